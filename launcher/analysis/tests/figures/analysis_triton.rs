//! `cuprof report`'s Triton kernels: torch.compile's launch operators (named after their
//! kernel, carrying inductor's keyword inputs: the generated file, the launch config, the
//! estimated bytes and FLOPs of one launch) with the kernels attributed to them: launches, GPU
//! time, and GB/s and TFLOP/s against the estimates.

use std::path::Path;

use crate::analysis_support::*;
use crate::export_support::{duckdb, query_after, Rows};
use serde_json::{json, Value};

/// A Triton launch's operator as torch.profiler (with record_shapes) and cuprof write it; the
/// estimates and config left out when `None`.
#[allow(clippy::too_many_arguments)]
fn launch(
    t: &mut Trace,
    ext: i64,
    name: &str,
    file: &str,
    num_gb: Option<f64>,
    flop: Option<i64>,
    start: i64,
    kernel_ns: i64,
    kernel_ext: bool,
) {
    let mut args = format!(
        "\"External id\": {ext}, \"Record function id\": 0, \"Input Dims\": [[1024], []], \"kernel_backend\": \"triton\", \"kernel_file\": {}, \"kernel_hash\": \"4f1e\", \"stream\": 0, \"num_warps\": 4, \"num_stages\": 1, \"kernel_kwargs\": \"XBLOCK=1024\"",
        q(file)
    );
    if let Some(gb) = num_gb {
        args.push_str(&format!(", \"kernel_num_gb\": {gb}"));
    }
    if let Some(f) = flop {
        args.push_str(&format!(", \"kernel_flop\": {f}"));
    }
    t.x("cpu_op", name, PID, MAIN, start, 8_000, &args);
    t.launch_in(
        ext,
        "cuLaunchKernel",
        "kernel",
        name,
        MAIN,
        start + 2_000,
        start + 20_000,
        kernel_ns,
        kernel_ext,
    );
}

const ADD_FILE: &str = "/tmp/torchinductor_u/ab/cab3.py";
const MM_FILE: &str = "/tmp/torchinductor_u/cd/ccd4.py";

/// Three launches of a pointwise kernel (10 µs each, one kernel found through its launch's
/// External id only), a matmul template with a FLOP count, a reduction without estimates, and
/// an aten::mm whose gemm is no Triton kernel.
fn triton_trace() -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    for i in 0..3 {
        launch(
            &mut t,
            11 + i,
            "triton_poi_fused_add_0",
            ADD_FILE,
            Some(0.004),
            None,
            i * 100_000,
            10_000,
            i != 1,
        );
    }
    launch(
        &mut t,
        14,
        "triton_tem_fused_mm_1",
        MM_FILE,
        Some(0.012),
        Some(2_000_000_000),
        400_000,
        100_000,
        true,
    );
    launch(
        &mut t,
        15,
        "triton_per_fused_sum_2",
        MM_FILE,
        None,
        None,
        600_000,
        5_000,
        true,
    );
    t.cpu_op("aten::mm", MAIN, 800_000, 10_000, 16, None, None);
    t.launch_in(
        16,
        "cudaLaunchKernel",
        "kernel",
        "gemm",
        MAIN,
        801_000,
        802_000,
        50_000,
        true,
    );
    t
}

/// `v` written and read back as summary.json is.
fn as_read(v: Value) -> Value {
    serde_json::from_str(&v.to_string()).unwrap()
}

#[test]
fn triton_kernels_with_inductors_estimates() {
    let dir = tempdir("triton");
    let trace = dir.join("t-rank0.trace.json.gz");
    triton_trace().write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    let rows = s["triton_kernels"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let config = json!({"num_warps": 4, "num_stages": 1, "config": "XBLOCK=1024"});
    let with = |v: Value| {
        let mut v = v;
        v.as_object_mut()
            .unwrap()
            .extend(config.as_object().unwrap().clone());
        as_read(v)
    };
    // 12 MB over 100 µs, 2 GFLOP over 100 µs.
    assert_eq!(
        rows[0],
        with(
            json!({"name": "triton_tem_fused_mm_1", "file": MM_FILE, "launches": 1,
                    "cpu_ns": 8_000, "gpu_ns": 100_000, "kernels": 1,
                    "gbps": 0.012 / (100_000.0 / 1e9), "tflops": 2e9 / (100_000.0 / 1e9) / 1e12})
        )
    );
    // 3 x 4 MB over 30 µs; no FLOP count.
    assert_eq!(
        rows[1],
        with(
            json!({"name": "triton_poi_fused_add_0", "file": ADD_FILE, "launches": 3,
                    "cpu_ns": 24_000, "gpu_ns": 30_000, "kernels": 3,
                    "gbps": (0.0 + 0.004 + 0.004 + 0.004) / (30_000.0 / 1e9), "tflops": null})
        )
    );
    assert_eq!(
        rows[2],
        with(
            json!({"name": "triton_per_fused_sum_2", "file": MM_FILE, "launches": 1,
                    "cpu_ns": 8_000, "gpu_ns": 5_000, "kernels": 1, "gbps": null, "tflops": null})
        )
    );
    let section: Vec<&str> = stdout
        .split("== Triton kernels (torch.compile) ==\n")
        .nth(1)
        .and_then(|r| r.split("\n\n").next())
        .expect("the section")
        .lines()
        .collect();
    assert_eq!(
        section,
        [
            "  kernel                  launches    GPU time  kernels    GB/s  TFLOP/s  config                        file",
            "  triton_tem_fused_mm_1          1  100.000 µs        1  120.00   20.000  warps=4 stages=1 XBLOCK=1024  /tmp/torchinductor_u/cd/ccd4.py",
            "  triton_poi_fused_add_0         3   30.000 µs        3  400.00        -  warps=4 stages=1 XBLOCK=1024  /tmp/torchinductor_u/ab/cab3.py",
            "  triton_per_fused_sum_2         1    5.000 µs        1       -        -  warps=4 stages=1 XBLOCK=1024  /tmp/torchinductor_u/cd/ccd4.py",
        ]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| triton_poi_fused_add_0 | 3 | 30.000 µs | 3 | 400.00 | - | warps=4 stages=1 XBLOCK=1024 | /tmp/torchinductor_u/ab/cab3.py |"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(r#"<section id="cp-triton"><h2>Triton kernels</h2>"#));
    assert!(
        html.contains(r#"data-key="triton_kernels.0.gpu_ns" data-value="100000""#),
        "{html}"
    );
    assert!(html.contains(r#"data-key="triton_kernels.2.gbps" data-value="null""#));
    // The page names each file by its folder and name, never its absolute path.
    assert_eq!(html.matches("<td><code>ab/cab3.py</code></td>").count(), 1);
    assert_eq!(html.matches("<td><code>cd/ccd4.py</code></td>").count(), 2);
    assert!(!html.contains("torchinductor_u"), "{html}");
}

/// Without Triton launches, no section and no key.
#[test]
fn no_triton_launches_no_section() {
    let dir = tempdir("no-triton");
    let trace = dir.join("t-rank0.trace.json.gz");
    sample().write_gz(&trace);
    let (stdout, s) = report(&trace, &dir.join("out"));
    assert_eq!(s.get("triton_kernels"), None);
    assert!(!stdout.contains("Triton kernels"));
}

/// `cuprof compare` puts each Triton kernel's GPU time in A and B side by side.
#[test]
fn compare_puts_triton_kernels_side_by_side() {
    let dir = tempdir("triton-compare");
    let (a, b) = (
        dir.join("a-rank0.trace.json.gz"),
        dir.join("b-rank0.trace.json.gz"),
    );
    triton_trace().write_gz(&a);
    let mut faster = Trace::new(0, 1);
    faster.metadata(&[0], &[(0, 7)], &[MAIN]);
    launch(
        &mut faster,
        11,
        "triton_poi_fused_add_0",
        ADD_FILE,
        Some(0.004),
        None,
        0,
        6_000,
        true,
    );
    faster.write_gz(&b);
    let (rows, _) = compared(&a, &b, "triton_kernels");
    assert_eq!(
        rows,
        [
            ("triton_tem_fused_mm_1".to_string(), 100_000, 0),
            ("triton_poi_fused_add_0".to_string(), 30_000, 6_000),
            ("triton_per_fused_sum_2".to_string(), 5_000, 0),
        ]
    );
}

/// `cuprof export` of `trace` into `out`: its operators table (the file named `name`).
fn exported_operators(trace: &Path, out: &Path, name: &str) -> Rows {
    cuprof_ok(&[
        "export",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    Rows::read(&out.join(format!("operators/rank=0/cycle=1/{name}.parquet")))
}

/// `cuprof export`'s operators table carries each launch's keyword inputs, and docs/tables.md's
/// Triton query, run in DuckDB over the dataset, gives the report's rows.
#[test]
fn export_has_the_triton_columns_and_the_documented_query_equals_the_report() {
    let dir = tempdir("triton-export");
    let trace = dir.join("t-rank0.trace.json.gz");
    triton_trace().write_gz(&trace);
    let out = dir.join("ds");
    let o = exported_operators(&trace, &out, "t-rank0");
    assert_eq!(
        o.text("name"),
        [
            "triton_poi_fused_add_0",
            "triton_poi_fused_add_0",
            "triton_poi_fused_add_0",
            "triton_tem_fused_mm_1",
            "triton_per_fused_sum_2",
            "aten::mm"
        ]
    );
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        o.texts("kernel_file"),
        [
            some(ADD_FILE),
            some(ADD_FILE),
            some(ADD_FILE),
            some(MM_FILE),
            some(MM_FILE),
            None
        ]
    );
    assert_eq!(
        o.floats("kernel_num_gb"),
        [
            Some(0.004),
            Some(0.004),
            Some(0.004),
            Some(0.012),
            None,
            None
        ]
    );
    assert_eq!(
        o.ints("kernel_flop"),
        [None, None, None, Some(2_000_000_000), None, None]
    );
    // The five launches' value, and none on aten::mm.
    fn five<T: Clone>(v: T) -> Vec<Option<T>> {
        [vec![Some(v); 5], vec![None]].concat()
    }
    assert_eq!(o.ints("num_warps"), five(4));
    assert_eq!(o.ints("num_stages"), five(1));
    assert_eq!(o.texts("kernel_kwargs"), five("XBLOCK=1024".to_string()));

    let (_, s) = report(&trace, &dir.join("report"));
    let want: Vec<Value> = s["triton_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            json!([
                r["name"],
                r["file"],
                r["launches"],
                r["gpu_ns"],
                r["gbps"],
                r["tflops"]
            ])
        })
        .collect();
    let got: Vec<Value> = duckdb(&out, &query_after("torch.compile's Triton kernels, as"));
    assert_eq!(got, want);
    // The figures themselves, so that an empty report cannot agree with an empty dataset.
    assert_eq!(want.len(), 3);
    assert_eq!(
        want[1],
        json!([
            "triton_poi_fused_add_0",
            ADD_FILE,
            3,
            30_000,
            (0.0 + 0.004 + 0.004 + 0.004) / (30_000.0 / 1e9),
            null
        ])
    );
}

/// torch.profiler writes a keyword string as it is, a tab included, which makes its file
/// invalid JSON: `cuprof report` and `cuprof export` read such an event as torch meant it.
#[test]
fn a_raw_tab_in_a_keyword_input_is_read_as_torch_meant_it() {
    let dir = tempdir("triton-raw-tab");
    let trace = dir.join("torch.json");
    let text = triton_trace().json().replacen(
        "\"kernel_kwargs\": \"XBLOCK=1024\"",
        "\"kernel_kwargs\": \"XBLOCK=1024\tYBLOCK=2\"",
        1,
    );
    assert!(serde_json::from_str::<Value>(&text).is_err());
    std::fs::write(&trace, text).unwrap();
    let (stdout, s) = report(&trace, &dir.join("out"));
    let configs: Vec<&str> = s["triton_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["config"].as_str().unwrap())
        .collect();
    assert_eq!(
        configs,
        ["XBLOCK=1024", "XBLOCK=1024\tYBLOCK=2", "XBLOCK=1024"]
    );
    assert_eq!(s["triton_kernels"][1]["gpu_ns"], 30_000);
    // On the terminal the tab is data, written as a visible escape.
    assert!(
        stdout.contains("  triton_poi_fused_add_0         3   30.000 µs        3  400.00        -  warps=4 stages=1 XBLOCK=1024\\u{9}YBLOCK=2  /tmp/torchinductor_u/ab/cab3.py"),
        "{stdout}"
    );
    let o = exported_operators(&trace, &dir.join("ds"), "torch");
    assert_eq!(
        o.texts("kernel_kwargs")[..2],
        [
            Some("XBLOCK=1024\tYBLOCK=2".to_string()),
            Some("XBLOCK=1024".to_string())
        ]
    );
}
