//! Tables for the terminal and for `report.md`.

use crate::format::{bytes, dur, gbps, pct, short, short_tail, tflops, times, Table};
use crate::model::{self, Breakdown, MeanStd, RunSpread, StepStats};
use crate::sections::allocations::DeviceAllocations;
use crate::sections::collectives::{CollectiveRow, CollectiveWait};
use crate::sections::durations::DurationRow;
use crate::sections::findings::Finding;
use crate::sections::idle::{IdleRow, KERNEL_WAIT_NS};
use crate::sections::launches::{Launches, LATE_START_NS, SLOW_CALL_NS};
use crate::sections::modules::{ModuleGrouping, Modules};
use crate::sections::operators::{CallSiteKind, CallSiteRow, OperatorRow, Operators, RankedBy};
use crate::sections::queues::{QueueRow, FULL_QUEUE};
use crate::sections::step_figures::StepBins;
use crate::sections::torch_compile::{TorchCompile, SHOWN_PHASES};
use crate::sections::triton::TritonRow;
use crate::summary::culprits::{figure_label, Culprits};
use crate::summary::schema::Summary;

fn step_line(s: &StepStats) -> String {
    if s.count == 0 {
        return "no ProfilerStep#N annotations".to_string();
    }
    let mut line = format!(
        "{} steps, mean {}, p50 {}, p90 {}, p99 {}, min {}, max {}",
        s.count,
        dur(s.mean_ns),
        dur(s.p50_ns),
        dur(s.p90_ns),
        dur(s.p99_ns),
        dur(s.min_ns as f64),
        dur(s.max_ns as f64)
    );
    if let Some(t) = s.throughput_per_s {
        line.push_str(&format!(
            "; throughput {:.1} tokens/s ({} tokens in {} steps)",
            t, s.work, s.work_steps
        ));
    }
    if let Some(r) = &s.step_tokens_per_s {
        line.push_str(&format!(
            "; per step p50 {:.1} tokens/s, min {:.1}, max {:.1}",
            r.p50, r.min, r.max
        ));
    }
    line
}

/// The step figures' columns after a table's first (bins, runs).
const STEP_COLUMNS: [&str; 6] = [">steps", ">mean", ">p50", ">p90", ">p99", ">tokens/s"];

/// A table whose first column is `first`, then [`STEP_COLUMNS`].
fn step_table(first: &str) -> Table {
    let mut header = vec![first];
    header.extend(STEP_COLUMNS);
    Table::new(&header)
}

/// One row of a [`step_table`]: `first`, then the steps' count, latency and tokens/s ("-"
/// where there is no step).
fn step_row(first: String, st: &StepStats) -> Vec<String> {
    let d = |v: f64| {
        if st.count == 0 {
            "-".to_string()
        } else {
            dur(v)
        }
    };
    vec![
        first,
        st.count.to_string(),
        d(st.mean_ns),
        d(st.p50_ns),
        d(st.p90_ns),
        d(st.p99_ns),
        st.throughput_per_s
            .map_or_else(|| "-".to_string(), |v| format!("{v:.1}")),
    ]
}

/// `--bin`: a row per bin of the figure, with its steps' latency and tokens/s.
fn bins_table(b: &StepBins) -> Table {
    let mut t = step_table("bin [lo, hi)");
    for bin in &b.bins {
        let range = match bin.hi {
            Some(hi) => format!("[{}, {})", bin.lo, hi),
            None => format!("[{}, inf)", bin.lo),
        };
        t.row(step_row(range, &bin.steps));
    }
    t
}

/// `--all-runs`: each run's step figures, then mean ± std over the runs.
fn runs_table(r: &RunSpread) -> Table {
    let mut t = step_table("run");
    for (name, st) in r.runs.iter().zip(&r.steps) {
        t.row(step_row(name.clone(), st));
    }
    let pm = |m: MeanStd| format!("{} ± {}", dur(m.mean), dur(m.std));
    t.row(vec![
        format!("mean ± std ({} runs)", r.runs.len()),
        String::new(),
        pm(r.mean_ns),
        pm(r.p50_ns),
        pm(r.p90_ns),
        pm(r.p99_ns),
        r.tokens_per_s.map_or_else(
            || "-".to_string(),
            |m| format!("{:.1} ± {:.1}", m.mean, m.std),
        ),
    ]);
    t
}

fn breakdown_cells(b: &Breakdown) -> Vec<String> {
    let w = b.wall_ns as f64;
    let c = |v: i64| {
        format!(
            "{} {}",
            dur(v as f64),
            pct(crate::model::ratio(v as f64, w))
        )
    };
    vec![
        dur(w),
        c(b.compute_ns),
        c(b.communication_ns),
        c(b.communication_total_ns),
        c(b.comm_compute_overlap_ns),
        c(b.memcpy_ns),
        c(b.memset_ns),
        c(b.idle_ns),
        c(b.idle_host_bound_ns),
        c(b.idle_sync_wait_ns),
    ]
}

/// The report's sections as (title, text) pairs; `md` picks Markdown tables.
pub fn sections(s: &Summary, top: usize, md: bool) -> Vec<(String, String)> {
    let render = |t: &Table| if md { t.markdown() } else { t.text() };
    let name_max = if md { 200 } else { 70 };
    let mut out = Vec::new();

    let events: u64 = s.files.iter().map(|f| f.events).sum();
    let mut head = format!(
        "{} file(s), {} rank(s), {} events\n",
        s.files.len(),
        s.ranks.len(),
        events
    );
    for f in &s.files {
        if let Some(t) = &f.truncated {
            head.push_str(&format!(
                "warning: {} (rank {}) is cut short: {t}; figures cover what was read\n",
                f.path, f.rank
            ));
        }
        if f.malformed_events_skipped + f.malformed_events_clamped > 0 {
            head.push_str(&crate::load::malformed_warning(
                &f.path,
                f.malformed_events_skipped,
                f.malformed_events_clamped,
            ));
            head.push('\n');
        }
        if f.gpu_ops == 0 && f.ignored_events > 0 {
            head.push_str(&format!(
                "note: {}: {} event(s) of categories {} ignored: not CUDA activity (kernel, \
                 gpu_memcpy, gpu_memset), which is what the figures cover\n",
                f.path,
                f.ignored_events,
                crate::load::category_list(&f.ignored_categories)
            ));
        }
    }
    out.push(("Overview".to_string(), head));
    if let Some(text) = culprits(&s.culprits, s, md, name_max) {
        out.push(("What holds the job back".to_string(), text));
    }

    let mut steps = format!("all ranks: {}\n", step_line(&s.steps));
    if s.ranks.len() > 1 {
        for r in &s.ranks {
            steps.push_str(&format!("rank {}: {}\n", r.rank, step_line(&r.steps)));
        }
    }
    out.push(("Steps (ProfilerStep#N)".to_string(), steps));
    if let Some(b) = &s.step_bins {
        let figure = crate::escape::terminal::printable_line(&b.figure);
        let mut text = render(&bins_table(b));
        text.push_str(&format!(
            "steps by figure {figure} (args.figures; tokens: args.work): {} below the first edge, {} without it\n",
            b.below, b.without
        ));
        out.push((format!("Steps by {figure}"), text));
    }
    if let Some(r) = &s.runs {
        out.push(("Steps over runs".to_string(), render(&runs_table(r))));
    }

    let mut t = Table::new(&[
        "rank",
        "device",
        ">wall",
        ">compute",
        ">communication",
        ">comm total",
        ">comm under compute",
        ">memcpy",
        ">memset",
        ">idle",
        ">host-bound",
        ">sync wait",
    ]);
    for r in &s.ranks {
        for d in &r.devices {
            let mut row = vec![r.rank.to_string(), d.device.to_string()];
            row.extend(breakdown_cells(&d.breakdown));
            t.row(row);
        }
    }
    if s.ranks.iter().map(|r| r.devices.len()).sum::<usize>() > 1 {
        let mut row = vec!["all".to_string(), "".to_string()];
        row.extend(breakdown_cells(&s.gpu));
        t.row(row);
    }
    out.push((
        "GPU time".to_string(),
        if t.is_empty() {
            "no GPU activity\n".to_string()
        } else {
            // The exclusive split alone can read `communication 0 ns` while NCCL ran the whole
            // time under compute: the two totals beside it say how much there was.
            render(&t)
                + "compute, communication, memcpy, memset and idle count each instant once (in \
                   that order) and add up to wall; comm total is all communication kernel time, \
                   comm under compute the part of it that ran with compute.\n"
        },
    ));

    if !s.findings.is_empty() {
        out.push((
            "What to look at".to_string(),
            findings(
                &s.findings,
                call_site_kind(s.operators.as_ref()),
                top,
                md,
                name_max,
            ),
        ));
    }

    let by_op = s.operators.is_some();
    let mut t = if by_op {
        Table::new(&[
            "#", "kernel", ">count", ">total", ">mean", ">median", ">max", ">share", "operator",
        ])
    } else {
        Table::new(&[
            "#", "kernel", ">count", ">total", ">mean", ">median", ">max", ">share",
        ])
    };
    for (i, k) in s.top_kernels.iter().take(top).enumerate() {
        let mut row = vec![
            (i + 1).to_string(),
            short(&k.name, name_max),
            k.count.to_string(),
            dur(k.total_ns as f64),
            dur(k.mean_ns),
            dur(k.median_ns),
            dur(k.max_ns as f64),
            pct(k.share),
        ];
        if by_op {
            row.push(short(k.operator.as_deref().unwrap_or(""), name_max / 2));
        }
        t.row(row);
    }
    let more = s.top_kernels.len().saturating_sub(top);
    let mut text = if t.is_empty() {
        "no kernels\n".to_string()
    } else {
        render(&t)
    };
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    out.push(("Top kernels".to_string(), text));

    if let Some(o) = &s.operators {
        out.push((
            match o.ranked_by {
                RankedBy::GpuTime => "Top operators (by GPU time launched as the innermost operator)",
                RankedBy::SelfCpuTime => {
                    "Top operators (by self CPU time: the run is CPU-bound, its GPU time under half the host's time in operators)"
                }
            }
            .to_string(),
            operators(o, top, md, name_max),
        ));
    }

    if let Some(m) = &s.modules {
        out.push((modules_title(m), modules(m, top, md, name_max)));
    }

    if let Some(c) = &s.torch_compile {
        out.push((
            "torch.compile (compilations and their compiled code)".to_string(),
            torch_compile(c, top, md),
        ));
    }

    let mut t = Table::new(&["NVTX range", ">ops", ">GPU time", ">share"]);
    for b in s.nvtx_buckets.iter().take(top) {
        t.row(vec![
            short(&b.name, name_max),
            b.count.to_string(),
            dur(b.total_ns as f64),
            pct(b.share),
        ]);
    }
    out.push((
        "NVTX buckets (innermost range at launch)".to_string(),
        if t.is_empty() {
            "no GPU work\n".to_string()
        } else {
            render(&t)
        },
    ));

    let mut t = Table::new(&[
        "kind",
        ">count",
        ">bytes",
        ">time",
        ">GB/s",
        ">median size",
        ">max size",
        ">median time",
        ">max time",
    ]);
    for m in &s.memcpy {
        t.row(vec![
            m.kind.clone(),
            m.count.to_string(),
            bytes(m.bytes),
            dur(m.total_ns as f64),
            format!("{:.2}", m.bandwidth_gbps),
            bytes(m.median_bytes.round() as i64),
            bytes(m.max_bytes),
            dur(m.median_ns),
            dur(m.max_ns as f64),
        ]);
    }
    out.push((
        "Memory copies and sets".to_string(),
        if t.is_empty() {
            "none\n".to_string()
        } else {
            render(&t)
        },
    ));

    if !s.allocations.is_empty() {
        out.push((
            "PyTorch memory: leaks, growth and the peak (allocations made in the window)"
                .to_string(),
            allocations(&s.allocations, top, md, name_max),
        ));
    }

    if !s.api_calls.is_empty() {
        out.push((
            "CUDA API calls".to_string(),
            durations(&s.api_calls, "call", top, md, name_max),
        ));
    }
    if !s.ranges.is_empty() {
        out.push((
            "NVTX ranges and labels".to_string(),
            durations(&s.ranges, "range", top, md, name_max),
        ));
    }
    if !s.collectives.is_empty() {
        out.push((
            "Collectives (nccl-tests' figures)".to_string(),
            collectives(&s.collectives, top, md, name_max),
        ));
    }
    if !s.collective_waits.is_empty() {
        out.push((
            "Waiting in collectives (per rank)".to_string(),
            collective_waits(&s.collective_waits, md),
        ));
    }
    if !s.triton_kernels.is_empty() {
        out.push((
            "Triton kernels (torch.compile)".to_string(),
            triton_kernels(&s.triton_kernels, top, md, name_max),
        ));
    }
    if let Some(l) = &s.launches {
        out.push((
            "Kernel launches (HTA's launch statistics)".to_string(),
            launches(l, top, md, name_max),
        ));
    }
    if !s.launch_queues.is_empty() {
        out.push((
            "Launch queues (HTA's queue length)".to_string(),
            launch_queues(&s.launch_queues, top, md),
        ));
    }
    if !s.idle_by_stream.is_empty() {
        out.push((
            "Idle time by stream (HTA's idle time breakdown)".to_string(),
            idle_by_stream(&s.idle_by_stream, top, md),
        ));
    }

    let d = &s.dropped;
    let mut text = format!(
        "{} records dropped (channel {}, CUPTI {}, buffers {}); {} kernels without timestamps; {} memory events dropped\n",
        d.total(),
        d.dropped_channel,
        d.dropped_cupti,
        d.dropped_buffers,
        d.kernels_without_timestamps,
        d.memory_events_dropped
    );
    if d.files_without_stats > 0 {
        text.push_str(&format!(
            "{} file(s) have no cuprofStats (cut short, or not written by cuprof)\n",
            d.files_without_stats
        ));
    }
    if d.files_incomplete > 0 {
        text.push_str(&format!(
            "{} file(s) say they are incomplete\n",
            d.files_incomplete
        ));
    }
    out.push(("Dropped records".to_string(), text));

    let c = &s.cross_rank;
    if c.ranks > 1 {
        let mut t = Table::new(&[
            ">rank",
            ">steps",
            ">mean step",
            ">GPU busy",
            ">comm",
            ">comm under compute",
            ">slowest in",
        ]);
        for r in &c.per_rank {
            t.row(vec![
                r.rank.to_string(),
                r.steps.to_string(),
                dur(r.mean_step_ns),
                dur(r.busy_ns as f64),
                dur(r.communication_total_ns as f64),
                pct(r.comm_overlap_fraction),
                match r.slowest_in_steps {
                    1 => "1 step".to_string(),
                    n => format!("{n} steps"),
                },
            ]);
        }
        let mut text = render(&t);
        let f = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{v:.3}"));
        text.push_str(&format!(
            "\nimbalance (max/mean): step time {}, GPU busy {}\n",
            f(c.step_time_imbalance),
            f(c.busy_imbalance)
        ));
        if !c.slowest_rank_per_step.is_empty() {
            let worst = worst_stragglers(&c.slowest_rank_per_step);
            let mut t = Table::new(&[
                ">step",
                ">slowest rank",
                ">its time",
                ">mean of ranks",
                ">behind the mean",
            ]);
            for st in worst.iter().take(top) {
                t.row(vec![
                    st.step.to_string(),
                    st.rank.to_string(),
                    dur(st.dur_ns as f64),
                    dur(st.mean_ns),
                    dur(st.dur_ns as f64 - st.mean_ns),
                ]);
            }
            text.push('\n');
            text.push_str(&render(&t));
            let more = worst.len().saturating_sub(top);
            if more > 0 {
                text.push_str(&format!("({more} more steps in summary.json)\n"));
            }
        }
        out.push(("Across ranks".to_string(), text));
    }
    out
}

/// The operator tables: per name, then per name and input shapes when shapes were recorded.
fn operators(o: &Operators, top: usize, md: bool, name_max: usize) -> String {
    let render = |t: &Table| if md { t.markdown() } else { t.text() };
    let mut text = format!(
        "{} operator calls; GPU time launched outside every operator: {} ({})\n",
        o.calls,
        dur(o.gpu_without_operator_ns as f64),
        pct(crate::model::ratio(
            o.gpu_without_operator_ns as f64,
            o.gpu_ns as f64
        ))
    );
    if let Some(m) = &o.tensor_memory {
        text.push_str(&format!(
            "{} PyTorch allocations and frees; allocated net outside every operator: {} CPU, {} GPU\n",
            m.events,
            bytes(m.outside_operators_cpu_bytes),
            bytes(m.outside_operators_device_bytes)
        ));
    }
    text.push('\n');
    let tables: [(&[OperatorRow], bool); 2] = [(&o.top, false), (&o.by_input_dims, true)];
    for (rows, dims) in tables {
        if rows.is_empty() {
            continue;
        }
        let mut headers = vec!["#", "operator"];
        if dims {
            headers.push("input dims");
        }
        headers.extend([">calls", ">GPU", ">GPU share", ">CPU total", ">CPU self"]);
        // Achieved TFLOP/s, when torch counted FLOPs (`--with-flops`).
        let flops = rows.iter().any(|r| r.flops.is_some());
        if flops {
            headers.push(">TFLOP/s");
        }
        let self_memory =
            |r: &OperatorRow| r.memory.map(|m| (m.self_cpu_bytes, m.self_device_bytes));
        let mem = MemoryColumns::of(rows.iter().map(self_memory));
        mem.headers(&mut headers);
        let mut t = Table::new(&headers);
        for (i, r) in rows.iter().take(top).enumerate() {
            let mut row = vec![(i + 1).to_string(), short(&r.name, name_max)];
            if dims {
                row.push(short(r.input_dims.as_deref().unwrap_or(""), name_max));
            }
            row.extend([
                r.count.to_string(),
                dur(r.gpu_ns as f64),
                pct(r.gpu_share),
                dur(r.cpu_ns as f64),
                dur(r.self_cpu_ns as f64),
            ]);
            if flops {
                row.push(match r.achieved_tflops {
                    Some(t) => format!("{t:.2}"),
                    None => String::new(),
                });
            }
            mem.cells(&mut row, self_memory(r));
            t.row(row);
        }
        if dims {
            text.push('\n');
        }
        text.push_str(&render(&t));
        let more = rows.len().saturating_sub(top);
        if more > 0 {
            text.push_str(&format!("({more} more in summary.json)\n"));
        }
    }
    if !o.by_call_site.is_empty() {
        let sites = call_site_kind(Some(o));
        text.push_str(&format!(
            "\nBy the {} that called them (the innermost frame of the call stack outside PyTorch and the standard library):\n",
            sites.noun()
        ));
        text.push_str(&call_sites(&o.by_call_site, sites, top, md, name_max));
    }
    text
}

/// The operator tables' columns of PyTorch's net allocations in the calls themselves (torch's
/// "Self CPU Mem" and "Self CUDA Mem"), each shown where some row has a figure in it.
struct MemoryColumns {
    cpu: bool,
    device: bool,
}

impl MemoryColumns {
    /// From each row's (CPU, GPU) bytes, `None` where the trace recorded no allocations.
    fn of(rows: impl Iterator<Item = Option<(i64, i64)>>) -> MemoryColumns {
        let mut c = MemoryColumns {
            cpu: false,
            device: false,
        };
        for (cpu, device) in rows.flatten() {
            c.cpu |= cpu != 0;
            c.device |= device != 0;
        }
        c
    }

    fn headers(&self, headers: &mut Vec<&str>) {
        if self.cpu {
            headers.push(">self CPU mem");
        }
        if self.device {
            headers.push(">self GPU mem");
        }
    }

    fn cells(&self, row: &mut Vec<String>, memory: Option<(i64, i64)>) {
        let (cpu, device) = memory.unwrap_or_default();
        if self.cpu {
            row.push(bytes(cpu));
        }
        if self.device {
            row.push(bytes(device));
        }
    }
}

/// What the call sites of a summary's operators name (lines when it does not say: a summary
/// written before it said so).
pub fn call_site_kind(o: Option<&Operators>) -> CallSiteKind {
    o.and_then(|o| o.call_sites).unwrap_or(CallSiteKind::Lines)
}

fn call_sites(
    rows: &[CallSiteRow],
    sites: CallSiteKind,
    top: usize,
    md: bool,
    name_max: usize,
) -> String {
    let mut headers = vec![
        "#",
        sites.noun(),
        ">calls",
        ">GPU",
        ">GPU share",
        ">CPU self",
    ];
    let memory = |r: &CallSiteRow| r.memory.map(|m| (m.cpu_bytes, m.device_bytes));
    let mem = MemoryColumns::of(rows.iter().map(memory));
    mem.headers(&mut headers);
    let mut t = Table::new(&headers);
    for (i, r) in rows.iter().take(top).enumerate() {
        let mut row = vec![
            (i + 1).to_string(),
            short_tail(&r.call_site, name_max),
            r.calls.to_string(),
            dur(r.gpu_ns as f64),
            pct(r.gpu_share),
            dur(r.self_cpu_ns as f64),
        ];
        mem.cells(&mut row, memory(r));
        t.row(row);
    }
    let mut text = if md { t.markdown() } else { t.text() };
    let more = rows.len().saturating_sub(top);
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    text
}

/// Named durations by total time, as `nsys stats`' `cuda_api_sum` and `nvtx_sum` list them;
/// `what` heads the names' column.
fn durations(rows: &[DurationRow], what: &str, top: usize, md: bool, name_max: usize) -> String {
    let mut t = Table::new(&[
        "#", what, ">count", ">total", ">share", ">mean", ">median", ">min", ">max",
    ]);
    for (i, r) in rows.iter().take(top).enumerate() {
        t.row(vec![
            (i + 1).to_string(),
            short(&r.name, name_max / 2),
            r.count.to_string(),
            dur(r.total_ns as f64),
            pct(r.share),
            dur(r.mean_ns),
            dur(r.median_ns),
            dur(r.min_ns as f64),
            dur(r.max_ns as f64),
        ]);
    }
    let mut text = if md { t.markdown() } else { t.text() };
    let more = rows.len().saturating_sub(top);
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    text
}

/// Collectives by GPU time, with nccl-tests' size and bandwidths.
fn collectives(rows: &[CollectiveRow], top: usize, md: bool, name_max: usize) -> String {
    let mut t = Table::new(&[
        "collective",
        "dtype",
        ">ranks",
        ">calls",
        ">bytes",
        ">GPU time",
        ">kernels",
        ">algbw GB/s",
        ">busbw GB/s",
        ">CPU time",
    ]);
    for r in rows.iter().take(top) {
        t.row(vec![
            short(&r.name, name_max / 2),
            r.dtype.clone(),
            r.group_size.map_or("-".to_string(), |n| n.to_string()),
            r.count.to_string(),
            r.bytes.map_or("-".to_string(), bytes),
            dur(r.gpu_ns as f64),
            r.kernels.to_string(),
            gbps(r.algbw_gbps),
            gbps(r.busbw_gbps),
            dur(r.cpu_ns as f64),
        ]);
    }
    let mut text = if md { t.markdown() } else { t.text() };
    let more = rows.len().saturating_sub(top);
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    text
}

/// The module view's title: what its rows are keyed by.
pub fn modules_title(m: &Modules) -> String {
    match (m.by, m.depth) {
        (ModuleGrouping::Path, None) => "Modules (CPU and GPU time per nn.Module path)".into(),
        (ModuleGrouping::Path, Some(d)) => {
            format!("Modules (CPU and GPU time per nn.Module path, rolled up to depth {d})")
        }
        (ModuleGrouping::Class, _) => "Modules (CPU and GPU time per nn.Module class)".into(),
        (ModuleGrouping::Attribute, _) => {
            "Modules (CPU and GPU time per nn.Module attribute name)".into()
        }
    }
}

/// Module rows by GPU inclusive time: calls, CPU and GPU time, self and inclusive; or the one
/// line saying why there are none.
fn modules(m: &Modules, top: usize, md: bool, name_max: usize) -> String {
    if let Some(note) = &m.note {
        return format!("{note}\n");
    }
    let mut t = Table::new(&[
        "module",
        ">calls",
        ">CPU self",
        ">CPU total",
        ">GPU self",
        ">GPU total",
    ]);
    for r in m.rows.iter().take(top) {
        t.row(vec![
            short_tail(&r.name, name_max),
            r.calls.to_string(),
            dur(r.cpu_self_ns as f64),
            dur(r.cpu_inclusive_ns as f64),
            dur(r.gpu_self_ns as f64),
            dur(r.gpu_inclusive_ns as f64),
        ]);
    }
    let mut text = if md { t.markdown() } else { t.text() };
    let more = m.rows.len().saturating_sub(top);
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    text.push_str(&format!(
        "GPU time of kernels launched outside every module call (backward, optimizer, code \
         outside the model): {}\n",
        dur(m.outside_gpu_ns as f64)
    ));
    text
}

/// Triton kernels by GPU time, with their launch config, the achieved GB/s and TFLOP/s
/// against inductor's estimates, and the file inductor wrote them to.
fn triton_kernels(rows: &[TritonRow], top: usize, md: bool, name_max: usize) -> String {
    let mut t = Table::new(&[
        "kernel",
        ">launches",
        ">GPU time",
        ">kernels",
        ">GB/s",
        ">TFLOP/s",
        "config",
        "file",
    ]);
    for r in rows.iter().take(top) {
        let mut config = Vec::new();
        if let Some(w) = r.num_warps {
            config.push(format!("warps={w}"));
        }
        if let Some(s) = r.num_stages {
            config.push(format!("stages={s}"));
        }
        if !r.config.is_empty() {
            config.push(r.config.clone());
        }
        t.row(vec![
            short(&r.name, name_max / 2),
            r.launches.to_string(),
            dur(r.gpu_ns as f64),
            r.kernels.to_string(),
            gbps(r.gbps),
            tflops(r.tflops),
            config.join(" "),
            short_tail(&r.file, name_max / 2),
        ]);
    }
    let mut text = if md { t.markdown() } else { t.text() };
    let more = rows.len().saturating_sub(top);
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    text
}

/// Each kernel's launch call and the delay from its end to the kernel's start: over all
/// launches, then per kernel name by median delay.
fn launches(l: &Launches, top: usize, md: bool, name_max: usize) -> String {
    let mut t = Table::new(&["", ">median", ">p90", ">min", ">max", ">outliers"]);
    let over = |n: u64, cutoff: i64| format!("{n} over {}", dur(cutoff as f64));
    for (what, s, outliers) in [
        ("launch call", &l.call, over(l.slow_calls, SLOW_CALL_NS)),
        ("launch delay", &l.delay, over(l.late_starts, LATE_START_NS)),
    ] {
        t.row(vec![
            what.to_string(),
            dur(s.median_ns),
            dur(s.p90_ns),
            dur(s.min_ns as f64),
            dur(s.max_ns as f64),
            outliers,
        ]);
    }
    let mut text = format!(
        "{} kernels with their launch call (delay: from the call's end to the kernel's start)\n",
        l.kernels
    );
    text.push_str(&if md { t.markdown() } else { t.text() });
    let mut k = Table::new(&[
        "kernel",
        ">kernels",
        ">call median",
        ">delay median",
        ">delay p90",
        ">delay max",
    ]);
    for r in l.by_kernel.iter().take(top) {
        k.row(vec![
            short(&r.name, name_max),
            r.kernels.to_string(),
            dur(r.call.median_ns),
            dur(r.delay.median_ns),
            dur(r.delay.p90_ns),
            dur(r.delay.max_ns as f64),
        ]);
    }
    text.push('\n');
    text.push_str(&if md { k.markdown() } else { k.text() });
    let more = l.by_kernel.len().saturating_sub(top);
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    text
}

/// Each stream's queue of operations launched and not started: its mean over time and its
/// peak, by launches.
fn launch_queues(rows: &[QueueRow], top: usize, md: bool) -> String {
    let full = rows.iter().any(|r| r.full_ns > 0);
    let mut headers = vec![
        ">rank",
        ">device",
        ">stream",
        ">launches",
        ">mean queue",
        ">max",
    ];
    if full {
        headers.push(">at full queue");
    }
    let mut t = Table::new(&headers);
    for r in rows.iter().take(top) {
        let mut row = vec![
            r.rank.to_string(),
            r.device.to_string(),
            r.stream.to_string(),
            r.launches.to_string(),
            format!("{:.2}", r.mean),
            r.max.to_string(),
        ];
        if full {
            row.push(dur(r.full_ns as f64));
        }
        t.row(row);
    }
    let mut text = format!(
        "operations launched on a stream and not yet started, over time: near 0, each starts as soon as it is launched and the stream waits on the host; deep, the host runs ahead (at {FULL_QUEUE} the next launch blocks)\n"
    );
    text.push_str(&if md { t.markdown() } else { t.text() });
    let more = rows.len().saturating_sub(top);
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    text
}

/// Each stream's gaps between operations, as host waits, kernel waits and other, by idle time.
fn idle_by_stream(rows: &[IdleRow], top: usize, md: bool) -> String {
    let mut t = Table::new(&[
        ">rank",
        ">device",
        ">stream",
        ">operations",
        ">idle",
        ">host wait",
        ">kernel wait",
        ">other",
    ]);
    let share = |part: i64, r: &IdleRow| {
        format!(
            "{} ({})",
            dur(part as f64),
            pct(model::ratio(part as f64, r.idle_ns as f64))
        )
    };
    for r in rows.iter().take(top) {
        t.row(vec![
            r.rank.to_string(),
            r.device.to_string(),
            r.stream.to_string(),
            r.ops.to_string(),
            dur(r.idle_ns as f64),
            share(r.host_wait_ns, r),
            share(r.kernel_wait_ns, r),
            share(r.other_ns, r),
        ]);
    }
    let mut text = format!(
        "the gaps between a stream's operations: host wait, the next one's launch call started after the previous one ended (the GPU waited on the host); kernel wait, a gap under {} between operations already launched (launch overhead: CUDA graphs and fusion shrink it); other, a longer one (an event, another stream, a synchronization)\n",
        dur(KERNEL_WAIT_NS as f64)
    );
    text.push_str(&if md { t.markdown() } else { t.text() });
    let more = rows.len().saturating_sub(top);
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    text
}

/// The page's first panel as a table: the ranks furthest from the median rank, the rank the
/// others wait for, the slowest steps; then the top kernels. None when there is nothing to
/// rank (no step, no second rank, no kernel).
fn culprits(c: &Culprits, s: &Summary, md: bool, name_max: usize) -> Option<String> {
    let mut t = Table::new(&["what", "who", ">value", ">median", ">vs median"]);
    for f in &c.rank_figures {
        for r in &f.ranks {
            t.row(vec![
                figure_label(&f.figure).to_string(),
                format!("rank {}", r.rank),
                dur(r.value),
                dur(f.median),
                times(r.vs_median),
            ]);
        }
    }
    if let Some(w) = &c.waited_for {
        t.row(vec![
            "the others wait for it in collectives".to_string(),
            format!("rank {}", w.rank),
            dur(w.wait_ns as f64),
            dur(w.median_wait_ns),
            times(model::ratio(w.wait_ns as f64, w.median_wait_ns)),
        ]);
    }
    for st in &c.slowest_steps {
        t.row(vec![
            format!("slow step {}", st.step),
            format!("rank {}", st.rank),
            dur(st.dur_ns as f64),
            dur(c.step_median_ns),
            times(st.vs_median),
        ]);
    }
    let kernels = s.top_kernels.iter().take(crate::summary::culprits::NAMED);
    if t.is_empty() && s.top_kernels.is_empty() {
        return None;
    }
    let mut text = if md { t.markdown() } else { t.text() };
    if !t.is_empty() && s.ranks.len() > 1 {
        text.push_str(
            "ranks furthest from the median rank, either way; a rank the others wait for has the \
             least waiting; a step's time is its longest rank's\n",
        );
    }
    for (i, k) in kernels.enumerate() {
        text.push_str(&format!(
            "kernel {}: {} {} ({} of kernel time)\n",
            i + 1,
            short(&k.name, name_max),
            dur(k.total_ns as f64),
            pct(k.share)
        ));
    }
    Some(text)
}

/// Each rank's waiting in the collectives it shares with others, and the rank they wait for.
fn collective_waits(rows: &[CollectiveWait], md: bool) -> String {
    let mut t = Table::new(&[">rank", ">collectives", ">GPU time", ">waiting", ">share"]);
    for w in rows {
        t.row(vec![
            w.rank.to_string(),
            w.matched.to_string(),
            dur(w.gpu_ns as f64),
            dur(w.wait_ns as f64),
            pct(model::ratio(w.wait_ns as f64, w.gpu_ns as f64)),
        ]);
    }
    let mut text = if md { t.markdown() } else { t.text() };
    let least = rows.iter().min_by_key(|w| (w.wait_ns, w.rank));
    let most = rows.iter().map(|w| w.wait_ns).max().unwrap_or(0);
    if let Some(least) = least.filter(|l| rows.len() > 1 && most > l.wait_ns) {
        text.push_str(&format!(
            "\nrank {} waits least: the other ranks wait for it in their collectives (waiting: a kernel's time beyond the shortest rank's kernel of the same collective)\n",
            least.rank
        ));
    }
    text
}

/// Each finding, costliest first: what it cost, the operators and lines behind it (up to 5, or
/// `top`), and what to do.
fn findings(
    list: &[Finding],
    sites: CallSiteKind,
    top: usize,
    md: bool,
    name_max: usize,
) -> String {
    let mut text = String::new();
    for (i, f) in list.iter().enumerate() {
        let headline = crate::sections::findings::headline(f, |_, text| text);
        let title = crate::sections::findings::title(f);
        text.push_str(&if md {
            format!("**{}. {title}**: {headline}.\n\n", i + 1)
        } else {
            format!("{}. {title}: {headline}.\n", i + 1)
        });
        if let Some(spread) = crate::sections::findings::rank_spread_line(f, |_, text| text) {
            text.push_str(&if md {
                format!("{spread}.\n\n")
            } else {
                format!("   {spread}.\n")
            });
        }
        if f.has_operators() {
            text.push_str(&finding_sources(f, sites, top, md, name_max));
        }
        text.push_str(crate::sections::findings::advice(f));
        text.push_str("\n\n");
    }
    text.pop();
    text
}

/// A finding's operators and lines, up to 5 (or `top`).
fn finding_sources(
    f: &Finding,
    sites: CallSiteKind,
    top: usize,
    md: bool,
    name_max: usize,
) -> String {
    let copies = f.sources.iter().any(|s| s.bytes.is_some());
    let lines = f.sources.iter().any(|s| s.call_site.is_some());
    let mut headers = vec!["operator"];
    if lines {
        headers.push(sites.noun());
    }
    let time = format!(">{}", crate::sections::findings::time_column(f));
    headers.extend([">count", time.as_str()]);
    if copies {
        headers.push(">bytes");
    }
    let mut t = Table::new(&headers);
    let shown = top.min(5);
    for src in f.sources.iter().take(shown) {
        let mut row = vec![short(&src.operator, name_max / 2)];
        if lines {
            row.push(short_tail(src.call_site.as_deref().unwrap_or(""), name_max));
        }
        row.extend([src.count.to_string(), dur(src.time_ns as f64)]);
        if copies {
            row.push(bytes(src.bytes.unwrap_or(0)));
        }
        t.row(row);
    }
    let mut text = if md { t.markdown() } else { t.text() };
    let more = f.sources.len().saturating_sub(shown);
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    text
}

/// One row per compilation (`F/N`: frame F, its Nth recompilation): its compile time and the
/// main phases in it (dynamo's bytecode tracing, the backend, inductor within the backend),
/// graph breaks, then what its compiled code cost when called (inclusive: a frame's first call
/// includes compiling what it calls, such as the resume function after a graph break). Then,
/// where the trace says, each frame's graph breaks (where and why) and each recompilation's
/// failed guard.
fn torch_compile(c: &TorchCompile, top: usize, md: bool) -> String {
    let mut text = format!(
        "{} compilation{} ({} recompilation{}, {} graph break{}); compile time recorded: {}\n\n",
        c.compilations.len(),
        plural(c.compilations.len() as u64),
        c.recompilations,
        plural(c.recompilations),
        c.graph_breaks,
        plural(c.graph_breaks),
        dur(c.compile_ns as f64),
    );
    let mut headers = vec!["compile id", ">compile"];
    headers.extend(SHOWN_PHASES.iter().map(|p| match *p {
        "bytecode_tracing" => ">tracing",
        "backend_compile" => ">backend",
        _ => ">inductor",
    }));
    headers.extend([">graph breaks", ">calls", ">CPU", ">GPU"]);
    let mut t = Table::new(&headers);
    for k in c.compilations.iter().take(top) {
        let mut row = vec![
            k.compile_id.clone(),
            k.compile_ns.map_or(String::new(), |n| dur(n as f64)),
        ];
        row.extend(SHOWN_PHASES.iter().map(|p| {
            k.phases
                .iter()
                .find(|(n, _)| n == p)
                .map_or(String::new(), |(_, t)| dur(*t as f64))
        }));
        row.extend([
            k.graph_breaks.to_string(),
            k.calls.to_string(),
            dur(k.cpu_ns as f64),
            dur(k.gpu_ns as f64),
        ]);
        t.row(row);
    }
    text.push_str(&if md { t.markdown() } else { t.text() });
    let more = c.compilations.len().saturating_sub(top);
    if more > 0 {
        text.push_str(&format!("({more} more in summary.json)\n"));
    }
    if c.compilations.iter().any(|k| k.compile_ns.is_none()) {
        text.push_str(
            "an empty compile time: compiled before the recorded window (its phases were not \
             recorded).\n",
        );
    }
    if !c.breaks.is_empty() {
        text.push_str("\nGraph breaks (where in the code, in how many compilations, why):\n\n");
        let mut t = Table::new(&["frame", "at", ">compilations", "reason"]);
        for b in c.breaks.iter().take(top) {
            t.row(vec![
                b.frame.to_string(),
                format!("{}:{}", b.file, b.line),
                b.count.to_string(),
                b.reason.clone(),
            ]);
        }
        text.push_str(&if md { t.markdown() } else { t.text() });
        let more = c.breaks.len().saturating_sub(top);
        if more > 0 {
            text.push_str(&format!("({more} more in summary.json)\n"));
        }
    }
    let recompiled = c.recompiled();
    if !recompiled.is_empty() {
        text.push_str(
            "\nRecompilations (the guard that failed; its F/N: the compilation it guarded):\n\n",
        );
        let mut t = Table::new(&["compile id", "reason"]);
        for (k, reason) in recompiled.iter().take(top) {
            t.row(vec![
                k.compile_id.clone(),
                reason.lines().next().unwrap_or("").to_string(),
            ]);
        }
        text.push_str(&if md { t.markdown() } else { t.text() });
        let more = recompiled.len().saturating_sub(top);
        if more > 0 {
            text.push_str(&format!("({more} more in summary.json)\n"));
        }
    }
    text
}

/// Per file and device: what was alive at the window's end, what grew over the last steps,
/// and what was alive at the peak, by operator and Python line (`cuprof memory TRACE` prints
/// the same).
pub fn allocations(rows: &[DeviceAllocations], top: usize, md: bool, name_max: usize) -> String {
    let mut out = String::new();
    for d in rows {
        let since = |t: i64| dur(t.saturating_sub(d.window_start_ns) as f64);
        out.push_str(&format!(
            "rank {} {}: {} allocation{} in the window; peak {} at +{}{}; alive at the end: {} in {} allocation{}\n",
            d.rank,
            d.device,
            d.allocations,
            plural(d.allocations),
            bytes(d.peak_bytes),
            since(d.peak_ns),
            d.peak_step
                .map(|n| format!(" (step {n})"))
                .unwrap_or_default(),
            bytes(d.leaked_bytes),
            d.leaked_count,
            plural(d.leaked_count),
        ));
        if md {
            out.push('\n');
        }
        if !d.step_ends.is_empty() {
            let ends: Vec<String> = d
                .step_ends
                .iter()
                .map(|s| format!("{} {}", s.step, bytes(s.bytes)))
                .collect();
            out.push_str(&format!("live at step ends: {}", ends.join(", ")));
            match &d.growth {
                Some(g) => out.push_str(&format!(
                    "; growing {} over steps {} to {}\n",
                    bytes(g.bytes),
                    g.steps.first().copied().unwrap_or_default(),
                    g.steps.last().copied().unwrap_or_default()
                )),
                None => out.push('\n'),
            }
            if md {
                out.push('\n');
            }
        }
        // The module column only where the trace has module calls.
        let by_module = d
            .leaks
            .iter()
            .chain(d.growth.iter().flat_map(|g| &g.groups))
            .chain(&d.at_peak)
            .any(|g| g.module.is_some());
        let mut t = if by_module {
            Table::new(&[
                "",
                ">bytes",
                ">allocations",
                "operator",
                "module",
                "Python line",
            ])
        } else {
            Table::new(&["", ">bytes", ">allocations", "operator", "Python line"])
        };
        let mut add = |what: &str, groups: &[crate::sections::allocations::AllocationGroup]| {
            for g in groups.iter().take(top) {
                let mut row = vec![
                    what.to_string(),
                    bytes(g.bytes),
                    g.count.to_string(),
                    short(&g.operator, name_max / 2),
                ];
                if by_module {
                    row.push(short_tail(g.module.as_deref().unwrap_or(""), name_max / 2));
                }
                row.push(short_tail(g.call_site.as_deref().unwrap_or(""), name_max));
                t.row(row);
            }
        };
        add("leaked", &d.leaks);
        if let Some(g) = &d.growth {
            add("grew", &g.groups);
        }
        add("at peak", &d.at_peak);
        if !t.is_empty() {
            out.push_str(&if md { t.markdown() } else { t.text() });
        }
    }
    out
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

pub fn text(s: &Summary, top: usize) -> String {
    let mut out = String::new();
    for (title, body) in sections(s, top, false) {
        out.push_str(&format!("== {title} ==\n{body}\n"));
    }
    out
}

pub fn markdown(s: &Summary, top: usize) -> String {
    let mut out = String::from("# cuprof report\n\n");
    for (title, body) in sections(s, top, true) {
        out.push_str(&format!(
            "## {}\n\n{}\n",
            crate::escape::markdown::text(&title),
            crate::escape::markdown::text(&body)
        ));
    }
    out
}

/// The steps whose slowest rank lagged the mean of the ranks most, worst first (ties: by
/// step); summary.json keeps every step, in step order.
fn worst_stragglers(
    steps: &[crate::summary::schema::SlowestStep],
) -> Vec<&crate::summary::schema::SlowestStep> {
    let mut worst: Vec<_> = steps.iter().collect();
    let lag = |s: &&crate::summary::schema::SlowestStep| s.dur_ns as f64 - s.mean_ns;
    worst.sort_by(|a, b| lag(b).total_cmp(&lag(a)).then(a.step.cmp(&b.step)));
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stragglers_worst_first() {
        let step = |step, dur_ns, mean_ns| crate::summary::schema::SlowestStep {
            step,
            rank: 0,
            dur_ns,
            mean_ns,
            ranks: 2,
        };
        let steps = [
            step(0, 10, 9.0),
            step(1, 30, 10.0),
            step(2, 12, 10.0),
            step(3, 20, 0.0),
        ];
        let order: Vec<i64> = worst_stragglers(&steps).iter().map(|s| s.step).collect();
        assert_eq!(order, [1, 3, 2, 0]);
    }
}
