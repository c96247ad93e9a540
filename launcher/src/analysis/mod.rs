//! Offline analysis of cuprof traces: `cuprof report | flame | compare | merge`.
//!
//! Every command streams each file once through [`cuprof_core::reader`] into compact columns
//! ([`load`]), one file per worker ([`crate::jobs`], `-j N`), then computes from those. Each
//! worker interns names on its own; the names are merged in file order, so every figure and
//! every tie is what one thread reading the files in order gives. The definitions below are the contract the tests check
//! (`docs/analysis.md` says the same for users).
//!
//! * **Steps**: `ProfilerStep#N` events of category `user_annotation` (`ph: "X"`). Latency is
//!   their `dur`; percentiles interpolate linearly between closest ranks (numpy's default).
//!   Throughput is the sum of `args.work` over the steps that carry it divided by their summed
//!   duration, in work units per second (per rank; the all-ranks figure pools every rank's
//!   steps).
//! * **GPU operations**: events of category `kernel`, `gpu_memcpy`, `gpu_memset`, on the device
//!   `args.device` (else `pid`). A kernel whose name contains `nccl` (any case) is
//!   communication, any other kernel compute.
//! * **Breakdown per device**: the window runs from the start of the device's first operation
//!   to the end of its last (`wall`). Each instant of the window is counted once: compute if a
//!   compute kernel runs on any stream, else communication if one runs, else memcpy, else
//!   memset, else idle. So concurrent streams are a union, and the five parts sum exactly to
//!   `wall`. Idle instants that fall inside a `cuda_sync` event of that device, or inside a CPU
//!   call of `cudaDeviceSynchronize`/`cudaStreamSynchronize`/`cudaEventSynchronize` (or their
//!   driver twins) on any thread of the process, are *sync wait*; the other idle instants are
//!   *host-bound* (the GPU waited for work to be submitted). Several files of one rank
//!   (profiling cycles) add up window by window.
//! * **Top kernels**: per demangled name, count and the plain sum of durations (overlapping
//!   kernels each count in full); share = total / sum over all kernels.
//! * **NVTX buckets**: each GPU operation's duration goes to the innermost `user_annotation`
//!   range (other than `ProfilerStep#N`) open, `start <= t <= end`, on the thread of the
//!   `cuda_runtime`/`cuda_driver` event whose `args.correlation` equals the operation's, at that
//!   call's start `t`. No such call: `(no launch record)`; no open range: `(no NVTX range)`.
//! * **Operators** (`cpu_op` events, [`operators`]): nested per thread by containment; self
//!   time = duration minus the operators directly inside. A GPU operation belongs to the
//!   operator its `External id` names, else to the one its launch's `External id` names (by
//!   correlation), else to `(no operator)`.
//! * **CUDA API calls, NVTX ranges and labels** ([`durations`]): per call name and per range
//!   name, count, total, share, mean, median, min and max, as Nsight Systems' `cuda_api_sum`
//!   and `nvtx_sum`.
//! * **Collectives** ([`collectives`]): per collective name, dtype and group size (the metadata
//!   on `record_param_comms` operators), nccl-tests' message bytes, the GPU time of the kernels
//!   attributed to them, algorithm and bus bandwidth; per rank, the time its kernels in the
//!   collectives it shares with other ranks ran beyond the shortest rank's (waiting for them).
//! * **Triton kernels** ([`triton`]): torch.compile's generated kernels, per kernel and the
//!   file inductor wrote it to (the keyword inputs on each launch's operator): launches, the
//!   GPU time of the kernels attributed to them, and GB/s and TFLOP/s against inductor's
//!   estimates of one launch's bytes and operations.
//! * **Kernel launches** ([`launches`]): HTA's launch statistics, each kernel's launch call
//!   time and the delay from its end to the kernel's start, with HTA's outlier counts.
//! * **Findings** ([`findings`]): host synchronizations, pageable copies, the GPU's host-bound
//!   gaps, kernels shorter than their launch and driver allocations inside steps, each tied to
//!   operators and Python lines.
//! * **Series** ([`series`]): each rank's step durations, and each device's memory counter
//!   (`reserved_bytes`) thinned to at most 2,000 points keeping each time bucket's extremes;
//!   `report --html` ([`html`]) plots these and the figures above.
//! * **Across ranks**: imbalance = max / mean over ranks (of mean step time, of GPU busy
//!   time); for each step number seen on two ranks or more, the rank whose step took longest
//!   (ties: lowest rank); comm/compute overlap = time communication and compute kernels ran
//!   together / total communication time (union).

mod collectives;
mod compare;
mod durations;
mod findings;
mod flame;
mod html;
mod idle;
mod launches;
pub(crate) mod load;
mod merge;
mod model;
pub(crate) mod operators;
mod python_frames;
mod queues;
pub(crate) mod render;
mod run_summary;
mod saturating;
mod series;
mod torch_compile;
mod triton;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::console::outln;

pub use compare::{compare, CompareArgs};
pub use flame::{flame, FlameArgs};
pub use merge::{merge, MergeArgs};
pub use run_summary::after_run;

use model::Analysis;

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Trace files (`*.trace.json.gz`, plain JSON too), or directories of rank traces.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Also write `summary.json` and `report.md` into this directory (created if needed).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Rows shown per table (summary.json has all of them).
    #[arg(long, default_value_t = 15)]
    pub top: usize,
    /// Also write the report as one self-contained HTML page with plots (default with `-o DIR`:
    /// `DIR/report.html`).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub jobs: crate::jobs::Jobs,
}

/// The trace files named by `paths`: files as given, directories listed (not recursively) for
/// `*.trace.json.gz` / `*.trace.json`, or failing that any `*.json.gz` / `*.json`.
pub fn trace_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let md = std::fs::metadata(p).with_context(|| {
            format!(
                "{}: cannot read it; pass trace files or the directory cuprof wrote them to",
                p.display()
            )
        })?;
        if !md.is_dir() {
            out.push(p.clone());
            continue;
        }
        let mut traces = Vec::new();
        let mut json = Vec::new();
        for e in std::fs::read_dir(p).with_context(|| format!("{}: cannot list it", p.display()))? {
            let e = e.with_context(|| format!("{}: cannot list it", p.display()))?;
            let path = e.path();
            if !path.is_file() {
                continue;
            }
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".trace.json.gz") || name.ends_with(".trace.json") {
                traces.push(path);
            } else if name.ends_with(".json.gz") || name.ends_with(".json") {
                json.push(path);
            }
        }
        let mut found = if traces.is_empty() { json } else { traces };
        if found.is_empty() {
            bail!(
                "{}: no trace files in it (*.trace.json.gz, *.json); pass the directory cuprof \
                 wrote (CUPROF_DIR / --profile-dir) or the files themselves",
                p.display()
            );
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// Loads every trace named by `paths` (one file per worker of the current rayon pool) and
/// derives the per-file attribution.
pub(crate) fn analyse(paths: &[PathBuf]) -> Result<Analysis> {
    let (names, loaded) = load::load_all(&trace_files(paths)?)?;
    Ok(Analysis::new(names, loaded))
}

pub fn report(args: ReportArgs) -> Result<()> {
    // `--html FILE`, else `DIR/report.html` beside the other outputs.
    let html = args
        .html
        .clone()
        .or_else(|| args.out.as_ref().map(|d| d.join(REPORT_HTML)));
    if args.out.is_some() || html.is_some() {
        let inputs = trace_files(&args.paths)?;
        if let Some(dir) = &args.out {
            for name in [SUMMARY_JSON, REPORT_MD] {
                crate::output::refuse_input(&dir.join(name), &inputs)?;
            }
        }
        if let Some(h) = &html {
            crate::output::refuse_input(h, &inputs)?;
        }
    }
    let an = args.jobs.install(|| analyse(&args.paths))??;
    let summary = an.summarize();
    crate::console::print_text(&render::text(&summary, args.top))?;
    if let Some(dir) = &args.out {
        write_report(dir, &summary, args.top)?;
        outln!(
            "wrote {} and {}",
            dir.join(SUMMARY_JSON).display(),
            dir.join(REPORT_MD).display()
        )?;
    }
    if let Some(h) = &html {
        // The page is shared: its flame graph names the inputs by base name, not by where
        // they sat on this machine.
        let names: Vec<std::path::PathBuf> = args
            .paths
            .iter()
            .map(|p| p.file_name().map_or_else(|| p.clone(), Into::into))
            .collect();
        let flame = flame::svg(&an, &names)?;
        let memory = flame::memory_svg(&an, &names)?;
        let page = html::page(&summary, flame.as_deref(), memory.as_deref(), args.top);
        crate::output::write(h, page.as_bytes())?;
        outln!("wrote {}", h.display())?;
    }
    Ok(())
}

const SUMMARY_JSON: &str = "summary.json";
const REPORT_MD: &str = "report.md";
const REPORT_HTML: &str = "report.html";

/// Writes `summary.json` and `report.md` into `dir`, each through a temporary file and a
/// rename (a symlink at either name is replaced, not followed).
fn write_report(dir: &Path, s: &model::Summary, top: usize) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "{}: cannot create the output directory; pick a writable -o DIR",
            dir.display()
        )
    })?;
    let json = serde_json::to_string_pretty(s)? + "\n";
    crate::output::write(&dir.join(SUMMARY_JSON), json.as_bytes())?;
    let md = render::markdown(s, top);
    let md = crate::console::printable_text(&md);
    crate::output::write(&dir.join(REPORT_MD), md.as_bytes())?;
    Ok(())
}
