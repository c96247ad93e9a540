//! Real CUPTI bytes end to end: a buffer CUPTI 13.0 wrote on an H100 (tests/data/, see its
//! README.md) is replayed by the libcupti double inside a live process with libcuprof.so
//! preloaded, rebased to the replay's time and pid. The written trace is held against the
//! rebased records the tracer received (dumped by CUPROF_DUMP_BUFFERS), to the nanosecond:
//! this proves decoding against bytes real CUPTI wrote, not only against the double's own.

use crate::common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const DATA: &str = "tests/data/cupti-130001-h100-steps10.bin";

/// `_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_21CUDAFunctorOnSelf_addIfEESt5arrayIPcLm2EEEEviT0_T1_`
/// demangled as libstdc++'s `__cxa_demangle` (and c++filt, and Kineto) write it.
const ADD: &str = "void at::native::vectorized_elementwise_kernel<4, \
                   at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul> >(int, \
                   at::native::CUDAFunctorOnSelf_add<float>, std::array<char*, 2ul>)";
/// `_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_`.
const FILL: &str = "void at::native::vectorized_elementwise_kernel<4, \
                    at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, \
                    at::native::FillFunctor<float>, std::array<char*, 1ul>)";

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// The record bytes of a dump file (pointer fields zeroed), by the format in
/// tests/cupti-double/src/replay.rs.
fn dump_data(path: &Path) -> Vec<u8> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..8], b"CUPROFB1");
    assert_eq!(u32_at(&b, 8), 130_001);
    let len = u64_at(&b, 16) as usize;
    b[24..24 + len].to_vec()
}

/// One record of the kinds this recording holds, read by the CUPTI 13.0 offsets
/// (cupti_activity.h): (kind, its timestamp fields, its processId if it has one).
struct Raw {
    kind: u32,
    times: Vec<u64>,
    pid: Option<u32>,
}

fn raw_records(data: &[u8]) -> Vec<Raw> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let r = &data[at..];
        let kind = u32_at(r, 0);
        let (size, times, pid): (usize, &[usize], Option<usize>) = match kind {
            // CUpti_ActivityKernel10: start, end, completed, queued, submitted.
            10 => (216, &[16, 24, 32, 120, 128], None),
            // CUpti_ActivityAPI: start, end; processId @24.
            5 => (40, &[8, 16], Some(24)),
            // CUpti_ActivityMemcpy6: start, end.
            1 => (96, &[16, 24], None),
            // CUpti_ActivitySynchronization2: start, end.
            38 => (56, &[8, 16], None),
            // CUpti_ActivityExternalCorrelation: no time.
            39 => (24, &[], None),
            // CUpti_ActivityMemory4: timestamp; processId @48.
            49 => (128, &[32], Some(48)),
            k => panic!("record kind {k} at {at}: not in this recording"),
        };
        out.push(Raw {
            kind,
            times: times.iter().map(|&o| u64_at(r, o)).collect(),
            pid: pid.map(|o| u32_at(r, o)),
        });
        at += size;
    }
    out
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn by_cat<'a>(events: &'a [RawEvent], cat: &str) -> Vec<&'a RawEvent> {
    events.iter().filter(|e| e.v["cat"] == cat).collect()
}

fn counts(evs: &[&RawEvent]) -> BTreeMap<String, usize> {
    count_by_name(&evs.iter().map(|e| &e.v).collect::<Vec<_>>())
}

fn want(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

#[test]
fn h100_cupti13_buffer_replayed_under_the_tracer() {
    let data_file = Path::new(env!("CARGO_MANIFEST_DIR")).join(DATA);
    let dir = TempDir::new("replay");
    let dumps = TempDir::new("replay-dumps");
    let before = now_ns();
    let (out, _) = Run::python("replay.py", &[data_file.to_str().unwrap()], dir.path())
        .env("CUPTI_DOUBLE_VERSION", "13")
        .env("CUPROF_ACTIVITIES", "CPU,GPU,MEM")
        .env("CUPROF_DUMP_BUFFERS", dumps.path())
        .ok_json();
    let after = now_ns();
    assert_eq!(out["records"], 299, "51 + 66 + 60 + 12 + 1 + 109 records");

    // Files: the trace and one memory snapshot.
    let files = dir.files();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[1], "t-rank0.trace.json.gz");
    let pickle = &files[0];
    assert!(
        pickle.starts_with("t-rank0-memory-") && pickle.ends_with(".pickle"),
        "{pickle}"
    );
    let path = dir.path().join("t-rank0.trace.json.gz");
    let events = raw_events(&path);
    let trace = read_trace(&path);
    let base = trace["baseTimeNanoseconds"].as_i64().unwrap();
    let pid = trace["cuprof"]["pid"].as_u64().unwrap();
    // A lone process without the launcher: its own host, pid and start time.
    let host = trace["cuprof"]["hostname"].as_str().unwrap();
    let run_id = trace["cuprof"]["run_id"].as_str().unwrap();
    let ticks = run_id.strip_prefix(&format!("{host}-{pid}-")).unwrap();
    assert!(ticks.parse::<u64>().unwrap() > 0, "{run_id}");
    assert_eq!(trace["cuprof"]["cupti_version"], 130_001);
    let stats = &trace["cuprofStats"];
    assert_eq!(stats["dropped_cupti"], 0);
    assert_eq!(stats["dropped_buffers"], 0);
    assert_eq!(stats["dropped_channel"], 0);
    assert_eq!(stats["kernels_without_timestamps"], 0);
    assert_eq!(stats["memory_events_dropped"], 0);
    assert_eq!(stats["complete"], true);
    assert_eq!(stats["events"], events.len());

    // What the tracer received: the recording, rebased. Every timestamp moved by one delta
    // (relative timing exact), the earliest to the replay's now + 1 ms; every processId is
    // this process's.
    let recs = dump::read_dir(dumps.path());
    assert_eq!(recs.version, 130_001);
    let mut dump_files: Vec<PathBuf> = std::fs::read_dir(dumps.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dump_files.sort();
    let received: Vec<u8> = dump_files.iter().flat_map(|f| dump_data(f)).collect();
    let recorded = dump_data(&data_file);
    assert_eq!(received.len(), recorded.len());
    let (got, orig) = (raw_records(&received), raw_records(&recorded));
    let earliest = |rs: &[Raw]| {
        rs.iter()
            .flat_map(|r| r.times.iter().copied())
            .filter(|&t| t != 0)
            .min()
            .unwrap()
    };
    let (new0, old0) = (earliest(&got), earliest(&orig));
    assert!(
        before + 1_000_000 <= new0 && new0 <= after + 1_000_000,
        "earliest {new0} in [{before}, {after}] + 1 ms"
    );
    let mut n_times = 0;
    for (g, o) in got.iter().zip(&orig) {
        assert_eq!(g.kind, o.kind);
        for (&gt, &ot) in g.times.iter().zip(&o.times) {
            if ot == 0 {
                assert_eq!(gt, 0, "unknown timestamps stay unknown");
            } else {
                assert_eq!(
                    gt - new0,
                    ot - old0,
                    "kind {} keeps its relative time",
                    g.kind
                );
                n_times += 1;
            }
        }
        if let Some(p) = g.pid {
            assert_eq!(u64::from(p), pid, "kind {} processId", g.kind);
        }
    }
    assert_eq!(n_times, 51 * 5 + 66 * 2 + 2 + 12 * 2 + 109);
    assert_eq!(recs.kernels.len(), 51);
    assert_eq!(recs.apis.len(), 66);
    assert_eq!(recs.copies.len(), 1);
    assert_eq!(recs.syncs.len(), 12);
    assert_eq!(recs.other, BTreeMap::from([(39, 60), (49, 109)]));

    // Kernels: every record, exact times, demangled names.
    let kernels = by_cat(&events, "kernel");
    assert_eq!(kernels.len(), 51);
    assert_eq!(counts(&kernels), want(&[(ADD, 50), (FILL, 1)]));
    let mut seen = BTreeSet::new();
    for rec in &recs.kernels {
        let e = kernels
            .iter()
            .find(|e| e.v["args"]["correlation"] == rec.correlation)
            .unwrap_or_else(|| panic!("no kernel event for {rec:?}"));
        assert!(seen.insert(rec.correlation), "one kernel per launch");
        let name = match rec.name.as_str() {
            "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_21CUDAFunctorOnSelf_addIfEESt5arrayIPcLm2EEEEviT0_T1_" => ADD,
            "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_" => FILL,
            other => panic!("unexpected kernel {other}"),
        };
        assert_eq!(e.v["name"], name);
        assert_kernel_matches(e, rec, base);
    }

    // Runtime calls: by name and count, exact times, the recorded threads, our pid.
    let api = by_cat(&events, "cuda_runtime");
    assert_eq!(
        counts(&api),
        want(&[
            ("cudaLaunchKernel", 51),
            ("cudaDeviceSynchronize", 11),
            ("cudaMalloc", 1),
            ("cudaHostAlloc", 1),
            ("cudaMemcpyAsync", 1),
            ("cudaStreamSynchronize", 1),
        ])
    );
    assert!(by_cat(&events, "cuda_driver").is_empty());
    for rec in &recs.apis {
        let e = api
            .iter()
            .find(|e| e.v["args"]["correlation"] == rec.correlation)
            .unwrap_or_else(|| panic!("no runtime event for {rec:?}"));
        assert_eq!(e.ts, us(rec.start as i64 - base));
        assert_eq!(e.dur, us((rec.end - rec.start) as i64));
        assert_eq!(e.v["tid"], rec.tid);
        assert_eq!(e.v["pid"], pid);
        assert_eq!(e.v["args"]["cbid"], rec.cbid);
    }

    // Synchronization: 11 cudaDeviceSynchronize (context), 1 cudaStreamSynchronize.
    let syncs = by_cat(&events, "cuda_sync");
    assert_eq!(syncs.len(), 12);
    assert_eq!(
        counts(&syncs),
        want(&[("Context Sync", 11), ("Stream Sync", 1)])
    );
    for &(start, end, corr) in &recs.syncs {
        let e = syncs
            .iter()
            .find(|e| e.v["args"]["correlation"] == corr)
            .unwrap_or_else(|| panic!("no sync event for correlation {corr}"));
        assert_eq!(e.ts, us(start as i64 - base));
        assert_eq!(e.dur, us((end - start) as i64));
    }

    // Kineto's rows: the Stream Sync on stream 7's sync row (tid 1000007, named and sorted
    // beside stream 7), the Context Syncs on tid 0; Kineto's fields (serde_json sorts them),
    // no wait_on_* for either.
    let stream_sync = syncs.iter().find(|e| e.v["name"] == "Stream Sync").unwrap();
    assert_eq!(stream_sync.v["tid"], 1_000_007);
    assert_eq!(stream_sync.v["args"]["stream"], 7);
    for e in &syncs {
        let keys: Vec<&str> = e.v["args"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            keys,
            [
                "context",
                "correlation",
                "cuda_sync_kind",
                "device",
                "stream"
            ]
        );
        if e.v["name"] == "Context Sync" {
            assert_eq!(
                (&e.v["tid"], &e.v["args"]["stream"]),
                (&0.into(), &(-1).into())
            );
        }
    }
    let meta: Vec<(&Value, &Value)> = events
        .iter()
        .filter(|e| e.v["ph"] == "M" && e.v["tid"] == 1_000_007)
        .map(|e| (&e.v["name"], &e.v["args"]))
        .collect();
    assert_eq!(
        meta,
        [
            (
                &"thread_name".into(),
                &serde_json::json!({"name": "stream 7 (sync)"})
            ),
            (
                &"thread_sort_index".into(),
                &serde_json::json!({"sort_index": 7})
            ),
        ]
    );
    // No two complete events on one track partly overlap (the DtoH copy and the Stream Sync
    // on stream 7 did): read_trace holds the trace to Perfetto's rules (common/rules.rs).

    // The one copy: float(x[0]), 4 bytes device -> pinned, async.
    let copies = by_cat(&events, "gpu_memcpy");
    assert_eq!(copies.len(), 1);
    let (c, rec) = (copies[0], &recs.copies[0]);
    assert_eq!(c.v["name"], "Memcpy DtoH (Device -> Pinned)");
    assert_eq!(c.v["args"]["bytes"], 4);
    assert_eq!(rec.bytes, 4);
    assert_eq!(c.v["args"]["correlation"], rec.correlation);
    assert_eq!(c.ts, us(rec.start as i64 - base));
    assert_eq!(c.dur, us((rec.end - rec.start) as i64));
    assert!(by_cat(&events, "gpu_memset").is_empty());

    // Memory: one counter event per MEMORY2 record, at its rebased timestamp; at the end
    // torch's 2 MiB segment, the 4-byte pinned buffer and 837 bytes of module statics.
    let counters: Vec<&RawEvent> = events.iter().filter(|e| e.v["ph"] == "C").collect();
    assert_eq!(counters.len(), 109);
    assert!(counters
        .iter()
        .all(|e| e.v["cat"] == "cuda_memory" && e.v["name"] == "GPU 0 Memory"));
    let mut counter_ts: Vec<&str> = counters.iter().map(|e| e.ts.as_str()).collect();
    let mut memory_ts: Vec<String> = got
        .iter()
        .filter(|r| r.kind == 49)
        .map(|r| us(r.times[0] as i64 - base))
        .collect();
    counter_ts.sort_unstable();
    memory_ts.sort_unstable();
    assert_eq!(counter_ts, memory_ts);
    let latest = got
        .iter()
        .filter(|r| r.kind == 49)
        .map(|r| r.times[0])
        .max()
        .unwrap();
    let last = counters
        .iter()
        .find(|e| e.ts == us(latest as i64 - base))
        .unwrap();
    assert_eq!(
        last.v["args"],
        serde_json::json!({"reserved_bytes": 2097152, "pinned_bytes": 4, "device_static_bytes": 837})
    );
    // The snapshot: torch's segment, loadable by MemoryViz's rules.
    let check = std::process::Command::new("python3")
        .arg(apps().join("check_snapshot.py"))
        .arg(dir.path().join(pickle))
        .args(["--expect-peak", "2097152"])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "check_snapshot: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    // Flows: one pair per launching call (51 kernel launches, 1 copy), each `s` on its
    // runtime call, each `f` on the start of its GPU event.
    let flow = |ph: &str| -> Vec<&RawEvent> { events.iter().filter(|e| e.v["ph"] == ph).collect() };
    let (starts, ends) = (flow("s"), flow("f"));
    let ids = |v: &[&RawEvent]| -> BTreeSet<u64> {
        v.iter().map(|e| e.v["id"].as_u64().unwrap()).collect()
    };
    assert_eq!(starts.len(), 52);
    assert_eq!(ends.len(), 52);
    assert_eq!(ids(&starts), ids(&ends));
    assert_eq!(ids(&starts).len(), 52);
    for s in &starts {
        let id = &s.v["id"];
        let call = api
            .iter()
            .find(|e| e.v["args"]["correlation"] == *id)
            .expect("launching call");
        assert_eq!(
            (&s.ts, &s.v["tid"]),
            (&call.ts, &call.v["tid"]),
            "flow start {id}"
        );
        assert!(call.v["name"] == "cudaLaunchKernel" || call.v["name"] == "cudaMemcpyAsync");
    }
    for f in &ends {
        let id = &f.v["id"];
        let gpu = kernels
            .iter()
            .chain(&copies)
            .find(|g| g.v["args"]["correlation"] == *id)
            .expect("GPU event");
        assert_eq!(
            (&f.ts, &f.v["tid"]),
            (&gpu.ts, &gpu.v["tid"]),
            "flow end {id}"
        );
        assert_eq!(f.v["bp"], "e");
    }
    let last: &Value = &events.last().unwrap().v;
    assert_eq!(last["name"], "Record Window End");
}
