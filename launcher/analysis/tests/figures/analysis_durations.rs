//! `cuprof report`'s tables of named durations: the CUDA API calls (`api_calls`, Nsight
//! Systems' `cuda_api_sum`) and the NVTX ranges and labels (`ranges`, its `nvtx_sum`), each on a
//! trace whose every event is known and on a real torch.profiler trace.

use std::path::Path;

use crate::analysis_support::*;
use serde_json::{json, Value};

/// (name, count, total, median, min, max) of each row of table `key`.
fn rows(s: &Value, key: &str) -> Vec<(String, u64, i64, f64, i64, i64)> {
    s[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["count"].as_u64().unwrap(),
                r["total_ns"].as_i64().unwrap(),
                r["median_ns"].as_f64().unwrap(),
                r["min_ns"].as_i64().unwrap(),
                r["max_ns"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn calls_by_name_with_nsys_figures() {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN, OTHER]);
    // Four launches of 1 µs (launch()), on two threads; two syncs of 3 and 8 µs; one copy
    // call of 1 µs.
    for (i, tid) in [MAIN, MAIN, OTHER, MAIN].into_iter().enumerate() {
        let at = i as i64 * 100_000;
        t.launch("k", tid, at, 0, 7, at + 10_000, 5_000);
    }
    let c = t.corr();
    t.runtime("cudaStreamSynchronize", MAIN, 500_000, 3_000, c);
    let c = t.corr();
    t.runtime("cudaStreamSynchronize", MAIN, 600_000, 8_000, c);
    t.copy(
        "Memcpy HtoD (Pinned -> Device)",
        MAIN,
        700_000,
        0,
        7,
        710_000,
        2_000,
        64,
    );
    let dir = tempdir("api-calls");
    let trace = dir.join("t-rank0.trace.json.gz");
    t.write_gz(&trace);
    let (stdout, s) = report(&trace, &dir.join("out"));
    let n = |s: &str| s.to_string();
    assert_eq!(
        rows(&s, "api_calls"),
        [
            (n("cudaStreamSynchronize"), 2, 11_000, 5_500.0, 3_000, 8_000),
            (n("cudaLaunchKernel"), 4, 4_000, 1_000.0, 1_000, 1_000),
            (n("cudaMemcpyAsync"), 1, 1_000, 1_000.0, 1_000, 1_000),
        ]
    );
    assert_eq!(s["api_calls"][0]["share"], json!(11.0 / 16.0));
    assert_eq!(s["api_calls"][0]["mean_ns"], json!(5_500.0));
    assert_eq!(
        section_lines(&stdout, "CUDA API calls"),
        [
            "  #  call                   count      total  share      mean    median       min       max",
            "  1  cudaStreamSynchronize      2  11.000 µs  68.8%  5.500 µs  5.500 µs  3.000 µs  8.000 µs",
            "  2  cudaLaunchKernel           4   4.000 µs  25.0%  1.000 µs  1.000 µs  1.000 µs  1.000 µs",
            "  3  cudaMemcpyAsync            1   1.000 µs   6.2%  1.000 µs  1.000 µs  1.000 µs  1.000 µs",
        ]
    );
}

/// AlexNet's torch.profiler trace from HTA's test data: 22 call names. The expected figures
/// were computed apart from cuprof, from the JSON with Python's `Decimal` and
/// `statistics.median`.
#[test]
fn a_real_torch_profiler_trace() {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/hta/alexnet-old-kineto.trace.json.gz");
    let dir = tempdir("api-calls-real");
    let (_, s) = report(&trace, &dir.join("out"));
    let all = rows(&s, "api_calls");
    assert_eq!(all.len(), 22);
    let total: i64 = all.iter().map(|r| r.2).sum();
    assert_eq!(total, 42_297_605_000);
    let n = |s: &str| s.to_string();
    let pick = |name: &str| all.iter().find(|r| r.0 == name).cloned().unwrap();
    assert_eq!(
        all[0],
        (
            n("cudaDeviceGetStreamPriorityRange"),
            11,
            29_927_381_000,
            0.0,
            0,
            29_927_377_000
        )
    );
    assert_eq!(
        pick("cudaLaunchKernel"),
        (
            n("cudaLaunchKernel"),
            79,
            3_056_561_000,
            9_000.0,
            4_000,
            3_055_567_000
        )
    );
    assert_eq!(
        pick("cudaMemcpyAsync"),
        (
            n("cudaMemcpyAsync"),
            16,
            56_991_000,
            34_500.0,
            9_000,
            34_949_000
        )
    );
    assert_eq!(
        pick("cudaStreamSynchronize"),
        (
            n("cudaStreamSynchronize"),
            16,
            559_000,
            11_000.0,
            9_000,
            95_000
        )
    );
    assert_eq!(
        pick("cudaEventRecord"),
        (n("cudaEventRecord"), 30, 89_000, 1_500.0, 0, 24_000)
    );
}

#[test]
fn no_calls_no_table() {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    t.kernel("k", 0, 7, 0, 1_000, 1);
    let dir = tempdir("api-calls-none");
    let trace = dir.join("t-rank0.trace.json.gz");
    t.write_gz(&trace);
    let (stdout, s) = report(&trace, &dir.join("out"));
    assert!(s.get("api_calls").is_none());
    assert!(!stdout.contains("CUDA API calls"), "{stdout}");
    assert!(s.get("ranges").is_none());
    assert!(!stdout.contains("NVTX ranges and labels"), "{stdout}");
}

/// The text of `report`'s section `title`, line by line.
fn section_lines(stdout: &str, title: &str) -> Vec<String> {
    stdout
        .split(&format!("== {title} ==\n"))
        .nth(1)
        .and_then(|r| r.split("\n\n").next())
        .expect("the section")
        .lines()
        .map(str::to_string)
        .collect()
}

/// Two ranks' ranges and labels by name over both, the steps left out, a nested range counted
/// with its own duration.
#[test]
fn ranges_by_name_with_nsys_figures() {
    let dir = tempdir("ranges");
    for rank in 0..2 {
        let mut t = Trace::new(rank, 2);
        t.metadata(&[0], &[(0, 7)], &[MAIN, OTHER]);
        t.step(1, MAIN, 0, 1_000_000, None);
        t.step(2, MAIN, 1_000_000, 1_000_000, None);
        // forward: 2 and 4 µs on rank 0, 9 µs on rank 1; attention inside each forward, 1 µs.
        let forwards: &[i64] = if rank == 0 { &[2_000, 4_000] } else { &[9_000] };
        for (i, &dur) in forwards.iter().enumerate() {
            let at = 10_000 + i as i64 * 1_000_000;
            t.range("forward", MAIN, at, dur);
            t.range("attention", MAIN, at + 500, 1_000);
        }
        if rank == 1 {
            t.range("data_load", OTHER, 5_000, 30_000);
        }
        t.write_gz(&dir.join(format!("t-rank{rank}.trace.json.gz")));
    }
    let (stdout, s) = report(&dir, &dir.join("out"));
    let n = |s: &str| s.to_string();
    assert_eq!(
        rows(&s, "ranges"),
        [
            (n("data_load"), 1, 30_000, 30_000.0, 30_000, 30_000),
            (n("forward"), 3, 15_000, 4_000.0, 2_000, 9_000),
            (n("attention"), 3, 3_000, 1_000.0, 1_000, 1_000),
        ]
    );
    assert_eq!(s["ranges"][1]["share"], json!(15.0 / 48.0));
    assert_eq!(s["ranges"][1]["mean_ns"], json!(5_000.0));
    assert_eq!(
        section_lines(&stdout, "NVTX ranges and labels"),
        [
            "  #  range      count      total  share       mean     median        min        max",
            "  1  data_load      1  30.000 µs  62.5%  30.000 µs  30.000 µs  30.000 µs  30.000 µs",
            "  2  forward        3  15.000 µs  31.2%   5.000 µs   4.000 µs   2.000 µs   9.000 µs",
            "  3  attention      3   3.000 µs   6.2%   1.000 µs   1.000 µs   1.000 µs   1.000 µs",
        ]
    );
}

/// A torch.profiler trace of a recommendation model's training step from HTA's test data: 32
/// `record_function` labels, two steps. The expected figures were computed apart from cuprof,
/// from the JSON with Python's `Decimal` and `statistics.median`.
#[test]
fn a_real_torch_profiler_traces_labels() {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/hta/sampled-rank0.trace.json.gz");
    let dir = tempdir("ranges-real");
    let (_, s) = report(&trace, &dir.join("out"));
    let all = rows(&s, "ranges");
    assert_eq!(all.len(), 32);
    assert_eq!(all.iter().map(|r| r.2).sum::<i64>(), 1_938_046_000);
    assert!(all.iter().all(|r| !r.0.starts_with("ProfilerStep#")));
    let n = |s: &str| s.to_string();
    let pick = |name: &str| all.iter().find(|r| r.0 == name).cloned().unwrap();
    assert_eq!(
        all[0],
        (
            n("## backward ##"),
            2,
            464_139_000,
            232_069_500.0,
            229_175_000,
            234_964_000
        )
    );
    assert_eq!(
        pick("nccl:all_to_all"),
        (
            n("nccl:all_to_all"),
            4,
            929_000,
            218_000.0,
            187_000,
            306_000
        )
    );
    assert_eq!(
        pick("nccl:all_reduce"),
        (n("nccl:all_reduce"), 4, 385_000, 98_000.0, 76_000, 113_000)
    );
    assert_eq!(
        pick("## encoder fp8 None ##"),
        (
            n("## encoder fp8 None ##"),
            4,
            541_000,
            136_000.0,
            119_000,
            150_000
        )
    );
}
