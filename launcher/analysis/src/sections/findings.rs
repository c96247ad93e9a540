//! What to look at first (`summary.json`'s `findings`): five patterns that cost GPU programs
//! time, most of them ones Nsight Systems' expert rules and HTA's kernel-launch statistics
//! flag, each found in the trace and tied to the operators, and the Python lines, that caused
//! it.
//!
//! * **`synchronize`**: CPU calls that block until the GPU has finished (`cudaDeviceSynchronize`,
//!   `cudaStreamSynchronize`, `cudaEventSynchronize` and the driver's twins: what `.item()`,
//!   `.cpu()`, `.tolist()`, `print` of a CUDA tensor and `torch.cuda.synchronize()` run). Cost:
//!   the calls' CPU time. Each call belongs to the innermost operator open on its thread when it
//!   started.
//! * **`pageable_copy`**: copies between a GPU and pageable (unpinned) host memory (`Memcpy HtoD
//!   (Pageable -> Device)`, `Memcpy DtoH (Device -> Pageable)`): the driver stages them through a
//!   pinned buffer of its own, the host waits for them, and `non_blocking=True` cannot overlap
//!   them with compute. Cost: their GPU time. Each belongs to the operator that launched it.
//! * **`host_bound_idle`**: the gaps of a device's window (between its first and last operation)
//!   in which no operation ran on any stream, less the time inside a synchronization: the GPU
//!   waited for the host to submit work. Cost: that time, so the findings' sum over every device
//!   is the breakdown's `idle_host_bound_ns`. A gap belongs to the operator that launched the
//!   operation that ended it (the first to start at its end).
//! * **`device_allocation`**: the driver's allocations and frees (`cudaMalloc`, `cudaFree`,
//!   `cudaHostAlloc`, `cudaFreeHost`, `cuMemAlloc`, `cuMemFree` and their kin; not the
//!   stream-ordered `...Async` ones) made inside a step (`ProfilerStep#N`, on any thread). In a
//!   steady state PyTorch's caching allocator serves every tensor from memory it holds: a call
//!   inside a step means it had to grow or give memory back (memory pressure, an
//!   `empty_cache()`), and `cudaFree` waits for the whole device. Cost: the calls' CPU time. Each
//!   belongs to the innermost operator open on its thread. A trace without steps has no such
//!   finding (its allocations may be the program's start).
//! * **`short_kernels`**: kernels that ran for less time than the CPU call that launched them,
//!   a call of at most 50 µs (HTA's "short GPU kernels", `get_cuda_kernel_launch_stats` with its
//!   default `runtime_cutoff`: a longer launch is a one-off, such as a first call loading a
//!   module, not launch overhead). A launch is a one-kernel call, `cudaLaunchKernel` and its kin,
//!   matched to its kernel by correlation id. A run of such kernels keeps the GPU waiting on the
//!   CPU's launches. Cost: the launches' CPU time (`gpu_ns`: the kernels' own). Each belongs to
//!   the operator that launched it.
//!
//! A trace without operators (or without a rule's link) puts everything under
//! [`NO_OPERATOR`]. Findings are ordered by cost, the largest first; a rule that found nothing
//! is left out.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::format::{bytes, dur, pct};
use crate::load::{ApiCall, FileData, GpuOp, Interner, OpKind, NO_NAME};
use crate::model::links::{call_site, Links, NONE, NO_OPERATOR};
use crate::model::{median, ratio, sync_wait, union};
use crate::saturating::AddSat;
use crate::sections::launches::{for_each_launched_kernel, SLOW_CALL_NS as LAUNCH_CUTOFF_NS};

/// One pattern found in the traces ([`find`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// `synchronize`, `pageable_copy`, `host_bound_idle`, `device_allocation` or
    /// `short_kernels`.
    pub rule: String,
    /// Calls, copies, gaps or kernels found.
    pub count: u64,
    /// What they cost (per rule: see the module documentation).
    pub time_ns: i64,
    /// `time_ns` over the summed wall time of every device's window (`gpu.wall_ns`).
    pub share_of_wall: f64,
    /// The costliest one.
    pub longest_ns: i64,
    /// `pageable_copy`: the bytes copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    /// `short_kernels`: the kernels' own GPU time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_ns: Option<i64>,
    /// Per operator and Python line, by cost (then count, operator, line).
    pub sources: Vec<FindingSource>,
    /// With several ranks: every rank's part, by rank (0 for a rank without any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<FindingRank>,
}

/// One rank's part of a finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingRank {
    pub rank: i64,
    pub count: u64,
    pub time_ns: i64,
}

/// The part of a finding one operator, called from one Python line, is the cause of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingSource {
    /// The operator's name, or `(no operator)`.
    pub operator: String,
    /// Its Python line (`file(line): function`), when the trace recorded stacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_site: Option<String>,
    pub count: u64,
    pub time_ns: i64,
    /// `pageable_copy`: the bytes copied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
}

/// The rules, in the order their accumulators are kept.
const RULES: [&str; 5] = [
    "synchronize",
    "pageable_copy",
    "host_bound_idle",
    "short_kernels",
    "device_allocation",
];
const SYNCHRONIZE: usize = 0;
const PAGEABLE_COPY: usize = 1;
const HOST_BOUND_IDLE: usize = 2;
const SHORT_KERNELS: usize = 3;
const DEVICE_ALLOCATION: usize = 4;

/// A source's key while counting: the operator's name id (`None`: no operator) and the name id
/// of the `Call stack` it was called with (`NO_NAME`: none); stacks become lines at the end,
/// once each.
type SourceKey = (Option<u32>, u32);

#[derive(Default, Clone, Copy)]
struct Cost {
    count: u64,
    time: i64,
    bytes: i64,
}

impl Cost {
    fn add(&mut self, o: Cost) {
        self.count = self.count.saturating_add(o.count);
        self.time.add_sat(o.time);
        self.bytes.add_sat(o.bytes);
    }
}

#[derive(Default)]
struct Rule {
    total: Cost,
    longest: i64,
    gpu: i64,
    sources: FxHashMap<SourceKey, Cost>,
    /// Added file by file: what the rule's total gained in each of the rank's files.
    by_rank: BTreeMap<i64, Cost>,
}

impl Rule {
    fn add(&mut self, source: SourceKey, time: i64, bytes: i64) {
        let one = Cost {
            count: 1,
            time,
            bytes,
        };
        self.total.add(one);
        self.sources.entry(source).or_default().add(one);
        self.longest = self.longest.max(time);
    }
}

/// The operator (and stack) an event of file `f` belongs to, given its operator index.
struct Sources<'a> {
    names: &'a Interner,
    f: &'a FileData,
    links: Option<&'a Links>,
}

impl Sources<'_> {
    fn of(&self, op: u32) -> SourceKey {
        match self.links {
            Some(l) if op != NONE => (
                Some(self.f.cpu_ops[op as usize].name),
                l.stack_of(&self.f.cpu_ops, op),
            ),
            _ => (None, NO_NAME),
        }
    }

    /// The innermost operator open on API call `a`'s thread when it started.
    fn of_call(&self, a: &ApiCall) -> SourceKey {
        self.of(self
            .links
            .map_or(NONE, |l| l.innermost_at(&self.f.cpu_ops, a.thread, a.start)))
    }

    /// The operator that launched GPU operation `i` of the file.
    fn of_gpu(&self, i: usize) -> SourceKey {
        self.of(self.links.map_or(NONE, |l| l.gpu[i]))
    }
}

/// What [`find`] counted, before each finding's share of the GPUs' wall time is known.
pub struct Found<'a> {
    names: &'a Interner,
    ranks: &'a [i64],
    rules: Vec<Rule>,
}

/// The findings of `files` (with their operators' `links` and the ranks they count under),
/// counted; [`Found::findings`] gives them once the GPUs' wall time is known (the scan, the
/// costly part, need not wait for it).
pub fn find<'a>(
    names: &'a Interner,
    files: &[FileData],
    links: &[Option<Links>],
    ranks: &'a [i64],
) -> Found<'a> {
    let mut rules: Vec<Rule> = RULES.iter().map(|_| Rule::default()).collect();
    for ((f, l), &rank) in files.iter().zip(links).zip(ranks) {
        let src = Sources {
            names,
            f,
            links: l.as_ref(),
        };
        let before: Vec<Cost> = rules.iter().map(|r| r.total).collect();
        synchronize(&src, &mut rules[SYNCHRONIZE]);
        pageable_copies(&src, &mut rules[PAGEABLE_COPY]);
        host_bound_idle(&src, &mut rules[HOST_BOUND_IDLE]);
        short_kernels(&src, &mut rules[SHORT_KERNELS]);
        device_allocations(&src, &mut rules[DEVICE_ALLOCATION]);
        for (r, b) in rules.iter_mut().zip(before) {
            r.by_rank.entry(rank).or_default().add(Cost {
                count: r.total.count - b.count,
                time: r.total.time.saturating_sub(b.time),
                bytes: r.total.bytes.saturating_sub(b.bytes),
            });
        }
    }
    Found {
        names,
        ranks,
        rules,
    }
}

impl Found<'_> {
    /// The findings, largest time first; `wall_ns` is the summed wall of every device's window.
    pub fn findings(self, wall_ns: i64) -> Vec<Finding> {
        let mut out: Vec<Finding> = self
            .rules
            .into_iter()
            .enumerate()
            .filter(|(_, r)| r.total.count > 0)
            .map(|(i, r)| finding(self.names, i, r, self.ranks, wall_ns))
            .collect();
        out.sort_by(|a, b| b.time_ns.cmp(&a.time_ns).then(a.rule.cmp(&b.rule)));
        out
    }
}

fn finding(names: &Interner, rule: usize, r: Rule, ranks: &[i64], wall_ns: i64) -> Finding {
    let copies = rule == PAGEABLE_COPY;
    let all: BTreeSet<i64> = ranks.iter().copied().collect();
    let per_rank = if all.len() > 1 {
        all.into_iter()
            .map(|rank| {
                let c = r.by_rank.get(&rank).copied().unwrap_or_default();
                FindingRank {
                    rank,
                    count: c.count,
                    time_ns: c.time,
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    // Stacks to lines, each stack once; several stacks can share a line.
    let mut lines: FxHashMap<u32, Option<&str>> = FxHashMap::default();
    let mut by_line: FxHashMap<(Option<u32>, Option<&str>), Cost> = FxHashMap::default();
    for ((op, stack), c) in r.sources {
        let line = *lines.entry(stack).or_insert_with(|| {
            (stack != NO_NAME)
                .then(|| call_site(names.name(stack)))
                .flatten()
        });
        by_line.entry((op, line)).or_default().add(c);
    }
    let mut sources: Vec<FindingSource> = by_line
        .into_iter()
        .map(|((op, site), c)| FindingSource {
            operator: op.map_or(NO_OPERATOR, |n| names.name(n)).to_string(),
            call_site: site.map(str::to_string),
            count: c.count,
            time_ns: c.time,
            bytes: copies.then_some(c.bytes),
        })
        .collect();
    sources.sort_by(|a, b| {
        b.time_ns
            .cmp(&a.time_ns)
            .then(b.count.cmp(&a.count))
            .then_with(|| a.operator.cmp(&b.operator))
            .then_with(|| a.call_site.cmp(&b.call_site))
    });
    Finding {
        rule: RULES[rule].to_string(),
        count: r.total.count,
        time_ns: r.total.time,
        share_of_wall: ratio(r.total.time as f64, wall_ns as f64),
        longest_ns: r.longest,
        bytes: copies.then_some(r.total.bytes),
        gpu_ns: (rule == SHORT_KERNELS).then_some(r.gpu),
        sources,
        ranks: per_rank,
    }
}

fn synchronize(src: &Sources<'_>, rule: &mut Rule) {
    for a in src.f.apis.iter().filter(|a| a.sync) {
        rule.add(src.of_call(a), a.end - a.start, 0);
    }
}

/// A call that allocates or frees through the driver (not stream-ordered).
fn is_driver_allocation(name: &str) -> bool {
    const CALLS: [&str; 7] = [
        "cudaMalloc",
        "cudaFree",
        "cudaHostAlloc",
        "cuMemAlloc",
        "cuMemFree",
        "cuMemHostAlloc",
        "cuMemHostFree",
    ];
    CALLS.iter().any(|c| name.starts_with(c)) && !name.contains("Async")
}

fn device_allocations(src: &Sources<'_>, rule: &mut Rule) {
    let f = src.f;
    if f.steps.is_empty() {
        return;
    }
    let steps = union(f.steps.iter().map(|s| (s.start, s.start + s.dur)).collect());
    for a in &f.apis {
        if !is_driver_allocation(src.names.name(a.name)) {
            continue;
        }
        let in_step = steps
            .partition_point(|&(start, _)| start <= a.start)
            .checked_sub(1)
            .is_some_and(|k| a.start < steps[k].1);
        if in_step {
            rule.add(src.of_call(a), a.end - a.start, 0);
        }
    }
}

fn pageable_copies(src: &Sources<'_>, rule: &mut Rule) {
    for (i, o) in src.f.ops.iter().enumerate() {
        if o.kind == OpKind::Memcpy && src.names.name(o.name).contains("Pageable") {
            rule.add(src.of_gpu(i), o.end - o.start, o.bytes);
        }
    }
}

/// Each device's idle gaps, less their time inside a synchronization (the intervals the
/// breakdown counts as sync wait: the process's CPU sync calls and the device's `cuda_sync`
/// events).
fn host_bound_idle(src: &Sources<'_>, rule: &mut Rule) {
    let f = src.f;
    let mut by_device: FxHashMap<i64, Vec<usize>> = FxHashMap::default();
    for (i, o) in f.ops.iter().enumerate() {
        by_device.entry(o.device).or_default().push(i);
    }
    for (dev, mut idx) in by_device {
        let syncs = sync_wait(f, dev);
        idx.sort_by_key(|&i| (f.ops[i].start, f.ops[i].end, i));
        let mut next_sync = 0;
        let mut busy_until = f.ops[idx[0]].start;
        for &i in &idx {
            let o: &GpuOp = &f.ops[i];
            if o.start > busy_until {
                let gap = o.start - busy_until;
                let host = gap - overlap(&syncs, &mut next_sync, busy_until, o.start);
                if host > 0 {
                    rule.add(src.of_gpu(i), host, 0);
                }
            }
            busy_until = busy_until.max(o.end);
        }
    }
}

/// The length of `[from, to)` covered by `syncs` (sorted, disjoint); `next` is the first
/// interval that can still reach a later gap, so that a pass over increasing gaps is linear.
fn overlap(syncs: &[(i64, i64)], next: &mut usize, from: i64, to: i64) -> i64 {
    while *next < syncs.len() && syncs[*next].1 <= from {
        *next += 1;
    }
    let mut covered = 0i64;
    for &(s, e) in &syncs[*next..] {
        if s >= to {
            break;
        }
        covered.add_sat(e.min(to) - s.max(from));
    }
    covered
}

fn short_kernels(src: &Sources<'_>, rule: &mut Rule) {
    for_each_launched_kernel(src.names, src.f, |i, kernel, call| {
        let (cpu, gpu) = (call.end - call.start, kernel.end - kernel.start);
        if gpu < cpu && cpu <= LAUNCH_CUTOFF_NS {
            rule.add(src.of_gpu(i), cpu, 0);
            rule.gpu.add_sat(gpu);
        }
    });
}

/// A finding's name where people read it.
pub fn title(f: &Finding) -> &'static str {
    rule_title(&f.rule)
}

/// A rule's name where people read it.
pub fn rule_title(rule: &str) -> &'static str {
    match rule {
        "synchronize" => "Host synchronization",
        "pageable_copy" => "Copies with pageable host memory",
        "host_bound_idle" => "GPU waiting for the host",
        "short_kernels" => "Kernels shorter than their launch",
        "device_allocation" => "Device memory allocated or freed inside steps",
        _ => "Finding",
    }
}

/// What a finding's figures say, in one sentence. `mark(field, text)` gives each figure as it
/// is to be shown (`field`: its name in the finding, `text`: the report's units); the words
/// around the figures need no escaping in HTML.
pub fn headline(f: &Finding, mark: impl Fn(&str, String) -> String) -> String {
    let n = f.count;
    let s = if n == 1 { "" } else { "s" };
    let count = mark("count", n.to_string());
    let time = mark("time_ns", dur(f.time_ns as f64));
    let share = mark("share_of_wall", pct(f.share_of_wall));
    let longest = mark("longest_ns", dur(f.longest_ns as f64));
    match f.rule.as_str() {
        "synchronize" => format!(
            "{count} synchronizing call{s} blocked the CPU for {time} ({share} of the GPU \
             window), the longest {longest}"
        ),
        "pageable_copy" => format!(
            "{count} cop{} of {} to or from pageable host memory took {time} of GPU time \
             ({share} of the GPU window), the longest {longest}",
            if n == 1 { "y" } else { "ies" },
            mark("bytes", bytes(f.bytes.unwrap_or(0))),
        ),
        "host_bound_idle" => format!(
            "the GPU sat idle {time} ({share} of the GPU window) waiting for work from the \
             host, in {count} gap{s}, the longest {longest}"
        ),
        "device_allocation" => format!(
            "{count} cudaMalloc/cudaFree-type call{s} inside steps took {time} of CPU time \
             ({share} of the GPU window), the longest {longest}"
        ),
        "short_kernels" => format!(
            "{count} kernel{s} ran {} on the GPU and took {time} of CPU time to launch ({share} \
             of the GPU window)",
            mark("gpu_ns", dur(f.gpu_ns.unwrap_or(0) as f64)),
        ),
        _ => format!("{count} found, {time}"),
    }
}

impl Finding {
    /// Whether its sources say more than `(no operator)`: a trace without operators gets no
    /// table of them.
    pub fn has_operators(&self) -> bool {
        self.sources.iter().any(|s| s.operator != NO_OPERATOR)
    }
}

/// With several ranks, how a finding's cost spreads over them: the indexes in `ranks` of the
/// rank with the most and of the one with the least (the lowest rank on a tie), and the median
/// of the ranks; `None` with one rank.
pub fn rank_spread(f: &Finding) -> Option<(usize, usize, f64)> {
    if f.ranks.len() < 2 {
        return None;
    }
    let by_time = |pick: fn(i64, i64) -> bool| {
        (0..f.ranks.len()).fold(0, |best, i| {
            if pick(f.ranks[i].time_ns, f.ranks[best].time_ns) {
                i
            } else {
                best
            }
        })
    };
    let mut times: Vec<i64> = f.ranks.iter().map(|r| r.time_ns).collect();
    Some((
        by_time(|a, b| a > b),
        by_time(|a, b| a < b),
        median(&mut times),
    ))
}

/// [`rank_spread`] in words; `mark(key, text)` gives each figure as it is to be shown (`key`:
/// its path under the finding, as `ranks.3.time_ns`).
pub fn rank_spread_line(f: &Finding, mark: impl Fn(&str, String) -> String) -> Option<String> {
    let (most, least, median) = rank_spread(f)?;
    let part = |i: usize| {
        let r = &f.ranks[i];
        format!(
            "rank {} ({}, {}x)",
            r.rank,
            mark(&format!("ranks.{i}.time_ns"), dur(r.time_ns as f64)),
            mark(&format!("ranks.{i}.count"), r.count.to_string()),
        )
    };
    Some(format!(
        "per rank: the most on {}, the least on {}, median {}",
        part(most),
        part(least),
        dur(median)
    ))
}

/// What a source's `time_ns` is, as a column header.
pub fn time_column(f: &Finding) -> &'static str {
    match f.rule.as_str() {
        "synchronize" => "CPU blocked",
        "pageable_copy" => "GPU time",
        "host_bound_idle" => "GPU idle before",
        "short_kernels" => "launch CPU",
        "device_allocation" => "CPU time",
        _ => "time",
    }
}

/// What to do about a finding.
pub fn advice(f: &Finding) -> &'static str {
    match f.rule.as_str() {
        "synchronize" => {
            "Each waits until the GPU has run all the work queued before it: `.item()`, \
             `.cpu()`, `.tolist()`, `print` or a Python `if` on a CUDA tensor, \
             `torch.cuda.synchronize()`. Keep values on the GPU, read them less often or \
             together; `torch.cuda.set_sync_debug_mode(\"warn\")` makes PyTorch name each one."
        }
        "pageable_copy" => {
            "The driver stages these through a pinned buffer of its own and the host waits, even \
             with `non_blocking=True`. Pin the host tensors (`DataLoader(pin_memory=True)`, \
             `tensor.pin_memory()`) and copy with `non_blocking=True`."
        }
        "host_bound_idle" => {
            "Each gap ended when the host launched the next work; the host was busy before \
             that (Python code, data loading, a long run of small launches). Look at the CPU \
             time just before those launches; torch.compile and CUDA graphs cut the number of \
             launches."
        }
        "device_allocation" => {
            "PyTorch's caching allocator serves tensors from memory it holds; these calls mean \
             it had to grow, or to give memory back (memory pressure, `torch.cuda.empty_cache()` \
             in the loop), and `cudaFree` waits for the whole device. Lower the peak, drop \
             `empty_cache()` from the loop, or try `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`; \
             `torch.cuda.memory_stats()[\"num_alloc_retries\"]` counts the allocator's retries."
        }
        "short_kernels" => {
            "A run of kernels shorter than their launch is paced by the CPU, not the GPU. Fuse \
             them (torch.compile) or replay them (CUDA graphs: \
             `torch.compile(mode=\"reduce-overhead\")`, `torch.cuda.graph`)."
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sections::launches::is_kernel_launch;

    #[test]
    fn overlap_walks_forward_once() {
        let syncs = [(10, 20), (30, 40), (50, 60)];
        let mut next = 0;
        assert_eq!(overlap(&syncs, &mut next, 0, 5), 0);
        assert_eq!(overlap(&syncs, &mut next, 15, 35), 10);
        assert_eq!(next, 0);
        assert_eq!(overlap(&syncs, &mut next, 38, 70), 12);
        assert_eq!(next, 1);
        assert_eq!(overlap(&syncs, &mut next, 60, 80), 0);
        assert_eq!(next, 3);
    }

    #[test]
    fn driver_allocations() {
        for n in [
            "cudaMalloc",
            "cudaMalloc_v3020",
            "cudaFree",
            "cudaHostAlloc",
            "cudaFreeHost",
            "cuMemAlloc_v2",
            "cuMemFree_v2",
        ] {
            assert!(is_driver_allocation(n), "{n}");
        }
        for n in [
            "cudaMallocAsync",
            "cudaFreeAsync",
            "cuMemAllocAsync",
            "cudaMemcpy",
        ] {
            assert!(!is_driver_allocation(n), "{n}");
        }
    }

    #[test]
    fn one_kernel_launches() {
        for n in [
            "cudaLaunchKernel",
            "cudaLaunchKernelExC_v11060",
            "cuLaunchKernel",
            "cuLaunchKernelEx",
            "cudaLaunchCooperativeKernel",
        ] {
            assert!(is_kernel_launch(n), "{n}");
        }
        for n in ["cudaGraphLaunch", "cudaMemcpyAsync", "cudaLaunchHostFunc"] {
            assert!(!is_kernel_launch(n), "{n}");
        }
    }
}
