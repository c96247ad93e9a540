//! The numbers of `cuprof report`, computed from loaded files. Every definition is in the module
//! documentation of `analysis` (and `docs/analysis.md`); this file is their implementation.

use super::saturating::{self, AddSat};
use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::load::{FileData, GpuOp, Interner, OpKind, NO_NAME};
use super::operators::{self, Links, Operators};
use super::series::{self, MemorySeries, StepTime};

/// Bucket of GPU work whose launching API call was not found in the trace.
pub const NO_LAUNCH: &str = "(no launch record)";
/// Bucket of GPU work launched outside every NVTX range.
pub const NO_RANGE: &str = "(no NVTX range)";

/// NVTX range paths (outermost first), interned: id 0 is the empty path.
pub struct Paths {
    map: FxHashMap<Vec<u32>, u32>,
    pub paths: Vec<Vec<u32>>,
}

impl Default for Paths {
    fn default() -> Self {
        let mut map = FxHashMap::default();
        map.insert(Vec::new(), 0);
        Paths {
            map,
            paths: vec![Vec::new()],
        }
    }
}

impl Paths {
    pub fn id(&mut self, key: &[u32]) -> u32 {
        if let Some(&i) = self.map.get(key) {
            return i;
        }
        let i = self.paths.len() as u32;
        self.paths.push(key.to_vec());
        self.map.insert(key.to_vec(), i);
        i
    }

    /// Innermost range of a path, `NO_NAME` for the empty path.
    pub fn innermost(&self, id: u32) -> u32 {
        self.paths[id as usize].last().copied().unwrap_or(NO_NAME)
    }
}

/// For each API call of `f` (same index as `f.apis`), the path of NVTX ranges open on its thread
/// at its start: range `[s, e]` is open at `t` when `s <= t <= e`; nesting is by start time
/// (a range that starts later is inside), ties broken by the longer range being outside.
pub fn api_paths(f: &FileData, paths: &mut Paths) -> Vec<u32> {
    let mut out = vec![0u32; f.apis.len()];
    let nthreads = f.threads.len();
    let mut apis_by: Vec<Vec<u32>> = vec![Vec::new(); nthreads];
    for (i, a) in f.apis.iter().enumerate() {
        apis_by[a.thread as usize].push(i as u32);
    }
    let mut ranges_by: Vec<Vec<u32>> = vec![Vec::new(); nthreads];
    for (i, r) in f.ranges.iter().enumerate() {
        ranges_by[r.thread as usize].push(i as u32);
    }
    let mut stack: Vec<u32> = Vec::new();
    let mut key: Vec<u32> = Vec::new();
    for (apis, ranges) in apis_by.iter_mut().zip(ranges_by.iter_mut()) {
        if apis.is_empty() {
            continue;
        }
        apis.sort_by_key(|&i| f.apis[i as usize].start);
        ranges.sort_by_key(|&i| {
            let r = &f.ranges[i as usize];
            (r.start, std::cmp::Reverse(r.end))
        });
        stack.clear();
        let mut next = 0;
        for &ai in apis.iter() {
            let t = f.apis[ai as usize].start;
            while next < ranges.len() && f.ranges[ranges[next] as usize].start <= t {
                // Ranges that ended by the time this one starts are its siblings, not its
                // parents, and contain no later call.
                let s = f.ranges[ranges[next] as usize].start;
                while stack
                    .last()
                    .is_some_and(|&top| f.ranges[top as usize].end <= s)
                {
                    stack.pop();
                }
                stack.push(ranges[next]);
                next += 1;
            }
            while let Some(&top) = stack.last() {
                if f.ranges[top as usize].end < t {
                    stack.pop();
                } else {
                    break;
                }
            }
            key.clear();
            key.extend(
                stack
                    .iter()
                    .map(|&r| &f.ranges[r as usize])
                    .filter(|r| r.end >= t)
                    .map(|r| r.name),
            );
            out[ai as usize] = paths.id(&key);
        }
    }
    out
}

/// For each GPU op of `f`, the range path of its launch: `Some(path)` when an API call with its
/// correlation id is in the file, `None` otherwise.
pub fn op_paths(f: &FileData, api_path: &[u32]) -> Vec<Option<u32>> {
    let mut by_corr: FxHashMap<i64, u32> = FxHashMap::default();
    by_corr.reserve(f.apis.len());
    for (i, a) in f.apis.iter().enumerate() {
        if a.corr >= 0 {
            by_corr.entry(a.corr).or_insert(i as u32);
        }
    }
    f.ops
        .iter()
        .map(|o| {
            if o.corr < 0 {
                return None;
            }
            by_corr.get(&o.corr).map(|&i| api_path[i as usize])
        })
        .collect()
}

/// Time breakdown of one device, integer nanoseconds. The window is from the start of the
/// device's first GPU operation to the end of its last; `compute + communication + memcpy +
/// memset + idle == wall` exactly, each instant counted once with priority compute >
/// communication > memcpy > memset (the union of busy intervals, so overlapping streams are not
/// counted twice). `idle == idle_sync_wait + idle_host_bound`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breakdown {
    pub wall_ns: i64,
    pub compute_ns: i64,
    pub communication_ns: i64,
    pub memcpy_ns: i64,
    pub memset_ns: i64,
    pub idle_ns: i64,
    /// Idle time inside a `cuda_sync` interval of the device or a CPU sync call of the process.
    pub idle_sync_wait_ns: i64,
    /// The rest of the idle time: the GPU waited for the host to submit work.
    pub idle_host_bound_ns: i64,
    /// `wall - idle`: time at least one operation ran.
    pub busy_ns: i64,
    /// Union of communication kernels, including the part under compute.
    pub communication_total_ns: i64,
    /// Time communication and compute kernels ran at once.
    pub comm_compute_overlap_ns: i64,
}

impl Breakdown {
    pub fn add(&mut self, o: &Breakdown) {
        self.wall_ns.add_sat(o.wall_ns);
        self.compute_ns.add_sat(o.compute_ns);
        self.communication_ns.add_sat(o.communication_ns);
        self.memcpy_ns.add_sat(o.memcpy_ns);
        self.memset_ns.add_sat(o.memset_ns);
        self.idle_ns.add_sat(o.idle_ns);
        self.idle_sync_wait_ns.add_sat(o.idle_sync_wait_ns);
        self.idle_host_bound_ns.add_sat(o.idle_host_bound_ns);
        self.busy_ns.add_sat(o.busy_ns);
        self.communication_total_ns
            .add_sat(o.communication_total_ns);
        self.comm_compute_overlap_ns
            .add_sat(o.comm_compute_overlap_ns);
    }
}

/// Sorted, disjoint union of intervals.
pub fn union(mut iv: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    iv.retain(|&(s, e)| e > s);
    iv.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(iv.len());
    for (s, e) in iv {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Total length of the intersection of two sorted disjoint interval lists.
pub fn intersection_len(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let s = a[i].0.max(b[j].0);
        let e = a[i].1.min(b[j].1);
        if e > s {
            total.add_sat(e - s);
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// The breakdown of one device's operations; `syncs` is the union of the intervals that make
/// idle time count as sync wait.
pub fn breakdown(ops: &[&GpuOp], syncs: &[(i64, i64)]) -> Breakdown {
    let mut b = Breakdown::default();
    let mut edges: Vec<(i64, i8, OpKind)> = Vec::with_capacity(ops.len() * 2);
    for o in ops {
        if o.end > o.start {
            edges.push((o.start, 1, o.kind));
            edges.push((o.end, -1, o.kind));
        }
    }
    let Some(first) = ops.iter().map(|o| o.start).min() else {
        return b;
    };
    let last = ops.iter().map(|o| o.end).max().unwrap_or(first);
    edges.sort_unstable_by_key(|e| (e.0, e.1));
    let mut active = [0i64; 4];
    let mut t = first;
    let mut idle: Vec<(i64, i64)> = Vec::new();
    let mut account = |active: &[i64; 4], from: i64, to: i64, b: &mut Breakdown| {
        let d = to - from;
        if d <= 0 {
            return;
        }
        if active[0] > 0 {
            b.compute_ns.add_sat(d);
        } else if active[1] > 0 {
            b.communication_ns.add_sat(d);
        } else if active[2] > 0 {
            b.memcpy_ns.add_sat(d);
        } else if active[3] > 0 {
            b.memset_ns.add_sat(d);
        } else {
            b.idle_ns.add_sat(d);
            match idle.last_mut() {
                Some(l) if l.1 == from => l.1 = to,
                _ => idle.push((from, to)),
            }
        }
        if active[1] > 0 {
            b.communication_total_ns.add_sat(d);
            if active[0] > 0 {
                b.comm_compute_overlap_ns.add_sat(d);
            }
        }
    };
    for (time, delta, kind) in edges {
        account(&active, t, time, &mut b);
        t = time;
        active[kind as usize] += delta as i64;
    }
    account(&active, t, last, &mut b);
    b.wall_ns = last - first;
    b.busy_ns = b.wall_ns - b.idle_ns;
    b.idle_sync_wait_ns = intersection_len(&idle, syncs);
    b.idle_host_bound_ns = b.idle_ns - b.idle_sync_wait_ns;
    b
}

/// Latency statistics of a set of steps (nanoseconds). Percentiles interpolate linearly between
/// the two nearest ranks (numpy's default): `p` of sorted `x[0..n]` is at index `p/100*(n-1)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepStats {
    pub count: usize,
    pub total_ns: i64,
    pub mean_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    /// Steps that reported `args.work`, their work and their time.
    pub work_steps: usize,
    pub work: f64,
    pub work_time_ns: i64,
    /// `work / work_time` in units per second, when any step reported work.
    pub throughput_per_s: Option<f64>,
}

/// Percentile `p` (an integer percent) of sorted values, interpolating linearly: exact rational
/// arithmetic up to the final division.
pub fn percentile(sorted: &[i64], p: u32) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let scaled = p as usize * (sorted.len() - 1);
    let lo = scaled / 100;
    let rem = (scaled % 100) as i64;
    if rem == 0 {
        return sorted[lo] as f64;
    }
    let diff = sorted[lo + 1] - sorted[lo];
    sorted[lo] as f64 + (diff as i128 * rem as i128) as f64 / 100.0
}

pub fn step_stats<'a>(steps: impl Iterator<Item = &'a super::load::Step>) -> StepStats {
    let mut durs = Vec::new();
    let mut s = StepStats::default();
    for st in steps {
        durs.push(st.dur);
        if let Some(w) = st.work {
            s.work_steps += 1;
            s.work += w;
            s.work_time_ns.add_sat(st.dur);
        }
    }
    if durs.is_empty() {
        return s;
    }
    durs.sort_unstable();
    s.count = durs.len();
    s.total_ns = saturating::sum(durs.iter().copied());
    s.mean_ns = s.total_ns as f64 / s.count as f64;
    s.p50_ns = percentile(&durs, 50);
    s.p90_ns = percentile(&durs, 90);
    s.p99_ns = percentile(&durs, 99);
    s.min_ns = durs[0];
    s.max_ns = durs[durs.len() - 1];
    if s.work_steps > 0 && s.work_time_ns > 0 {
        s.throughput_per_s = Some(s.work / (s.work_time_ns as f64 / 1e9));
    }
    s
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileSummary {
    pub path: String,
    pub rank: i64,
    pub events: u64,
    pub uncompressed_bytes: u64,
    /// Why and where the file stops early, when it does.
    pub truncated: Option<String>,
    /// Complete events left out: `ts` or `dur` missing, not a number, not finite or beyond
    /// ±2^62 ns.
    #[serde(default)]
    pub malformed_events_skipped: u64,
    /// Complete events with a negative `dur`, counted as lasting 0.
    #[serde(default)]
    pub malformed_events_clamped: u64,
    /// Complete events of categories that are not CUDA activity nor known host events (another
    /// accelerator's device events), left out of every figure.
    #[serde(default)]
    pub ignored_events: u64,
    /// Those categories, by name, with their counts.
    #[serde(default)]
    pub ignored_categories: BTreeMap<String, u64>,
    /// GPU operations (kernels, memcpys, memsets) read from the file.
    #[serde(default)]
    pub gpu_ops: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceSummary {
    pub device: i64,
    pub window_start_ns: i64,
    pub window_end_ns: i64,
    #[serde(flatten)]
    pub breakdown: Breakdown,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Dropped {
    pub dropped_channel: u64,
    pub dropped_cupti: u64,
    pub dropped_buffers: u64,
    pub kernels_without_timestamps: u64,
    pub memory_events_dropped: u64,
    /// Files without `cuprofStats` (cut short, or not written by cuprof).
    pub files_without_stats: usize,
    /// Files whose stats say the trace is incomplete.
    pub files_incomplete: usize,
}

impl Dropped {
    pub fn total(&self) -> u64 {
        self.dropped_channel + self.dropped_cupti + self.dropped_buffers
    }

    fn add(&mut self, o: &Dropped) {
        self.dropped_channel.add_sat(o.dropped_channel);
        self.dropped_cupti.add_sat(o.dropped_cupti);
        self.dropped_buffers.add_sat(o.dropped_buffers);
        self.kernels_without_timestamps
            .add_sat(o.kernels_without_timestamps);
        self.memory_events_dropped.add_sat(o.memory_events_dropped);
        self.files_without_stats.add_sat(o.files_without_stats);
        self.files_incomplete.add_sat(o.files_incomplete);
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankSummary {
    pub rank: i64,
    pub files: Vec<String>,
    pub steps: StepStats,
    /// Every step's duration, by step number.
    #[serde(default)]
    pub step_times: Vec<StepTime>,
    pub devices: Vec<DeviceSummary>,
    /// Sum over the rank's devices.
    pub gpu: Breakdown,
    pub dropped: Dropped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelRow {
    pub name: String,
    pub count: u64,
    pub total_ns: i64,
    pub mean_ns: f64,
    /// `total / sum of all kernels' totals`.
    pub share: f64,
    /// When the traces have operators: the operator that launched most of this kernel's time
    /// (`(no operator)` for launches outside every operator), and that time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_ns: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BucketRow {
    /// Innermost NVTX range, or `(no NVTX range)` / `(no launch record)`.
    pub name: String,
    pub count: u64,
    pub total_ns: i64,
    pub share: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemcpyRow {
    /// The op's name without its `Memcpy ` prefix: `HtoD (Pageable -> Device)`, `Memset (Device)`.
    pub kind: String,
    pub count: u64,
    pub bytes: i64,
    pub total_ns: i64,
    /// `bytes / total time` (bytes per nanosecond = GB/s).
    pub bandwidth_gbps: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankRow {
    pub rank: i64,
    pub steps: usize,
    pub mean_step_ns: f64,
    pub total_step_ns: i64,
    pub busy_ns: i64,
    pub communication_total_ns: i64,
    pub comm_compute_overlap_ns: i64,
    /// `overlap / communication_total`: the part of communication hidden under compute.
    pub comm_overlap_fraction: f64,
    /// Steps in which this rank was the slowest.
    pub slowest_in_steps: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SlowestStep {
    pub step: i64,
    pub rank: i64,
    pub dur_ns: i64,
    /// Mean of the step's duration over the ranks that have it.
    pub mean_ns: f64,
    pub ranks: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CrossRank {
    pub ranks: usize,
    pub per_rank: Vec<RankRow>,
    /// `max / mean` of the ranks' mean step time (ranks with steps); 1 means balanced.
    pub step_time_imbalance: Option<f64>,
    /// `max / mean` of the ranks' GPU busy time.
    pub busy_imbalance: Option<f64>,
    /// For each step number present on two ranks or more: the rank that took longest.
    pub slowest_rank_per_step: Vec<SlowestStep>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub tool: String,
    pub version: String,
    pub files: Vec<FileSummary>,
    /// `ProfilerStep#N` annotations of every rank.
    pub steps: StepStats,
    /// Sum over every device of every rank.
    pub gpu: Breakdown,
    pub ranks: Vec<RankSummary>,
    /// Every kernel name, by total time (descending).
    pub top_kernels: Vec<KernelRow>,
    /// GPU time (kernels, memcpy, memset) by innermost NVTX range of the launch, descending.
    pub nvtx_buckets: Vec<BucketRow>,
    pub memcpy: Vec<MemcpyRow>,
    pub dropped: Dropped,
    pub cross_rank: CrossRank,
    /// PyTorch operators (`cpu_op` events); absent when no trace has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operators: Option<Operators>,
    /// Device memory counters (`reserved_bytes`) per rank and device; absent when no trace
    /// recorded memory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemorySeries>,
}

/// Loaded files and what was derived from them once.
pub struct Analysis {
    pub names: Interner,
    pub files: Vec<FileData>,
    pub paths: Paths,
    /// Per file, per API call: range path.
    pub api_paths: Vec<Vec<u32>>,
    /// Per file, per GPU op: range path of its launch (`None`: no launch record).
    pub op_paths: Vec<Vec<Option<u32>>>,
    /// Per file: the rank it is counted under.
    pub ranks: Vec<i64>,
    /// Per file: operator nesting and attribution (`None`: the file has no operators).
    pub links: Vec<Option<Links>>,
}

impl Analysis {
    pub fn new(names: Interner, files: Vec<FileData>) -> Self {
        let mut paths = Paths::default();
        let mut api_p = Vec::with_capacity(files.len());
        let mut op_p = Vec::with_capacity(files.len());
        for f in &files {
            let a = api_paths(f, &mut paths);
            op_p.push(op_paths(f, &a));
            api_p.push(a);
        }
        // Files without a rank get the next ranks after the known ones, in file order.
        let mut next = files.iter().filter_map(|f| f.rank).max().unwrap_or(-1) + 1;
        let ranks = files
            .iter()
            .map(|f| {
                f.rank.unwrap_or_else(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        let links = files.iter().map(operators::links).collect();
        Analysis {
            names,
            files,
            paths,
            api_paths: api_p,
            op_paths: op_p,
            ranks,
            links,
        }
    }

    /// Label of an op's NVTX bucket.
    pub fn bucket_name(&self, path: Option<u32>) -> &str {
        match path {
            None => NO_LAUNCH,
            Some(p) => match self.paths.innermost(p) {
                NO_NAME => NO_RANGE,
                n => self.names.name(n),
            },
        }
    }

    pub fn summarize(&self) -> Summary {
        let mut by_rank: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
        for (i, &r) in self.ranks.iter().enumerate() {
            by_rank.entry(r).or_default().push(i);
        }
        let files = self
            .files
            .iter()
            .zip(&self.ranks)
            .map(|(f, &rank)| FileSummary {
                path: f.path.display().to_string(),
                rank,
                events: f.read.events,
                uncompressed_bytes: f.read.uncompressed_bytes,
                truncated: f.read.truncated.as_ref().map(|t| t.to_string()),
                malformed_events_skipped: f.malformed_skipped,
                malformed_events_clamped: f.malformed_clamped,
                ignored_events: saturating::sum(f.ignored.values().copied()),
                ignored_categories: f.ignored.clone(),
                gpu_ops: f.ops.len() as u64,
            })
            .collect();

        let mut ranks = Vec::new();
        let mut gpu = Breakdown::default();
        let mut dropped = Dropped::default();
        for (&rank, idx) in &by_rank {
            let r = self.rank_summary(rank, idx);
            gpu.add(&r.gpu);
            dropped.add(&r.dropped);
            ranks.push(r);
        }
        let steps = step_stats(self.files.iter().flat_map(|f| f.steps.iter()));

        // Top kernels: per-kernel sums (overlaps counted in full for each kernel).
        let mut kernels: FxHashMap<u32, (u64, i64)> = FxHashMap::default();
        let mut buckets: FxHashMap<&str, (u64, i64)> = FxHashMap::default();
        let mut memcpy: FxHashMap<u32, (u64, i64, i64)> = FxHashMap::default();
        for (fi, f) in self.files.iter().enumerate() {
            for (o, path) in f.ops.iter().zip(&self.op_paths[fi]) {
                let d = o.end - o.start;
                match o.kind {
                    OpKind::Compute | OpKind::Comm => {
                        let k = kernels.entry(o.name).or_default();
                        k.0 += 1;
                        k.1.add_sat(d);
                    }
                    OpKind::Memcpy | OpKind::Memset => {
                        let m = memcpy.entry(o.name).or_default();
                        m.0 += 1;
                        m.1.add_sat(o.bytes);
                        m.2.add_sat(d);
                    }
                }
                let b = buckets.entry(self.bucket_name(*path)).or_default();
                b.0 += 1;
                b.1.add_sat(d);
            }
        }
        let kernel_total: i64 = saturating::sum(kernels.values().map(|k| k.1));
        let ops = operators::summarize(&self.names, &self.files, &self.links);
        let launcher = |name: u32| ops.as_ref().and_then(|(_, by)| by.get(&name)).cloned();
        let mut top_kernels: Vec<KernelRow> = kernels
            .into_iter()
            .map(|(name, (count, total))| KernelRow {
                name: self.names.name(name).to_string(),
                count,
                total_ns: total,
                mean_ns: total as f64 / count as f64,
                share: ratio(total as f64, kernel_total as f64),
                operator: launcher(name).map(|l| l.0),
                operator_ns: launcher(name).map(|l| l.1),
            })
            .collect();
        top_kernels.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        let bucket_total: i64 = saturating::sum(buckets.values().map(|b| b.1));
        let mut nvtx_buckets: Vec<BucketRow> = buckets
            .into_iter()
            .map(|(name, (count, total))| BucketRow {
                name: name.to_string(),
                count,
                total_ns: total,
                share: ratio(total as f64, bucket_total as f64),
            })
            .collect();
        nvtx_buckets.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        let mut memcpy: Vec<MemcpyRow> = memcpy
            .into_iter()
            .map(|(name, (count, bytes, total))| {
                let n = self.names.name(name);
                MemcpyRow {
                    kind: n.strip_prefix("Memcpy ").unwrap_or(n).to_string(),
                    count,
                    bytes,
                    total_ns: total,
                    bandwidth_gbps: ratio(bytes as f64, total as f64),
                }
            })
            .collect();
        memcpy.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.kind.cmp(&b.kind)));

        let cross_rank = self.cross_rank(&ranks, &by_rank);
        let memory = by_rank
            .iter()
            .flat_map(|(&rank, idx)| series::memory(rank, &self.files, idx))
            .collect();
        Summary {
            tool: "cuprof report".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            files,
            steps,
            gpu,
            ranks,
            top_kernels,
            nvtx_buckets,
            memcpy,
            dropped,
            cross_rank,
            operators: ops.map(|o| o.0),
            memory,
        }
    }

    fn rank_summary(&self, rank: i64, idx: &[usize]) -> RankSummary {
        let mut devices: Vec<DeviceSummary> = Vec::new();
        let mut dropped = Dropped::default();
        // Each file (profiling cycle) is its own window: breakdowns of a rank's files add up.
        let mut per_device: BTreeMap<i64, DeviceSummary> = BTreeMap::new();
        for &fi in idx {
            let f = &self.files[fi];
            let cpu_syncs: Vec<(i64, i64)> = f
                .apis
                .iter()
                .filter(|a| a.sync)
                .map(|a| (a.start, a.end))
                .collect();
            let mut ops_by: BTreeMap<i64, Vec<&GpuOp>> = BTreeMap::new();
            for o in &f.ops {
                ops_by.entry(o.device).or_default().push(o);
            }
            for (dev, ops) in ops_by {
                let mut s = cpu_syncs.clone();
                s.extend(
                    f.gpu_syncs
                        .iter()
                        .filter(|g| g.0 == dev)
                        .map(|g| (g.1, g.2)),
                );
                let b = breakdown(&ops, &union(s));
                let start = ops.iter().map(|o| o.start).min().unwrap_or(0);
                let end = ops.iter().map(|o| o.end).max().unwrap_or(0);
                let d = per_device.entry(dev).or_insert_with(|| DeviceSummary {
                    device: dev,
                    window_start_ns: start,
                    window_end_ns: end,
                    breakdown: Breakdown::default(),
                });
                d.window_start_ns = d.window_start_ns.min(start);
                d.window_end_ns = d.window_end_ns.max(end);
                d.breakdown.add(&b);
            }
            match &f.meta.stats {
                Some(st) => {
                    dropped.dropped_channel.add_sat(st.dropped_channel);
                    dropped.dropped_cupti.add_sat(st.dropped_cupti);
                    dropped.dropped_buffers.add_sat(st.dropped_buffers);
                    dropped
                        .kernels_without_timestamps
                        .add_sat(st.kernels_without_timestamps);
                    dropped
                        .memory_events_dropped
                        .add_sat(st.memory_events_dropped);
                    if st.complete == Some(false) {
                        dropped.files_incomplete += 1;
                    }
                }
                None => dropped.files_without_stats += 1,
            }
        }
        devices.extend(per_device.into_values());
        let mut gpu = Breakdown::default();
        for d in &devices {
            gpu.add(&d.breakdown);
        }
        RankSummary {
            rank,
            files: idx
                .iter()
                .map(|&i| self.files[i].path.display().to_string())
                .collect(),
            steps: step_stats(idx.iter().flat_map(|&i| self.files[i].steps.iter())),
            step_times: series::step_times(&self.files, idx),
            devices,
            gpu,
            dropped,
        }
    }

    fn cross_rank(&self, ranks: &[RankSummary], by_rank: &BTreeMap<i64, Vec<usize>>) -> CrossRank {
        // Step number -> (rank, longest duration of that step on the rank).
        let mut per_step: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
        for (&rank, idx) in by_rank {
            let mut mine: BTreeMap<i64, i64> = BTreeMap::new();
            for &i in idx {
                for s in &self.files[i].steps {
                    let e = mine.entry(s.number).or_insert(s.dur);
                    *e = (*e).max(s.dur);
                }
            }
            for (n, d) in mine {
                per_step.entry(n).or_default().push((rank, d));
            }
        }
        let mut slowest = Vec::new();
        let mut slow_count: BTreeMap<i64, usize> = BTreeMap::new();
        for (step, v) in per_step {
            if v.len() < 2 {
                continue;
            }
            // Ties go to the lowest rank (v is in rank order; max_by_key keeps the last max).
            let (rank, dur) = v
                .iter()
                .copied()
                .rev()
                .max_by_key(|&(_, d)| d)
                .expect("non-empty");
            let mean = v.iter().map(|x| x.1 as f64).sum::<f64>() / v.len() as f64;
            *slow_count.entry(rank).or_default() += 1;
            slowest.push(SlowestStep {
                step,
                rank,
                dur_ns: dur,
                mean_ns: mean,
                ranks: v.len(),
            });
        }
        let per_rank: Vec<RankRow> = ranks
            .iter()
            .map(|r| RankRow {
                rank: r.rank,
                steps: r.steps.count,
                mean_step_ns: r.steps.mean_ns,
                total_step_ns: r.steps.total_ns,
                busy_ns: r.gpu.busy_ns,
                communication_total_ns: r.gpu.communication_total_ns,
                comm_compute_overlap_ns: r.gpu.comm_compute_overlap_ns,
                comm_overlap_fraction: ratio(
                    r.gpu.comm_compute_overlap_ns as f64,
                    r.gpu.communication_total_ns as f64,
                ),
                slowest_in_steps: slow_count.get(&r.rank).copied().unwrap_or(0),
            })
            .collect();
        let step_means: Vec<f64> = per_rank
            .iter()
            .filter(|r| r.steps > 0)
            .map(|r| r.mean_step_ns)
            .collect();
        let busy: Vec<f64> = per_rank.iter().map(|r| r.busy_ns as f64).collect();
        CrossRank {
            ranks: ranks.len(),
            per_rank,
            step_time_imbalance: imbalance(&step_means),
            busy_imbalance: imbalance(&busy),
            slowest_rank_per_step: slowest,
        }
    }
}

/// `a / b`, 0 when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

/// `max / mean`; `None` for no values or a zero mean.
pub fn imbalance(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let max = v.iter().copied().fold(f64::MIN, f64::max);
    (mean > 0.0).then(|| max / mean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::load::Step;

    fn op(start: i64, end: i64, kind: OpKind) -> GpuOp {
        GpuOp {
            start,
            end,
            device: 0,
            name: 0,
            kind,
            corr: -1,
            bytes: 0,
        }
    }

    #[test]
    fn breakdown_priorities_and_exact_sum() {
        // compute 0-100 and 150-200 on two streams overlapping comm 50-170; memcpy 160-260
        // (under comm/compute until 200); memset 300-310; idle 260-300 of which 280-290 sync.
        let ops = [
            op(0, 100, OpKind::Compute),
            op(150, 200, OpKind::Compute),
            op(50, 170, OpKind::Comm),
            op(160, 260, OpKind::Memcpy),
            op(300, 310, OpKind::Memset),
        ];
        let refs: Vec<&GpuOp> = ops.iter().collect();
        let b = breakdown(&refs, &[(280, 290), (305, 400)]);
        assert_eq!(b.wall_ns, 310);
        assert_eq!(b.compute_ns, 150);
        assert_eq!(b.communication_ns, 50); // 100..150
        assert_eq!(b.memcpy_ns, 60); // 200..260
        assert_eq!(b.memset_ns, 10);
        assert_eq!(b.idle_ns, 40);
        assert_eq!(b.idle_sync_wait_ns, 10);
        assert_eq!(b.idle_host_bound_ns, 30);
        assert_eq!(
            b.compute_ns + b.communication_ns + b.memcpy_ns + b.memset_ns + b.idle_ns,
            b.wall_ns
        );
        assert_eq!(b.busy_ns, 270);
        assert_eq!(b.communication_total_ns, 120);
        assert_eq!(b.comm_compute_overlap_ns, 70); // 50..100 and 150..170
    }

    #[test]
    fn percentiles_interpolate() {
        let v: Vec<i64> = (1..=10).map(|x| x * 100).collect();
        assert_eq!(percentile(&v, 50), 550.0);
        assert_eq!(percentile(&v, 90), 910.0);
        assert_eq!(percentile(&v, 99), 991.0);
        assert_eq!(percentile(&[7], 99), 7.0);
        let steps: Vec<Step> = [300, 100, 200]
            .iter()
            .enumerate()
            .map(|(i, &d)| Step {
                number: i as i64,
                start: 0,
                dur: d,
                work: Some(10.0),
            })
            .collect();
        let s = step_stats(steps.iter());
        assert_eq!(s.count, 3);
        assert_eq!(s.mean_ns, 200.0);
        assert_eq!(s.p50_ns, 200.0);
        assert_eq!(s.throughput_per_s, Some(30.0 / 600e-9));
    }

    #[test]
    fn innermost_range_at_launch() {
        use crate::analysis::load::{ApiCall, FileData, Range};
        use cuprof_core::reader::Id;
        let range = |thread, start, end, name| Range {
            thread,
            start,
            end,
            name,
        };
        let api = |thread, start| ApiCall {
            thread,
            start,
            end: start + 1,
            name: 99,
            corr: -1,
            sync: false,
        };
        let f = FileData {
            path: "t".into(),
            meta: Default::default(),
            read: Default::default(),
            rank: Some(0),
            ops: vec![],
            // Thread 0: P [0,100] holds C1 [10,20] and C2 [20,30] (touching siblings), then
            // X [90,150] crosses P's end. Thread 1: Q [0,1000].
            ranges: vec![
                range(0, 20, 30, 3),
                range(0, 0, 100, 1),
                range(0, 10, 20, 2),
                range(0, 90, 150, 4),
                range(1, 0, 1000, 5),
            ],
            apis: vec![
                api(0, 5),
                api(0, 15),
                api(0, 20),
                api(0, 25),
                api(0, 50),
                api(0, 95),
                api(0, 120),
                api(0, 200),
                api(1, 200),
            ],
            steps: vec![],
            gpu_syncs: vec![],
            threads: vec![(Id::Int(1), Id::Int(1)), (Id::Int(1), Id::Int(2))],
            cpu_ops: vec![],
            api_ext: vec![],
            op_ext: vec![],
            memory: vec![],
            malformed_skipped: 0,
            malformed_clamped: 0,
            ignored: Default::default(),
        };
        let mut paths = Paths::default();
        let got: Vec<Vec<u32>> = api_paths(&f, &mut paths)
            .into_iter()
            .map(|p| paths.paths[p as usize].clone())
            .collect();
        assert_eq!(
            got,
            [
                vec![1],
                vec![1, 2],
                vec![1, 3],
                vec![1, 3],
                vec![1],
                vec![1, 4],
                vec![4],
                vec![],
                vec![5],
            ]
        );
    }

    #[test]
    fn intervals() {
        assert_eq!(
            union(vec![(5, 8), (0, 3), (2, 4), (8, 9)]),
            [(0, 4), (5, 9)]
        );
        assert_eq!(intersection_len(&[(0, 10), (20, 30)], &[(5, 25)]), 10);
        assert_eq!(imbalance(&[1.0, 3.0]), Some(1.5));
    }
}
