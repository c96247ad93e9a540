//! The analysis's figure tests, one binary: traces with known content (or real ones from
//! tests/data) through `cuprof report | flame | compare | merge | export`, and the figures
//! checked. Each command is a call of the library in-process ([`command`]), on the test's
//! thread; what only the binary shows is the CLI suite's (launcher/tests/cli). Each module was
//! its own test binary under launcher/tests before.

// Tests print and read raw text (launcher/clippy.toml is for what the crates output).
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

mod analysis_support;
mod command;
mod export_support;

mod analysis_allocations;
mod analysis_attribution;
mod analysis_bad_inputs;
mod analysis_chunked;
mod analysis_collectives;
mod analysis_compare;
mod analysis_compile;
mod analysis_durations;
mod analysis_findings;
mod analysis_flame;
mod analysis_hta;
mod analysis_idle;
mod analysis_launches;
mod analysis_merge;
mod analysis_modules;
mod analysis_operators;
mod analysis_queues;
mod analysis_ranks;
mod analysis_report;
mod analysis_runs;
mod analysis_step_figures;
mod analysis_triton;
mod export_chunked;
mod export_engines;
mod export_inputs;
mod export_kineto;
mod export_step_queries;
mod export_tables;
mod report_html;
