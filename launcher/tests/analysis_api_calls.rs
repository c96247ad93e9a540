//! `cuprof report`'s CUDA API table (`api_calls`, Nsight Systems' `cuda_api_sum`): on a trace
//! whose every call is known, and on a real torch.profiler trace.

mod analysis_support;

use std::path::Path;

use analysis_support::*;
use serde_json::{json, Value};

/// (name, count, total, median, min, max) of each row.
fn rows(s: &Value) -> Vec<(String, u64, i64, f64, i64, i64)> {
    s["api_calls"]
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
        rows(&s),
        [
            (n("cudaStreamSynchronize"), 2, 11_000, 5_500.0, 3_000, 8_000),
            (n("cudaLaunchKernel"), 4, 4_000, 1_000.0, 1_000, 1_000),
            (n("cudaMemcpyAsync"), 1, 1_000, 1_000.0, 1_000, 1_000),
        ]
    );
    assert_eq!(s["api_calls"][0]["share"], json!(11.0 / 16.0));
    assert_eq!(s["api_calls"][0]["mean_ns"], json!(5_500.0));
    let section = stdout
        .split("== CUDA API calls ==\n")
        .nth(1)
        .and_then(|r| r.split("\n\n").next())
        .expect("an API section");
    assert_eq!(
        section.lines().collect::<Vec<_>>(),
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
        .join("../tests/data/hta/alexnet-old-kineto.trace.json.gz");
    let dir = tempdir("api-calls-real");
    let (_, s) = report(&trace, &dir.join("out"));
    let all = rows(&s);
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
}
