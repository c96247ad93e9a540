use super::*;
use crate::event::{Kernel, Memcpy, Memory};
use std::sync::Arc;

const S: u64 = WINDOW_NS;

fn kernel(name: &Name, start: u64, end: u64) -> Event {
    let mut k = Kernel::sample("x", 1, start, end);
    k.name = name.clone();
    Event::Kernel(k)
}

fn copy(start: u64, end: u64) -> Event {
    Event::Memcpy(Memcpy {
        copy_kind: 1,
        src_kind: 1,
        dst_kind: 3,
        flags: 0,
        bytes: 8,
        start,
        end,
        device: 0,
        context: 1,
        stream: 7,
        correlation: 2,
        runtime_correlation: 0,
        graph_id: 0,
        graph_node_id: 0,
        src_device: None,
        dst_device: None,
    })
}

fn memory(op: MemoryOp, kind: u32, bytes: u64) -> Event {
    Event::Memory(Memory::sample(op, kind, 0x1000, bytes, 1))
}

fn op(record: &str, start: u64, end: u64) -> Range {
    Range {
        name: record.into(),
        domain: None,
        start,
        end,
        pid: 1,
        tid: 1,
        id: 9,
        parent: 0,
        payload: None,
        kind: RangeKind::NativeOp,
        stack: None,
    }
}

fn top(name: &str, count: u64, ns: u64) -> Top {
    Top {
        name: name.into(),
        count,
        ns,
    }
}

#[test]
fn the_last_window_ends_at_the_newest_work_and_counts_overlaps_once() {
    let gemm: Name = Arc::from("gemm");
    let softmax: Name = Arc::from("softmax");
    let mut l = LiveStats::new(false);
    l.begin(5);
    l.events(&[
        // Before the window (which is (10 S - 1 S, 10 S]): in the totals only.
        kernel(&gemm, S, S + 100),
        // Across the window's start: 50 ns inside.
        kernel(&gemm, 9 * S - 50, 9 * S + 50),
        // Overlapping kernels and a copy: busy once.
        kernel(&softmax, 9 * S + 1000, 9 * S + 1400),
        kernel(&gemm, 9 * S + 1200, 9 * S + 1300),
        copy(9 * S + 1350, 9 * S + 1500),
    ]);
    l.events(&[kernel(&softmax, 10 * S - 200, 10 * S)]);
    let s = l.snapshot();
    assert_eq!(s.since, Some(5));
    assert_eq!(s.gpu_to, 10 * S);
    assert_eq!(s.busy_ns, 50 + 500 + 200);
    assert_eq!(
        s.kernels_last,
        [top("softmax", 2, 600), top("gemm", 2, 150)]
    );
    assert_eq!(
        s.kernels_total,
        [top("softmax", 2, 600), top("gemm", 3, 300)]
    );
    assert_eq!((s.ops_to, s.ops_last.len()), (0, 0));
    assert_eq!(s.memory_bytes, None);
}

#[test]
fn names_are_tallied_by_name_whatever_their_allocation() {
    let mut l = LiveStats::new(false);
    l.begin(0);
    for _ in 0..3 {
        // A fresh Arc each time, as an undeduplicated decoder would give.
        let n: Name = Arc::from("k");
        l.events(&[kernel(&n, 10, 20)]);
    }
    assert_eq!(l.snapshot().kernels_total, [top("k", 3, 30)]);
}

#[test]
fn at_most_five_names_per_list_most_time_first() {
    let mut l = LiveStats::new(false);
    l.begin(0);
    let names: Vec<Name> = (0..7).map(|i| Arc::from(format!("k{i}"))).collect();
    for (i, n) in names.iter().enumerate() {
        l.events(&[kernel(n, 100, 100 + 10 * i as u64)]);
    }
    let s = l.snapshot();
    let got: Vec<&str> = s.kernels_total.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(got, ["k6", "k5", "k4", "k3", "k2"]);
    assert_eq!(s.kernels_last, s.kernels_total);
}

#[test]
fn operators_are_named_without_their_record_fields() {
    let mut l = LiveStats::new(false);
    l.begin(0);
    l.range(&op(
        "aten::mm\x1f-1\x1f0\x1f11\x1f\x1f\x1f\x1f\x1f",
        100,
        400,
    ));
    l.range(&op(
        "aten::mm\x1f-1\x1f0\x1f12\x1f\x1f\x1f\x1f\x1f",
        500,
        600,
    ));
    let mut observer = op("aten::add, seq = 3, op_id = 13", 2 * S, 2 * S + 10);
    observer.kind = RangeKind::PushPop;
    l.range(&observer);
    // A plain NVTX range is not an operator.
    let mut plain = op("my range", 0, S);
    plain.kind = RangeKind::PushPop;
    l.range(&plain);
    let s = l.snapshot();
    assert_eq!(
        s.ops_total,
        [top("aten::mm", 2, 400), top("aten::add", 1, 10)]
    );
    assert_eq!(s.ops_to, 2 * S + 10);
    assert_eq!(s.ops_last, [top("aten::add", 1, 10)]);
}

#[test]
fn a_new_recording_starts_the_names_over_and_the_steps_go_on() {
    let k: Name = Arc::from("k");
    let mut l = LiveStats::new(false);
    l.begin(0);
    l.events(&[kernel(&k, 10, 20)]);
    for ns in [30, 10, 20, 40] {
        l.step(ns);
    }
    l.end();
    assert_eq!(l.snapshot().since, None);
    l.begin(100);
    let s = l.snapshot();
    assert_eq!(s.since, Some(100));
    assert!(s.kernels_total.is_empty() && s.kernels_last.is_empty());
    assert_eq!((s.gpu_to, s.busy_ns), (0, 0));
    // Steps: the last one, and the lower median of [10, 20, 30, 40].
    assert_eq!((s.step_last_ns, s.step_p50_ns), (Some(40), Some(20)));
}

#[test]
fn steps_keep_the_last_1024() {
    let mut l = LiveStats::new(false);
    for ns in 0..2000 {
        l.step(ns);
    }
    let s = l.snapshot();
    assert_eq!(s.step_last_ns, Some(1999));
    // The median of 976..=1999.
    assert_eq!(s.step_p50_ns, Some(976 + 511));
}

#[test]
fn device_memory_in_use_counts_device_allocations_only() {
    let mut l = LiveStats::new(true);
    assert_eq!(l.snapshot().memory_bytes, Some(0));
    l.events(&[
        memory(MemoryOp::Alloc, DEVICE_MEMORY, 1000),
        memory(MemoryOp::Alloc, DEVICE_MEMORY, 24),
        // Pinned host memory.
        memory(MemoryOp::Alloc, 2, 4096),
        memory(MemoryOp::Free, DEVICE_MEMORY, 1000),
        // A free of memory allocated before anything was seen never underflows.
        memory(MemoryOp::Free, DEVICE_MEMORY, 5000),
        memory(MemoryOp::Alloc, DEVICE_MEMORY, 7),
    ]);
    assert_eq!(l.snapshot().memory_bytes, Some(7));
}

#[test]
fn the_remembered_intervals_are_bounded_to_two_windows() {
    let k: Name = Arc::from("k");
    let mut l = LiveStats::new(false);
    l.begin(0);
    for i in 0..100 {
        l.events(&[kernel(&k, i * S / 10, i * S / 10 + 1)]);
    }
    // Ends from 7.9 S to 9.9 S are kept (within 2 S of the newest).
    assert_eq!(l.gpu.intervals.len(), 21);
    assert_eq!(l.snapshot().kernels_total, [top("k", 100, 100)]);
    assert_eq!(l.snapshot().kernels_last, [top("k", 10, 10)]);
}

#[test]
fn union_of_intervals() {
    assert_eq!(union_ns(vec![]), 0);
    assert_eq!(union_ns(vec![(5, 10), (0, 3), (2, 4), (10, 12)]), 4 + 7);
}
