//! The arguments of the offline commands (`report`, `flame`, `compare`, `merge`, `export`), each
//! turned into the options of its `cuprof_analysis` call.

use std::path::PathBuf;

use cuprof_analysis as analysis;

/// `-j N`: files read at once.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct JobsArg {
    /// Files read at once (default: every core, or RAYON_NUM_THREADS).
    #[arg(short = 'j', long = "jobs", value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
}

impl From<JobsArg> for analysis::Jobs {
    fn from(j: JobsArg) -> Self {
        analysis::Jobs { jobs: j.jobs }
    }
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Trace files (`*.trace.json.gz`, plain JSON too), or directories of rank traces.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Also write `summary.json` and `report.md` into this directory (created if needed).
    #[arg(short, long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Rows shown per table (summary.json has all of them).
    #[arg(long, default_value_t = analysis::report::DEFAULT_TOP)]
    pub top: usize,
    /// Also write the report as one self-contained HTML page with plots (default with `-o DIR`:
    /// `DIR/report.html`).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// The run to report when the inputs hold several (by its name or run id; default: the
    /// newest). Runs are never added together.
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
    /// Also bin the steps by one of their figures (`cuprof.step(kv_len=...)`, or `tokens`):
    /// bin i is [E_i, E_i+1), the last [E_last, inf); each gets its steps, latency
    /// p50/p90/p99 and tokens/s (e.g. `--bin kv_len=0,512,1024,2048`).
    #[arg(long, value_name = "FIGURE=E0,E1,...")]
    pub bin: Option<analysis::sections::step_figures::BinSpec>,
    /// Also read every run among the inputs: each run's step latency and tokens/s, and their
    /// mean ± std over the runs (the rest of the report is the run --run chooses).
    #[arg(long)]
    pub all_runs: bool,
    /// Group the module view (CPU and GPU time per nn.Module) by module path, class
    /// (`Linear`) or attribute name (`q_proj`; list indices as `*`).
    #[arg(long, value_name = "path|class|attribute", default_value = "path")]
    pub module_by: analysis::sections::modules::ModuleGrouping,
    /// Roll the module paths up to their first N components (with --module-by path).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub module_depth: Option<u16>,
    #[command(flatten)]
    pub jobs: JobsArg,
}

impl From<ReportArgs> for analysis::ReportOptions {
    fn from(a: ReportArgs) -> Self {
        analysis::ReportOptions {
            paths: a.paths,
            out: a.out,
            top: a.top,
            html: a.html,
            run: a.run,
            bin: a.bin,
            all_runs: a.all_runs,
            modules: analysis::sections::modules::ModuleView {
                by: a.module_by,
                depth: a.module_depth.map(usize::from),
            },
            jobs: a.jobs.into(),
        }
    }
}

#[derive(clap::Args)]
pub struct FlameArgs {
    /// Trace files or directories (several ranks get one root frame each).
    #[arg(required = true, value_name = "TRACE")]
    pub paths: Vec<PathBuf>,
    /// The SVG to write.
    #[arg(short, long, value_name = "SVG", default_value = analysis::views::flame::DEFAULT_OUT)]
    pub out: PathBuf,
    /// Weight CUDA runtime/driver API calls by their CPU time instead of GPU work by GPU time.
    #[arg(long)]
    pub cpu: bool,
    /// Weight PyTorch's tensor allocations by their bytes instead (the trace's `[memory]`
    /// events: the MEM activity with the native observer, or torch.profiler's
    /// `profile_memory`), under the Python lines and operators that made them.
    #[arg(long, conflicts_with_all = ["cpu", "nvtx"])]
    pub memory: bool,
    /// Also write the folded stacks (`frame;frame;leaf weight` per line: nanoseconds, or
    /// bytes with `--memory`).
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Stack by NVTX ranges even when the trace has PyTorch operators.
    #[arg(long)]
    pub nvtx: bool,
    /// Stack by nn.Module path instead of Python stack: module path -> operators -> kernel
    /// (the trace's nn.Module calls: `cuprof run --with-modules`, or torch.profiler's
    /// with_stack=True).
    #[arg(long, conflicts_with = "nvtx")]
    pub modules: bool,
    #[command(flatten)]
    pub jobs: JobsArg,
}

impl From<FlameArgs> for analysis::FlameOptions {
    fn from(a: FlameArgs) -> Self {
        analysis::FlameOptions {
            paths: a.paths,
            out: a.out,
            cpu: a.cpu,
            memory: a.memory,
            folded: a.folded,
            nvtx: a.nvtx,
            modules: a.modules,
            jobs: a.jobs.into(),
        }
    }
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// The baseline: a trace file or a directory of rank traces.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The candidate, compared against A.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Rows shown per table (the JSON has all of them).
    #[arg(long, default_value_t = analysis::compare::DEFAULT_TOP)]
    pub top: usize,
    /// Also read every run of each side: step latency and tokens/s as mean ± std over its runs
    /// (the other figures compare the newest run of each).
    #[arg(long)]
    pub all_runs: bool,
    #[command(flatten)]
    pub jobs: JobsArg,
}

impl From<CompareArgs> for analysis::CompareOptions {
    fn from(a: CompareArgs) -> Self {
        analysis::CompareOptions {
            a: a.a,
            b: a.b,
            json: a.json,
            top: a.top,
            all_runs: a.all_runs,
            jobs: a.jobs.into(),
        }
    }
}

#[derive(clap::Args)]
pub struct MergeArgs {
    /// Directory of rank traces (or the trace files themselves).
    #[arg(required = true, value_name = "DIR")]
    pub paths: Vec<PathBuf>,
    /// The merged trace to write (gzip).
    #[arg(
        short,
        long,
        value_name = "FILE",
        default_value = analysis::merge::DEFAULT_OUT
    )]
    pub out: PathBuf,
    /// The run to merge when the inputs hold several (by its name or run id; default: the
    /// newest).
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
    #[command(flatten)]
    pub jobs: JobsArg,
}

impl From<MergeArgs> for analysis::MergeOptions {
    fn from(a: MergeArgs) -> Self {
        analysis::MergeOptions {
            paths: a.paths,
            out: a.out,
            run: a.run,
            jobs: a.jobs.into(),
        }
    }
}

#[derive(clap::Args)]
pub struct ExportArgs {
    /// Trace files (`*.trace.json.gz`, plain JSON too), or directories of rank traces.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The dataset's directory (created if needed; files of the same name are replaced).
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub jobs: JobsArg,
}

impl From<ExportArgs> for analysis::ExportOptions {
    fn from(a: ExportArgs) -> Self {
        analysis::ExportOptions {
            paths: a.paths,
            out: a.out,
            jobs: a.jobs.into(),
        }
    }
}
