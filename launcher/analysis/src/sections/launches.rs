//! `cuprof report`'s kernel launches: HTA's CUDA kernel launch statistics. Each kernel is
//! joined to the call that launched it (`cudaLaunchKernel`, `cuLaunchKernel` and their
//! cooperative forms, on `correlation` within one file), and two times are read off the pair:
//! the launch call's own CPU time, and the launch delay, from the call's end to the kernel's
//! start on the GPU. Delays of a few microseconds mean the GPU starts each kernel as soon as
//! the host submits it: it waits on the host, and fewer launches (CUDA graphs, fusion) would
//! help. Long delays mean work is queued: the GPU runs behind the host. A kernel that started
//! before its launch call returned has a delay of 0, as HTA counts it.
//!
//! Outliers are counted as HTA counts them by default: launch calls over 50 µs (its
//! `runtime_cutoff`) and delays over 100 µs (its `launch_delay_cutoff`).

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::load::{ApiCall, FileData, GpuOp, Interner};
use crate::model::percentile;

/// HTA's default `runtime_cutoff`: a launch call longer than this is an outlier (and its
/// kernel cannot count as shorter than its launch in the findings).
pub const SLOW_CALL_NS: i64 = 50_000;
/// HTA's default `launch_delay_cutoff`: a kernel starting later than this after its launch
/// call returned is an outlier.
pub const LATE_START_NS: i64 = 100_000;

/// The spread of one time over the launches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchSpread {
    pub median_ns: f64,
    /// Linear interpolation at 0.9·(n-1), as the step percentiles.
    pub p90_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
}

impl LaunchSpread {
    fn of(values: &mut [i64]) -> LaunchSpread {
        values.sort_unstable();
        LaunchSpread {
            median_ns: percentile(values, 50),
            p90_ns: percentile(values, 90),
            min_ns: values.first().copied().unwrap_or(0),
            max_ns: values.last().copied().unwrap_or(0),
        }
    }
}

/// One kernel name's launches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchRow {
    pub name: String,
    pub kernels: u64,
    pub call: LaunchSpread,
    pub delay: LaunchSpread,
}

/// `summary.json`'s `launches`: every kernel whose launch call is in the traces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Launches {
    /// Kernels joined to their launch call.
    pub kernels: u64,
    /// The launch calls' CPU time.
    pub call: LaunchSpread,
    /// From each launch call's end to its kernel's start (0 when the kernel started first).
    pub delay: LaunchSpread,
    /// Launch calls longer than [`SLOW_CALL_NS`].
    pub slow_calls: u64,
    /// Kernels starting more than [`LATE_START_NS`] after their launch call returned.
    pub late_starts: u64,
    /// Per kernel name, by median delay (then name).
    pub by_kernel: Vec<LaunchRow>,
}

/// A CUDA call that launches exactly one kernel, its GPU work found by correlation id.
pub fn is_kernel_launch(name: &str) -> bool {
    name.starts_with("cudaLaunchKernel")
        || name.starts_with("cuLaunchKernel")
        || name.starts_with("cudaLaunchCooperativeKernel")
        || name.starts_with("cuLaunchCooperativeKernel")
}

/// Calls `g` with each GPU operation of `f` joined to the call that launched it, a call whose
/// name `is_launch` accepts, on `correlation`: the operation's index in `f.ops`, the operation,
/// the call.
pub fn for_each_launched(
    names: &Interner,
    f: &FileData,
    is_launch: impl Fn(&str) -> bool,
    mut g: impl FnMut(usize, &GpuOp, &ApiCall),
) {
    let launch: FxHashMap<i64, usize> = f
        .apis
        .iter()
        .enumerate()
        .filter(|(_, a)| a.corr >= 0 && is_launch(names.name(a.name)))
        .map(|(i, a)| (a.corr, i))
        .collect();
    if launch.is_empty() {
        return;
    }
    for (i, o) in f.ops.iter().enumerate() {
        if o.corr < 0 {
            continue;
        }
        if let Some(&a) = launch.get(&o.corr) {
            g(i, o, &f.apis[a]);
        }
    }
}

/// Calls `g` with each kernel of `f` joined to the call that launched it (one of
/// [`is_kernel_launch`]'s, on `correlation`): the kernel's index in `f.ops`, the kernel, the call.
pub fn for_each_launched_kernel(
    names: &Interner,
    f: &FileData,
    mut g: impl FnMut(usize, &GpuOp, &ApiCall),
) {
    for_each_launched(names, f, is_kernel_launch, |i, o, call| {
        if o.kind.is_kernel() {
            g(i, o, call);
        }
    });
}

/// The launches of `files`; `None` when no kernel's launch call is in them.
pub fn launches(names: &Interner, files: &[FileData]) -> Option<Launches> {
    // Per kernel name id: (call ns, delay ns) of each launch.
    let mut by_name: FxHashMap<u32, (Vec<i64>, Vec<i64>)> = FxHashMap::default();
    for f in files {
        for_each_launched_kernel(names, f, |_, kernel, call| {
            let (calls, delays) = by_name.entry(kernel.name).or_default();
            calls.push(call.end - call.start);
            delays.push((kernel.start - call.end).max(0));
        });
    }
    if by_name.is_empty() {
        return None;
    }
    let (mut calls, mut delays) = (Vec::new(), Vec::new());
    let mut by_kernel: Vec<LaunchRow> = by_name
        .into_iter()
        .map(|(name, (mut c, mut d))| {
            calls.extend_from_slice(&c);
            delays.extend_from_slice(&d);
            LaunchRow {
                name: names.name(name).to_string(),
                kernels: c.len() as u64,
                call: LaunchSpread::of(&mut c),
                delay: LaunchSpread::of(&mut d),
            }
        })
        .collect();
    by_kernel.sort_by(|a, b| {
        b.delay
            .median_ns
            .total_cmp(&a.delay.median_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
    Some(Launches {
        kernels: calls.len() as u64,
        slow_calls: calls.iter().filter(|&&c| c > SLOW_CALL_NS).count() as u64,
        late_starts: delays.iter().filter(|&&d| d > LATE_START_NS).count() as u64,
        call: LaunchSpread::of(&mut calls),
        delay: LaunchSpread::of(&mut delays),
        by_kernel,
    })
}
