//! The summary.json schema: what `report` writes and `compare` and the HTML page read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{Breakdown, RunSpread, StepStats};
use crate::saturating::AddSat;
use crate::sections::allocations::DeviceAllocations;
use crate::sections::collectives::{CollectiveRow, CollectiveWait};
use crate::sections::durations::DurationRow;
use crate::sections::findings::Finding;
use crate::sections::idle::IdleRow;
use crate::sections::launches::Launches;
use crate::sections::modules::Modules;
use crate::sections::operators::Operators;
use crate::sections::queues::QueueRow;
use crate::sections::series::{MemorySeries, StepTime};
use crate::sections::step_breakdown::StepBreakdown;
use crate::sections::step_figures::StepBins;
use crate::sections::torch_compile::TorchCompile;
use crate::sections::triton::TritonRow;
use crate::summary::culprits::Culprits;

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
    /// The profiler's own overhead records (`cat: overhead`: CUPTI's buffer flushes and
    /// instrumentation, as torch.profiler writes them), and their total time.
    #[serde(default)]
    pub profiler_overhead_events: u64,
    #[serde(default)]
    pub profiler_overhead_ns: i64,
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

    pub(super) fn add(&mut self, o: &Dropped) {
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
    /// The middle duration (the mean of the two middle ones for an even count), the shortest
    /// and the longest: Nsight Systems' `cuda_gpu_kern_sum` figures.
    #[serde(default)]
    pub median_ns: f64,
    #[serde(default)]
    pub min_ns: i64,
    #[serde(default)]
    pub max_ns: i64,
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
    /// The spread of one operation's size and time, as Nsight Systems'
    /// `cuda_gpu_mem_size_sum` and `cuda_gpu_mem_time_sum` give them (medians as numpy's).
    #[serde(default)]
    pub median_bytes: f64,
    #[serde(default)]
    pub min_bytes: i64,
    #[serde(default)]
    pub max_bytes: i64,
    #[serde(default)]
    pub median_ns: f64,
    #[serde(default)]
    pub min_ns: i64,
    #[serde(default)]
    pub max_ns: i64,
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
    /// The steps binned by one of their figures (`report --bin FIGURE=E0,E1,...`); absent
    /// unless asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_bins: Option<StepBins>,
    /// Each step's time as compute, communication, copies, GPU idle and host, on its slowest
    /// rank (TensorBoard's step time breakdown); binned past 200 steps.
    #[serde(default)]
    pub step_breakdown: StepBreakdown,
    /// Step latency and tokens/s over runs, mean ± std (`report --all-runs`); absent unless
    /// asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<RunSpread>,
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
    /// What holds the job back: the ranks furthest from the median rank, the rank the others
    /// wait for in collectives, the slowest steps (the page's first panel).
    #[serde(default)]
    pub culprits: Culprits,
    /// CUDA runtime and driver calls by name, by total time; absent when the traces have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_calls: Vec<DurationRow>,
    /// NVTX ranges and `record_function` labels (not the steps) by name, by total time; absent
    /// when the traces have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<DurationRow>,
    /// Collectives (their `record_param_comms` operators) by name, element type and group
    /// size, by GPU time; absent when the traces have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collectives: Vec<CollectiveRow>,
    /// Per rank, its waiting in the collectives it shares with other ranks of the traces;
    /// absent when no collective is on two ranks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collective_waits: Vec<CollectiveWait>,
    /// torch.compile's Triton kernels by kernel name and generated file, by GPU time; absent
    /// when the traces have no Triton launch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub triton_kernels: Vec<TritonRow>,
    /// HTA's kernel launch statistics: each kernel's launch call and the delay from its end to
    /// the kernel's start; absent when no kernel's launch call is in the traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launches: Option<Launches>,
    /// HTA's queue length per rank, device and stream: the operations launched and not yet
    /// started, over time; absent when no operation's launch call is in the traces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launch_queues: Vec<QueueRow>,
    /// HTA's idle time breakdown per rank, device and stream: the gaps between its operations,
    /// as host waits, kernel waits and other; absent when no operation is on a stream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_by_stream: Vec<IdleRow>,
    /// What to look at first: host synchronizations, pageable copies, the GPU waiting for the
    /// host, kernels shorter than their launch, driver allocations inside steps; by cost,
    /// absent when none was found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// PyTorch operators (`cpu_op` events); absent when no trace has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operators: Option<Operators>,
    /// CPU and GPU time per `nn.Module` path (or class, attribute, depth: `report
    /// --module-by`, `--module-depth`), self and inclusive; a `note` instead of rows when the
    /// traces have no operators or no module calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<Modules>,
    /// torch.compile's compilations and compiled regions; absent when no trace has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_compile: Option<TorchCompile>,
    /// Device memory counters (`reserved_bytes`) per rank and device; absent when no trace
    /// recorded memory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<MemorySeries>,
    /// PyTorch's allocations (`[memory]` events with addresses) per file and device: leaks,
    /// growth over steps, the peak and what was alive at it; absent when no trace recorded
    /// any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<DeviceAllocations>,
}
