//! The injected library's configuration, read from `CUPROF_*` environment variables
//! (documented, one row each, in README.md, "Configuration"), plus the naming of the files it
//! writes and the report file through which it tells the launcher what it wrote.
//!
//! One file per job:
//! * [`vars`]: the variables' names;
//! * `model`: [`Config`] and its parts, with their defaults;
//! * `settings`: [`Settings`], what the variables say, typed, and how they resolve into a
//!   [`Config`] (defaults, which step source wins);
//! * `env`: parsing the environment into settings and a [`Config`] ([`Config::from_lookup`]),
//!   and its inverse, [`Settings::to_env`], which the launcher sets its options with. An invalid
//!   value never stops the program: it gives one warning line (naming the variable, the value,
//!   what is accepted and the fallback) and the documented fallback: tracing off for
//!   `CUPROF_ENABLED` and `CUPROF_RANKS`, the default for every other variable. An empty value
//!   counts as unset;
//! * `file_names`: the files' names, created without ever overwriting one ([`unique_path`]);
//! * [`report`]: the report-file protocol between the library and the launcher;
//! * [`run_id`]: the run id every rank's traces share, chosen by the launcher or derived.
//!
//! Step source, when several are given (each conflict gives a warning naming both):
//! `CUPROF_STEP_NVTX` > `CUPROF_CAPTURE_RANGE` > `CUPROF_DELAY`/`CUPROF_DURATION` > a schedule
//! alone (`CUPROF_WAIT`/`WARMUP`/`ACTIVE`/`REPEAT`/`SKIP_FIRST`\[`_WAIT`\], steps from
//! `cuprof_step()` calls) > nothing (record from CUDA init to exit).

mod env;
mod file_names;
mod model;
pub mod report;
pub mod run_id;
mod settings;
#[cfg(test)]
mod test_dir;
pub mod vars;

pub use env::{parse_ranks, parse_seconds};
pub use file_names::{
    memory_file_name, split_trace_suffix, trace_file_name, unique_path, UniqueFile, TRACE_SUFFIXES,
};
pub use model::*;
pub use settings::{Settings, StepSettings};
