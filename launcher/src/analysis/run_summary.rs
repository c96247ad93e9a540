//! What `cuprof run` says about a run when the program ends, so that a user sees whether it
//! was useful without a second command: the GPU's busy share, the step latency when there are
//! steps, the top kernels and operators; and the full report (`report.html`, `report.md`,
//! `summary.json`) written into a folder beside the traces (not among them: HTA reads every `*.json` of the
//! trace directory).

use super::{analyse, flame, html, model::Summary, render, write_report, REPORT_HTML};
use std::path::{Path, PathBuf};

/// Kernels and operators named in the short summary.
const TOP: usize = 5;
/// Rows of the written report's tables (as `cuprof report`'s default).
const REPORT_TOP: usize = 15;

/// Analyses the traces a run wrote. Returns the lines to print and, when `write` is set, the
/// folder the report went to; an analysis that fails is one line, never an error of the run.
pub fn after_run(traces: &[PathBuf], write: bool) -> (Vec<String>, Option<PathBuf>) {
    if traces.is_empty() {
        return (Vec::new(), None);
    }
    let traces: Vec<PathBuf> = traces.iter().filter(|t| t.is_file()).cloned().collect();
    if traces.is_empty() {
        return (Vec::new(), None);
    }
    let an = match analyse(&traces) {
        Ok(an) => an,
        Err(e) => {
            let line = format!("cuprof: no summary of the run: {e:#}");
            return (vec![line], None);
        }
    };
    let summary = an.summarize();
    let mut lines = short(&summary);
    let mut dir = None;
    if write {
        let d = report_dir(&traces[0]);
        let written = write_report(&d, &summary, REPORT_TOP).and_then(|()| {
            let flame = flame::svg(&an, &traces)?;
            let page = html::page(&summary, flame.as_deref(), REPORT_TOP);
            crate::output::write(&d.join(REPORT_HTML), page.as_bytes())
        });
        match written {
            Ok(()) => {
                lines.push(format!(
                    "cuprof: full report in {} (report.html, report.md, summary.json)",
                    d.display()
                ));
                dir = Some(d);
            }
            Err(e) => lines.push(format!("cuprof: the report was not written: {e:#}")),
        }
    }
    (lines, dir)
}

/// The short summary: a few lines, each prefixed `cuprof:`.
pub fn short(s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let g = &s.gpu;
    if g.wall_ns > 0 {
        let share = |ns: i64| render::pct(ns as f64 / g.wall_ns as f64);
        out.push(format!(
            "cuprof: GPU busy {} of {} (compute {}, communication {}, copies and sets {})",
            share(g.busy_ns),
            render::dur(g.wall_ns as f64),
            share(g.compute_ns),
            share(g.communication_total_ns),
            share(g.memcpy_ns + g.memset_ns),
        ));
    }
    if s.steps.count > 0 {
        out.push(format!(
            "cuprof: {} steps, p50 {}, p90 {}",
            s.steps.count,
            render::dur(s.steps.p50_ns),
            render::dur(s.steps.p90_ns)
        ));
    }
    if !s.top_kernels.is_empty() {
        out.push("cuprof: top kernels:".to_string());
        for k in s.top_kernels.iter().take(TOP) {
            out.push(format!(
                "cuprof:   {:>6}  {:>12}  {:>7}x  {}",
                render::pct(k.share),
                render::dur(k.total_ns as f64),
                k.count,
                render::short(&k.name, 80)
            ));
        }
    }
    if let Some(ops) = &s.operators {
        if !ops.top.is_empty() {
            out.push("cuprof: top operators (GPU time of the kernels they launched):".to_string());
            for o in ops.top.iter().take(TOP) {
                out.push(format!(
                    "cuprof:   {:>12}  {:>7}x  {}",
                    render::dur(o.gpu_ns as f64),
                    o.count,
                    render::short(&o.name, 80)
                ));
            }
        }
    }
    out
}

/// `DIR/NAME-report/` for traces `DIR/NAME-rankR[...].trace.json.gz`.
fn report_dir(first_trace: &Path) -> PathBuf {
    let dir = first_trace.parent().unwrap_or(Path::new("."));
    let file = first_trace
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match file.rfind("-rank") {
        Some(i) => &file[..i],
        None => file.split('.').next().unwrap_or("cuprof"),
    };
    dir.join(format!("{name}-report"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_folder_is_named_for_the_run() {
        assert_eq!(
            report_dir(Path::new("/d/job-rank0-cycle2.trace.json.gz")),
            PathBuf::from("/d/job-report")
        );
        assert_eq!(
            report_dir(Path::new("/d/profile_1700-rank12.trace.json.gz")),
            PathBuf::from("/d/profile_1700-report")
        );
        assert_eq!(report_dir(Path::new("x.json")), PathBuf::from("x-report"));
    }
}
