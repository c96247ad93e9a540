//! `cuprof`: run a program under the tracer, or analyse traces offline.
//!
//! Glue: arguments, then library calls, then the exit status. The offline commands (report,
//! flame, compare, merge, export) are `cuprof_analysis` calls, their arguments in
//! `analysis_args`; the others are one module each: `run` (options to core's
//! `config::Settings`, the preloaded child process, what is printed after it), `memory_cmd`,
//! `repair_cmd` (over `cuprof_core::repair`), `observer_cmd` (builds the native operator
//! observer ahead of time), `control_cmd` and `top_*` (on-demand capture), `serve` (the web server over
//! traces and the live figures). What the commands
//! share to print and write (one-line errors, a stdout closed early, output files written
//! without destroying one) is `cuprof_analysis::io`.

mod analysis_args;
mod control_cmd;
mod memory_cmd;
mod observer_cmd;
mod repair_cmd;
mod run;
mod serve;
mod terminal;
mod top_cmd;
mod top_view;

use std::process::ExitCode;

use analysis_args::{CompareArgs, ExportArgs, FlameArgs, MergeArgs, ReportArgs};
use clap::{Parser, Subcommand};
use cuprof_analysis::io::console;

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
    Report(ReportArgs),
    /// Flame graph of NVTX ranges -> kernels weighted by GPU time (SVG).
    Flame(FlameArgs),
    /// Compare two traces kernel by kernel and bucket by bucket.
    Compare(CompareArgs),
    /// Merge the rank traces of a directory into one timeline.
    Merge(MergeArgs),
    /// Summarise a memory snapshot pickle (peak reserved, when, by which stack; live at end;
    /// leaks and the peak of allocated blocks by stack) or a MEM trace's allocations.
    Memory(memory_cmd::MemoryArgs),
    /// Traces as a Parquet dataset for DuckDB and Spark: one table per kind, partitioned by
    /// rank and cycle (DIR/kernels/rank=R/cycle=C/NAME.parquet, ...).
    Export(ExportArgs),
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
    /// A local web server over traces: the report page, JSON of the summary, kernels,
    /// operators, memory, flame stacks, torch.compile and timeline windows of any rank, and the
    /// live figures of --on-demand processes (127.0.0.1 unless --bind; elsewhere with a token)
    Serve(serve::ServeArgs),
}

fn dispatch(command: Command) -> anyhow::Result<()> {
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    match command {
        Command::Run(a) => run::run(a),
        Command::Report(a) => cuprof_analysis::report(&a.into(), &mut out, &mut err),
        Command::Flame(a) => cuprof_analysis::flame(&a.into(), &mut out, &mut err),
        Command::Compare(a) => cuprof_analysis::compare(&a.into(), &mut out, &mut err),
        Command::Merge(a) => cuprof_analysis::merge(&a.into(), &mut out, &mut err),
        Command::Memory(a) => memory_cmd::run(a),
        Command::Repair(a) => repair_cmd::run(a),
        Command::Export(a) => cuprof_analysis::export(&a.into(), &mut out, &mut err),
        Command::Observer(a) => observer_cmd::run(a),
        Command::Capture(a) => control_cmd::capture(a),
        Command::Ps(a) => control_cmd::ps(a),
        Command::Top(a) => top_cmd::top(a),
        Command::Serve(a) => serve::serve(a),
    }
}

/// Errors are one line, `cuprof: what: why`, and exit with status 1.
fn main() -> ExitCode {
    let command = Cli::parse().command;
    // What a program decides and a library leaves to it: progress bars on stderr (drawn only
    // on a terminal), and the temporary files of outputs being written removed on Ctrl-C (by a
    // thread started with the first output).
    cuprof_analysis::load::show_progress_bars();
    cuprof_analysis::io::output::remove_temporaries_on_signal();
    match dispatch(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::disallowed_macros)] // error_line escapes what it quotes.
            {
                eprint!("{}", console::error_line(&e));
            }
            ExitCode::FAILURE
        }
    }
}
