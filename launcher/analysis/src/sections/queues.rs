//! `cuprof report`'s launch queues: HTA's queue length. A stream's queue holds the operations
//! launched on it that have not started yet. It grows by one when a launch call starts
//! (`cudaLaunchKernel`, `cuLaunchKernel` and their cooperative forms, `cudaMemcpyAsync`,
//! `cudaMemsetAsync`) and shrinks by one when the operation that call launched (joined on
//! `correlation` within a file) starts on the GPU, as HTA's `get_queue_length_time_series`
//! counts it.
//!
//! A queue near 0 means each operation starts as soon as it is launched: the stream waits on
//! the host, and fewer launches (CUDA graphs, fusion) would help. A deep one means the host runs
//! ahead of the GPU. At [`FULL_QUEUE`] the next launch blocks until the GPU catches up.
//!
//! HTA summarizes the series by its values at each change, whatever the time between them;
//! cuprof gives the mean over time (each length weighted by how long the queue held it), from
//! the stream's first change to its last.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::load::{FileData, Interner};
use crate::saturating::AddSat;
use crate::sections::launches::{for_each_launched, is_kernel_launch};

/// HTA's `CUDA_MAX_LAUNCH_QUEUE_PER_STREAM`: the launches a stream holds before the next one
/// blocks.
pub const FULL_QUEUE: i64 = 1024;

/// One stream's queue, over every file of its rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueRow {
    pub rank: i64,
    pub device: i64,
    pub stream: i64,
    /// Operations joined to the call that launched them.
    pub launches: u64,
    /// The queue's length averaged over time, from the stream's first change to its last.
    pub mean: f64,
    pub max: i64,
    /// Time the queue held [`FULL_QUEUE`] operations or more.
    pub full_ns: i64,
}

/// A call that puts one operation on a stream's queue, as HTA's queue length counts them
/// (`cudaLaunchKernel`, `cudaLaunchKernelExC`, `cuLaunchKernel`, `cudaMemcpyAsync`,
/// `cudaMemsetAsync`), and the cooperative launches.
pub fn is_queued_launch(name: &str) -> bool {
    is_kernel_launch(name)
        || name.starts_with("cudaMemcpyAsync")
        || name.starts_with("cudaMemsetAsync")
}

#[derive(Default)]
struct Acc {
    launches: u64,
    /// Sum of length × time, and the time it covers.
    area: i128,
    span: i64,
    max: i64,
    full_ns: i64,
}

impl Acc {
    /// Walks one file's changes of one stream, (time, +1 launch / -1 start), in time order.
    fn walk(&mut self, changes: &[(i64, i64)]) {
        let Some(&(first, _)) = changes.first() else {
            return;
        };
        let (mut length, mut at) = (0i64, first);
        for &(t, delta) in changes {
            let held = t - at;
            self.area += i128::from(length) * i128::from(held);
            if length >= FULL_QUEUE {
                self.full_ns.add_sat(held);
            }
            length += delta;
            self.max = self.max.max(length);
            self.launches += u64::from(delta > 0);
            at = t;
        }
        // Totals over many files stop at the 64-bit limit, as the report's other totals.
        self.span.add_sat(at - first);
    }
}

/// The launch queues of `files` (each of rank `ranks[i]`), by launches (then rank, device and
/// stream); empty when no operation's launch call is in them.
pub fn queues(names: &Interner, files: &[FileData], ranks: &[i64]) -> Vec<QueueRow> {
    let mut by_stream: BTreeMap<(i64, i64, i64), Acc> = BTreeMap::new();
    for (f, &rank) in files.iter().zip(ranks) {
        let mut changes: FxHashMap<(i64, i64), Vec<(i64, i64)>> = FxHashMap::default();
        for_each_launched(names, f, is_queued_launch, |_, o, call| {
            let c = changes.entry((o.device, o.stream)).or_default();
            c.push((call.start, 1));
            c.push((o.start, -1));
        });
        for ((device, stream), mut c) in changes {
            // At one time, starts before launches: a launch never counts against an operation
            // that started with it.
            c.sort_unstable();
            by_stream
                .entry((rank, device, stream))
                .or_default()
                .walk(&c);
        }
    }
    let mut rows: Vec<QueueRow> = by_stream
        .into_iter()
        .map(|((rank, device, stream), a)| QueueRow {
            rank,
            device,
            stream,
            launches: a.launches,
            mean: if a.span > 0 {
                a.area as f64 / a.span as f64
            } else {
                0.0
            },
            max: a.max,
            full_ns: a.full_ns,
        })
        .collect();
    // Stable: equal launches stay in (rank, device, stream) order.
    rows.sort_by_key(|r| std::cmp::Reverse(r.launches));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_weighted_by_the_time_it_held_each_length() {
        let mut a = Acc::default();
        // Launches at 0, 10, 20; their operations start at 20, 40, 50; a launch at 50 starts at 60.
        a.walk(&[
            (0, 1),
            (10, 1),
            (20, -1),
            (20, 1),
            (40, -1),
            (50, -1),
            (50, 1),
            (60, -1),
        ]);
        assert_eq!(a.launches, 4);
        assert_eq!(a.max, 2);
        // 1 for 10, 2 for 10, 2 for 20 (start then launch at 20), 1 for 10, 1 for 10: 90 over 60.
        assert_eq!((a.area, a.span), (90, 60));
        assert_eq!(a.full_ns, 0);
    }

    #[test]
    fn a_full_queue_counts_its_time() {
        let mut c: Vec<(i64, i64)> = (0..FULL_QUEUE).map(|i| (i, 1)).collect();
        c.push((FULL_QUEUE + 99, -1));
        let mut a = Acc::default();
        a.walk(&c);
        assert_eq!(a.max, FULL_QUEUE);
        // Full from the last launch (at 1,023) until the first start (at 1,123).
        assert_eq!(a.full_ns, 100);
    }

    #[test]
    fn queued_launches_are_htas_and_the_cooperative_ones() {
        for name in [
            "cudaLaunchKernel",
            "cudaLaunchKernelExC",
            "cuLaunchKernel",
            "cudaMemcpyAsync",
            "cudaMemsetAsync",
            "cudaLaunchCooperativeKernel",
        ] {
            assert!(is_queued_launch(name), "{name}");
        }
        for name in ["cudaMemcpy", "cudaGraphLaunch", "cudaStreamSynchronize"] {
            assert!(!is_queued_launch(name), "{name}");
        }
    }
}
