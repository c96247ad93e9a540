//! A `cuprof export` dataset read by real engines, DuckDB and Spark (local mode), gives the
//! figures of `cuprof report` to the nanosecond: top kernels, GPU busy time per rank, step
//! latency per rank, the slowest rank of each step, and NCCL time under compute per rank.
//!
//! Needs the `duckdb` and `pyspark` Python packages (and a Java runtime for Spark):
//! `bash scripts/test.sh` installs scripts/python-requirements.txt into a virtual environment
//! and puts it first on PATH.

use std::path::Path;
use std::process::Command;

use crate::analysis_support::*;
use serde_json::{json, Value};

const US: i64 = 1000;

/// Rank `r` of two: 5 steps whose lengths differ by rank (rank 1 is slower in steps 1 and 3,
/// step 4 ties), each with a memcpy, two gemms on two streams that overlap, an all-reduce
/// partly under the second gemm, and odd nanoseconds everywhere.
fn rank_trace(r: i64) -> Trace {
    let mut t = Trace::new(r, 2);
    t.metadata(&[0], &[(0, 7), (0, 13), (0, 21)], &[MAIN]);
    let lens = [
        [
            900 * US + 1,
            1_100 * US + 7,
            1_000 * US,
            1_234 * US + 567,
            800 * US,
        ],
        [
            950 * US + 3,
            1_300 * US + 11,
            990 * US,
            1_500 * US + 1,
            800 * US,
        ],
    ];
    let mut now = 10 * US + r;
    for (k, len) in lens[r as usize].iter().enumerate() {
        let s = now;
        t.step(k as i64, MAIN, s, *len, Some(64.0));
        t.copy(
            "Memcpy HtoD (Pageable -> Device)",
            MAIN,
            s + US,
            0,
            21,
            s + 2 * US + 3,
            40 * US + 9,
            4_000_000,
        );
        t.launch(
            "gemm_big",
            MAIN,
            s + 3 * US,
            0,
            7,
            s + 50 * US,
            300 * US + 1 + r,
        );
        t.launch(
            "gemm_small",
            MAIN,
            s + 4 * US,
            0,
            13,
            s + 100 * US + 5,
            120 * US + 3,
        );
        t.launch(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            MAIN,
            s + 5 * US,
            0,
            13,
            s + 330 * US + 7,
            200 * US + 13 * (k as i64 + 1),
        );
        if k == 2 {
            t.launch("softmax", MAIN, s + 6 * US, 0, 7, s + 600 * US, 0);
        }
        now += len;
    }
    t
}

fn query(engine: &str, dataset: &Path) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/figures/export_query.py");
    let o = Command::new("python3")
        .arg(&script)
        .arg(engine)
        .arg(dataset)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_ne!(
        o.status.code(),
        Some(3),
        "{engine} is not installed for python3 ({stderr}): run `bash scripts/test.sh`, which \
         installs scripts/python-requirements.txt (duckdb, pyspark) into a virtual environment \
         and puts it first on PATH; Spark also needs a Java runtime (`java -version`)"
    );
    assert!(o.status.success(), "{engine} failed:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The same figures from `cuprof report`'s summary.json.
fn expected(s: &Value) -> Value {
    let top: Vec<Value> = s["top_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| json!([k["name"], k["count"], k["total_ns"]]))
        .collect();
    let busy: Vec<Value> = s["cross_rank"]["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json!([r["rank"], r["busy_ns"]]))
        .collect();
    let steps: Vec<Value> = s["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let st = &r["steps"];
            json!([
                r["rank"],
                st["count"],
                st["total_ns"],
                st["min_ns"],
                st["max_ns"],
                st["p50_ns"]
            ])
        })
        .collect();
    let slowest: Vec<Value> = s["cross_rank"]["slowest_rank_per_step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| json!([x["step"], x["rank"], x["dur_ns"]]))
        .collect();
    let overlap: Vec<Value> = s["cross_rank"]["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| json!([r["rank"], r["comm_compute_overlap_ns"]]))
        .collect();
    json!({"top_kernels": top, "busy": busy, "steps": steps, "slowest": slowest, "overlap": overlap})
}

fn check(engine: &str) {
    let dir = tempdir(&format!("export-{engine}"));
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    for r in 0..2 {
        rank_trace(r).write_gz(&traces.join(format!("job-rank{r}.trace.json.gz")));
    }
    let out = dir.join("report");
    cuprof_ok(&[
        "report",
        traces.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let want = expected(&read_json(&out.join("summary.json")));
    let ds = dir.join("dataset");
    cuprof_ok(&[
        "export",
        traces.to_str().unwrap(),
        "-o",
        ds.to_str().unwrap(),
    ]);
    let got = query(engine, &ds);
    assert_eq!(got, want, "{engine} disagrees with cuprof report");

    // The figures themselves, so that an empty report cannot agree with an empty dataset.
    assert_eq!(want["top_kernels"][0], json!(["gemm_big", 10, 3_000_015]));
    assert_eq!(want["top_kernels"].as_array().unwrap().len(), 4);
    assert_eq!(
        want["slowest"],
        json!([
            [0, 1, 950_003],
            [1, 1, 1_300_011],
            [2, 0, 1_000_000],
            [3, 1, 1_500_001],
            [4, 0, 800_000]
        ])
    );
    assert_eq!(want["busy"].as_array().unwrap().len(), 2);
    // Per step the all-reduce (from 330.007 µs) runs under gemm_big (to 350.001 µs + rank ns).
    assert_eq!(want["overlap"], json!([[0, 5 * 19_994], [1, 5 * 19_995]]));
}

#[test]
fn duckdb_reads_the_report_figures() {
    check("duckdb");
}

#[test]
fn spark_reads_the_report_figures() {
    check("spark");
}
