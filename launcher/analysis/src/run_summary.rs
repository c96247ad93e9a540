//! What `cuprof run` says about a run when the program ends, so that a user sees whether it
//! was useful without a second command: the GPU's busy share, the step latency when there are
//! steps, the top kernels and operators; and the full report (`report.html`, `report.md`,
//! `summary.json`) written into a folder beside the traces (not among them: HTA reads every `*.json` of the
//! trace directory).

use crate::escape::terminal::Shown;
use crate::model::analyse;
use crate::sections::operators::RankedBy;
use crate::summary::schema::Summary;
use crate::views::files::{write_report, REPORT_HTML};
use crate::views::{flame, html};
use std::path::{Path, PathBuf};

/// Kernels and operators named in the short summary.
const TOP: usize = 5;
/// Rows of the written report's tables (as `cuprof report`'s default).
const REPORT_TOP: usize = 15;

/// Whose report [`after_run`] writes, which names its folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportOf {
    /// A run's traces, every cycle: `NAME-report`.
    Run,
    /// One on-demand capture's traces, every rank: `NAME-cycleC-report`, so that the next
    /// capture does not overwrite it.
    Capture,
}

/// Analyses the traces a run wrote. Returns the lines to print and the folder the report went
/// to; an analysis that fails is one line, never an error of the run.
pub fn after_run(traces: &[PathBuf], of: ReportOf) -> (Vec<String>, Option<PathBuf>) {
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
    let d = report_dir(&traces[0], of);
    let written = write_report(&d, &summary, REPORT_TOP).and_then(|()| {
        let (flame, memory) = flame::page_svgs(&an, &traces)?;
        let ranked = flame::page_rank_svgs(&an, &flame::page_flame_ranks(&summary))?;
        crate::io::output::write_with(&d.join(REPORT_HTML), |w| {
            html::write_page_ranked(w, &summary, flame, ranked, memory, REPORT_TOP)
        })
    });
    match written {
        Ok(()) => {
            lines.push(format!(
                "cuprof: full report in {} (report.html, report.md, summary.json)",
                d.shown()
            ));
            (lines, Some(d))
        }
        Err(e) => {
            lines.push(format!("cuprof: the report was not written: {e:#}"));
            (lines, None)
        }
    }
}

/// The short summary: a few lines, each prefixed `cuprof:`.
pub fn short(s: &Summary) -> Vec<String> {
    let mut out = Vec::new();
    let g = &s.gpu;
    if g.wall_ns > 0 {
        // The parts are exclusive and add up to busy, as in HTA's temporal breakdown (compute,
        // then non-compute = busy less compute): communication is what ran with no compute
        // kernel, copies and sets what ran with neither. The report's table has the totals.
        let share = |ns: i64| crate::format::pct(ns as f64 / g.wall_ns as f64);
        out.push(format!(
            "cuprof: GPU busy {} of {} (compute {}, communication outside compute {}, copies \
             and sets outside both {})",
            share(g.busy_ns),
            crate::format::dur(g.wall_ns as f64),
            share(g.compute_ns),
            share(g.communication_ns),
            share(g.memcpy_ns.saturating_add(g.memset_ns)),
        ));
    }
    if s.steps.count > 0 {
        out.push(format!(
            "cuprof: {} steps, p50 {}, p90 {}",
            s.steps.count,
            crate::format::dur(s.steps.p50_ns),
            crate::format::dur(s.steps.p90_ns)
        ));
    }
    if !s.top_kernels.is_empty() {
        out.push("cuprof: top kernels:".to_string());
        for k in s.top_kernels.iter().take(TOP) {
            out.push(format!(
                "cuprof:   {:>6}  {:>12}  {:>7}x  {}",
                crate::format::pct(k.share),
                crate::format::dur(k.total_ns as f64),
                k.count,
                crate::format::short(&k.name, 80)
            ));
        }
    }
    if let Some(ops) = &s.operators {
        // By the GPU time the operators launched, or by their self CPU time when the run is
        // CPU-bound (`ranked_by`) or none launched any.
        let rows: Vec<Listed> = ops
            .top
            .iter()
            .map(|o| Listed {
                gpu: o.gpu_ns,
                self_cpu: o.self_cpu_ns,
                cpu: Some(o.cpu_ns),
                count: o.count,
                what: &o.name,
            })
            .collect();
        list(
            &mut out,
            ops.ranked_by,
            rows,
            crate::format::short,
            [
                "cuprof: top operators by the GPU time they launched (then self CPU time, calls):",
                "cuprof: top operators by self CPU time, the run being CPU-bound (then CPU time \
                 with nested operators, calls):",
                "cuprof: top operators by self CPU time, none having launched GPU work (then CPU \
                 time with nested operators, calls):",
            ],
        );
        // With stacks: the lines of the program that called them, the same way.
        let rows: Vec<Listed> = ops
            .by_call_site
            .iter()
            .map(|c| Listed {
                gpu: c.gpu_ns,
                self_cpu: c.self_cpu_ns,
                cpu: None,
                count: c.calls,
                what: &c.call_site,
            })
            .collect();
        list(
            &mut out,
            ops.ranked_by,
            rows,
            crate::format::short_tail,
            [
                "cuprof: top Python lines by the GPU time their operators launched (then their \
                 self CPU time, calls):",
                "cuprof: top Python lines by their operators' self CPU time, the run being \
                 CPU-bound (then calls):",
                "cuprof: top Python lines by their operators' self CPU time (then calls):",
            ],
        );
    }
    look_at(&mut out, &s.findings);
    out
}

/// The findings that cost at least this share of the GPU window are named at the end of a run.
const FINDING_SHARE: f64 = 0.01;

/// The report's findings worth a look (at least [`FINDING_SHARE`] of the GPU window), each in
/// one line with the operator (and line) behind most of it.
fn look_at(out: &mut Vec<String>, findings: &[crate::sections::findings::Finding]) {
    let worth: Vec<_> = findings
        .iter()
        .filter(|f| f.share_of_wall >= FINDING_SHARE)
        .take(TOP)
        .collect();
    if worth.is_empty() {
        return;
    }
    out.push("cuprof: what to look at (report.md says what to do):".to_string());
    for f in worth {
        let mut line = format!(
            "cuprof:   {}: {}",
            crate::sections::findings::title(f),
            crate::sections::findings::headline(f, |_, text| text)
        );
        if let Some(src) = f.sources.first().filter(|_| f.has_operators()) {
            line.push_str(&format!(
                "; most in {}",
                crate::format::short(&src.operator, 60)
            ));
            if let Some(site) = &src.call_site {
                line.push_str(&format!(" at {}", crate::format::short_tail(site, 80)));
            }
        }
        out.push(line);
    }
}

/// A row of the summary's operator lists.
struct Listed<'a> {
    gpu: i64,
    self_cpu: i64,
    /// With nested operators (operators have it, Python lines do not).
    cpu: Option<i64>,
    count: u64,
    what: &'a str,
}

/// The first [`TOP`] rows (`rows` come in `ranked_by`'s order): by the GPU time they launched
/// under `titles[0]` when ranked so and some launched any; else by self CPU time, under
/// `titles[1]` for a CPU-bound run, `titles[2]` for one whose GPU work no row launched; nothing
/// for no rows. What a shown row is goes through `shorten` (to 80 characters).
fn list(
    out: &mut Vec<String>,
    ranked_by: RankedBy,
    mut rows: Vec<Listed>,
    shorten: fn(&str, usize) -> String,
    titles: [&str; 3],
) {
    let line = |times: &[i64], count: u64, what: &str| {
        let mut l = "cuprof:   ".to_string();
        for &ns in times {
            l.push_str(&format!("{:>12}  ", crate::format::dur(ns as f64)));
        }
        l.push_str(&format!("{count:>7}x  {}", shorten(what, 80)));
        l
    };
    if ranked_by == RankedBy::GpuTime && rows.iter().any(|r| r.gpu > 0) {
        out.push(titles[0].to_string());
        for r in rows.iter().filter(|r| r.gpu > 0).take(TOP) {
            out.push(line(&[r.gpu, r.self_cpu], r.count, r.what));
        }
    } else if !rows.is_empty() {
        let title = match ranked_by {
            RankedBy::SelfCpuTime => titles[1],
            RankedBy::GpuTime => titles[2],
        };
        out.push(title.to_string());
        // Stable: ties keep the summary's order.
        rows.sort_by_key(|r| std::cmp::Reverse(r.self_cpu));
        for r in rows.iter().take(TOP) {
            let times: Vec<i64> = std::iter::once(r.self_cpu).chain(r.cpu).collect();
            out.push(line(&times, r.count, r.what));
        }
    }
}

/// `DIR/NAME-report/` for traces `DIR/NAME-rankR[...].trace.json.gz`; a capture's
/// (`NAME-rankR-cycleC...`): `DIR/NAME-cycleC-report/`.
fn report_dir(first_trace: &Path, of: ReportOf) -> PathBuf {
    let dir = first_trace.parent().unwrap_or(Path::new("."));
    let file = first_trace
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (name, after) = match file.rfind("-rank") {
        Some(i) => (&file[..i], &file[i + 5..]),
        None => (file.split('.').next().unwrap_or("cuprof"), ""),
    };
    let cycle = after
        .split_once("-cycle")
        .map(|(_, c)| {
            c.split(|ch: char| !ch.is_ascii_digit())
                .next()
                .unwrap_or("")
        })
        .filter(|c| !c.is_empty() && of == ReportOf::Capture);
    match cycle {
        Some(c) => dir.join(format!("{name}-cycle{c}-report")),
        None => dir.join(format!("{name}-report")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The short summary of a plain trace holding `events`.
    fn summary_of(tag: &str, events: &[&str]) -> Vec<String> {
        let dir = std::env::temp_dir().join(format!("cuprof-short-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        std::fs::write(
            &path,
            format!("{{\"traceEvents\": [{}]}}", events.join(",\n")),
        )
        .unwrap();
        let lines = short(&analyse(std::slice::from_ref(&path)).unwrap().summarize());
        std::fs::remove_dir_all(&dir).unwrap();
        lines
    }

    /// Compute 0-100 µs, NCCL 50-200 µs (100 µs of it under compute), a copy 150-250 µs (50
    /// µs under NCCL): the parts are exclusive and add up to busy, as HTA's temporal breakdown.
    #[test]
    fn the_busy_line_parts_add_up_to_busy() {
        let k = |name: &str, ts: i64, dur: i64| {
            format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "{name}", "pid": 0, "tid": 7, "ts": {ts}, "dur": {dur}, "args": {{"device": 0}}}}"#
            )
        };
        let gemm = k("gemm", 0, 100);
        let nccl = k("ncclDevKernel_AllReduce", 50, 150);
        let copy = r#"{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 8, "ts": 150, "dur": 100, "args": {"device": 0, "bytes": 4}}"#;
        let lines = summary_of("busy", &[&gemm, &nccl, copy]);
        assert_eq!(
            lines[0],
            "cuprof: GPU busy 100.0% of 250.000 µs (compute 40.0%, communication outside compute \
             40.0%, copies and sets outside both 20.0%)"
        );
    }

    /// With stacks, the Python lines that called the operators follow them: by the GPU time
    /// their operators launched, else by the operators' CPU time.
    #[test]
    fn the_python_lines_that_called_the_operators_follow_them() {
        let op = |name: &str, ts: i64, dur: i64, stack: &str| {
            format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": {ts}, "dur": {dur}, "args": {{"External id": {ts}, "Call stack": "{stack}"}}}}"#
            )
        };
        let torch = "/v/site-packages/torch/nn/functional.py(9): linear";
        let (a, b, c) = (
            op("aten::add", 0, 5, "m.py(3): f;m.py(9): <module>"),
            op(
                "aten::mm",
                10,
                30,
                &format!("{torch};m.py(4): g;m.py(9): <module>"),
            ),
            op("aten::add", 50, 7, "m.py(3): f;m.py(9): <module>"),
        );
        assert_eq!(
            summary_of("sites", &[&a, &b, &c])[3..],
            [
                "cuprof: top Python lines by their operators' self CPU time, the run being \
                 CPU-bound (then calls):",
                "cuprof:      30.000 µs        1x  m.py(4): g",
                "cuprof:      12.000 µs        2x  m.py(3): f",
            ]
        );
        // 80 µs of GPU time, not under half the 42 µs in operators: GPU-bound.
        let launch = r#"{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 55, "dur": 1, "args": {"External id": 50, "correlation": 1}}"#;
        let kernel = r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 60, "dur": 80, "args": {"device": 0, "External id": 50, "correlation": 1}}"#;
        let lines = summary_of("sites-gpu", &[&a, &b, &c, launch, kernel]);
        assert_eq!(
            lines[lines.len() - 2..],
            [
                "cuprof: top Python lines by the GPU time their operators launched (then their \
                 self CPU time, calls):",
                "cuprof:      80.000 µs     12.000 µs        2x  m.py(3): f",
            ]
        );
    }

    /// A wrapper of 100 µs (`evaluate_function`) holds `aten::mm` (60 µs) and `aten::add` (30
    /// µs): 10 µs its own. Another `aten::add` takes 20 µs: 120 µs in operators.
    fn wrapped(kernel_us: i64) -> Vec<String> {
        let op = |name: &str, ts: i64, dur: i64| {
            format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": {ts}, "dur": {dur}, "args": {{"External id": {ts}}}}}"#
            )
        };
        let launch = r#"{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"External id": 5, "correlation": 1}}"#;
        let kernel = format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": {kernel_us}, "args": {{"device": 0, "External id": 5, "correlation": 1}}}}"#
        );
        let events = [
            op(
                "autograd::engine::evaluate_function: AddmmBackward0",
                0,
                100,
            ),
            op("aten::mm", 5, 60),
            op("aten::add", 70, 30),
            op("aten::add", 200, 20),
            launch.to_string(),
            kernel,
        ];
        let events: Vec<&str> = events.iter().map(String::as_str).collect();
        let lines = summary_of(&format!("wrapped-{kernel_us}"), &events);
        let at = lines
            .iter()
            .position(|l| l.starts_with("cuprof: top operators"))
            .expect("an operators line");
        lines[at..].to_vec()
    }

    /// A CPU-bound run (10 µs of GPU time, under half the 120 µs in operators): operators by
    /// their self CPU time, the wrapper last though its CPU time is the longest.
    #[test]
    fn a_cpu_bound_run_lists_operators_by_self_cpu_time() {
        assert_eq!(
            wrapped(10),
            [
                "cuprof: top operators by self CPU time, the run being CPU-bound (then CPU time \
                 with nested operators, calls):",
                "cuprof:      60.000 µs     60.000 µs        1x  aten::mm",
                "cuprof:      50.000 µs     50.000 µs        2x  aten::add",
                "cuprof:      10.000 µs    100.000 µs        1x  autograd::engine::evaluate_function: \
                 AddmmBackward0",
            ]
        );
    }

    /// A GPU-bound run (60 µs of GPU time, half the 120 µs in operators): by the GPU time they
    /// launched, with their self CPU time.
    #[test]
    fn a_gpu_bound_run_lists_operators_by_gpu_time() {
        assert_eq!(
            wrapped(60),
            [
                "cuprof: top operators by the GPU time they launched (then self CPU time, calls):",
                "cuprof:      60.000 µs     60.000 µs        1x  aten::mm",
            ]
        );
    }

    /// GPU work that no operator launched, enough for a GPU-bound run: the operators by self
    /// CPU time, said to have launched none.
    #[test]
    fn operators_without_gpu_work_are_listed_by_self_cpu_time() {
        let op = |name: &str, ts: i64, dur: i64| {
            format!(
                r#"{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": {ts}, "dur": {dur}, "args": {{"External id": {ts}}}}}"#
            )
        };
        let (a, b, c) = (
            op("aten::add", 0, 5),
            op("aten::mm", 10, 30),
            op("aten::add", 50, 7),
        );
        let kernel = r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 100, "args": {"device": 0}}"#;
        let lines = summary_of("cpu-ops", &[&a, &b, &c, kernel]);
        assert_eq!(
            lines[lines.len() - 3..],
            [
                "cuprof: top operators by self CPU time, none having launched GPU work (then CPU \
                 time with nested operators, calls):",
                "cuprof:      30.000 µs     30.000 µs        1x  aten::mm",
                "cuprof:      12.000 µs     12.000 µs        2x  aten::add",
            ]
        );
    }

    /// A finding of at least 1% of the GPU window ends the summary, with the operator and line
    /// behind most of it; one below 1% is left to the report.
    #[test]
    fn findings_worth_a_look_end_the_summary() {
        let op = r#"{"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1, "ts": 0, "dur": 1500, "args": {"External id": 7, "Call stack": "m.py(8): f"}}"#;
        let sync = r#"{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 1, "ts": 10, "dur": 1000, "args": {"correlation": 2}}"#;
        let kernel = |ts: i64| {
            format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": {ts}, "dur": 100, "args": {{"device": 0}}}}"#
            )
        };
        // Kernels 0-100 and 200-300 and pageable copies at 300 and 30,300 µs (1 µs each): a
        // window of 30,301 µs whose gaps are host-bound past the sync's end at 1,010 µs
        // (29,290 µs, 96.7%); the sync, 1,000 µs (3.3%), is in `aten::item`; the copies, 2 µs,
        // are not named.
        let (a, b) = (kernel(0), kernel(200));
        let copy = |ts: i64| {
            format!(
                r#"{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": {ts}, "dur": 1, "args": {{"device": 0, "bytes": 4}}}}"#
            )
        };
        let (c, d) = (copy(300), copy(30_300));
        let lines = summary_of("look-at", &[op, sync, &a, &b, &c, &d]);
        let at = lines
            .iter()
            .position(|l| l.starts_with("cuprof: what to look at"))
            .expect("a look-at line");
        assert_eq!(
            lines[at..],
            [
                "cuprof: what to look at (report.md says what to do):",
                "cuprof:   GPU waiting for the host: the GPU sat idle 29.290 ms (96.7% of the GPU \
                 window) waiting for work from the host, in 1 gap, the longest 29.290 ms",
                "cuprof:   Host synchronization: 1 synchronizing call blocked the CPU for 1.000 ms \
                 (3.3% of the GPU window), the longest 1.000 ms; most in aten::item at m.py(8): f",
            ]
        );
    }

    #[test]
    fn the_report_folder_is_named_for_the_run() {
        use ReportOf::{Capture, Run};
        assert_eq!(
            report_dir(Path::new("/d/job-rank0-cycle2.trace.json.gz"), Run),
            PathBuf::from("/d/job-report")
        );
        // One capture's: the next one does not overwrite it.
        assert_eq!(
            report_dir(Path::new("/d/job-rank0-cycle12.trace.json.gz"), Capture),
            PathBuf::from("/d/job-cycle12-report")
        );
        assert_eq!(
            report_dir(
                Path::new("/d/job-rank0-cycle3-pid42-1.trace.json.gz"),
                Capture
            ),
            PathBuf::from("/d/job-cycle3-report")
        );
        assert_eq!(
            report_dir(Path::new("/d/profile_1700-rank12.trace.json.gz"), Capture),
            PathBuf::from("/d/profile_1700-report")
        );
        // `--tensorboard`'s names.
        assert_eq!(
            report_dir(Path::new("/d/job-rank3.2.pt.trace.json.gz"), Run),
            PathBuf::from("/d/job-report")
        );
        assert_eq!(
            report_dir(Path::new("x.json"), Run),
            PathBuf::from("x-report")
        );
    }
}
