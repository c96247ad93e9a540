//! `cuprof compare A B --json`: per kernel and per bucket ratios, step-time speedup.

use std::path::Path;

use crate::analysis_support::*;
use serde_json::{json, Value};

/// Steps of 1 ms; gemm 3 x 150 µs in `forward`, the all-reduce 500 µs in `backward`, and a
/// kernel A does not have.
fn faster() -> Trace {
    let mut t = Trace::new(0, 1);
    for n in 0..4 {
        t.step(n, MAIN, n * 1_000_000, 1_000_000, None);
    }
    t.range("forward", MAIN, 0, 500_000);
    t.range("backward", MAIN, 500_000, 400_000);
    for k in 0..3 {
        t.launch(
            "gemm",
            MAIN,
            10_000 + k * 1000,
            0,
            7,
            100_000 + k * 150_000,
            150_000,
        );
    }
    t.launch(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        MAIN,
        600_000,
        0,
        13,
        600_000,
        500_000,
    );
    t.launch("new_kernel", MAIN, 1_500_000, 0, 7, 1_500_000, 100_000);
    t
}

fn rows(v: &Value) -> Vec<(String, i64, i64, Option<f64>)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["a_ns"].as_i64().unwrap(),
                r["b_ns"].as_i64().unwrap(),
                r["ratio"].as_f64(),
            )
        })
        .collect()
}

/// `cuprof compare A B`'s tables.
fn compare_table(a: &Path, b: &Path) -> String {
    cuprof_ok(&["compare", a.to_str().unwrap(), b.to_str().unwrap()])
}

#[test]
fn compare_json_and_table() {
    let dir = tempdir("compare");
    let a = dir.join("a-rank0.trace.json.gz");
    let b = dir.join("b-rank0.trace.json.gz");
    sample().write_gz(&a);
    faster().write_gz(&b);
    let c = compare_json(&a, &b);
    assert_eq!(c["step_time_speedup"], 2.5);
    assert_eq!(c["total_step_time_speedup"], 2.5);
    let s = |n: &str| n.to_string();
    assert_eq!(
        rows(&c["kernels"]),
        [
            (s("gemm"), 900_000, 450_000, Some(0.5)),
            (
                s("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
                500_000,
                500_000,
                Some(1.0)
            ),
            (s("flash_attn"), 200_000, 0, Some(0.0)),
            (s("new_kernel"), 0, 100_000, None),
        ]
    );
    assert_eq!(
        rows(&c["nvtx_buckets"]),
        [
            (s("backward"), 800_000, 500_000, Some(0.625)),
            (s("forward"), 300_000, 450_000, Some(1.5)),
            (s("(no NVTX range)"), 400_000, 100_000, Some(0.25)),
            (s("attention"), 200_000, 0, Some(0.0)),
            (s("(no launch record)"), 50_000, 0, Some(0.0)),
        ]
    );
    // Copies by GPU time: A's pageable upload of 100 µs and its 50 µs memset; B has none.
    assert_eq!(
        rows(&c["copies"]),
        [
            (s("HtoD (Pageable -> Device)"), 100_000, 0, Some(0.0)),
            (s("Memset (Device)"), 50_000, 0, Some(0.0)),
        ]
    );
    // Ranges by their own time: A's forward 600 µs (attention 200 µs inside it), backward
    // 900 µs, a 10 ms range on another thread; B's forward 500 µs, backward 400 µs.
    assert_eq!(
        rows(&c["ranges"]),
        [
            (s("other_thread"), 10_000_000, 0, Some(0.0)),
            (s("backward"), 900_000, 400_000, Some(400.0 / 900.0)),
            (s("forward"), 600_000, 500_000, Some(500.0 / 600.0)),
            (s("attention"), 200_000, 0, Some(0.0)),
        ]
    );
    // API calls by total: A's 500 µs device sync, 5 launches and a copy call of 1 µs each; B's 5
    // launches.
    assert_eq!(
        rows(&c["api_calls"]),
        [
            (s("cudaDeviceSynchronize"), 500_000, 0, Some(0.0)),
            (s("cudaLaunchKernel"), 5_000, 5_000, Some(1.0)),
            (s("cudaMemcpyAsync"), 1_000, 0, Some(0.0)),
        ]
    );

    let table = compare_table(&a, &b);
    assert!(
        table.contains("step time speedup 2.500x (B faster)"),
        "{table}"
    );
    assert!(table.contains("gemm"), "{table}");
    assert!(table.contains("0.500x"), "{table}");
    let ranges = table
        .split("NVTX range or label, own time")
        .nth(1)
        .and_then(|r| r.split("\n\n").next())
        .expect("a ranges table");
    assert_eq!(ranges.lines().count(), 5, "{table}");
    assert!(ranges.contains("other_thread"), "{table}");
    assert!(table.contains("CUDA API call"), "{table}");
    assert!(table.contains("copy or set"), "{table}");
}

/// Traces without ranges or API calls on either side have no such rows.
#[test]
fn compare_leaves_out_what_neither_side_has() {
    let dir = tempdir("compare-none");
    let mut t = Trace::new(0, 1);
    t.kernel("k", 0, 7, 0, 1_000, 1);
    let a = dir.join("a-rank0.trace.json.gz");
    let b = dir.join("b-rank0.trace.json.gz");
    t.write_gz(&a);
    t.write_gz(&b);
    let c = compare_json(&a, &b);
    for key in ["copies", "ranges", "api_calls", "collectives"] {
        assert!(c.get(key).is_none(), "{key}: {c}");
    }
    let table = compare_table(&a, &b);
    assert!(
        !table.contains("own time")
            && !table.contains("CUDA API call")
            && !table.contains("copy or set")
            && !table.contains("collective"),
        "{table}"
    );
}

#[test]
fn compare_says_no_difference_when_the_means_are_equal() {
    let dir = tempdir("out-compare");
    let a = dir.join("a.trace.json.gz");
    let b = dir.join("b.trace.json.gz");
    sample().write_gz(&a);
    sample().write_gz(&b);
    let out = compare_table(&a, &b);
    assert!(
        out.contains("step time speedup 1.000x (no difference)"),
        "{out}"
    );
    let json = compare_json(&a, &b);
    assert_eq!(json["step_time_speedup"], 1.0);
}

/// The findings of each side, rule by rule, are the report's own (`findings[]`'s count and
/// cost), largest first, with a table under the step and GPU lines.
#[test]
fn compare_puts_the_findings_side_by_side() {
    let dir = tempdir("compare-findings");
    let a = dir.join("a-rank0.trace.json.gz");
    let b = dir.join("b-rank0.trace.json.gz");
    sample().write_gz(&a);
    faster().write_gz(&b);
    let report = |t: &std::path::Path, out: &str| {
        let out = dir.join(out);
        cuprof_ok(&["report", t.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        read_json(&out.join("summary.json"))["findings"].clone()
    };
    let side = |f: &Value, rule: &str| -> (u64, i64) {
        f.as_array()
            .unwrap()
            .iter()
            .find(|x| x["rule"] == rule)
            .map_or((0, 0), |x| {
                (x["count"].as_u64().unwrap(), x["time_ns"].as_i64().unwrap())
            })
    };
    let (fa, fb) = (report(&a, "ra"), report(&b, "rb"));
    let c = compare_json(&a, &b);
    let rows = c["findings"].as_array().unwrap();
    // sample() has host-bound gaps, a device sync and a pageable copy; faster() only gaps.
    let rules: Vec<&str> = rows.iter().map(|r| r["rule"].as_str().unwrap()).collect();
    assert_eq!(rules, ["host_bound_idle", "synchronize", "pageable_copy"]);
    for r in rows {
        let rule = r["rule"].as_str().unwrap();
        let ((ac, an), (bc, bn)) = (side(&fa, rule), side(&fb, rule));
        assert_eq!(
            (
                r["a_count"].as_u64(),
                r["a_ns"].as_i64(),
                r["b_count"].as_u64(),
                r["b_ns"].as_i64()
            ),
            (Some(ac), Some(an), Some(bc), Some(bn)),
            "{rule}"
        );
        assert_eq!(r["delta_ns"].as_i64(), Some(bn - an));
    }
    assert!(rows[0]["a_ns"].as_i64().unwrap() > 0 && rows[0]["b_ns"].as_i64().unwrap() > 0);
    assert_eq!(
        (&rows[1]["b_count"], &rows[2]["b_count"]),
        (&json!(0), &json!(0))
    );
    let table = compare_table(&a, &b);
    let header = table
        .lines()
        .find(|l| l.trim_start().starts_with("what to look at"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        header.contains("count A") && header.contains("B-A"),
        "{header}"
    );
    assert!(table.contains("Host synchronization"), "{table}");
}

/// Operator `ext` on `tid` from `start` for 10 µs, launching one kernel per entry of
/// `kernels_ns` (at 1 µs past its start).
fn launching_op(t: &mut Trace, name: &str, tid: i64, ext: i64, start: i64, kernels_ns: &[i64]) {
    t.cpu_op(name, tid, start, 10_000, ext, None, None);
    for (i, &ns) in kernels_ns.iter().enumerate() {
        let at = start + 1_000;
        let gpu = 5_000_000 + ext * 100_000 + i as i64 * 50_000;
        t.launch_in(
            ext,
            "cudaLaunchKernel",
            "kernel",
            name,
            tid,
            at,
            gpu,
            ns,
            true,
        );
    }
}

/// An eager step (1 ms): the model `Block` (100-700 µs) launches 4 kernels from 3 operators
/// (85 µs), one of them inside a child module; the backward thread 1 kernel (30 µs) outside it;
/// and a label only this run has.
fn eager() -> Trace {
    let mut t = Trace::new(0, 1);
    t.step(0, MAIN, 0, 1_000_000, None);
    module_call(&mut t, "Block_0", Some("Block"), (100_000, 600_000), (1, 0));
    module_call(
        &mut t,
        "Linear_0",
        Some("Block.up"),
        (150_000, 150_000),
        (2, 1),
    );
    launching_op(&mut t, "aten::addmm", MAIN, 1, 160_000, &[50_000]);
    launching_op(&mut t, "aten::gelu", MAIN, 2, 400_000, &[20_000, 5_000]);
    launching_op(&mut t, "aten::mul", MAIN, 3, 500_000, &[10_000]);
    launching_op(&mut t, "aten::sum", 2, 4, 750_000, &[30_000]);
    t.range("eager only", MAIN, 800_000, 100_000);
    t
}

/// The same model compiled, two steps of 400 µs: each a call of its wrapper (`OptimizedModule`,
/// written under the model's class) launching 2 kernels (65 µs) from 2 operators, and the
/// backward thread's kernel.
fn compiled() -> Trace {
    let mut t = Trace::new(0, 1);
    for n in 0..2 {
        let at = n * 400_000;
        t.step(n, MAIN, at, 400_000, None);
        module_call(
            &mut t,
            "OptimizedModule_0",
            Some("Block"),
            (at + 50_000, 200_000),
            (n + 1, 0),
        );
        let ext = 10 + n * 3;
        launching_op(
            &mut t,
            "triton_poi_fused_gelu_mul_0",
            MAIN,
            ext,
            at + 60_000,
            &[15_000],
        );
        launching_op(
            &mut t,
            "aten::addmm",
            MAIN,
            ext + 1,
            at + 100_000,
            &[50_000],
        );
        launching_op(&mut t, "aten::sum", 2, ext + 2, at + 300_000, &[30_000]);
    }
    t
}

/// `compare EAGER COMPILED`'s regions: the steps (kernels of every thread) and the root module
/// by class (its thread's kernels), per call; a label one run lacks is in no region; the
/// table's row.
#[test]
fn compare_regions_per_call_eager_against_compiled() {
    let dir = tempdir("compare-regions");
    let a = dir.join("eager-rank0.trace.json.gz");
    let b = dir.join("compiled-rank0.trace.json.gz");
    eager().write_gz(&a);
    compiled().write_gz(&b);
    let c = compare_json(&a, &b);
    let ratio = |x: f64, y: f64| json!(x / y);
    assert_eq!(
        c["regions"],
        json!([
            {
                "kind": "step", "name": "steps", "a_calls": 1, "b_calls": 2,
                "a_ns_per_call": 1_000_000.0, "b_ns_per_call": 400_000.0, "speedup": 2.5,
                "a_gpu_ns_per_call": 115_000.0, "b_gpu_ns_per_call": 95_000.0,
                "gpu_speedup": ratio(115_000.0, 95_000.0),
                "a_kernels_per_call": 5.0, "b_kernels_per_call": 3.0,
                "a_operators_per_call": 4.0, "b_operators_per_call": 3.0,
                "fusion_ratio": ratio(4.0, 3.0),
            },
            {
                "kind": "module", "name": "Block", "a_calls": 1, "b_calls": 2,
                "a_ns_per_call": 600_000.0, "b_ns_per_call": 200_000.0, "speedup": 3.0,
                "a_gpu_ns_per_call": 85_000.0, "b_gpu_ns_per_call": 65_000.0,
                "gpu_speedup": ratio(85_000.0, 65_000.0),
                "a_kernels_per_call": 4.0, "b_kernels_per_call": 2.0,
                "a_operators_per_call": 3.0, "b_operators_per_call": 2.0,
                "fusion_ratio": 1.5,
            },
        ])
    );
    let table = compare_table(&a, &b);
    let row = table
        .lines()
        .find(|l| l.trim_start().starts_with("module Block"))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split("  ").filter(|c| !c.is_empty()).collect();
    assert_eq!(
        cells.iter().map(|c| c.trim()).collect::<Vec<_>>(),
        [
            "module Block",
            "1",
            "2",
            "600.000 µs",
            "200.000 µs",
            "3.000x",
            "85.000 µs",
            "65.000 µs",
            "1.308x",
            "3.0",
            "2.0",
            "1.500x"
        ]
    );
}
