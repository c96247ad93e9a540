//! `cuprof report` on traces with known content: every number in summary.json is asserted.

use crate::analysis_support::*;
use serde_json::Value;

fn report(dir: &std::path::Path, inputs: &[&std::path::Path]) -> (String, Value) {
    let out = dir.join("out");
    let mut args = vec!["report".to_string()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(["-o".to_string(), out.display().to_string()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let stdout = cuprof_ok(&a);
    assert!(out.join("report.md").exists());
    (stdout, read_json(&out.join("summary.json")))
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn single_rank_every_section() {
    let dir = tempdir("report1");
    let trace = dir.join("run-rank0.trace.json.gz");
    sample().write_gz(&trace);
    let (stdout, s) = report(&dir, &[&trace]);

    // Steps: 1, 2, 3, 4 ms.
    let st = &s["steps"];
    assert_eq!(i(&st["count"]), 4);
    assert_eq!(st["mean_ns"], 2_500_000.0);
    assert_eq!(st["p50_ns"], 2_500_000.0);
    assert_eq!(st["p90_ns"], 3_700_000.0);
    assert_eq!(st["p99_ns"], 3_970_000.0);
    assert_eq!(i(&st["min_ns"]), 1_000_000);
    assert_eq!(i(&st["max_ns"]), 4_000_000);
    assert_eq!(i(&st["work_steps"]), 3);
    assert_eq!(st["work"], 300.0);
    assert_eq!(st["throughput_per_s"], 50_000.0);

    // Breakdown of device 0.
    let d = &s["ranks"][0]["devices"][0];
    assert_eq!(i(&d["device"]), 0);
    assert_eq!(i(&d["window_start_ns"]), 100_000);
    assert_eq!(i(&d["window_end_ns"]), 3_000_000);
    assert_eq!(i(&d["wall_ns"]), 2_900_000);
    assert_eq!(i(&d["compute_ns"]), 1_100_000);
    assert_eq!(i(&d["communication_ns"]), 400_000);
    assert_eq!(i(&d["memcpy_ns"]), 100_000);
    assert_eq!(i(&d["memset_ns"]), 50_000);
    assert_eq!(i(&d["idle_ns"]), 1_250_000);
    assert_eq!(i(&d["idle_sync_wait_ns"]), 550_000);
    assert_eq!(i(&d["idle_host_bound_ns"]), 700_000);
    assert_eq!(i(&d["busy_ns"]), 1_650_000);
    assert_eq!(i(&d["communication_total_ns"]), 500_000);
    assert_eq!(i(&d["comm_compute_overlap_ns"]), 100_000);
    let parts: i64 = [
        "compute_ns",
        "communication_ns",
        "memcpy_ns",
        "memset_ns",
        "idle_ns",
    ]
    .iter()
    .map(|k| i(&d[k]))
    .sum();
    assert_eq!(parts, i(&d["wall_ns"]));
    assert_eq!(s["gpu"], s["ranks"][0]["gpu"]);

    // Top kernels: per-kernel sums, by total.
    let k = s["top_kernels"].as_array().unwrap();
    let names: Vec<&str> = k.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "gemm",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "flash_attn"
        ]
    );
    assert_eq!(i(&k[0]["count"]), 3);
    assert_eq!(i(&k[0]["total_ns"]), 900_000);
    assert_eq!(k[0]["mean_ns"], 300_000.0);
    assert_eq!(k[0]["share"], 0.5625);
    assert_eq!(k[1]["share"], 0.3125);
    assert_eq!(k[2]["share"], 0.125);

    // NVTX buckets through correlation ids; thread 200's range captures nothing.
    let b: Vec<(String, i64, i64)> = s["nvtx_buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                i(&r["count"]),
                i(&r["total_ns"]),
            )
        })
        .collect();
    assert_eq!(
        b,
        [
            ("backward".to_string(), 2, 800_000),
            ("(no NVTX range)".to_string(), 2, 400_000),
            ("forward".to_string(), 1, 300_000),
            ("attention".to_string(), 1, 200_000),
            ("(no launch record)".to_string(), 1, 50_000),
        ]
    );

    // Copies and sets.
    let m = s["memcpy"].as_array().unwrap();
    assert_eq!(m[0]["kind"], "HtoD (Pageable -> Device)");
    assert_eq!(i(&m[0]["bytes"]), 1_000_000);
    assert_eq!(m[0]["bandwidth_gbps"], 10.0);
    assert_eq!(m[1]["kind"], "Memset (Device)");
    assert_eq!(m[1]["bandwidth_gbps"], 4096.0 / 50_000.0);

    // Dropped records.
    assert_eq!(i(&s["dropped"]["dropped_channel"]), 3);
    assert_eq!(i(&s["dropped"]["dropped_cupti"]), 2);
    assert_eq!(i(&s["dropped"]["kernels_without_timestamps"]), 1);
    assert_eq!(i(&s["dropped"]["files_without_stats"]), 0);

    // One rank: imbalance 1.
    assert_eq!(s["cross_rank"]["busy_imbalance"], 1.0);
    assert!(s["files"][0]["truncated"].is_null());

    // The terminal table shows the same.
    assert!(
        stdout.contains("4 steps, mean 2.500 ms, p50 2.500 ms, p90 3.700 ms, p99 3.970 ms"),
        "{stdout}"
    );
    assert!(stdout.contains("throughput 50000.0 tokens/s"), "{stdout}");
    assert!(stdout.contains("5 records dropped"), "{stdout}");
    let md = std::fs::read_to_string(dir.join("out/report.md")).unwrap();
    assert!(
        md.contains("| 1 | gemm | 3 | 900.000 µs | 300.000 µs | 300.000 µs | 300.000 µs | 56.2% |"),
        "{md}"
    );
}

#[test]
fn plain_json_and_directory_input() {
    let dir = tempdir("report2");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    std::fs::write(traces.join("run-rank0.trace.json"), sample().json()).unwrap();
    // Not a trace name: ignored when trace files are present.
    std::fs::write(traces.join("notes.json"), "{}").unwrap();
    let (_, s) = report(&dir, &[&traces]);
    assert_eq!(s["files"].as_array().unwrap().len(), 1);
    assert_eq!(i(&s["ranks"][0]["devices"][0]["compute_ns"]), 1_100_000);
}

#[test]
fn cut_short_file_is_read_up_to_the_cut() {
    let dir = tempdir("report3");
    let trace = dir.join("cut-rank0.trace.json.gz");
    let t = sample();
    // Keep the metadata, steps, ranges, and the memcpy with its runtime call.
    let keep = t
        .events
        .iter()
        .position(|e| e.contains("\"flash_attn\""))
        .unwrap();
    t.write_cut(&trace, keep);
    let (stdout, s) = report(&dir, &[&trace]);
    let tr = s["files"][0]["truncated"].as_str().unwrap();
    assert!(tr.contains("inside the traceEvents"), "{tr}");
    assert!(
        tr.contains(&format!("after {keep} complete events")),
        "{tr}"
    );
    assert_eq!(i(&s["files"][0]["events"]), keep as i64);
    assert_eq!(i(&s["steps"]["count"]), 4);
    assert_eq!(i(&s["gpu"]["memcpy_ns"]), 100_000);
    assert_eq!(i(&s["gpu"]["compute_ns"]), 0);
    assert_eq!(i(&s["dropped"]["files_without_stats"]), 1);
    assert!(stdout.contains("is cut short"), "{stdout}");
}

#[test]
fn errors_name_the_file_and_what_to_do() {
    let dir = tempdir("report4");
    let bad = dir.join("bad.trace.json");
    std::fs::write(&bad, "not json").unwrap();
    let out = cuprof(&["report", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.trace.json") && err.contains("not a Chrome trace"),
        "{err}"
    );
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = cuprof(&["report", empty.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no trace files"), "{err}");
}

/// Each kernel's spread, as Nsight Systems' `cuda_gpu_kern_sum` gives it: median (the mean of
/// the two middle durations for an even count), min and max.
#[test]
fn kernels_have_their_median_min_and_max() {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    let mut at = 0;
    for dur in [100_000, 400_000, 250_000, 50_000] {
        t.launch("gemm", MAIN, at, 0, 7, at + 10_000, dur);
        at += 1_000_000;
    }
    t.launch("relu", MAIN, at, 0, 7, at + 10_000, 7_000);
    let dir = tempdir("kernel-spread");
    let trace = dir.join("t-rank0.trace.json.gz");
    t.write_gz(&trace);
    let (stdout, s) = report(&dir, &[&trace]);
    let spread: Vec<(String, f64, i64, i64)> = s["top_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap().to_string(),
                k["median_ns"].as_f64().unwrap(),
                k["min_ns"].as_i64().unwrap(),
                k["max_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        spread,
        [
            ("gemm".to_string(), 175_000.0, 50_000, 400_000),
            ("relu".to_string(), 7_000.0, 7_000, 7_000),
        ]
    );
    assert!(
        stdout.contains(
            "  1  gemm        4  800.000 µs  200.000 µs  175.000 µs  400.000 µs  99.1%\n"
        ),
        "{stdout}"
    );
}

/// Kind, count, median, min and max size, median, min and max time of a copy row.
type CopySpread = (String, u64, f64, i64, i64, f64, i64, i64);

fn copy_spreads(s: &Value) -> Vec<CopySpread> {
    s["memcpy"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["kind"].as_str().unwrap().to_string(),
                m["count"].as_u64().unwrap(),
                m["median_bytes"].as_f64().unwrap(),
                i(&m["min_bytes"]),
                i(&m["max_bytes"]),
                m["median_ns"].as_f64().unwrap(),
                i(&m["min_ns"]),
                i(&m["max_ns"]),
            )
        })
        .collect()
}

/// Each copy kind's size and time spread, as `nsys stats`' `cuda_gpu_mem_size_sum` and
/// `cuda_gpu_mem_time_sum` give them: three copies of 1,000, 3,000 and 8,000 bytes taking 1, 2
/// and 4 µs.
#[test]
fn copies_have_nsys_size_and_time_spreads() {
    let dir = tempdir("report-copies");
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    for (k, (bytes, dur)) in [(1_000, 1_000), (8_000, 4_000), (3_000, 2_000)]
        .into_iter()
        .enumerate()
    {
        let at = k as i64 * 100_000;
        t.copy(
            "Memcpy HtoD (Pinned -> Device)",
            MAIN,
            at,
            0,
            7,
            at + 10_000,
            dur,
            bytes,
        );
    }
    let trace = dir.join("t-rank0.trace.json.gz");
    t.write_gz(&trace);
    let (stdout, s) = report(&dir, &[&trace]);
    assert_eq!(
        copy_spreads(&s),
        [(
            "HtoD (Pinned -> Device)".to_string(),
            3,
            3_000.0,
            1_000,
            8_000,
            2_000.0,
            1_000,
            4_000
        )]
    );
    assert_eq!(i(&s["memcpy"][0]["bytes"]), 12_000);
    assert_eq!(s["memcpy"][0]["bandwidth_gbps"], 12_000.0 / 7_000.0);
    assert!(
        stdout.contains(
            "  HtoD (Pinned -> Device)      3  11.7 KiB  7.000 µs  1.71      2.9 KiB   7.8 KiB     2.000 µs  4.000 µs\n"
        ),
        "{stdout}"
    );
}

/// AlexNet's torch.profiler trace from HTA's test data: 16 pageable copies and 3 sets. The
/// expected figures were computed apart from cuprof, from the JSON with Python's `Decimal` and
/// `statistics.median`.
#[test]
fn a_real_traces_copy_spreads() {
    let dir = tempdir("report-copies-real");
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/hta/alexnet-old-kineto.trace.json.gz");
    let (_, s) = report(&dir, &[&trace]);
    assert_eq!(
        copy_spreads(&s),
        [
            (
                "HtoD (Pageable -> Device)".to_string(),
                16,
                54_656.0,
                256,
                150_994_944,
                7_500.0,
                1_000,
                34_780_000
            ),
            (
                "Memset (Device)".to_string(),
                3,
                512.0,
                512,
                20_736,
                2_000.0,
                2_000,
                4_000
            ),
        ]
    );
    assert_eq!(i(&s["memcpy"][0]["bytes"]), 244_403_360);
    assert_eq!(i(&s["memcpy"][0]["total_ns"]), 55_503_000);
}
