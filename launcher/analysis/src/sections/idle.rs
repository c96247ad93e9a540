//! `cuprof report`'s idle time by stream: HTA's idle time breakdown. A stream is idle between
//! one operation's end and the next one's start (kernels, copies and sets, in start order); each
//! such gap is put in one of three kinds, as HTA's `get_idle_time_breakdown` does:
//! - *host wait*: the call that launched the next operation started after the previous one had
//!   ended, so the GPU waited on the host to launch work;
//! - *kernel wait*: a shorter gap than [`KERNEL_WAIT_NS`] between operations the host had
//!   already launched: the cost of launching back-to-back operations (CUDA graphs and fusion
//!   shrink it);
//! - *other*: a longer gap between launched operations: waiting on an event, another stream or
//!   a synchronization.
//!
//! Gaps are taken between consecutive operations of one file; an operation whose launch call is
//! not in its file is never a host wait. As in HTA, the gaps are summed as they are (operations
//! that overlap on a stream, which a real stream does not run, give a negative gap).

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::load::FileData;
use crate::saturating::AddSat;

/// HTA's `consecutive_kernel_delay` default: 30 in its trace's unit, microseconds.
pub const KERNEL_WAIT_NS: i64 = 30_000;

/// One stream's idle time, over every file of its rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleRow {
    pub rank: i64,
    pub device: i64,
    pub stream: i64,
    /// Kernels, copies and sets on the stream.
    pub ops: u64,
    /// The gaps between them, and the three kinds they add up to.
    pub idle_ns: i64,
    pub host_wait_ns: i64,
    pub kernel_wait_ns: i64,
    pub other_ns: i64,
}

/// An operation on a stream: start, end, and its launch call's start when that is known.
type StreamOp = (i64, i64, Option<i64>);

#[derive(Default)]
struct Acc {
    ops: u64,
    host_wait: i64,
    kernel_wait: i64,
    other: i64,
}

impl Acc {
    /// One file's operations of one stream, in start order.
    fn walk(&mut self, ops: &[StreamOp]) {
        self.ops += ops.len() as u64;
        for pair in ops.windows(2) {
            let previous_end = pair[0].1;
            let (start, _, launched) = pair[1];
            let gap = start - previous_end;
            if launched.is_some_and(|at| at > previous_end) {
                self.host_wait.add_sat(gap);
            } else if gap < KERNEL_WAIT_NS {
                self.kernel_wait.add_sat(gap);
            } else {
                self.other.add_sat(gap);
            }
        }
    }
}

/// The idle time of each stream of `files` (each of rank `ranks[i]`), by idle time (then rank,
/// device and stream); empty when no file has a GPU operation on a stream.
pub fn idle_by_stream(files: &[FileData], ranks: &[i64]) -> Vec<IdleRow> {
    let mut by_stream: BTreeMap<(i64, i64, i64), Acc> = BTreeMap::new();
    for (f, &rank) in files.iter().zip(ranks) {
        // The start of the CPU call each correlation id names (HTA's `index_correlation`).
        let calls: FxHashMap<i64, i64> = f
            .apis
            .iter()
            .filter(|a| a.corr >= 0)
            .map(|a| (a.corr, a.start))
            .collect();
        let mut streams: FxHashMap<(i64, i64), Vec<StreamOp>> = FxHashMap::default();
        for o in f.ops.iter().filter(|o| o.stream >= 0) {
            let launched = (o.corr >= 0).then(|| calls.get(&o.corr).copied()).flatten();
            streams
                .entry((o.device, o.stream))
                .or_default()
                .push((o.start, o.end, launched));
        }
        for ((device, stream), mut ops) in streams {
            ops.sort_unstable_by_key(|&(start, end, _)| (start, end));
            by_stream
                .entry((rank, device, stream))
                .or_default()
                .walk(&ops);
        }
    }
    let mut rows: Vec<IdleRow> = by_stream
        .into_iter()
        .map(|((rank, device, stream), a)| IdleRow {
            rank,
            device,
            stream,
            ops: a.ops,
            idle_ns: a
                .host_wait
                .saturating_add(a.kernel_wait)
                .saturating_add(a.other),
            host_wait_ns: a.host_wait,
            kernel_wait_ns: a.kernel_wait,
            other_ns: a.other,
        })
        .collect();
    // Stable: equal idle times stay in (rank, device, stream) order.
    rows.sort_by_key(|r| std::cmp::Reverse(r.idle_ns));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_gap_is_a_host_wait_a_kernel_wait_or_other() {
        let mut a = Acc::default();
        a.walk(&[
            (0, 100, Some(0)),
            // Launched at 150, after the first ended at 100: the host was late (60).
            (160, 200, Some(150)),
            // Launched long before, 10 µs after the previous: launch overhead.
            (10_200, 10_300, Some(5)),
            // Launched before, 40 µs after: other.
            (50_300, 50_400, Some(6)),
            // No launch call in the file, a short gap: kernel wait.
            (50_450, 50_500, None),
            // Exactly the threshold: other.
            (80_500, 80_600, Some(7)),
        ]);
        assert_eq!(a.ops, 6);
        assert_eq!(a.host_wait, 60);
        assert_eq!(a.kernel_wait, 10_000 + 50);
        assert_eq!(a.other, 40_000 + 30_000);
    }

    #[test]
    fn a_launch_at_the_previous_end_is_not_a_host_wait() {
        let mut a = Acc::default();
        a.walk(&[(0, 100, None), (150, 200, Some(100))]);
        assert_eq!((a.host_wait, a.kernel_wait, a.other), (0, 50, 0));
    }
}
