//! The library's life: its one state's transitions, CUPTI's set-up, fatal signals and the
//! on-demand control socket. Imports every folder below it.

pub mod control;
pub mod lifecycle;
pub mod setup;
pub mod signals;
