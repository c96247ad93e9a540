//! Interval algebra over one device's GPU operations: unions, intersections, and the time
//! breakdown that counts each instant of the device's window once.

use serde::{Deserialize, Serialize};

use crate::load::{FileData, GpuOp, OpKind};
use crate::saturating::AddSat;

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

/// The intervals in which device `dev`'s idle time of file `f` is sync wait: the process's CPU
/// sync calls (on any thread) and the device's `cuda_sync` events, as a sorted disjoint union.
pub fn sync_wait(f: &FileData, dev: i64) -> Vec<(i64, i64)> {
    let cpu = f.apis.iter().filter(|a| a.sync).map(|a| (a.start, a.end));
    let gpu = f
        .gpu_syncs
        .iter()
        .filter(|g| g.0 == dev)
        .map(|g| (g.1, g.2));
    union(cpu.chain(gpu).collect())
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

/// A GPU operation on stream 7 of device 0, for tests of time breakdowns.
#[cfg(test)]
pub(crate) fn op(start: i64, end: i64, kind: OpKind) -> GpuOp {
    GpuOp {
        stream: 7,
        start,
        end,
        device: 0,
        name: 0,
        kind,
        corr: -1,
        bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ratios::imbalance;

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
    fn intervals() {
        assert_eq!(
            union(vec![(5, 8), (0, 3), (2, 4), (8, 9)]),
            [(0, 4), (5, 9)]
        );
        assert_eq!(intersection_len(&[(0, 10), (20, 30)], &[(5, 25)]), 10);
        assert_eq!(imbalance(&[1.0, 3.0]), Some(1.5));
    }
}
