//! `cuprof report`: the traces loaded, summarized, printed, and written as report.md,
//! summary.json and report.html where asked.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use crate::escape::terminal::Shown;
use crate::io::console::{outln, Console};
use crate::io::jobs::Jobs;
use crate::load::runs::{choose, inputs_named};
use crate::load::trace_files;
use crate::model::over_runs;
use crate::sections::modules::{ModuleGrouping, ModuleView};
use crate::sections::step_figures::BinSpec;
use crate::views::files::{write_report, REPORT_HTML, REPORT_MD, SUMMARY_JSON};

/// What `cuprof report` was asked for.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Trace files (`*.trace.json.gz`, plain JSON too), or directories of rank traces.
    pub paths: Vec<PathBuf>,
    /// Also write `summary.json` and `report.md` into this directory (created if needed).
    pub out: Option<PathBuf>,
    /// Rows shown per table (summary.json has all of them).
    pub top: usize,
    /// Also write the report as one self-contained HTML page (default with `out`:
    /// `DIR/report.html`).
    pub html: Option<PathBuf>,
    /// The run to report, by name or id, when the inputs hold several (default: the newest).
    pub run: Option<String>,
    /// Also bin the steps by one of their figures (`--bin kv_len=0,512,1024`).
    pub bin: Option<BinSpec>,
    /// Read every run among the inputs (`--all-runs`): step latency and tokens/s per run and
    /// their mean ± std; the other figures are the chosen run's.
    pub all_runs: bool,
    /// How the module view groups its rows (`--module-by`, `--module-depth`).
    pub modules: ModuleView,
    pub jobs: Jobs,
}

/// Rows shown per table unless asked (`--top`).
pub const DEFAULT_TOP: usize = 15;

impl ReportOptions {
    /// The report of `paths`, printed only: no files, [`DEFAULT_TOP`] rows, every core.
    pub fn new(paths: Vec<PathBuf>) -> Self {
        ReportOptions {
            paths,
            out: None,
            top: DEFAULT_TOP,
            html: None,
            run: None,
            bin: None,
            all_runs: false,
            modules: ModuleView::default(),
            jobs: Jobs::default(),
        }
    }
}

/// `cuprof report`: the summary printed on `stdout`, and written as files where asked.
/// `stderr` gets the notices (the runs among the inputs when there are several, a merged trace
/// skipped); errors are returned, not printed.
pub fn report(
    args: &ReportOptions,
    stdout: &mut (impl Write + Send),
    stderr: &mut (impl Write + Send),
) -> Result<()> {
    report_to(args, &mut Console::new(stdout, stderr))
}

fn report_to(args: &ReportOptions, con: &mut Console) -> Result<()> {
    if args.modules.depth.is_some() && args.modules.by != ModuleGrouping::Path {
        anyhow::bail!(
            "--module-depth cuts module paths; it goes with --module-by path only, not class or \
             attribute"
        );
    }
    // `--html FILE`, else `DIR/report.html` beside the other outputs.
    let html = args
        .html
        .clone()
        .or_else(|| args.out.as_ref().map(|d| d.join(REPORT_HTML)));
    if args.out.is_some() || html.is_some() {
        let inputs = trace_files(&args.paths)?;
        if let Some(dir) = &args.out {
            for name in [SUMMARY_JSON, REPORT_MD] {
                crate::io::output::refuse_input(&dir.join(name), &inputs)?;
            }
        }
        if let Some(h) = &html {
            crate::io::output::refuse_input(h, &inputs)?;
        }
    }
    let chosen = args
        .jobs
        .install(|| choose(&args.paths, args.run.as_deref(), &inputs_named(&args.paths)))??;
    for n in &chosen.notes {
        con.note(n);
    }
    let an = args
        .jobs
        .install(|| crate::model::analyse_files(&chosen.files))??;
    let mut summary = args.jobs.install(|| an.summarize())?;
    summary.step_bins = args
        .bin
        .as_ref()
        .map(|b| crate::sections::step_figures::bins(&an.files, b));
    if args.modules != ModuleView::default() {
        summary.modules = Some(an.modules_view(args.modules));
    }
    if args.all_runs {
        summary.runs = Some(args.jobs.install(|| over_runs(&chosen.every))??);
    }
    con.print(&crate::views::render::text(&summary, args.top))?;
    if let Some(dir) = &args.out {
        write_report(dir, &summary, args.top)?;
        outln!(
            con,
            "wrote {} and {}",
            dir.join(SUMMARY_JSON).shown(),
            dir.join(REPORT_MD).shown()
        )?;
    }
    if let Some(h) = &html {
        // The page is shared: its flame graphs name the inputs by base name, not by where
        // they sat on this machine.
        let (flame, memory) = crate::views::flame::page_svgs(&an, &args.paths)?;
        let ranked = crate::views::flame::page_rank_svgs(
            &an,
            &crate::views::flame::page_flame_ranks(&summary),
        )?;
        // The page is made from the summary alone: the loaded columns go first.
        drop(an);
        crate::io::output::write_with(h, |w| {
            crate::views::html::write_page_ranked(w, &summary, flame, ranked, memory, args.top)
        })?;
        outln!(con, "wrote {}", h.shown())?;
    }
    Ok(())
}
