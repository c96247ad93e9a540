//! Each step's time split into what the GPU and the host did in it, as TensorBoard's overview
//! stacks its "Step Time Breakdown": per step (`ProfilerStep#N`, the window from its start to
//! its end on its rank) the time in which
//! - *compute*: a compute kernel ran (any stream, any device of the step's file);
//! - *communication*: a communication kernel ran and no compute kernel;
//! - *copies*: a memcpy or memset ran and no kernel;
//! - *idle*: nothing ran on the GPU, between the step's first and last GPU operation (the GPU
//!   waited in the middle of the step);
//! - *host*: nothing ran on the GPU, before the step's first GPU operation or after its last
//!   (the whole step when it ran none): the host's own time in the step.
//!
//! Operations are clipped to the step's window (a kernel launched in a step and run after it
//! counts in the next). The five add up to the step's duration exactly. Over the ranks, a step
//! is its slowest rank's (the longest; ties: the lowest rank), as the first panel's slow steps
//! are: its five parts add up to the step's time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::load::{FileData, GpuOp, OpKind};
use crate::saturating::AddSat;

/// Past this many steps the page draws bins of consecutive steps, and summary.json has them.
pub const MAX_BARS: usize = 200;

/// One step's parts, on its slowest rank.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepParts {
    pub step: i64,
    pub rank: i64,
    pub dur_ns: i64,
    pub compute_ns: i64,
    pub communication_ns: i64,
    pub copies_ns: i64,
    pub idle_ns: i64,
    pub host_ns: i64,
}

/// Consecutive steps together: the mean of each part over them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepPartsBin {
    pub first_step: i64,
    pub last_step: i64,
    pub steps: usize,
    pub dur_ns: f64,
    pub compute_ns: f64,
    pub communication_ns: f64,
    pub copies_ns: f64,
    pub idle_ns: f64,
    pub host_ns: f64,
}

impl StepParts {
    /// Compute, communication, copies, idle, host: the order the page draws them in.
    pub fn parts(&self) -> [i64; 5] {
        [
            self.compute_ns,
            self.communication_ns,
            self.copies_ns,
            self.idle_ns,
            self.host_ns,
        ]
    }
}

impl StepPartsBin {
    /// The means of [`StepParts::parts`] over the bin's steps, in the same order.
    pub fn parts(&self) -> [f64; 5] {
        [
            self.compute_ns,
            self.communication_ns,
            self.copies_ns,
            self.idle_ns,
            self.host_ns,
        ]
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepBreakdown {
    /// Every step number, in order, on its slowest rank.
    pub steps: Vec<StepParts>,
    /// With more than [`MAX_BARS`] steps: `steps` cut into at most [`MAX_BARS`] bins of
    /// `ceil(steps / MAX_BARS)` consecutive steps (the last may hold fewer); else empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<StepPartsBin>,
}

/// What ran on the GPU, as disjoint time segments in time order: (start, end, what), what
/// being 0 compute, 1 communication, 2 copies (the highest-priority kind running).
fn segments(ops: &[GpuOp]) -> Vec<(i64, i64, u8)> {
    let mut edges: Vec<(i64, i8, u8)> = Vec::with_capacity(ops.len() * 2);
    for o in ops.iter().filter(|o| o.end > o.start) {
        let what = match o.kind {
            OpKind::Compute => 0,
            OpKind::Comm => 1,
            OpKind::Memcpy | OpKind::Memset => 2,
        };
        edges.push((o.start, 1, what));
        edges.push((o.end, -1, what));
    }
    edges.sort_unstable_by_key(|e| (e.0, e.1));
    let mut active = [0i64; 3];
    let mut out: Vec<(i64, i64, u8)> = Vec::new();
    let mut t = i64::MIN;
    for (time, delta, what) in edges {
        if let Some(now) = (0..3u8).find(|&k| active[k as usize] > 0) {
            if time > t {
                match out.last_mut() {
                    Some(l) if l.1 == t && l.2 == now => l.1 = time,
                    _ => out.push((t, time, now)),
                }
            }
        }
        t = time;
        active[what as usize] += delta as i64;
    }
    out
}

/// The parts of the step `[start, start + dur)` given the file's `segments`.
fn parts(seg: &[(i64, i64, u8)], step: i64, rank: i64, start: i64, dur: i64) -> StepParts {
    let end = start.saturating_add(dur);
    let mut p = StepParts {
        step,
        rank,
        dur_ns: dur,
        ..Default::default()
    };
    let mut first: Option<i64> = None;
    let mut last = start;
    let mut busy = 0i64;
    let from = seg.partition_point(|s| s.1 <= start);
    for &(a, b, what) in seg[from..].iter().take_while(|s| s.0 < end) {
        let (a, b) = (a.max(start), b.min(end));
        if b <= a {
            continue;
        }
        first.get_or_insert(a);
        last = b;
        let d = b - a;
        busy.add_sat(d);
        match what {
            0 => p.compute_ns.add_sat(d),
            1 => p.communication_ns.add_sat(d),
            _ => p.copies_ns.add_sat(d),
        }
    }
    if let Some(first) = first {
        p.idle_ns = (last - first) - busy;
    }
    p.host_ns = dur - busy - p.idle_ns;
    p
}

/// The breakdown of every step of `files` (each of rank `ranks[i]`).
pub fn step_breakdown(files: &[FileData], ranks: &[i64]) -> StepBreakdown {
    // Step number -> its slowest (rank, parts).
    let mut by_step: BTreeMap<i64, StepParts> = BTreeMap::new();
    for (f, &rank) in files.iter().zip(ranks) {
        if f.steps.is_empty() {
            continue;
        }
        let seg = segments(&f.ops);
        for s in &f.steps {
            let p = parts(&seg, s.number, rank, s.start, s.dur);
            by_step
                .entry(s.number)
                .and_modify(|e| {
                    if (p.dur_ns, -p.rank) > (e.dur_ns, -e.rank) {
                        *e = p;
                    }
                })
                .or_insert(p);
        }
    }
    let steps: Vec<StepParts> = by_step.into_values().collect();
    let bins = if steps.len() > MAX_BARS {
        let per = steps.len().div_ceil(MAX_BARS);
        steps.chunks(per).map(bin).collect()
    } else {
        Vec::new()
    };
    StepBreakdown { steps, bins }
}

fn bin(chunk: &[StepParts]) -> StepPartsBin {
    let n = chunk.len() as f64;
    let mean = |f: fn(&StepParts) -> i64| chunk.iter().map(|p| f(p) as f64).sum::<f64>() / n;
    StepPartsBin {
        first_step: chunk[0].step,
        last_step: chunk[chunk.len() - 1].step,
        steps: chunk.len(),
        dur_ns: mean(|p| p.dur_ns),
        compute_ns: mean(|p| p.compute_ns),
        communication_ns: mean(|p| p.communication_ns),
        copies_ns: mean(|p| p.copies_ns),
        idle_ns: mean(|p| p.idle_ns),
        host_ns: mean(|p| p.host_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::intervals::op;

    #[test]
    fn a_step_is_compute_communication_copies_idle_and_host() {
        // Step 100..1000: host until the first op at 150; a copy 150..200; compute 200..500
        // with communication 400..600 (100 under compute); idle 600..700; a memset 700..750;
        // host after, to 1000. A kernel 900..1200 spills into the next step.
        let ops = [
            op(150, 200, OpKind::Memcpy),
            op(200, 500, OpKind::Compute),
            op(400, 600, OpKind::Comm),
            op(700, 750, OpKind::Memset),
            op(900, 1200, OpKind::Compute),
        ];
        let seg = segments(&ops);
        assert_eq!(
            seg,
            [
                (150, 200, 2),
                (200, 500, 0),
                (500, 600, 1),
                (700, 750, 2),
                (900, 1200, 0)
            ]
        );
        let p = parts(&seg, 3, 1, 100, 900);
        assert_eq!(p.parts(), [300 + 100, 100, 50 + 50, 100 + 150, 50]);
        assert_eq!(p.parts().iter().sum::<i64>(), p.dur_ns);
        // The next step, 1000..1500: the spilled kernel's 200 ns, then host.
        let p = parts(&seg, 4, 1, 1000, 500);
        assert_eq!(p.parts(), [200, 0, 0, 0, 300]);
        // A step without GPU work is all host.
        let p = parts(&seg, 5, 1, 2000, 70);
        assert_eq!((p.idle_ns, p.host_ns), (0, 70));
    }

    #[test]
    fn bins_hold_every_step() {
        let steps: Vec<StepParts> = (0..450)
            .map(|k| StepParts {
                step: k,
                dur_ns: 10 + k,
                host_ns: 10 + k,
                ..Default::default()
            })
            .collect();
        let per = steps.len().div_ceil(MAX_BARS);
        assert_eq!(per, 3);
        let bins: Vec<StepPartsBin> = steps.chunks(per).map(bin).collect();
        assert_eq!(bins.len(), 150);
        assert_eq!(
            (bins[0].first_step, bins[0].last_step, bins[0].steps),
            (0, 2, 3)
        );
        assert_eq!(bins[0].dur_ns, 11.0);
        assert_eq!(bins[149].host_ns, 458.0);
    }
}
