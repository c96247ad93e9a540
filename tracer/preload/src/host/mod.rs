//! The host process, the ground: its CPython, Python stacks, symbols, record names, GPUs, OS
//! and why tracing could not start. Imports nothing of this crate above it.

pub mod devices;
pub mod error;
pub mod process;
pub mod py_stacks;
pub mod python;
pub mod resolve;
pub mod symbols;
