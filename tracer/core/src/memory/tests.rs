//! Tests of the memory timeline and of its snapshot pickle, through the `memory` API.

use super::*;
use crate::event::{Memory, MemoryOp};
use serde_pickle::{DeOptions, HashableValue, Value};
use std::path::Path;
use std::sync::Arc;

const MIB: u64 = 1 << 20;
const A: u64 = 0x7f00_0000_0000;
const B: u64 = 0x7f00_1000_0000;
const C: u64 = 0x7f00_2000_0000;
/// `cudaStream_t` handles a program passed to stream-ordered allocations.
const S1: StreamHandle = 0x7f00_dead_0000;
const S2: StreamHandle = 0x7f00_beef_0000;

fn rec(op: MemoryOp, kind: u32, address: u64, bytes: u64, timestamp: u64) -> Memory {
    Memory::sample(op, kind, address, bytes, timestamp)
}

fn alloc(address: u64, bytes: u64, timestamp: u64) -> Memory {
    rec(
        MemoryOp::Alloc,
        DEVICE_MEMORY_KIND,
        address,
        bytes,
        timestamp,
    )
}

fn free(address: u64, bytes: u64, timestamp: u64) -> Memory {
    rec(
        MemoryOp::Free,
        DEVICE_MEMORY_KIND,
        address,
        bytes,
        timestamp,
    )
}

/// A stream-ordered record on CUPTI's stream id `stream_id` (never written to the snapshot).
fn pool(mut m: Memory, stream_id: u32) -> Memory {
    m.is_async = true;
    m.stream = stream_id;
    m.pool_address = 0x5000;
    m
}

fn on(mut m: Memory, device: u32) -> Memory {
    m.device = device;
    m
}

fn stack(name: &str) -> Frames {
    Arc::from(vec![
        Frame {
            filename: "model.py".into(),
            line: 12,
            name: name.into(),
        },
        Frame {
            filename: "train.py".into(),
            line: 3,
            name: "<module>".into(),
        },
    ])
}

fn sample(device: u32, timestamp: u64, values: &[(&'static str, i64)]) -> Option<CounterSample> {
    Some(CounterSample {
        device,
        timestamp,
        values: values.to_vec(),
    })
}

type Row = (&'static str, u64, u64, StreamHandle, u64);

/// (action, address, size, stream, timestamp) of every kept entry.
fn entries(t: &MemoryTimeline, device: u32) -> Vec<Row> {
    t.trace(device)
        .map(|e| (e.action.as_str(), e.address, e.size, e.stream, e.timestamp))
        .collect()
}

/// The entries of an allocation becoming live: `segment_alloc`, then `alloc`.
fn born(address: u64, size: u64, stream: StreamHandle, ts: u64) -> Vec<Row> {
    vec![
        ("segment_alloc", address, size, stream, ts),
        ("alloc", address, size, stream, ts),
    ]
}

/// The entries of a freed allocation: `free_requested`, `free_completed`, `segment_free`.
fn died(address: u64, size: u64, stream: StreamHandle, ts: u64) -> Vec<Row> {
    vec![
        ("free_requested", address, size, stream, ts),
        ("free_completed", address, size, stream, ts),
        ("segment_free", address, size, stream, ts),
    ]
}

fn cat(parts: Vec<Vec<Row>>) -> Vec<Row> {
    parts.concat()
}

#[test]
fn counters_peak_and_entries_over_time() {
    let mut t = MemoryTimeline::default();
    let s = stack("big");
    assert_eq!(
        t.record(&alloc(A, 2 * MIB, 1_000), None),
        sample(0, 1_000, &[("reserved_bytes", 2_097_152)])
    );
    assert_eq!(
        t.record(&alloc(B, 20 * MIB, 2_000), Some(s.clone())),
        sample(0, 2_000, &[("reserved_bytes", 23_068_672)])
    );
    // CUPTI's free usually has no size: it comes from the live allocation.
    assert_eq!(
        t.record(&free(A, 0, 3_000), None),
        sample(0, 3_000, &[("reserved_bytes", 20_971_520)])
    );
    // Pinned host memory: its own series, not reserved.
    assert_eq!(
        t.record(&rec(MemoryOp::Alloc, 2, C, 4096, 4_000), None),
        sample(
            0,
            4_000,
            &[("reserved_bytes", 20_971_520), ("pinned_bytes", 4096)]
        )
    );
    assert_eq!(
        t.record(&free(B, 20 * MIB, 5_000), None),
        sample(0, 5_000, &[("reserved_bytes", 0), ("pinned_bytes", 4096)])
    );
    assert_eq!(
        t.record(&rec(MemoryOp::Free, 2, C, 0, 6_000), None),
        sample(0, 6_000, &[("reserved_bytes", 0), ("pinned_bytes", 0)])
    );

    let peak = t.peak(0).unwrap();
    assert_eq!((peak.bytes, peak.timestamp), (23_068_672, 2_000));
    assert_eq!(peak.frames.as_ref().unwrap()[0].name, "big");
    assert_eq!(t.reserved_bytes(0), 0);
    assert_eq!(t.bytes_of_kind(0, 2), 0);
    assert_eq!(
        t.live(0),
        LiveMemory {
            segments: 0,
            bytes: 0
        }
    );
    assert_eq!(
        t.counter(0),
        sample(0, 6_000, &[("reserved_bytes", 0), ("pinned_bytes", 0)])
    );
    assert_eq!(t.counter(1), None);
    assert_eq!(
        entries(&t, 0),
        cat(vec![
            born(A, 2 * MIB, 0, 1_000),
            born(B, 20 * MIB, 0, 2_000),
            died(A, 2 * MIB, 0, 3_000),
            died(B, 20 * MIB, 0, 5_000),
        ])
    );
    assert_eq!(t.dropped_events(0), 0);
    // The allocation's stack on its segment_alloc and alloc; the free had none.
    let frames: Vec<bool> = t.trace(0).map(|e| e.frames.as_ref() == Some(&s)).collect();
    assert_eq!(
        frames,
        [false, false, true, true, false, false, false, false, false, false]
    );
}

#[test]
fn drops_oldest_entries_at_the_bound() {
    let mut t = MemoryTimeline::new(5);
    for i in 0..4u64 {
        t.record(&alloc(A + i * MIB, MIB, 100 + i), None);
    }
    // 8 entries made, the oldest 3 dropped.
    assert_eq!(t.dropped_events(0), 3);
    assert_eq!(
        entries(&t, 0),
        vec![
            ("alloc", A + MIB, MIB, 0, 101),
            ("segment_alloc", A + 2 * MIB, MIB, 0, 102),
            ("alloc", A + 2 * MIB, MIB, 0, 102),
            ("segment_alloc", A + 3 * MIB, MIB, 0, 103),
            ("alloc", A + 3 * MIB, MIB, 0, 103),
        ]
    );
    t.record(&free(A, 0, 200), None);
    t.record(&free(A + MIB, 0, 201), None);
    assert_eq!(t.dropped_events(0), 9);
    assert_eq!(
        entries(&t, 0),
        vec![
            ("free_completed", A, MIB, 0, 200),
            ("segment_free", A, MIB, 0, 200),
            ("free_requested", A + MIB, MIB, 0, 201),
            ("free_completed", A + MIB, MIB, 0, 201),
            ("segment_free", A + MIB, MIB, 0, 201),
        ]
    );
    // Counters and peak are not bounded.
    assert_eq!(t.reserved_bytes(0), 2 * MIB);
    assert_eq!(
        t.peak(0).map(|p| (p.bytes, p.timestamp)),
        Some((4 * MIB, 103))
    );

    let mut none = MemoryTimeline::new(0);
    none.record(&alloc(A, MIB, 1), None);
    assert_eq!(entries(&none, 0), vec![]);
    assert_eq!(none.dropped_events(0), 2);
    assert_eq!(none.reserved_bytes(0), MIB);
}

#[test]
fn pool_allocation_without_a_known_pool_is_its_own_segment() {
    let mut t = MemoryTimeline::default();
    let s = stack("pool_alloc");
    assert_eq!(
        t.record_on_stream(&pool(alloc(A, 3 * MIB, 10), 7), Some(s.clone()), S1),
        sample(0, 10, &[("reserved_bytes", 3 * MIB as i64)])
    );
    assert_eq!(
        t.live(0),
        LiveMemory {
            segments: 1,
            bytes: 3 * MIB
        }
    );
    // The free's entries carry the allocation's stream, as torch's do.
    assert_eq!(
        t.record(&pool(free(A, 0, 20), 7), None),
        sample(0, 20, &[("reserved_bytes", 0)])
    );
    assert_eq!(
        entries(&t, 0),
        cat(vec![born(A, 3 * MIB, S1, 10), died(A, 3 * MIB, S1, 20)])
    );
    assert_eq!(
        t.peak(0).map(|p| (p.bytes, p.timestamp)),
        Some((3 * MIB, 10))
    );
}

#[test]
fn pool_allocation_inside_a_known_segment_is_a_block() {
    let mut t = MemoryTimeline::default();
    t.record(&alloc(A, 64 * MIB, 1), None);
    // Inside the segment: no counter change, an `alloc` entry. The first one makes the
    // segment a pool: its whole-segment block ends.
    assert_eq!(
        t.record_on_stream(&pool(alloc(A + MIB, 2 * MIB, 2), 7), Some(stack("x")), S1),
        None
    );
    assert_eq!(
        t.record_on_stream(&pool(alloc(A + 8 * MIB, MIB, 3), 7), None, S2),
        None
    );
    // Overlapping an existing block: its own segment.
    assert_eq!(
        t.record_on_stream(&pool(alloc(A + 2 * MIB, MIB, 4), 7), None, S1),
        sample(0, 4, &[("reserved_bytes", 65 * MIB as i64)])
    );
    assert_eq!(t.record(&pool(free(A + 8 * MIB, 0, 5), 7), None), None);
    assert_eq!(
        entries(&t, 0),
        cat(vec![
            born(A, 64 * MIB, 0, 1),
            vec![
                ("free_requested", A, 64 * MIB, 0, 2),
                ("free_completed", A, 64 * MIB, 0, 2),
                ("alloc", A + MIB, 2 * MIB, S1, 2),
                ("alloc", A + 8 * MIB, MIB, S2, 3),
            ],
            born(A + 2 * MIB, MIB, S1, 4),
            vec![
                ("free_requested", A + 8 * MIB, MIB, S2, 5),
                ("free_completed", A + 8 * MIB, MIB, S2, 5),
            ],
        ])
    );
    let snap = decode(&t.snapshot_pickle());
    let segs = list(get(&snap, "segments"));
    assert_eq!(segs.len(), 2);
    let blocks: Vec<(i64, i64, i64, String)> = list(get(&segs[0], "blocks"))
        .iter()
        .map(|b| {
            (
                int(get(b, "address")),
                int(get(b, "size")),
                int(get(b, "requested_size")),
                string(get(b, "state")),
            )
        })
        .collect();
    let a = A as i64;
    let mib = MIB as i64;
    assert_eq!(
        blocks,
        vec![
            (a, mib, 0, "inactive".into()),
            (a + mib, 2 * mib, 2 * mib, "active_allocated".into()),
            (a + 3 * mib, 61 * mib, 0, "inactive".into()),
        ]
    );
    assert_eq!(int(get(&segs[0], "allocated_size")), 2 * mib);
    assert_eq!(int(get(&segs[0], "total_size")), 64 * mib);
    // Freeing the hosting segment frees the blocks still inside it first.
    t.record(&free(A, 0, 9), None);
    assert_eq!(
        entries(&t, 0)[10..],
        [
            ("free_requested", A + MIB, 2 * MIB, S1, 9),
            ("free_completed", A + MIB, 2 * MIB, S1, 9),
            ("segment_free", A, 64 * MIB, 0, 9),
        ]
    );
    assert_eq!(
        t.live(0),
        LiveMemory {
            segments: 1,
            bytes: MIB
        }
    );
}

#[test]
fn repairs_unmatched_frees_stale_addresses_and_other_devices() {
    let mut t = MemoryTimeline::default();
    assert_eq!(t.record(&free(A, MIB, 1), None), None);
    assert_eq!(t.unmatched_frees(0), 1);
    t.record(&alloc(A, MIB, 2), None);
    // The free of A was lost: a new allocation at A frees the stale one first.
    assert_eq!(
        t.record(&alloc(A, 4 * MIB, 3), None),
        sample(0, 3, &[("reserved_bytes", 4 * MIB as i64)])
    );
    // A free reported on another device finds the allocation by address.
    assert_eq!(
        t.record(&on(free(A, 0, 4), 1), None),
        sample(0, 4, &[("reserved_bytes", 0)])
    );
    assert_eq!(
        entries(&t, 0),
        cat(vec![
            born(A, MIB, 0, 2),
            died(A, MIB, 0, 3),
            born(A, 4 * MIB, 0, 3),
            died(A, 4 * MIB, 0, 4),
        ])
    );
    // A free reported with another memory kind finds the allocation by address too.
    t.record(&alloc(B, MIB, 5), None);
    assert_eq!(
        t.record(&rec(MemoryOp::Free, 0, B, 0, 6), None),
        sample(0, 6, &[("reserved_bytes", 0)])
    );
    assert_eq!(t.unmatched_frees(0), 1);
    // Ignored records.
    assert_eq!(t.record(&alloc(0, MIB, 5), None), None);
    assert_eq!(t.record(&alloc(B, 0, 5), None), None);
    assert_eq!(t.record(&on(alloc(B, MIB, 5), MAX_DEVICES), None), None);
    assert_eq!(t.ignored_records(), 3);
}

#[test]
fn out_of_order_records_keep_time_order() {
    let mut t = MemoryTimeline::default();
    t.record(&alloc(A, MIB, 10), None);
    t.record(&alloc(B, MIB, 30), None);
    t.record(&alloc(C, MIB, 20), None);
    t.record(&alloc(C + MIB, MIB, 5), None);
    let times: Vec<u64> = t.trace(0).map(|e| e.timestamp).collect();
    assert_eq!(times, vec![5, 5, 10, 10, 20, 20, 30, 30]);
    let actions: Vec<&str> = t.trace(0).map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["segment_alloc", "alloc"].repeat(4));
}

#[test]
fn segment_type_follows_torch_pools() {
    assert_eq!(segment_type(512 << 10), "small");
    assert_eq!(segment_type(2 * MIB), "small");
    assert_eq!(segment_type(2 * MIB + 1), "large");
    assert_eq!(segment_type(20 * MIB), "large");
}

#[test]
fn kind_series_names() {
    assert_eq!(kind_series(3), "reserved_bytes");
    assert_eq!(kind_series(2), "pinned_bytes");
    assert_eq!(kind_series(5), "managed_bytes");
    assert_eq!(kind_series(0), "unknown_bytes");
    assert_eq!(kind_series(99), "unknown_bytes");
}

// ---- the snapshot pickle, read back ----

fn decode(bytes: &[u8]) -> Value {
    serde_pickle::value_from_slice(bytes, DeOptions::new()).expect("pickle decodes")
}

fn get<'a>(v: &'a Value, key: &str) -> &'a Value {
    match v {
        Value::Dict(d) => d
            .get(&HashableValue::String(key.into()))
            .unwrap_or_else(|| panic!("no key {key}")),
        _ => panic!("not a dict: {v:?}"),
    }
}

fn keys(v: &Value) -> Vec<String> {
    match v {
        Value::Dict(d) => d
            .keys()
            .map(|k| match k {
                HashableValue::String(s) => s.clone(),
                _ => panic!("non-string key"),
            })
            .collect(),
        _ => panic!("not a dict"),
    }
}

fn list(v: &Value) -> &[Value] {
    match v {
        Value::List(l) => l,
        _ => panic!("not a list: {v:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::I64(i) => *i,
        _ => panic!("not an int: {v:?}"),
    }
}

fn string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        _ => panic!("not a str: {v:?}"),
    }
}

fn sorted(mut v: Vec<&str>) -> Vec<String> {
    v.sort();
    v.into_iter().map(String::from).collect()
}

#[test]
fn snapshot_contents_entry_by_entry() {
    let mut t = MemoryTimeline::default();
    let s = stack("alloc_weights");
    t.record(&alloc(A, 20 * MIB, 1_000_500), Some(s.clone()));
    t.record(&alloc(B, 2 * MIB, 2_000_000), Some(s.clone()));
    t.record(&free(B, 0, 3_000_000), None);
    t.record_on_stream(
        &on(pool(alloc(C, MIB, 4_000_000), 9), 2),
        Some(stack("async")),
        S1,
    );
    t.allocator_settings_mut().pytorch_cuda_alloc_conf = "max_split_size_mb:128".into();

    let snap = decode(&t.snapshot_pickle());
    assert_eq!(
        keys(&snap),
        sorted(vec![
            "segments",
            "device_traces",
            "allocator_settings",
            "external_annotations"
        ])
    );
    assert_eq!(list(get(&snap, "external_annotations")), &[]);

    let segs = list(get(&snap, "segments"));
    assert_eq!(segs.len(), 2);
    let seg = &segs[0];
    assert_eq!(
        keys(seg),
        sorted(vec![
            "device",
            "address",
            "total_size",
            "allocated_size",
            "active_size",
            "requested_size",
            "stream",
            "segment_type",
            "segment_pool_id",
            "is_expandable",
            "frames",
            "blocks"
        ])
    );
    assert_eq!(int(get(seg, "device")), 0);
    assert_eq!(int(get(seg, "address")), A as i64);
    for k in [
        "total_size",
        "allocated_size",
        "active_size",
        "requested_size",
    ] {
        assert_eq!(int(get(seg, k)), 20 * MIB as i64, "{k}");
    }
    assert_eq!(int(get(seg, "stream")), 0);
    assert_eq!(string(get(seg, "segment_type")), "large");
    assert_eq!(
        get(seg, "segment_pool_id"),
        &Value::Tuple(vec![Value::I64(0), Value::I64(0)])
    );
    assert_eq!(get(seg, "is_expandable"), &Value::Bool(false));
    let frames = list(get(seg, "frames"));
    assert_eq!(frames.len(), 2);
    assert_eq!(keys(&frames[0]), sorted(vec!["name", "filename", "line"]));
    assert_eq!(string(get(&frames[0], "name")), "alloc_weights");
    assert_eq!(string(get(&frames[0], "filename")), "model.py");
    assert_eq!(int(get(&frames[0], "line")), 12);
    let blocks = list(get(seg, "blocks"));
    assert_eq!(blocks.len(), 1);
    assert_eq!(
        keys(&blocks[0]),
        sorted(vec!["address", "size", "requested_size", "state", "frames"])
    );
    assert_eq!(int(get(&blocks[0], "address")), A as i64);
    assert_eq!(int(get(&blocks[0], "size")), 20 * MIB as i64);
    assert_eq!(int(get(&blocks[0], "requested_size")), 20 * MIB as i64);
    assert_eq!(string(get(&blocks[0], "state")), "active_allocated");
    assert_eq!(list(get(&blocks[0], "frames")).len(), 2);

    let pool_seg = &segs[1];
    assert_eq!(int(get(pool_seg, "device")), 2);
    // The handle the program passed, not CUPTI's stream id (9).
    assert_eq!(int(get(pool_seg, "stream")), 0x7f00_dead_0000);
    assert_eq!(string(get(pool_seg, "segment_type")), "small");
    assert_eq!(list(get(pool_seg, "blocks")).len(), 1);

    let traces = list(get(&snap, "device_traces"));
    assert_eq!(traces.len(), 3, "devices 0..=2");
    assert_eq!(list(&traces[1]), &[]);
    let mut dev0 = Vec::new();
    for e in list(&traces[0]) {
        assert_eq!(
            keys(e),
            sorted(vec![
                "action",
                "addr",
                "size",
                "stream",
                "time_us",
                "compile_context",
                "user_metadata",
                "frames"
            ])
        );
        assert_eq!(string(get(e, "compile_context")), "N/A");
        assert_eq!(string(get(e, "user_metadata")), "");
        dev0.push((
            string(get(e, "action")),
            int(get(e, "addr")),
            int(get(e, "size")),
            int(get(e, "stream")),
            int(get(e, "time_us")),
            list(get(e, "frames")).len(),
        ));
    }
    let (a, b, mib) = (A as i64, B as i64, MIB as i64);
    let row = |action: &str, addr, size, time_us, frames| {
        (action.to_string(), addr, size, 0, time_us, frames)
    };
    assert_eq!(
        dev0,
        vec![
            row("segment_alloc", a, 20 * mib, 1_000, 2),
            row("alloc", a, 20 * mib, 1_000, 2),
            row("segment_alloc", b, 2 * mib, 2_000, 2),
            row("alloc", b, 2 * mib, 2_000, 2),
            row("free_requested", b, 2 * mib, 3_000, 0),
            row("free_completed", b, 2 * mib, 3_000, 0),
            row("segment_free", b, 2 * mib, 3_000, 0),
        ]
    );
    let dev2: Vec<(String, i64)> = list(&traces[2])
        .iter()
        .map(|e| (string(get(e, "action")), int(get(e, "stream"))))
        .collect();
    assert_eq!(
        dev2,
        vec![
            ("segment_alloc".to_string(), 0x7f00_dead_0000),
            ("alloc".to_string(), 0x7f00_dead_0000)
        ]
    );

    let settings = get(&snap, "allocator_settings");
    assert_eq!(
        keys(settings),
        sorted(vec![
            "PYTORCH_CUDA_ALLOC_CONF",
            "max_split_size",
            "garbage_collection_threshold",
            "expandable_segments",
            "pinned_num_register_threads",
            "release_lock_on_cudamalloc",
            "pinned_use_cuda_host_register",
            "graph_capture_record_stream_reuse",
            "roundup_power2_divisions"
        ])
    );
    assert_eq!(
        string(get(settings, "PYTORCH_CUDA_ALLOC_CONF")),
        "max_split_size_mb:128"
    );
    assert_eq!(int(get(settings, "max_split_size")), -1);
    assert_eq!(
        get(settings, "garbage_collection_threshold"),
        &Value::F64(0.0)
    );
    assert_eq!(get(settings, "expandable_segments"), &Value::Bool(false));
    assert_eq!(int(get(settings, "pinned_num_register_threads")), 1);
    let div = get(settings, "roundup_power2_divisions");
    assert_eq!(keys(div).len(), 16);
    assert_eq!(int(get(div, "32768")), 0);
}

#[test]
fn snapshot_of_nothing_and_shared_frames() {
    let t = MemoryTimeline::default();
    let snap = decode(&t.snapshot_pickle());
    assert_eq!(list(get(&snap, "segments")), &[]);
    assert_eq!(list(get(&snap, "device_traces")), &[]);

    // One stack is written once and referenced afterwards, whether the records share one
    // `Arc` or carry equal copies.
    let mut t = MemoryTimeline::default();
    let s = stack("a_rather_long_function_name_to_find");
    for i in 0..50 {
        let frames = if i % 2 == 0 {
            s.clone()
        } else {
            stack("a_rather_long_function_name_to_find")
        };
        t.record(&alloc(A + i * MIB, MIB, i), Some(frames));
    }
    let bytes = t.snapshot_pickle();
    let needle = b"a_rather_long_function_name_to_find";
    assert_eq!(
        bytes.windows(needle.len()).filter(|w| w == needle).count(),
        1
    );
    let snap = decode(&bytes);
    let entries = list(&list(get(&snap, "device_traces"))[0]);
    assert_eq!(entries.len(), 100);
    for e in entries {
        assert_eq!(
            string(get(&list(get(e, "frames"))[0], "name")),
            "a_rather_long_function_name_to_find"
        );
    }
}

#[test]
fn write_snapshot_to_a_file() {
    let mut t = MemoryTimeline::default();
    t.record(&alloc(A, MIB, 1), None);
    let dir = std::env::temp_dir().join(format!("cuprof-memory-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x-memory-1.pickle");
    t.write_snapshot(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), t.snapshot_pickle());
    assert!(!dir.join("x-memory-1.pickle.tmp").exists());
    std::fs::remove_dir_all(&dir).unwrap();
    let err = t
        .write_snapshot(Path::new("/nonexistent-dir/x.pickle"))
        .unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent-dir/x.pickle"),
        "{err}"
    );
}
