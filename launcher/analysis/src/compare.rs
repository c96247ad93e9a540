//! `cuprof compare A B`: kernel by kernel, bucket by bucket, copy kind by copy kind, range by
//! range, API call by API call, launch figures, idle time by kind and (when both have them)
//! PyTorch operator by operator, with the step-time speedup; and region by region (steps, root
//! modules, labels both runs have), each region's speedup and torch.compile's fusion ratio.

use crate::saturating::AddSat;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use crate::format::{bytes, dur, short, Table};
use crate::io::console::{outln, Console};
use crate::load::runs::{choose, inputs_named};
use crate::model::{over_runs, Breakdown, MeanStd, RunSpread, StepStats};
use crate::sections::operators::Operators;
use crate::sections::regions::{regions, RegionFigures, RegionKind};
use crate::summary::schema::Summary;

#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// The baseline: a trace file or a directory of rank traces.
    pub a: PathBuf,
    /// The candidate, compared against A.
    pub b: PathBuf,
    /// Print JSON instead of tables.
    pub json: bool,
    /// Rows shown per table (the JSON has all of them).
    pub top: usize,
    /// Also read every run of each side: step latency and tokens/s as mean ± std over its runs.
    pub all_runs: bool,
    pub jobs: crate::io::jobs::Jobs,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub name: String,
    pub a_ns: i64,
    pub b_ns: i64,
    /// `b / a`; `null` when A has none of it.
    pub ratio: Option<f64>,
    pub delta_ns: i64,
}

#[derive(Debug, Serialize)]
pub struct Side {
    pub paths: Vec<String>,
    pub steps: StepStats,
    pub gpu: Breakdown,
}

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    /// `--all-runs`: each side's runs, their step latency and tokens/s, mean ± std over them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_runs: Option<RunSpread>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_runs: Option<RunSpread>,
    /// Mean step time of A / mean step time of B (> 1: B is faster); `null` without steps on
    /// both sides.
    pub step_time_speedup: Option<f64>,
    /// Total step time of A / of B.
    pub total_step_time_speedup: Option<f64>,
    /// Kernels by name, largest `max(a, b)` first.
    pub kernels: Vec<Row>,
    /// NVTX buckets (innermost range at launch), largest first.
    pub nvtx_buckets: Vec<Row>,
    /// Memory copies and sets by kind (`HtoD (Pageable -> Device)`, `Memset (Device)`), their
    /// GPU time: the report's `memcpy`, largest first; absent when neither side has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<Row>,
    /// NVTX ranges and `record_function` labels by name, their own (CPU) time: the report's
    /// `ranges`, largest first; absent when neither side has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<Row>,
    /// CUDA API calls by name, their total time: the report's `api_calls`, largest first;
    /// absent when neither side has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_calls: Vec<Row>,
    /// Collectives by name, the GPU time of their kernels: the report's `collectives`, largest
    /// first; absent when neither side has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub collectives: Vec<Row>,
    /// torch.compile's Triton kernels by name, the GPU time of their kernels: the report's
    /// `triton_kernels`, largest first; absent when neither side has any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub triton_kernels: Vec<Row>,
    /// The report's kernel launches: the median and p90 of the launch calls' time and of the
    /// launch delays; absent when neither side has a kernel joined to its launch call.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub launches: Vec<Row>,
    /// The report's idle time by stream, summed over every stream, by kind (host wait, kernel
    /// wait, other); absent when neither side has a GPU operation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub idle: Vec<Row>,
    /// Operators by name, when both sides have them: largest `max(a, b)` GPU time first, then
    /// CPU time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operators: Option<Vec<OperatorRow>>,
    /// The report's findings by rule, when either side has one: largest `max(a, b)` cost first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<FindingRow>,
    /// The regions both sides have (steps, root modules, labels), per call; absent when they
    /// share none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<RegionRow>,
}

/// One region both runs have, per call of it: A against B (an eager run against a compiled
/// one: its speedup, and how many of A's operators one kernel of B does).
#[derive(Debug, Serialize)]
pub struct RegionRow {
    pub kind: RegionKind,
    pub name: String,
    pub a_calls: u64,
    pub b_calls: u64,
    /// Host time per call, from its start to its end.
    pub a_ns_per_call: f64,
    pub b_ns_per_call: f64,
    /// `a_ns_per_call / b_ns_per_call` (> 1: B is faster).
    pub speedup: Option<f64>,
    /// GPU time per call of the kernels launched inside it.
    pub a_gpu_ns_per_call: f64,
    pub b_gpu_ns_per_call: f64,
    /// `a_gpu_ns_per_call / b_gpu_ns_per_call`; `null` when either launched no kernel.
    pub gpu_speedup: Option<f64>,
    /// Kernels per call, and the distinct operators per call that launched them.
    pub a_kernels_per_call: f64,
    pub b_kernels_per_call: f64,
    pub a_operators_per_call: f64,
    pub b_operators_per_call: f64,
    /// `a_operators_per_call / b_kernels_per_call`: A's operators that launched GPU work for
    /// each kernel of B (torch.compile's fusion, A eager and B compiled); `null` when either
    /// is 0.
    pub fusion_ratio: Option<f64>,
}

fn per_call(total: f64, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        total / calls as f64
    }
}

/// The regions A and B both have, side by side: steps, then root modules, then labels, each
/// kind largest `max(a, b)` time per call first.
fn region_rows(
    a: &BTreeMap<(RegionKind, String), RegionFigures>,
    b: &BTreeMap<(RegionKind, String), RegionFigures>,
) -> Vec<RegionRow> {
    let mut v: Vec<RegionRow> = a
        .iter()
        .filter_map(|(key, x)| {
            let y = b.get(key)?;
            let pa = |t: f64| per_call(t, x.calls);
            let pb = |t: f64| per_call(t, y.calls);
            let (a_ns, b_ns) = (pa(x.wall_ns as f64), pb(y.wall_ns as f64));
            let (a_gpu, b_gpu) = (pa(x.gpu_ns as f64), pb(y.gpu_ns as f64));
            let (a_ops, b_kernels) = (pa(x.launching_operators as f64), pb(y.kernels as f64));
            Some(RegionRow {
                kind: key.0,
                name: key.1.clone(),
                a_calls: x.calls,
                b_calls: y.calls,
                a_ns_per_call: a_ns,
                b_ns_per_call: b_ns,
                speedup: speedup(a_ns, b_ns),
                a_gpu_ns_per_call: a_gpu,
                b_gpu_ns_per_call: b_gpu,
                gpu_speedup: speedup(a_gpu, b_gpu),
                a_kernels_per_call: pa(x.kernels as f64),
                b_kernels_per_call: b_kernels,
                a_operators_per_call: a_ops,
                b_operators_per_call: pb(y.launching_operators as f64),
                fusion_ratio: speedup(a_ops, b_kernels),
            })
        })
        .collect();
    v.sort_by(|x, y| {
        x.kind
            .cmp(&y.kind)
            .then(
                y.a_ns_per_call
                    .max(y.b_ns_per_call)
                    .total_cmp(&x.a_ns_per_call.max(x.b_ns_per_call)),
            )
            .then_with(|| x.name.cmp(&y.name))
    });
    v
}

/// The regions side by side: time per call and its speedup, GPU time per call, kernels per
/// call and the fusion ratio.
fn region_table(rows: &[RegionRow], top: usize) -> String {
    let mut t = Table::new(&[
        "region (both runs), per call",
        ">calls A",
        ">calls B",
        ">A",
        ">B",
        ">speedup",
        ">GPU A",
        ">GPU B",
        ">GPU speedup",
        ">ops A",
        ">kernels B",
        ">fusion",
    ]);
    let x = |r: Option<f64>| r.map_or(String::new(), |r| format!("{r:.3}x"));
    let count = |n: f64| format!("{n:.1}");
    for r in rows.iter().take(top) {
        let kind = match r.kind {
            RegionKind::Step => "",
            RegionKind::Module => "module ",
            RegionKind::Label => "label ",
        };
        t.row(vec![
            format!("{kind}{}", short(&r.name, 60)),
            r.a_calls.to_string(),
            r.b_calls.to_string(),
            dur(r.a_ns_per_call),
            dur(r.b_ns_per_call),
            x(r.speedup),
            dur(r.a_gpu_ns_per_call),
            dur(r.b_gpu_ns_per_call),
            x(r.gpu_speedup),
            count(r.a_operators_per_call),
            count(r.b_kernels_per_call),
            x(r.fusion_ratio),
        ]);
    }
    let mut s = t.text();
    if rows.len() > top {
        s.push_str(&format!("  ({} more with --json)\n", rows.len() - top));
    }
    s
}

/// One finding's rule in A and B (the report's `findings[]`: count and cost, `time_ns`).
#[derive(Debug, Default, Serialize)]
pub struct FindingRow {
    pub rule: String,
    pub a_count: u64,
    pub b_count: u64,
    pub a_ns: i64,
    pub b_ns: i64,
    /// `b / a`; `null` when A has none of it.
    pub ratio: Option<f64>,
    pub delta_ns: i64,
}

fn finding_rows(a: &Summary, b: &Summary) -> Vec<FindingRow> {
    let mut m: BTreeMap<&str, FindingRow> = BTreeMap::new();
    for (side, s) in [(0, a), (1, b)] {
        for f in &s.findings {
            let r = m.entry(&f.rule).or_default();
            let (count, ns) = if side == 0 {
                (&mut r.a_count, &mut r.a_ns)
            } else {
                (&mut r.b_count, &mut r.b_ns)
            };
            *count = count.saturating_add(f.count);
            ns.add_sat(f.time_ns);
        }
    }
    let mut v: Vec<FindingRow> = m
        .into_iter()
        .map(|(rule, mut r)| {
            r.rule = rule.to_string();
            r.ratio = (r.a_ns != 0).then(|| r.b_ns as f64 / r.a_ns as f64);
            r.delta_ns = r.b_ns - r.a_ns;
            r
        })
        .collect();
    v.sort_by(|x, y| {
        y.a_ns
            .max(y.b_ns)
            .cmp(&x.a_ns.max(x.b_ns))
            .then_with(|| x.rule.cmp(&y.rule))
    });
    v
}

/// The findings side by side, titled as the report titles them.
fn finding_table(rows: &[FindingRow]) -> String {
    let mut t = Table::new(&[
        "what to look at",
        ">count A",
        ">count B",
        ">A",
        ">B",
        ">B/A",
        ">B-A",
    ]);
    for r in rows {
        t.row(vec![
            crate::sections::findings::rule_title(&r.rule).to_string(),
            r.a_count.to_string(),
            r.b_count.to_string(),
            dur(r.a_ns as f64),
            dur(r.b_ns as f64),
            ratio_cell(r.ratio),
            dur(r.delta_ns as f64),
        ]);
    }
    t.text()
}

/// One operator name in A and B (the report's `operators.top` figures).
#[derive(Debug, Default, Serialize)]
pub struct OperatorRow {
    pub name: String,
    pub a_count: u64,
    pub b_count: u64,
    /// CPU time, nested operators included.
    pub a_cpu_ns: i64,
    pub b_cpu_ns: i64,
    pub cpu_delta_ns: i64,
    pub a_self_cpu_ns: i64,
    pub b_self_cpu_ns: i64,
    /// GPU time launched as the innermost operator.
    pub a_gpu_ns: i64,
    pub b_gpu_ns: i64,
    /// `b_gpu / a_gpu`; `null` when A launched no GPU work from it.
    pub gpu_ratio: Option<f64>,
    pub gpu_delta_ns: i64,
    /// Net allocations made in the calls themselves (the report's `memory.self_cpu_bytes` and
    /// `self_device_bytes`); absent for a side that recorded no allocations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_self_cpu_mem_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_self_cpu_mem_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub a_self_device_mem_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_self_device_mem_bytes: Option<i64>,
}

fn operator_rows(a: &Operators, b: &Operators) -> Vec<OperatorRow> {
    // A side that recorded allocations has a figure for every name, 0 for those it lacks.
    let (a_mem, b_mem) = (a.tensor_memory.is_some(), b.tensor_memory.is_some());
    let blank = || OperatorRow {
        a_self_cpu_mem_bytes: a_mem.then_some(0),
        b_self_cpu_mem_bytes: b_mem.then_some(0),
        a_self_device_mem_bytes: a_mem.then_some(0),
        b_self_device_mem_bytes: b_mem.then_some(0),
        ..OperatorRow::default()
    };
    let mut m: BTreeMap<&str, OperatorRow> = BTreeMap::new();
    for r in &a.top {
        let o = m.entry(&r.name).or_insert_with(blank);
        o.a_count.add_sat(r.count);
        o.a_cpu_ns.add_sat(r.cpu_ns);
        o.a_self_cpu_ns.add_sat(r.self_cpu_ns);
        o.a_gpu_ns.add_sat(r.gpu_ns);
        let mem = r.memory.unwrap_or_default();
        add_bytes(&mut o.a_self_cpu_mem_bytes, mem.self_cpu_bytes);
        add_bytes(&mut o.a_self_device_mem_bytes, mem.self_device_bytes);
    }
    for r in &b.top {
        let o = m.entry(&r.name).or_insert_with(blank);
        o.b_count.add_sat(r.count);
        o.b_cpu_ns.add_sat(r.cpu_ns);
        o.b_self_cpu_ns.add_sat(r.self_cpu_ns);
        o.b_gpu_ns.add_sat(r.gpu_ns);
        let mem = r.memory.unwrap_or_default();
        add_bytes(&mut o.b_self_cpu_mem_bytes, mem.self_cpu_bytes);
        add_bytes(&mut o.b_self_device_mem_bytes, mem.self_device_bytes);
    }
    let mut v: Vec<OperatorRow> = m
        .into_iter()
        .map(|(name, mut o)| {
            o.name = name.to_string();
            o.cpu_delta_ns = o.b_cpu_ns - o.a_cpu_ns;
            o.gpu_delta_ns = o.b_gpu_ns - o.a_gpu_ns;
            o.gpu_ratio = (o.a_gpu_ns != 0).then(|| o.b_gpu_ns as f64 / o.a_gpu_ns as f64);
            o
        })
        .collect();
    v.sort_by(|x, y| {
        y.a_gpu_ns
            .max(y.b_gpu_ns)
            .cmp(&x.a_gpu_ns.max(x.b_gpu_ns))
            .then(y.a_cpu_ns.max(y.b_cpu_ns).cmp(&x.a_cpu_ns.max(x.b_cpu_ns)))
            .then_with(|| x.name.cmp(&y.name))
    });
    v
}

/// Adds `bytes` to a side's figure, which is `None` when that side recorded no allocations.
fn add_bytes(figure: &mut Option<i64>, bytes: i64) {
    if let Some(f) = figure {
        f.add_sat(bytes);
    }
}

/// A's and B's rows of one report table side by side, by the name and time `figure` reads
/// from each row.
fn rows<T>(a: &[T], b: &[T], figure: fn(&T) -> (&str, i64)) -> Vec<Row> {
    let mut m: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for (n, t) in a.iter().map(figure) {
        m.entry(n).or_default().0.add_sat(t);
    }
    for (n, t) in b.iter().map(figure) {
        m.entry(n).or_default().1.add_sat(t);
    }
    let mut v: Vec<Row> = m
        .into_iter()
        .map(|(name, (a, b))| Row {
            name: name.to_string(),
            a_ns: a,
            b_ns: b,
            ratio: (a != 0).then(|| b as f64 / a as f64),
            delta_ns: b - a,
        })
        .collect();
    v.sort_by(|x, y| {
        y.a_ns
            .max(y.b_ns)
            .cmp(&x.a_ns.max(x.b_ns))
            .then_with(|| x.name.cmp(&y.name))
    });
    v
}

fn speedup(a: f64, b: f64) -> Option<f64> {
    (a > 0.0 && b > 0.0).then(|| a / b)
}

pub(crate) fn comparison(a: &Summary, b: &Summary) -> Comparison {
    let side = |s: &Summary| Side {
        paths: s.files.iter().map(|f| f.path.clone()).collect(),
        steps: s.steps.clone(),
        gpu: s.gpu.clone(),
    };
    Comparison {
        a: side(a),
        b: side(b),
        a_runs: None,
        b_runs: None,
        step_time_speedup: speedup(a.steps.mean_ns, b.steps.mean_ns),
        total_step_time_speedup: speedup(a.steps.total_ns as f64, b.steps.total_ns as f64),
        kernels: rows(&a.top_kernels, &b.top_kernels, |k| (&k.name, k.total_ns)),
        nvtx_buckets: rows(&a.nvtx_buckets, &b.nvtx_buckets, |k| (&k.name, k.total_ns)),
        copies: rows(&a.memcpy, &b.memcpy, |m| (&m.kind, m.total_ns)),
        ranges: rows(&a.ranges, &b.ranges, |r| (&r.name, r.total_ns)),
        api_calls: rows(&a.api_calls, &b.api_calls, |r| (&r.name, r.total_ns)),
        collectives: rows(&a.collectives, &b.collectives, |c| (&c.name, c.gpu_ns)),
        triton_kernels: rows(&a.triton_kernels, &b.triton_kernels, |t| {
            (&t.name, t.gpu_ns)
        }),
        launches: rows(&launch_figures(a), &launch_figures(b), |f| (f.0, f.1)),
        idle: rows(&idle_figures(a), &idle_figures(b), |f| (f.0, f.1)),
        operators: match (&a.operators, &b.operators) {
            (Some(x), Some(y)) => Some(operator_rows(x, y)),
            _ => None,
        },
        findings: finding_rows(a, b),
        regions: Vec::new(),
    }
}

/// The report's launch figures as named times (whole nanoseconds): the median and p90 of the
/// launch calls and of the launch delays.
fn launch_figures(s: &Summary) -> Vec<(&'static str, i64)> {
    s.launches.as_ref().map_or_else(Vec::new, |l| {
        vec![
            ("launch call, median", l.call.median_ns.round() as i64),
            ("launch call, p90", l.call.p90_ns.round() as i64),
            ("launch delay, median", l.delay.median_ns.round() as i64),
            ("launch delay, p90", l.delay.p90_ns.round() as i64),
        ]
    })
}

/// The report's idle time by stream as named times, summed over every stream (streams are
/// not the same ones from one run to the next; their kinds of wait are).
fn idle_figures(s: &Summary) -> Vec<(&'static str, i64)> {
    if s.idle_by_stream.is_empty() {
        return Vec::new();
    }
    let mut sum = [0i64; 3];
    for r in &s.idle_by_stream {
        sum[0].add_sat(r.host_wait_ns);
        sum[1].add_sat(r.kernel_wait_ns);
        sum[2].add_sat(r.other_ns);
    }
    vec![
        ("idle, host wait", sum[0]),
        ("idle, kernel wait", sum[1]),
        ("idle, other", sum[2]),
    ]
}

fn ratio_cell(r: Option<f64>) -> String {
    r.map_or("new".to_string(), |r| format!("{r:.3}x"))
}

fn table(title: &str, rows: &[Row], top: usize) -> String {
    let mut t = Table::new(&[title, ">A", ">B", ">B/A", ">B-A"]);
    for r in rows.iter().take(top) {
        t.row(vec![
            short(&r.name, 70),
            dur(r.a_ns as f64),
            dur(r.b_ns as f64),
            ratio_cell(r.ratio),
            dur(r.delta_ns as f64),
        ]);
    }
    let mut s = t.text();
    if rows.len() > top {
        s.push_str(&format!("  ({} more with --json)\n", rows.len() - top));
    }
    s
}

/// `a_ops` / `b_ops`: whether each side has operators (to say so when only one does).
/// `--all-runs`: a side's step figures over its runs, mean ± std.
fn runs_line(side: &str, r: &RunSpread) -> String {
    let pm = |m: MeanStd| format!("{} ± {}", dur(m.mean), dur(m.std));
    let mut line = format!(
        "{side} over {} run(s): step mean {}, p50 {}, p90 {}, p99 {}",
        r.runs.len(),
        pm(r.mean_ns),
        pm(r.p50_ns),
        pm(r.p90_ns),
        pm(r.p99_ns)
    );
    if let Some(t) = r.tokens_per_s {
        line.push_str(&format!(", {:.1} ± {:.1} tokens/s", t.mean, t.std));
    }
    line.push('\n');
    line
}

pub(crate) fn text(c: &Comparison, top: usize, a_ops: bool, b_ops: bool) -> String {
    let mut out = format!("A: {}\nB: {}\n\n", c.a.paths.join(" "), c.b.paths.join(" "));
    out.push_str(&format!(
        "steps: A {} x mean {}, B {} x mean {}; ",
        c.a.steps.count,
        dur(c.a.steps.mean_ns),
        c.b.steps.count,
        dur(c.b.steps.mean_ns)
    ));
    match c.step_time_speedup {
        Some(s) => out.push_str(&format!(
            "step time speedup {s:.3}x ({})\n",
            match c.a.steps.mean_ns.total_cmp(&c.b.steps.mean_ns) {
                std::cmp::Ordering::Equal => "no difference",
                std::cmp::Ordering::Greater => "B faster",
                std::cmp::Ordering::Less => "B slower",
            }
        )),
        None => out.push_str("no step time speedup (needs ProfilerStep#N on both sides)\n"),
    }
    for (side, r) in [("A", &c.a_runs), ("B", &c.b_runs)] {
        if let Some(r) = r {
            out.push_str(&runs_line(side, r));
        }
    }
    out.push_str(&format!(
        "GPU busy: A {}, B {}; idle: A {}, B {}\n\n",
        dur(c.a.gpu.busy_ns as f64),
        dur(c.b.gpu.busy_ns as f64),
        dur(c.a.gpu.idle_ns as f64),
        dur(c.b.gpu.idle_ns as f64)
    ));
    if !c.findings.is_empty() {
        out.push_str(&finding_table(&c.findings));
        out.push('\n');
    }
    if !c.regions.is_empty() {
        out.push_str(&region_table(&c.regions, top));
        out.push('\n');
    }
    out.push_str(&table("kernel", &c.kernels, top));
    out.push('\n');
    out.push_str(&table("NVTX range", &c.nvtx_buckets, top));
    out.push('\n');
    for (title, rows) in [
        ("copy or set", &c.copies),
        ("NVTX range or label, own time", &c.ranges),
        ("CUDA API call", &c.api_calls),
        ("collective, GPU time", &c.collectives),
        ("Triton kernel, GPU time", &c.triton_kernels),
        ("kernel launches", &c.launches),
        ("idle time between a stream's operations", &c.idle),
    ] {
        if !rows.is_empty() {
            out.push_str(&table(title, rows, top));
            out.push('\n');
        }
    }
    out.push_str(&match &c.operators {
        Some(rows) => operator_table(rows, top),
        None => match (a_ops, b_ops) {
            (false, false) => return out,
            (true, false) => "operators: only A has them (B has no cpu_op events)\n".to_string(),
            _ => "operators: only B has them (A has no cpu_op events)\n".to_string(),
        },
    });
    out
}

/// One figure of a row in A and in B.
type AandB = fn(&OperatorRow) -> [Option<i64>; 2];

fn operator_table(rows: &[OperatorRow], top: usize) -> String {
    let mut headers = vec![
        "operator", ">GPU A", ">GPU B", ">B/A", ">GPU B-A", ">CPU A", ">CPU B", ">CPU B-A",
    ];
    // Allocations, when a side recorded them: on the GPU where there are any, else the CPU's.
    let any = |f: AandB| {
        rows.iter()
            .any(|r| f(r).iter().any(|b| b.is_some_and(|b| b != 0)))
    };
    let device = |r: &OperatorRow| [r.a_self_device_mem_bytes, r.b_self_device_mem_bytes];
    let cpu = |r: &OperatorRow| [r.a_self_cpu_mem_bytes, r.b_self_cpu_mem_bytes];
    let memory: Option<AandB> = if any(device) {
        headers.extend([">self GPU mem A", ">self GPU mem B"]);
        Some(device)
    } else if any(cpu) {
        headers.extend([">self CPU mem A", ">self CPU mem B"]);
        Some(cpu)
    } else {
        None
    };
    let mut t = Table::new(&headers);
    for r in rows.iter().take(top) {
        let mut row = vec![
            short(&r.name, 70),
            dur(r.a_gpu_ns as f64),
            dur(r.b_gpu_ns as f64),
            // No GPU work on either side: no ratio, rather than "new".
            if r.a_gpu_ns == 0 && r.b_gpu_ns == 0 {
                String::new()
            } else {
                ratio_cell(r.gpu_ratio)
            },
            dur(r.gpu_delta_ns as f64),
            dur(r.a_cpu_ns as f64),
            dur(r.b_cpu_ns as f64),
            dur(r.cpu_delta_ns as f64),
        ];
        if let Some(f) = memory {
            row.extend(f(r).map(|b| b.map_or(String::new(), bytes)));
        }
        t.row(row);
    }
    let mut s = t.text();
    if rows.len() > top {
        s.push_str(&format!("  ({} more with --json)\n", rows.len() - top));
    }
    s
}

/// Rows shown per table unless asked (`--top`).
pub const DEFAULT_TOP: usize = 20;

impl CompareOptions {
    /// `b` against `a`, as tables of [`DEFAULT_TOP`] rows, on every core.
    pub fn new(a: PathBuf, b: PathBuf) -> Self {
        CompareOptions {
            a,
            b,
            json: false,
            top: DEFAULT_TOP,
            all_runs: false,
            jobs: crate::io::jobs::Jobs::default(),
        }
    }
}

/// `cuprof compare`: the comparison printed on `stdout`, as tables or JSON. `stderr` gets the
/// notices (the runs of A or B when one holds several: the newest of each is compared); errors
/// are returned, not printed.
pub fn compare(
    args: &CompareOptions,
    stdout: &mut (impl Write + Send),
    stderr: &mut (impl Write + Send),
) -> Result<()> {
    compare_to(args, &mut Console::new(stdout, stderr))
}

fn compare_to(args: &CompareOptions, con: &mut Console) -> Result<()> {
    // The newest run of each side, said where a side holds several.
    let side = |label: &str, p: &PathBuf| {
        let what = format!("{label} ({})", inputs_named(std::slice::from_ref(p)));
        choose(std::slice::from_ref(p), None, &what)
    };
    let (a_run, b_run) = args
        .jobs
        .install(|| (side("A", &args.a), side("B", &args.b)))?;
    let (a_run, b_run) = (a_run?, b_run?);
    for n in a_run.notes.iter().chain(&b_run.notes) {
        con.note(n);
    }
    // A and B at once, each file of each on its own worker.
    let (a, b) = args.jobs.install(|| {
        rayon::join(
            || crate::model::analyse_files(&a_run.files).map(|an| (regions(&an), an.summarize())),
            || crate::model::analyse_files(&b_run.files).map(|an| (regions(&an), an.summarize())),
        )
    })?;
    let ((a_regions, a), (b_regions, b)) = (a?, b?);
    let mut c = comparison(&a, &b);
    c.regions = region_rows(&a_regions, &b_regions);
    if args.all_runs {
        c.a_runs = Some(args.jobs.install(|| over_runs(&a_run.every))??);
        c.b_runs = Some(args.jobs.install(|| over_runs(&b_run.every))??);
    }
    if args.json {
        outln!(con, "{}", crate::escape::json::to_string_pretty(&c)?)
    } else {
        con.print(&text(
            &c,
            args.top,
            a.operators.is_some(),
            b.operators.is_some(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_merge_and_ratio() {
        let r = rows(&[("x", 100), ("y", 50)], &[("x", 50), ("z", 500)], |r| *r);
        assert_eq!(r[0].name, "z");
        assert_eq!(r[0].ratio, None);
        assert_eq!(r[1].name, "x");
        assert_eq!(r[1].ratio, Some(0.5));
        assert_eq!(r[1].delta_ns, -50);
        assert_eq!(r[2].ratio, Some(0.0));
    }
}
