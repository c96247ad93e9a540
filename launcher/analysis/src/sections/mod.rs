//! The figures of a report, one file each, computed from `model` and `load`. Among themselves
//! they import downward only: `findings`, `queues` and `regions` use `launches`,
//! `torch_compile` uses `operators`; nothing here imports `findings`, `queues`, `regions` or
//! `torch_compile`.

pub mod allocations;
pub mod collectives;
pub mod durations;
pub mod findings;
pub mod idle;
pub mod launches;
pub mod modules;
pub mod operators;
pub mod queues;
pub mod regions;
pub mod series;
pub mod step_breakdown;
pub mod step_figures;
pub mod torch_compile;
pub mod triton;
