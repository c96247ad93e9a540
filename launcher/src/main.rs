//! `cuprof`: run a program under the tracer, or analyse traces offline.
//!
//! One module per command: `run` (options to core's `config::Settings`, the preloaded child
//! process, what is printed after it), `analysis` (report, flame, compare, merge: a model
//! built from the traces through `cuprof_core::reader`, rendered as text, HTML and JSON),
//! `memory_cmd`, `repair_cmd` (over `cuprof_core::repair`), `export` (Parquet) and
//! `observer_cmd` (builds the native operator observer ahead of time). `console`
//! and `output` hold what the commands share: one-line errors, a stdout closed early, output
//! files written without destroying one.

mod analysis;
mod console;
mod control_cmd;
mod export;
mod gzip_out;
mod jobs;
mod memory_cmd;
mod observer_cmd;
mod output;
mod repair_cmd;
mod run;
mod terminal;
mod top_cmd;
mod top_view;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cuprof",
    version,
    about = "GPU activity tracer for CUDA and PyTorch programs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program with the tracer preloaded: cuprof run [options] -- CMD ARGS...
    Run(run::RunArgs),
    /// Per-step latency, GPU time breakdown, top kernels, NVTX buckets, cross-rank figures.
    Report(analysis::ReportArgs),
    /// Flame graph of NVTX ranges -> kernels weighted by GPU time (SVG).
    Flame(analysis::FlameArgs),
    /// Compare two traces kernel by kernel and bucket by bucket.
    Compare(analysis::CompareArgs),
    /// Merge the rank traces of a directory into one timeline.
    Merge(analysis::MergeArgs),
    /// Summarise a memory snapshot pickle (peak reserved, when, by which stack; live at end).
    Memory(memory_cmd::MemoryArgs),
    /// Traces as a Parquet dataset for DuckDB and Spark: one table per kind, partitioned by
    /// rank and cycle (DIR/kernels/rank=R/cycle=C/NAME.parquet, ...).
    Export(export::ExportArgs),
    /// Close a trace cut short (SIGKILL, OOM kill) into a valid trace: NAME.repaired.trace.json.gz
    /// beside it, -o OUT, or --in-place.
    Repair(repair_cmd::RepairArgs),
    /// Build the native PyTorch operator observer ahead of time for a Python's torch (for
    /// machines without a compiler: build once, share CUPROF_CACHE).
    Observer(observer_cmd::ObserverArgs),
    /// Record running processes started with `cuprof run --on-demand`: --pid/--all/--name,
    /// --steps N (the same steps in every rank) or --duration S
    Capture(control_cmd::CaptureArgs),
    /// List the processes of this user on this host started with --on-demand
    Ps(control_cmd::PsArgs),
    /// Watch the on-demand processes live while they record: GPU busy share, top kernels and
    /// operators, step time, device memory (q quits)
    Top(top_cmd::TopArgs),
}

fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Run(a) => run::run(a),
        Command::Report(a) => analysis::report(a),
        Command::Flame(a) => analysis::flame(a),
        Command::Compare(a) => analysis::compare(a),
        Command::Merge(a) => analysis::merge(a),
        Command::Memory(a) => memory_cmd::run(a),
        Command::Repair(a) => repair_cmd::run(a),
        Command::Export(a) => export::run(a),
        Command::Observer(a) => observer_cmd::run(a),
        Command::Capture(a) => control_cmd::capture(a),
        Command::Ps(a) => control_cmd::ps(a),
        Command::Top(a) => top_cmd::top(a),
    }
}

/// Errors are one line, `cuprof: what: why`, and exit with status 1.
fn main() -> ExitCode {
    match dispatch(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cuprof: {}", console::one_line(&e));
            ExitCode::FAILURE
        }
    }
}
