//! Issue 3 end to end: a real process with libcuprof.so preloaded, the libcupti double in the
//! 12.x and 13.0 layouts, NVTX through the real NVTX3 loader. The written trace is held
//! against the raw records CUPTI handed over (dumped by CUPROF_DUMP_BUFFERS and read back here
//! through cupti-sys's structs), to the nanosecond.

use crate::common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

struct Traced {
    events: Vec<RawEvent>,
    trace: Value,
    records: dump::Records,
    corr: Value,
}

fn trace_workload(version: &str) -> Traced {
    let dir = TempDir::new(&format!("workload{version}"));
    let dumps = TempDir::new(&format!("dumps{version}"));
    let (corr, _) = Run::python("workload.py", &[], dir.path())
        .env("CUPTI_DOUBLE_VERSION", version)
        .env("CUPROF_DUMP_BUFFERS", dumps.path())
        .ok_json();
    assert_eq!(dir.files(), vec!["t-rank0.trace.json.gz"]);
    let path = dir.path().join("t-rank0.trace.json.gz");
    Traced {
        events: raw_events(&path),
        trace: read_trace(&path),
        records: dump::read_dir(dumps.path()),
        corr,
    }
}

fn by_cat<'a>(t: &'a Traced, cat: &str) -> Vec<&'a RawEvent> {
    t.events.iter().filter(|e| e.v["cat"] == cat).collect()
}

fn check_workload(version: &str, expected_cupti_version: u64) {
    let t = trace_workload(version);
    let base = t.trace["baseTimeNanoseconds"].as_i64().unwrap();
    assert_eq!(t.trace["cuprof"]["cupti_version"], expected_cupti_version);
    assert_eq!(t.records.version as u64, expected_cupti_version);

    // Kernels: every record, exact times, Kineto's args.
    let kernels = by_cat(&t, "kernel");
    assert_eq!(kernels.len(), 12, "3 + 2 + 4 graph nodes + 2 + 1 kernels");
    assert_eq!(t.records.kernels.len(), 12);
    let mut seen = BTreeSet::new();
    for rec in &t.records.kernels {
        let e = kernels
            .iter()
            .find(|e| {
                e.v["args"]["correlation"] == rec.correlation && e.ts == us(rec.start as i64 - base)
            })
            .unwrap_or_else(|| panic!("no kernel event for {rec:?}"));
        seen.insert((rec.correlation, rec.start));
        assert_kernel_matches(e, rec, base);
    }
    assert_eq!(seen.len(), 12);
    let kernel_names = count_by_name(&kernels.iter().map(|e| &e.v).collect::<Vec<_>>());
    let expected: BTreeMap<String, usize> = [
        ("kernel(float*, int)", 3),
        ("void at::native::vectorized_elementwise_kernel<4>(int)", 2),
        ("graphnode()", 4),
        ("ncclDevKernel_AllReduce_Sum_f32", 2),
        ("weird\"name\\\u{1}\n", 1),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    for (name, n) in &expected {
        assert_eq!(
            kernel_names.get(name),
            Some(n),
            "kernel {name:?} in {kernel_names:?}"
        );
    }
    assert_eq!(kernel_names.values().sum::<usize>(), 12);

    // Copies and memsets: exact bytes, names, times, bandwidth.
    let copies = by_cat(&t, "gpu_memcpy");
    assert_eq!(copies.len(), 2);
    let h2d = copies
        .iter()
        .find(|e| e.v["name"] == "Memcpy HtoD (Pageable -> Device)")
        .expect("HtoD copy");
    assert_eq!(h2d.v["args"]["bytes"], 1 << 20);
    assert_eq!(h2d.dur, "20.000");
    assert_eq!(h2d.v["args"]["memory bandwidth (GB/s)"], 52.4288);
    assert_eq!(h2d.v["args"]["correlation"], t.corr["h2d"]);
    let d2h = copies
        .iter()
        .find(|e| e.v["name"] == "Memcpy DtoH (Device -> Pinned)")
        .expect("DtoH copy");
    assert_eq!(d2h.v["args"]["bytes"], 4096);
    assert_eq!(d2h.v["args"]["correlation"], t.corr["d2h"]);
    for rec in t.records.copies.iter().filter(|c| c.kind == 1) {
        assert!(
            copies.iter().any(|e| e.ts == us(rec.start as i64 - base)
                && e.dur == us((rec.end - rec.start) as i64)),
            "{rec:?}"
        );
    }
    let memsets = by_cat(&t, "gpu_memset");
    assert_eq!(memsets.len(), 1);
    assert_eq!(memsets[0].v["name"], "Memset (Device)");
    assert_eq!(memsets[0].v["args"]["bytes"], 4096);
    assert_eq!(memsets[0].dur, "1.000");

    // Synchronization: one stream sync on stream 7.
    let syncs = by_cat(&t, "cuda_sync");
    assert_eq!(syncs.len(), 1);
    assert_eq!(syncs[0].v["name"], "Stream Sync");
    assert_eq!(syncs[0].v["args"]["stream"], 7);
    assert_eq!(syncs[0].dur, "50.000");
    let (s_start, _, s_corr) = t.records.syncs[0];
    assert_eq!(syncs[0].ts, us(s_start as i64 - base));
    assert_eq!(syncs[0].v["args"]["correlation"], s_corr);

    // Runtime calls on their real threads; CPU events carry no `stream` (HTA would take them
    // for GPU work).
    let api = by_cat(&t, "cuda_runtime");
    let api_names = count_by_name(&api.iter().map(|e| &e.v).collect::<Vec<_>>());
    let want: BTreeMap<String, usize> = [
        ("cudaLaunchKernel", 8),
        ("cudaGraphLaunch", 1),
        ("cudaMemcpyAsync", 1),
        ("cudaMemcpy", 1),
        ("cudaMemsetAsync", 1),
        ("cudaStreamSynchronize", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect();
    assert_eq!(api_names, want);
    for rec in &t.records.apis {
        let e = api
            .iter()
            .find(|e| e.v["args"]["correlation"] == rec.correlation)
            .expect("api event");
        assert_eq!(e.ts, us(rec.start as i64 - base));
        assert_eq!(e.dur, us((rec.end - rec.start) as i64));
        assert_eq!(e.v["tid"], rec.tid);
        assert_eq!(e.v["args"]["cbid"], rec.cbid);
        assert!(e.v["args"].get("stream").is_none());
    }
    let worker_tid = api
        .iter()
        .find(|e| {
            t.corr["k3"]
                .as_array()
                .unwrap()
                .contains(&e.v["args"]["correlation"])
        })
        .unwrap()
        .v["tid"]
        .clone();
    let main_tid = api
        .iter()
        .find(|e| e.v["args"]["correlation"] == t.corr["h2d"])
        .unwrap()
        .v["tid"]
        .clone();
    assert_ne!(
        worker_tid, main_tid,
        "the worker's launches are on its own OS thread"
    );

    // Flows: one `s` per launching call, one `f` at its first GPU event, ids unique per phase.
    let starts: Vec<u64> = t
        .events
        .iter()
        .filter(|e| e.v["ph"] == "s")
        .map(|e| e.v["id"].as_u64().unwrap())
        .collect();
    let ends: Vec<u64> = t
        .events
        .iter()
        .filter(|e| e.v["ph"] == "f")
        .map(|e| e.v["id"].as_u64().unwrap())
        .collect();
    assert_eq!(
        starts.len(),
        12,
        "8 kernel launches, 1 graph launch, 2 copies, 1 memset"
    );
    assert_eq!(ends.len(), 12);
    assert_eq!(
        starts.iter().collect::<BTreeSet<_>>(),
        ends.iter().collect::<BTreeSet<_>>()
    );
    assert_eq!(starts.iter().collect::<BTreeSet<_>>().len(), 12);
    for e in t.events.iter().filter(|e| e.v["ph"] == "f") {
        let id = &e.v["id"];
        let gpu = t.events.iter().find(|g| {
            (g.v["cat"] == "kernel" || g.v["cat"] == "gpu_memcpy" || g.v["cat"] == "gpu_memset")
                && g.v["args"]["correlation"] == *id
                && g.ts == e.ts
        });
        assert!(gpu.is_some(), "flow end {id} sits on a GPU event's start");
        assert_eq!(e.v["bp"], "e");
    }

    // NVTX: nesting on the CPU thread, domains, and the projection onto the GPU.
    let ann = by_cat(&t, "user_annotation");
    assert_eq!(
        names(&ann.iter().map(|e| &e.v).collect::<Vec<_>>()),
        vec!["inner", "train", "worker"]
    );
    let get = |n: &str| ann.iter().find(|e| e.v["name"] == n).unwrap();
    let (train, inner, worker) = (get("train"), get("inner"), get("worker"));
    assert_eq!(train.v["tid"], main_tid);
    assert_eq!(inner.v["tid"], main_tid);
    assert_eq!(worker.v["tid"], worker_tid);
    assert_eq!(worker.v["args"]["domain"], "side");
    let t0: f64 = train.ts.parse().unwrap();
    let t1: f64 = t0 + train.dur.parse::<f64>().unwrap();
    let i0: f64 = inner.ts.parse().unwrap();
    assert!(
        t0 <= i0 && i0 + inner.dur.parse::<f64>().unwrap() <= t1,
        "inner nests in train"
    );
    let gpu_ann = by_cat(&t, "gpu_user_annotation");
    let spans: BTreeSet<(String, u64)> = gpu_ann
        .iter()
        .map(|e| {
            (
                e.v["name"].as_str().unwrap().to_string(),
                e.v["tid"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: BTreeSet<(String, u64)> = [("train", 7), ("train", 9), ("inner", 9), ("worker", 11)]
        .iter()
        .map(|(n, s)| (n.to_string(), *s))
        .collect();
    assert_eq!(spans, want);
    // `inner` on stream 9 spans its two kernels.
    let k2: Vec<&dump::KernelRec> = t
        .records
        .kernels
        .iter()
        .filter(|k| {
            t.corr["k2"]
                .as_array()
                .unwrap()
                .contains(&serde_json::json!(k.correlation))
        })
        .collect();
    let inner_gpu = gpu_ann.iter().find(|e| e.v["name"] == "inner").unwrap();
    let first = k2.iter().map(|k| k.start).min().unwrap();
    let last = k2.iter().map(|k| k.end).max().unwrap();
    // Kineto's shift: 1 ns before the first kernel, 1 ns after the last.
    assert_eq!(inner_gpu.ts, us(first as i64 - 1 - base));
    assert_eq!(inner_gpu.dur, us((last - first) as i64 + 2));

    // Metadata in Kineto's order.
    let devices = t.trace["deviceProperties"].as_array().unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0]["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(devices[0]["numSms"], 132);
    // A single process that never initialised torch.distributed: no distributedInfo, as
    // torch.profiler writes none (a rank of a job has it: window.rs).
    assert_eq!(t.trace.get("distributedInfo"), None);
    assert_eq!(base % 7_889_238_000_000_000, 0);
    let last = t.events.last().unwrap();
    assert_eq!(last.v["name"], "Record Window End");
    assert_eq!(t.trace["cuprofStats"]["dropped_channel"], 0);
    assert_eq!(t.trace["cuprofStats"]["events"], t.events.len());
}

#[test]
fn cupti13_layout_trace_holds_every_record_exactly() {
    check_workload("13", 130001);
}

#[test]
fn cupti12_layout_trace_holds_every_record_exactly() {
    check_workload("12", 28);
}

fn driver_launches(api: Option<&str>) -> (Value, Value) {
    let dir = TempDir::new("driver");
    let mut run = Run::python("driver_launch.py", &[], dir.path());
    if let Some(api) = api {
        run = run.env("CUPROF_API", api);
    }
    let (corr, _) = run.ok_json();
    (read_trace(&dir.path().join("t-rank0.trace.json.gz")), corr)
}

#[test]
fn direct_driver_launches_get_their_cpu_partner_and_flow() {
    // Default: the DRIVER kind filtered to launches, graph launches and syncs; `all`: unfiltered.
    for api in [None, Some("all")] {
        let (t, corr) = driver_launches(api);
        let driver = events(&t, "cuda_driver");
        let launches: Vec<&&Value> = driver
            .iter()
            .filter(|e| e["name"] == "cuLaunchKernel")
            .collect();
        assert_eq!(launches.len(), 3, "{api:?}");
        let want: Vec<&Value> = corr["driver"].as_array().unwrap().iter().collect();
        let got: Vec<&Value> = launches.iter().map(|e| &e["args"]["correlation"]).collect();
        assert_eq!(got, want, "{api:?}");
        for e in &launches {
            assert_eq!(e["args"]["cbid"], 307);
            assert!(e["dur"].as_f64().unwrap() >= 0.0);
        }
        let kernels = events(&t, "kernel");
        assert_eq!(kernels.len(), 4);
        for c in want {
            let k = kernels
                .iter()
                .find(|k| k["args"]["correlation"] == *c)
                .expect("kernel of the launch");
            assert_eq!(k["name"], "triton_poi_fused_add_0");
            let s = phs(&t, "s").into_iter().filter(|f| f["id"] == *c).count();
            let f = phs(&t, "f").into_iter().filter(|f| f["id"] == *c).count();
            assert_eq!((s, f), (1, 1), "{api:?}: one flow pair per driver launch");
        }
        assert_eq!(events(&t, "cuda_runtime").len(), 1);
    }
}

/// What one run of api_selection.py left in CUPTI's switches and in the trace.
struct Selection {
    switches: BTreeMap<&'static str, Value>,
    /// (category, name) of the API events in the trace, by correlation id.
    api: BTreeMap<u64, (String, String)>,
    kernels: usize,
    corr: Value,
}

fn api_selection(api: &str) -> Selection {
    let dir = TempDir::new("apisel");
    let (out, _) = Run::python("api_selection.py", &[], dir.path())
        .env("CUPROF_API", api)
        .env("CUPROF_CAPTURE_RANGE", "cudaProfilerApi")
        .ok_json();
    let t = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    let mut found = BTreeMap::new();
    for cat in ["cuda_runtime", "cuda_driver"] {
        for e in events(&t, cat) {
            let c = e["args"]["correlation"].as_u64().unwrap();
            let name = e["name"].as_str().unwrap().to_string();
            assert!(found.insert(c, (cat.to_string(), name)).is_none());
        }
    }
    let mut switches = BTreeMap::new();
    for when in ["before", "inside", "after"] {
        switches.insert(when, out[when]["switches"].clone());
    }
    Selection {
        switches,
        api: found,
        kernels: events(&t, "kernel").len(),
        corr: out,
    }
}

fn switch_state(kinds: [u8; 2], calls: [u8; 4]) -> Value {
    serde_json::json!({
        "kind_runtime": kinds[0], "kind_driver": kinds[1],
        "cudaLaunchKernel": calls[0], "cudaGetDevice": calls[1],
        "cuLaunchKernel": calls[2], "cuCtxGetCurrent": calls[3],
    })
}

#[test]
fn unkept_api_calls_are_switched_off_one_by_one_inside_the_window() {
    let off = switch_state([0, 0], [0, 0, 0, 0]);
    // (CUPROF_API, switches inside the range, API calls kept)
    let cases: [(&str, Value, &[&str]); 3] = [
        (
            "filtered",
            switch_state([1, 1], [1, 0, 1, 0]),
            &["cudaLaunchKernel", "cuLaunchKernel"],
        ),
        (
            "runtime",
            switch_state([1, 0], [1, 0, 0, 0]),
            &["cudaLaunchKernel"],
        ),
        (
            "all",
            switch_state([1, 1], [1, 1, 1, 1]),
            &[
                "cudaGetDevice",
                "cuCtxGetCurrent",
                "cudaLaunchKernel",
                "cuLaunchKernel",
            ],
        ),
    ];
    for (api, inside, kept) in cases {
        let s = api_selection(api);
        let what = format!("CUPROF_API={api}");
        assert_eq!(s.switches["before"], off, "{what}");
        assert_eq!(s.switches["inside"], inside, "{what}");
        assert_eq!(s.switches["after"], off, "{what}");
        // Only the calls made inside the range, and of those only the kept ones.
        let want: BTreeMap<u64, (String, String)> = kept
            .iter()
            .map(|name| {
                let cat = if name.starts_with("cuda") {
                    "cuda_runtime"
                } else {
                    "cuda_driver"
                };
                let c = s.corr["inside"]["corr"][*name].as_u64().unwrap();
                (c, (cat.to_string(), name.to_string()))
            })
            .collect();
        assert_eq!(s.api, want, "{what}");
        assert_eq!(s.kernels, 2, "{what}");
    }
}

/// The syncs of events.py under the double playing CUPTI `version`, by correlation id, with
/// the correlation ids the program got.
fn event_syncs(version: &str) -> (BTreeMap<u64, Value>, Value) {
    let dir = TempDir::new(&format!("events{version}"));
    let (corr, _) = Run::python("events.py", &[], dir.path())
        .env("CUPTI_DOUBLE_VERSION", version)
        .ok_json();
    let trace = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    let syncs = events(&trace, "cuda_sync")
        .into_iter()
        .map(|e| (e["args"]["correlation"].as_u64().unwrap(), e.clone()))
        .collect();
    (syncs, corr)
}

/// Event syncs name the stream and the cudaEventRecord call of the event they waited on, from
/// CUPTI's CUDA_EVENT records (CudaEvent before CUDA 12.8, CudaEvent2 since), as Kineto does.
#[test]
fn event_syncs_name_where_their_event_was_recorded() {
    for version in ["13", "12", "25"] {
        let (syncs, corr) = event_syncs(version);
        let waits = |c: &str| -> (Value, Value, Value, Value) {
            let e = &syncs[&corr[c].as_u64().unwrap()];
            let a = &e["args"];
            (
                e["name"].clone(),
                a["wait_on_stream"].clone(),
                a["wait_on_cuda_event_record_corr_id"].clone(),
                a["wait_on_cuda_event_id"].clone(),
            )
        };
        let json = |v: i64| Value::from(v);
        // The stream wait on event 4: recorded on stream 7.
        assert_eq!(
            waits("wait4"),
            (
                "Stream Wait Event".into(),
                json(7),
                corr["record4"].clone(),
                json(4)
            ),
            "CUPTI {version}"
        );
        // Event 3 was recorded twice: the later recording, on stream 9, is the one waited on.
        assert_eq!(
            waits("sync3"),
            (
                "Event Sync".into(),
                json(9),
                corr["record3"].clone(),
                json(3)
            ),
            "CUPTI {version}"
        );
        // Event 5 was never recorded: -1, as Kineto writes it.
        assert_eq!(
            waits("sync5"),
            ("Event Sync".into(), json(-1), json(-1), json(5)),
            "CUPTI {version}"
        );
        assert_eq!(syncs.len(), 3);
    }
}

/// The traced workload, read back by `cuprof report`: its pageable copy (1 MiB from pageable
/// memory, 20 µs), its stream synchronization (the double's call lasts the 50 µs sync and 1 µs
/// more) and its one kernel shorter than its launch (the 1 µs `weird` kernel; the double's
/// launches last 2 µs) are findings, from what the tracer wrote.
#[test]
fn report_finds_the_workloads_pageable_copy_and_sync() {
    let dir = TempDir::new("workload-findings");
    let (_corr, _) = Run::python("workload.py", &[], dir.path()).ok_json();
    let s = report_summary(&dir.path().join("t-rank0.trace.json.gz"), dir.path());
    let found = |rule: &str| -> Value {
        let f = s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == rule)
            .unwrap_or_else(|| panic!("no {rule} in {}", s["findings"]))
            .clone();
        let mut f = f.as_object().unwrap().clone();
        f.remove("share_of_wall");
        f.remove("sources");
        Value::Object(f)
    };
    assert_eq!(
        found("pageable_copy"),
        serde_json::json!({"rule": "pageable_copy", "count": 1, "time_ns": 20_000, "longest_ns": 20_000, "bytes": 1 << 20})
    );
    assert_eq!(
        found("synchronize"),
        serde_json::json!({"rule": "synchronize", "count": 1, "time_ns": 51_000, "longest_ns": 51_000})
    );
    assert_eq!(
        found("short_kernels"),
        serde_json::json!({"rule": "short_kernels", "count": 1, "time_ns": 2_000, "longest_ns": 2_000, "gpu_ns": 1_000})
    );
    // Its NVTX ranges (the real NVTX3 loader's, timed by cuprof's clock): one of each name,
    // `train` at least as long as `inner`, which it encloses.
    let mut ranges: Vec<(&str, u64, i64)> = s["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let name = r["name"].as_str().unwrap();
            (
                name,
                r["count"].as_u64().unwrap(),
                r["total_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    ranges.sort();
    let names: Vec<(&str, u64)> = ranges.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(names, [("inner", 1), ("train", 1), ("worker", 1)]);
    assert!(ranges[1].2 >= ranges[0].2, "{}", s["ranges"]);
}
