//! `cuprof report`'s findings (what to look at first): on a trace whose every figure is known,
//! on real torch.profiler traces, and against HTA's short-kernel statistics.

use std::path::Path;

use crate::analysis_support::*;
use serde_json::{json, Value};

const US: i64 = 1000;

/// One thread's forward pass, times in µs (device 0, stream 7):
/// * `aten::mm` (model.py line 30) 0-10 launches `gemm` at 2 (a 1 µs call) run 20-20.5: shorter
///   than its launch; a second `aten::mm` 12-22 launches `gemm` run 20.5-50.5;
/// * `aten::copy_` (line 50) 60-70 copies 4 KiB from pageable memory, 80-90;
/// * `aten::item` (line 60) 100-500 holds `aten::_local_scalar_dense` (no stack of its own)
///   101-499, which copies 4 KiB back to pageable memory (110-115) and calls
///   `cudaStreamSynchronize` 104-404;
/// * `cudaDeviceSynchronize` 520-620, outside every operator;
/// * `aten::relu` (line 70) 690-695 launches `relu` run 700-720.
///
/// The device's gaps: 50.5-80 (29.5 µs host-bound), 90-110 (20 µs, 6 of them inside the
/// stream sync: 14 host-bound), 115-700 (585 µs, 289 + 100 inside syncs: 196 host-bound).
fn forward_pass() -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    let line = |n: u32| {
        format!("/site-packages/torch/nn/modules/module.py(1751): _call_impl;model.py({n}): forward;train.py(9): <module>")
    };
    // External ids from 100: none equals a launch's correlation id (from 1).
    t.cpu_op("aten::mm", MAIN, 0, 10 * US, 100, None, Some(&line(30)));
    t.launch_in(
        100,
        "cudaLaunchKernel",
        "kernel",
        "gemm",
        MAIN,
        2 * US,
        20 * US,
        500,
        true,
    );
    t.cpu_op(
        "aten::mm",
        MAIN,
        12 * US,
        10 * US,
        101,
        None,
        Some(&line(30)),
    );
    t.launch_in(
        101,
        "cudaLaunchKernel",
        "kernel",
        "gemm",
        MAIN,
        14 * US,
        20_500,
        30 * US,
        true,
    );
    t.cpu_op(
        "aten::copy_",
        MAIN,
        60 * US,
        10 * US,
        102,
        None,
        Some(&line(50)),
    );
    t.launch_in(
        102,
        "cudaMemcpyAsync",
        "gpu_memcpy",
        "Memcpy HtoD (Pageable -> Device)",
        MAIN,
        61 * US,
        80 * US,
        10 * US,
        true,
    );
    t.cpu_op(
        "aten::item",
        MAIN,
        100 * US,
        400 * US,
        103,
        None,
        Some(&line(60)),
    );
    t.cpu_op(
        "aten::_local_scalar_dense",
        MAIN,
        101 * US,
        398 * US,
        104,
        None,
        None,
    );
    t.launch_in(
        104,
        "cudaMemcpyAsync",
        "gpu_memcpy",
        "Memcpy DtoH (Device -> Pageable)",
        MAIN,
        102 * US,
        110 * US,
        5 * US,
        true,
    );
    let c = t.corr();
    t.runtime("cudaStreamSynchronize", MAIN, 104 * US, 300 * US, c);
    let c = t.corr();
    t.runtime("cudaDeviceSynchronize", MAIN, 520 * US, 100 * US, c);
    t.cpu_op(
        "aten::relu",
        MAIN,
        690 * US,
        5 * US,
        105,
        None,
        Some(&line(70)),
    );
    t.launch_in(
        105,
        "cudaLaunchKernel",
        "kernel",
        "relu",
        MAIN,
        691 * US,
        700 * US,
        20 * US,
        true,
    );
    t
}

fn source(op: &str, line: Option<&str>, count: u64, time_ns: i64, bytes: Option<i64>) -> Value {
    let mut v = json!({"operator": op, "count": count, "time_ns": time_ns});
    if let Some(l) = line {
        v["call_site"] = json!(l);
    }
    if let Some(b) = bytes {
        v["bytes"] = json!(b);
    }
    v
}

#[test]
fn each_finding_names_its_operators_and_python_lines() {
    let dir = tempdir("findings");
    let trace = dir.join("fwd-rank0.trace.json.gz");
    forward_pass().write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    let wall = 700 * US;
    assert_eq!(s["gpu"]["wall_ns"], json!(wall));
    let (l30, l50, l60, l70) = (
        Some("model.py(30): forward"),
        Some("model.py(50): forward"),
        Some("model.py(60): forward"),
        Some("model.py(70): forward"),
    );
    let share = |ns: i64| ns as f64 / wall as f64;
    let expected = json!([
        {
            "rule": "synchronize", "count": 2, "time_ns": 400 * US,
            "share_of_wall": share(400 * US), "longest_ns": 300 * US,
            "sources": [
                source("aten::_local_scalar_dense", l60, 1, 300 * US, None),
                source("(no operator)", None, 1, 100 * US, None),
            ],
        },
        {
            "rule": "host_bound_idle", "count": 3, "time_ns": 239_500,
            "share_of_wall": share(239_500), "longest_ns": 196 * US,
            "sources": [
                source("aten::relu", l70, 1, 196 * US, None),
                source("aten::copy_", l50, 1, 29_500, None),
                source("aten::_local_scalar_dense", l60, 1, 14 * US, None),
            ],
        },
        {
            "rule": "pageable_copy", "count": 2, "time_ns": 15 * US,
            "share_of_wall": share(15 * US), "longest_ns": 10 * US, "bytes": 8192,
            "sources": [
                source("aten::copy_", l50, 1, 10 * US, Some(4096)),
                source("aten::_local_scalar_dense", l60, 1, 5 * US, Some(4096)),
            ],
        },
        {
            "rule": "short_kernels", "count": 1, "time_ns": US,
            "share_of_wall": share(US), "longest_ns": US, "gpu_ns": 500,
            "sources": [source("aten::mm", l30, 1, US, None)],
        },
    ]);
    assert_eq!(s["findings"], expected);
    // The host-bound gaps add up to the breakdown's host-bound idle time.
    assert_eq!(s["gpu"]["idle_host_bound_ns"], json!(239_500));

    let section = stdout
        .split("== What to look at ==\n")
        .nth(1)
        .and_then(|r| r.split("\n== ").next())
        .expect("a findings section");
    let headlines: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(
        headlines,
        [
            "1. Host synchronization: 2 synchronizing calls blocked the CPU for 400.000 µs (57.1% of the GPU window), the longest 300.000 µs.",
            "2. GPU waiting for the host: the GPU sat idle 239.500 µs (34.2% of the GPU window) waiting for work from the host, in 3 gaps, the longest 196.000 µs.",
            "3. Copies with pageable host memory: 2 copies of 8.0 KiB to or from pageable host memory took 15.000 µs of GPU time (2.1% of the GPU window), the longest 10.000 µs.",
            "4. Kernels shorter than their launch: 1 kernel ran 500 ns on the GPU and took 1.000 µs of CPU time to launch (0.1% of the GPU window).",
        ]
    );
    let table: Vec<&str> = section.lines().skip(1).take(3).collect();
    assert_eq!(
        table,
        [
            "  operator                   Python line            count  CPU blocked",
            "  aten::_local_scalar_dense  model.py(60): forward      1   300.000 µs",
            "  (no operator)                                         1   100.000 µs",
        ]
    );
    assert!(
        section.contains("`torch.cuda.set_sync_debug_mode(\"warn\")`"),
        "{section}"
    );
    assert!(
        section.contains("`DataLoader(pin_memory=True)`"),
        "{section}"
    );
    // The section comes before the tables of kernels and operators.
    let at = |h: &str| stdout.find(h).unwrap_or_else(|| panic!("{h} in {stdout}"));
    assert!(at("== GPU time ==") < at("== What to look at =="));
    assert!(at("== What to look at ==") < at("== Top kernels =="));

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## What to look at\n\n**1. Host synchronization**: 2 synchronizing calls blocked the CPU for 400.000 µs"), "{md}");
    assert!(
        md.contains("| aten::copy_ | model.py(50): forward | 1 | 10.000 µs | 4.0 KiB |"),
        "{md}"
    );
}

#[test]
fn without_operators_everything_is_under_no_operator() {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    t.launch("k", MAIN, 0, 0, 7, 10 * US, 400);
    t.copy(
        "Memcpy HtoD (Pageable -> Device)",
        MAIN,
        20 * US,
        0,
        7,
        30 * US,
        2 * US,
        100,
    );
    let dir = tempdir("findings-no-ops");
    let trace = dir.join("t-rank0.trace.json.gz");
    t.write_gz(&trace);
    let out = dir.join("out");
    let (_, s) = report(&trace, &out);
    let rules: Vec<(&str, &Value)> = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["rule"].as_str().unwrap(), &f["sources"]))
        .collect();
    // Gap 10.4-30 µs; copy 2 µs; the kernel ran 400 ns of its 1 µs launch.
    assert_eq!(
        rules,
        [
            (
                "host_bound_idle",
                &json!([source("(no operator)", None, 1, 19_600, None)])
            ),
            (
                "pageable_copy",
                &json!([source("(no operator)", None, 1, 2 * US, Some(100))])
            ),
            (
                "short_kernels",
                &json!([source("(no operator)", None, 1, US, None)])
            ),
        ]
    );
}

#[test]
fn a_trace_with_nothing_to_flag_has_no_findings() {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    t.launch("k", MAIN, 0, 0, 7, 10 * US, 400 * US);
    t.launch("k", MAIN, 5 * US, 0, 7, 410 * US, 400 * US);
    let dir = tempdir("findings-none");
    let trace = dir.join("t-rank0.trace.json.gz");
    t.write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    assert!(s.get("findings").is_none(), "{}", s["findings"]);
    assert!(!stdout.contains("What to look at"), "{stdout}");
}

/// The HTA test data's real torch.profiler traces (AlexNet on one GPU, and a sampled rank of a
/// large model): what each finding counts there. The expected figures were computed apart from
/// cuprof, from the JSON with Python's `Decimal`: the host-bound gaps (the device's gaps less
/// the sync calls and `cuda_sync` events in them) and the pageable copies' `bytes`.
#[test]
fn real_torch_profiler_traces() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/hta");
    let dir = tempdir("findings-real");
    let summary = |name: &str| {
        let out = dir.join(name);
        let trace = data.join(format!("{name}.trace.json.gz"));
        report(&trace, &out).1
    };
    let figures = |s: &Value| -> Vec<(String, u64, i64, Option<i64>, String)> {
        s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["rule"].as_str().unwrap().to_string(),
                    f["count"].as_u64().unwrap(),
                    f["time_ns"].as_i64().unwrap(),
                    f["bytes"].as_i64(),
                    f["sources"][0]["operator"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let s = summary("alexnet-old-kineto");
    let f = |r: &str, n: u64, t: i64, b: Option<i64>, op: &str| {
        (r.to_string(), n, t, b, op.to_string())
    };
    assert_eq!(
        figures(&s),
        [
            f(
                "host_bound_idle",
                86,
                12_853_919_000,
                None,
                "aten::cudnn_convolution"
            ),
            f(
                "pageable_copy",
                16,
                55_503_000,
                Some(244_403_360),
                "aten::copy_"
            ),
            f("synchronize", 21, 1_497_000, None, "(no operator)"),
            f("short_kernels", 12, 164_000, None, "aten::native_dropout"),
        ]
    );
    assert_eq!(s["gpu"]["idle_host_bound_ns"], json!(12_853_919_000i64));
    let s = summary("sampled-rank0");
    assert_eq!(
        figures(&s),
        [
            f("host_bound_idle", 930, 675_191_000, None, "aten::mm"),
            f("short_kernels", 250, 1_999_000, None, "aten::mul"),
            f("pageable_copy", 24, 81_000, Some(22_531), "aten::copy_"),
        ]
    );
    assert_eq!(s["gpu"]["idle_host_bound_ns"], json!(675_191_000));
}

/// cuprof's short kernels are HTA's (`get_cuda_kernel_launch_stats`), kernel for kernel, on the
/// three real traces: tests/hta/short_kernels_with_hta.py compares count and times.
#[test]
fn short_kernels_agree_with_hta() {
    agrees_with_hta(
        "short_kernels_with_hta.py",
        "findings-hta",
        &[
            "cuprof and HTA agree on short kernels",
            "cuprof and HTA agree on kernel launches",
        ],
        |_, _| {},
    );
}

/// With several ranks each finding says how its cost spreads over them, every rank listed.
#[test]
fn several_ranks_each_finding_says_where_it_is_worst() {
    let dir = tempdir("findings-ranks");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    forward_pass().write_gz(&traces.join("fwd-rank0.trace.json.gz"));
    // Rank 1: one kernel, then a 50 µs device sync outside every operator.
    let mut t = Trace::new(1, 2);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    t.launch("k", MAIN, 0, 0, 7, 10 * US, 20 * US);
    let c = t.corr();
    t.runtime("cudaDeviceSynchronize", MAIN, 40 * US, 50 * US, c);
    t.write_gz(&traces.join("fwd-rank1.trace.json.gz"));
    let (stdout, s) = report(&traces, &dir.join("out"));
    let sync = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "synchronize")
        .unwrap();
    assert_eq!(
        sync["ranks"],
        json!([
            {"rank": 0, "count": 2, "time_ns": 400 * US},
            {"rank": 1, "count": 1, "time_ns": 50 * US},
        ])
    );
    let copies = s["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "pageable_copy")
        .unwrap();
    assert_eq!(
        copies["ranks"],
        json!([
            {"rank": 0, "count": 2, "time_ns": 15 * US},
            {"rank": 1, "count": 0, "time_ns": 0},
        ])
    );
    assert!(
        stdout.contains(
            "   per rank: the most on rank 0 (400.000 µs, 2x), the least on rank 1 (50.000 µs, 1x), median 225.000 µs.\n"
        ),
        "{stdout}"
    );
    // One rank: no per-rank figures.
    let (_, one) = report(&traces.join("fwd-rank0.trace.json.gz"), &dir.join("one"));
    assert!(one["findings"][0].get("ranks").is_none());
}

/// The driver's allocations and frees inside steps (not stream-ordered ones, not outside every
/// step); a trace without steps has no such finding.
#[test]
fn driver_allocations_inside_steps() {
    let build = |steps: bool| {
        let mut t = Trace::new(0, 1);
        t.metadata(&[0], &[(0, 7)], &[MAIN]);
        if steps {
            t.step(0, MAIN, 0, 1000 * US, None);
        }
        t.launch("k", MAIN, 5 * US, 0, 7, 10 * US, 20 * US);
        t.cpu_op(
            "aten::empty",
            MAIN,
            100 * US,
            50 * US,
            100,
            None,
            Some("model.py(7): forward"),
        );
        let mut call = |name: &str, at: i64, dur: i64| {
            let c = t.corr();
            t.runtime(name, MAIN, at, dur, c);
        };
        call("cudaMalloc", 110 * US, 30 * US);
        call("cudaFree", 300 * US, 80 * US);
        call("cudaMallocAsync", 400 * US, 5 * US);
        call("cudaMalloc", 1200 * US, 40 * US);
        t
    };
    let dir = tempdir("findings-alloc");
    for (steps, tag) in [(true, "steps"), (false, "no-steps")] {
        let trace = dir.join(format!("{tag}-rank0.trace.json.gz"));
        build(steps).write_gz(&trace);
        let (stdout, s) = report(&trace, &dir.join(tag));
        let found = s["findings"]
            .as_array()
            .map(|v| v.iter().find(|f| f["rule"] == "device_allocation").cloned())
            .unwrap_or_default();
        if !steps {
            assert_eq!(found, None);
            continue;
        }
        let f = found.expect("a device_allocation finding");
        assert_eq!(
            (&f["count"], &f["time_ns"], &f["longest_ns"]),
            (&json!(2), &json!(110 * US), &json!(80 * US))
        );
        assert_eq!(
            f["sources"],
            json!([
                source("(no operator)", None, 1, 80 * US, None),
                source(
                    "aten::empty",
                    Some("model.py(7): forward"),
                    1,
                    30 * US,
                    None
                ),
            ])
        );
        assert!(
            stdout.contains(". Device memory allocated or freed inside steps: 2 cudaMalloc/cudaFree-type calls inside steps took 110.000 µs of CPU time"),
            "{stdout}"
        );
    }
}
