//! What only the `cuprof` binary can show, one test binary: arguments, exit codes, messages,
//! the files it writes and refuses to write, signals. Each module was its own test binary
//! before.

// Tests print and read raw text (launcher/clippy.toml is for what the crates output).
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

#[path = "../../analysis/tests/figures/analysis_support.rs"]
mod analysis_support;
mod command;
/// The figure tests' in-process call, for `arguments` to check it against the binary.
#[path = "../../analysis/tests/figures/command.rs"]
mod in_process;
mod serve_client;

mod arguments;
mod console_output;
mod hostile_inputs;
mod hostile_names;
mod interrupted_outputs;
mod memory_snapshot;
mod output_paths;
mod parallel_output;
mod repair_safety;
mod run_launcher;
mod serve;
