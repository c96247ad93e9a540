//! PyTorch operators in `cuprof report`, `flame` and `compare`, on a trace whose every figure
//! is known (`with_operators` in analysis_support).

use crate::analysis_support::*;
use serde_json::Value;

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// (name, input dims, calls, CPU, self CPU, GPU, GPU ops, GPU with nested operators).
type Row = (String, Option<String>, i64, i64, i64, i64, i64, i64);

fn rows(v: &Value) -> Vec<Row> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r.get("input_dims").map(|d| d.as_str().unwrap().to_string()),
                i(&r["count"]),
                i(&r["cpu_ns"]),
                i(&r["self_cpu_ns"]),
                i(&r["gpu_ns"]),
                i(&r["gpu_ops"]),
                i(&r["gpu_total_ns"]),
            )
        })
        .collect()
}

fn row(name: &str, dims: Option<&str>, n: [i64; 6]) -> Row {
    (
        name.to_string(),
        dims.map(str::to_string),
        n[0],
        n[1],
        n[2],
        n[3],
        n[4],
        n[5],
    )
}

#[test]
fn report_tables_and_summary() {
    let dir = tempdir("ops-report");
    let trace = dir.join("run-rank0.trace.json.gz");
    with_operators(300_000, true).write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    let o = &s["operators"];
    assert_eq!(i(&o["calls"]), 6);
    // gemm 300 + bias_add 50 + gemm 100 + memcpy 100 + gemm 50 outside every operator.
    assert_eq!(i(&o["gpu_ns"]), 600_000);
    assert_eq!(i(&o["gpu_without_operator_ns"]), 50_000);
    // linear's self time: 300 - t 20 - addmm 200. mul, on another thread, is inside nothing.
    assert_eq!(
        rows(&o["top"]),
        [
            row(
                "aten::addmm",
                None,
                [2, 300_000, 300_000, 450_000, 3, 450_000]
            ),
            row(
                "aten::copy_",
                None,
                [1, 100_000, 100_000, 100_000, 1, 100_000]
            ),
            row("aten::linear", None, [1, 300_000, 80_000, 0, 0, 350_000]),
            row("aten::mul", None, [1, 100_000, 100_000, 0, 0, 0]),
            row("aten::t", None, [1, 20_000, 20_000, 0, 0, 0]),
        ]
    );
    assert_eq!(o["top"][0]["gpu_share"], 0.75);
    // 600 µs of GPU time, not under half the 600 µs in operators: ranked by GPU time.
    assert_eq!(i(&o["self_cpu_ns"]), 600_000);
    assert_eq!(o["ranked_by"], "gpu_time");
    // Kineto's spaced shapes and cuprof's compact ones are one key; copy_ had none.
    assert_eq!(
        rows(&o["by_input_dims"]),
        [
            row(
                "aten::addmm",
                Some("[[32],[8,64],[64,32]]"),
                [1, 200_000, 200_000, 350_000, 2, 350_000]
            ),
            row(
                "aten::addmm",
                Some("[[32],[4,64],[64,32]]"),
                [1, 100_000, 100_000, 100_000, 1, 100_000]
            ),
            row(
                "aten::copy_",
                Some(""),
                [1, 100_000, 100_000, 100_000, 1, 100_000]
            ),
            row(
                "aten::linear",
                Some("[[8,64],[32,64],[32]]"),
                [1, 300_000, 80_000, 0, 0, 350_000]
            ),
            row(
                "aten::mul",
                Some("[[8],[8]]"),
                [1, 100_000, 100_000, 0, 0, 0]
            ),
            row("aten::t", Some("[[32,64]]"), [1, 20_000, 20_000, 0, 0, 0]),
        ]
    );

    // Each kernel's operator bucket: gemm ran 400 µs under addmm, 50 µs under none.
    let k: Vec<(&str, &str, i64, i64)> = s["top_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                r["operator"].as_str().unwrap(),
                i(&r["operator_ns"]),
                i(&r["total_ns"]),
            )
        })
        .collect();
    assert_eq!(
        k,
        [
            ("gemm", "aten::addmm", 400_000, 450_000),
            ("bias_add", "aten::addmm", 50_000, 50_000),
        ]
    );

    assert!(
        stdout.contains(
            "6 operator calls; GPU time launched outside every operator: 50.000 µs (8.3%)"
        ),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("  1  aten::addmm       2  450.000 µs      75.0%  300.000 µs  300.000 µs\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  3  aten::copy_                              1  100.000 µs      16.7%  100.000 µs  100.000 µs\n"
        ),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| 1 | gemm | 3 | 450.000 µs | 150.000 µs | 100.000 µs | 300.000 µs | 90.0% | aten::addmm |"),
        "{md}"
    );
}

/// A CPU-bound run: on the main thread a wrapper of 800 µs
/// (`autograd::engine::evaluate_function`) holds `aten::mm` (500 µs, which launches a 10 µs
/// kernel) and `aten::add` (200 µs), 100 µs its own; another `aten::add` takes 150 µs; on
/// another thread `aten::copy_` takes 300 µs. 1,250 µs in operators against 10 µs of GPU time:
/// the tables rank by self CPU time, the wrapper last though its CPU time is the longest.
#[test]
fn a_cpu_bound_run_ranks_operators_by_self_cpu_time() {
    let dir = tempdir("ops-self");
    let trace = dir.join("run-rank0.trace.json.gz");
    let wrapper = "autograd::engine::evaluate_function: AddmmBackward0";
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN, OTHER]);
    t.cpu_op(wrapper, MAIN, 100_000, 800_000, 1, None, None);
    t.cpu_op("aten::mm", MAIN, 150_000, 500_000, 2, None, None);
    t.launch_in(
        2,
        "cudaLaunchKernel",
        "kernel",
        "gemm",
        MAIN,
        200_000,
        700_000,
        10_000,
        true,
    );
    t.cpu_op("aten::add", MAIN, 700_000, 200_000, 3, None, None);
    t.cpu_op("aten::add", MAIN, 2_000_000, 150_000, 4, None, None);
    t.cpu_op("aten::copy_", OTHER, 100_000, 300_000, 5, None, None);
    t.write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    let o = &s["operators"];
    assert_eq!(i(&o["self_cpu_ns"]), 1_250_000);
    assert_eq!(o["ranked_by"], "self_cpu_time");
    assert_eq!(
        rows(&o["top"]),
        [
            row("aten::mm", None, [1, 500_000, 500_000, 10_000, 1, 10_000]),
            row("aten::add", None, [2, 350_000, 350_000, 0, 0, 0]),
            row("aten::copy_", None, [1, 300_000, 300_000, 0, 0, 0]),
            row(wrapper, None, [1, 800_000, 100_000, 0, 0, 10_000]),
        ]
    );
    let title = "Top operators (by self CPU time: the run is CPU-bound, its GPU time under half \
                 the host's time in operators)";
    assert!(stdout.contains(title), "{stdout}");
    assert!(
        stdout.contains(
            "  4  autograd::engine::evaluate_function: AddmmBackward0      1       0 ns       0.0%  800.000 µs  100.000 µs\n"
        ),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains(title), "{md}");
    assert!(
        md.contains("| 1 | aten::mm | 1 | 10.000 µs | 100.0% | 500.000 µs | 500.000 µs |"),
        "{md}"
    );
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("top operators by self CPU time (CPU-bound run)"),
        "the page names the order"
    );
}

#[test]
fn no_operators_no_operator_keys() {
    let dir = tempdir("ops-none");
    let trace = dir.join("run-rank0.trace.json.gz");
    sample().write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    assert!(s.get("operators").is_none());
    assert!(s["top_kernels"][0].get("operator").is_none());
    assert!(!stdout.contains("operator"), "{stdout}");
}

fn folded(trace: &std::path::Path, extra: &[&str]) -> String {
    let dir = trace.parent().unwrap();
    let folded = dir.join("f.folded");
    let svg = dir.join("f.svg");
    let mut args = vec![
        "flame",
        trace.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
    ];
    args.extend(extra);
    cuprof_ok(&args);
    std::fs::read_to_string(&folded).unwrap()
}

#[test]
fn flame_python_line_operator_kernel() {
    let dir = tempdir("ops-flame");
    let trace = dir.join("run-rank0.trace.json.gz");
    with_operators(300_000, true).write_gz(&trace);
    // The Python frames are the outermost operator's, outermost first; bias_add is found
    // through its launch; copy_ has no stack.
    assert_eq!(
        folded(&trace, &[]),
        "(no operator);gemm 50000\n\
         aten::copy_;Memcpy HtoD (Pageable -> Device) 100000\n\
         train.py(40): <module>;model.py(12): forward;aten::linear;aten::addmm;bias_add 50000\n\
         train.py(40): <module>;model.py(12): forward;aten::linear;aten::addmm;gemm 300000\n\
         train.py(40): <module>;model.py(20): head;aten::addmm;gemm 100000\n"
    );
    assert_eq!(
        folded(&trace, &["--cpu"]),
        "(no operator);cudaLaunchKernel 1000\n\
         aten::copy_;cudaMemcpyAsync 1000\n\
         train.py(40): <module>;model.py(12): forward;aten::linear;aten::addmm;cudaLaunchKernel 2000\n\
         train.py(40): <module>;model.py(20): head;aten::addmm;cudaLaunchKernel 1000\n"
    );
    // --nvtx keeps the ranges view (this trace has no ranges).
    assert_eq!(
        folded(&trace, &["--nvtx"]),
        "Memcpy HtoD (Pageable -> Device) 100000\nbias_add 50000\ngemm 450000\n"
    );
}

/// PyTorch's allocations (`[memory]`, torch.profiler's `profile_memory`) in the report's
/// operator figures, and in `flame --memory`.
#[test]
fn allocations_by_operator_and_python_line() {
    let dir = tempdir("ops-memory");
    let trace = dir.join("run-rank0.trace.json.gz");
    with_allocations().write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    let o = &s["operators"];
    // (CPU, self CPU, GPU, self GPU): linear holds t's 256 B and frees them itself, and holds
    // addmm's 4 KiB; the MPS allocation counts nowhere.
    let memory: Vec<(&str, [i64; 4])> = o["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let m = &r["memory"];
            (
                r["name"].as_str().unwrap(),
                [
                    i(&m["cpu_bytes"]),
                    i(&m["self_cpu_bytes"]),
                    i(&m["device_bytes"]),
                    i(&m["self_device_bytes"]),
                ],
            )
        })
        .collect();
    assert_eq!(
        memory,
        [
            ("aten::addmm", [0, 0, 12_288, 12_288]),
            ("aten::copy_", [0, 0, 0, 0]),
            ("aten::linear", [0, -256, 4096, 0]),
            ("aten::mul", [64, 64, 0, 0]),
            ("aten::t", [256, 256, 0, 0]),
        ]
    );
    assert_eq!(
        o["tensor_memory"],
        serde_json::json!({"events": 6, "outside_operators_cpu_bytes": 1024, "outside_operators_device_bytes": 0})
    );
    assert_eq!(
        o["by_input_dims"][0]["memory"],
        serde_json::json!({"cpu_bytes": 0, "self_cpu_bytes": 0, "device_bytes": 4096, "self_device_bytes": 4096})
    );
    assert!(
        stdout.contains(
            "6 PyTorch allocations and frees; allocated net outside every operator: 1.0 KiB CPU, 0 B GPU\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("  CPU self  self CPU mem  self GPU mem\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  300.000 µs           0 B      12.0 KiB\n"),
        "{stdout}"
    );
    // The page draws the allocations too, below the GPU time's flame graph, with ids of its
    // own.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let section = |id: &str| {
        let at = html.find(&format!(r#"<section id="{id}""#)).unwrap();
        &html[at..at + html[at..].find("</section>").unwrap()]
    };
    let (gpu, memory) = (section("cp-flame"), section("cp-flame-memory"));
    assert!(gpu.contains(r#" id="frames""#) && !gpu.contains(r#"id="mem-"#));
    assert!(memory.contains(r#" id="mem-frames""#) && !memory.contains(r#" id="frames""#));
    assert!(memory.contains("[GPU allocations]") && memory.contains("model.py(20): head"));
    assert!(html.contains(r##"<a href="#cp-flame-memory">Allocations by Python stack</a>"##));
    // The trace without allocations: no memory anywhere.
    let plain = dir.join("plain-rank0.trace.json.gz");
    with_operators(300_000, true).write_gz(&plain);
    let out = dir.join("out-plain");
    let (stdout, s) = report(&plain, &out);
    assert!(!std::fs::read_to_string(out.join("report.html"))
        .unwrap()
        .contains("cp-flame-memory"));
    assert!(s["operators"].get("tensor_memory").is_none());
    assert!(s["operators"]["top"][0].get("memory").is_none());
    assert!(
        !stdout.contains("self CPU mem") && !stdout.contains("PyTorch allocations"),
        "{stdout}"
    );

    // Bytes allocated (frees are not drawn) by Python line, operator and device.
    assert_eq!(
        folded(&trace, &["--memory"]),
        "(no operator);[CPU allocations] 1024\n\
         aten::mul;[CPU allocations] 64\n\
         train.py(40): <module>;model.py(12): forward;aten::linear;aten::addmm;[GPU allocations] 4096\n\
         train.py(40): <module>;model.py(12): forward;aten::linear;aten::t;[CPU allocations] 256\n\
         train.py(40): <module>;model.py(20): head;aten::addmm;[GPU allocations] 8192\n"
    );
    let svg = std::fs::read_to_string(dir.join("f.svg")).unwrap();
    assert!(svg.contains("bytes PyTorch allocated, by Python stack and operator"));
    // Nothing to draw: one line. (--memory with --cpu, clap's refusal, is the CLI suite's:
    // launcher/tests/cli/arguments.rs.)
    let o = cuprof(&[
        "flame",
        plain.to_str().unwrap(),
        "--memory",
        "-o",
        dir.join("p.svg").to_str().unwrap(),
    ]);
    assert_eq!(
        stderr_of(&o),
        format!("cuprof: {}: no PyTorch allocations (`[memory]` events) in the trace(s); nothing to draw (record them with the MEM activity, `cuprof run --activities CPU MEM`, or torch.profiler's profile_memory=True)\n", plain.display())
    );
    assert!(!dir.join("p.svg").exists());
}

/// The operators grouped by the Python line that called them (their `Call stack`): an operator
/// without a stack is at its enclosing operator's line; one with neither is at none.
#[test]
fn operators_by_the_python_line_that_called_them() {
    let dir = tempdir("ops-sites");
    let trace = dir.join("run-rank0.trace.json.gz");
    with_allocations().write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    // model.py(12): linear (80 µs self), t in it (20) and the first addmm (200, launching 350
    // µs of GPU work); model.py(20): the second addmm. copy_ and mul have no stack.
    assert_eq!(s["operators"]["call_sites"], "lines");
    assert_eq!(
        s["operators"]["by_call_site"],
        serde_json::json!([
            {"call_site": "model.py(12): forward", "calls": 1, "gpu_ns": 350_000,
             "gpu_share": 350_000.0 / 600_000.0, "self_cpu_ns": 300_000,
             "memory": {"cpu_bytes": 0, "device_bytes": 4096}},
            {"call_site": "model.py(20): head", "calls": 1, "gpu_ns": 100_000,
             "gpu_share": 100_000.0 / 600_000.0, "self_cpu_ns": 100_000,
             "memory": {"cpu_bytes": 0, "device_bytes": 8192}},
        ])
    );
    assert!(
        stdout.contains(
            "  #  Python line            calls         GPU  GPU share    CPU self  self GPU mem\n\
             \x20 1  model.py(12): forward      1  350.000 µs      58.3%  300.000 µs       4.0 KiB\n\
             \x20 2  model.py(20): head         1  100.000 µs      16.7%  100.000 µs       8.0 KiB\n"
        ),
        "{stdout}"
    );
    // The page's chart of them, its marks carrying summary.json's values.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<h3>By the Python line that called them</h3>"));
    assert!(html.contains(r#"data-key="operators.by_call_site.0.gpu_ns" data-value="350000""#));
    assert!(html.contains(r#"data-key="operators.by_call_site.1.self_cpu_ns" data-value="100000""#));
    assert!(html.contains("<title>model.py(20): head\n1 calls entered; GPU 100.000 µs (16.7% of GPU time); self CPU 100.000 µs\nallocated net: CPU 0 B, GPU 8.0 KiB</title>"), "{html}");
    // Without stacks, no such table.
    let plain = dir.join("plain-rank0.trace.json.gz");
    let mut t = with_operators(300_000, true);
    t.events.retain(|e| !e.contains("Call stack"));
    t.write_gz(&plain);
    let out = dir.join("out-plain");
    let (stdout, s) = report(&plain, &out);
    assert!(s["operators"].get("by_call_site").is_none());
    assert!(s["operators"].get("call_sites").is_none());
    assert!(!stdout.contains("Python line"), "{stdout}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!html.contains("by_call_site"));
}

/// [`with_operators`] as torch.profiler's `with_stack` writes it in torch 2.x: no `Call stack`,
/// the Python calls as `python_function` events (functions named by the line they are defined
/// on), on rank `rank`.
fn with_python_functions(rank: i64) -> Trace {
    let mut t = with_operators(300_000, true);
    t.rank = rank;
    t.events.iter_mut().for_each(|e| {
        if let Some(at) = e.find(", \"Call stack\"") {
            let end = e[at..].find('}').unwrap() + at;
            e.replace_range(at..end, "");
        }
    });
    t.x(
        "python_function",
        "train.py(38): <module>",
        PID,
        MAIN,
        0,
        5_000_000,
        "",
    );
    t.x(
        "python_function",
        "nn.Module: Linear_0",
        PID,
        MAIN,
        90_000,
        310_000,
        "",
    );
    t.x(
        "python_function",
        "model.py(10): forward",
        PID,
        MAIN,
        95_000,
        305_000,
        "",
    );
    t.x(
        "python_function",
        "model.py(18): head",
        PID,
        MAIN,
        990_000,
        210_000,
        "",
    );
    t
}

/// Call sites read from torch 2.x's Python functions are functions, not lines, and the report
/// says so; read with a trace of lines, it says both.
#[test]
fn call_sites_from_python_functions_are_named_functions() {
    let dir = tempdir("ops-site-functions");
    let trace = dir.join("torch-rank0.trace.json.gz");
    with_python_functions(0).write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    let o = &s["operators"];
    assert_eq!(o["call_sites"], "functions");
    let sites: Vec<(&str, i64)> = o["by_call_site"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["call_site"].as_str().unwrap(), i(&r["calls"])))
        .collect();
    // linear (holding t and the first addmm), the second addmm, then copy_ in the module's frame.
    assert_eq!(
        sites,
        [
            ("model.py(10): forward", 1),
            ("model.py(18): head", 1),
            ("train.py(38): <module>", 1)
        ]
    );
    assert!(
        stdout.contains("By the Python function that called them (the innermost frame"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  #  Python function         calls"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  operator       Python function         count  GPU idle before\n"),
        "{stdout}"
    );
    // The pageable copy's source, at its function.
    assert!(
        stdout.contains("  aten::copy_  train.py(38): <module>      1  100.000 µs  4.0 KiB"),
        "{stdout}"
    );
    assert!(!stdout.contains("Python line"), "{stdout}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<h3>By the Python function that called them</h3>"));
    assert!(html.contains("<th>Python function</th>"));
    assert!(html.contains("with the operators and Python functions behind them"));
    assert!(!html.contains("Python line"));

    // Rank 1 of the same run (the same name).
    let lines = dir.join("torch-rank1.trace.json.gz");
    let mut t = with_operators(300_000, true);
    t.rank = 1;
    t.write_gz(&lines);
    let both = dir.join("both");
    let stdout = cuprof_ok(&[
        "report",
        trace.to_str().unwrap(),
        lines.to_str().unwrap(),
        "-o",
        both.to_str().unwrap(),
    ]);
    let s = read_json(&both.join("summary.json"));
    assert_eq!(s["operators"]["call_sites"], "lines_and_functions");
    assert!(
        stdout.contains("By the Python line or function that called them"),
        "{stdout}"
    );
}

/// `compare` puts each operator's own allocations of A and B side by side, GPU first.
#[test]
fn compare_operators_allocations() {
    let dir = tempdir("ops-compare-memory");
    let a = dir.join("a-rank0.trace.json.gz");
    let b = dir.join("b-rank0.trace.json.gz");
    let plain = dir.join("p-rank0.trace.json.gz");
    with_allocations().write_gz(&a);
    // B: the first addmm allocates 2 KiB on the GPU instead of 4.
    let mut t = with_allocations();
    t.events.retain(|e| !e.contains(r#""Bytes": 4096,"#));
    t.tensor_memory(MAIN, 160_000, 2048, 1);
    t.write_gz(&b);
    with_operators(300_000, true).write_gz(&plain);
    let (a, b, plain) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        plain.to_str().unwrap(),
    );
    let mem = |c: &Value| -> Vec<(String, [Option<i64>; 4])> {
        c["operators"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let k = [
                    "a_self_cpu_mem_bytes",
                    "b_self_cpu_mem_bytes",
                    "a_self_device_mem_bytes",
                    "b_self_device_mem_bytes",
                ];
                (
                    r["name"].as_str().unwrap().to_string(),
                    k.map(|k| r[k].as_i64()),
                )
            })
            .collect()
    };
    let c: Value = serde_json::from_str(&cuprof_ok(&["compare", a, b, "--json"])).unwrap();
    let n = |v: [i64; 4]| v.map(Some);
    assert_eq!(
        mem(&c),
        [
            ("aten::addmm".to_string(), n([0, 0, 12_288, 10_240])),
            ("aten::copy_".to_string(), n([0, 0, 0, 0])),
            ("aten::linear".to_string(), n([-256, -256, 0, 0])),
            ("aten::mul".to_string(), n([64, 64, 0, 0])),
            ("aten::t".to_string(), n([256, 256, 0, 0])),
        ]
    );
    let text = cuprof_ok(&["compare", a, b]);
    assert!(
        text.contains("  CPU B-A  self GPU mem A  self GPU mem B\n"),
        "{text}"
    );
    assert!(
        text.contains("  300.000 µs     0 ns        12.0 KiB        10.0 KiB\n"),
        "{text}"
    );
    // B without allocations: its figures are absent, its cells empty.
    let c: Value = serde_json::from_str(&cuprof_ok(&["compare", a, plain, "--json"])).unwrap();
    assert_eq!(
        mem(&c)[0],
        (
            "aten::addmm".to_string(),
            [Some(0), None, Some(12_288), None]
        )
    );
    let text = cuprof_ok(&["compare", plain, plain]);
    assert!(!text.contains(" mem "), "{text}");
}

#[test]
fn compare_operators() {
    let dir = tempdir("ops-compare");
    let a = dir.join("a-rank0.trace.json.gz");
    let b = dir.join("b-rank0.trace.json.gz");
    let plain = dir.join("p-rank0.trace.json.gz");
    with_operators(300_000, true).write_gz(&a);
    // B: the first GEMM takes 150 µs instead of 300, and aten::mul is gone.
    with_operators(150_000, false).write_gz(&b);
    sample().write_gz(&plain);
    let (a, b, plain) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        plain.to_str().unwrap(),
    );
    let c: Value = serde_json::from_str(&cuprof_ok(&["compare", a, b, "--json"])).unwrap();
    let got: Vec<(String, [i64; 8], Option<f64>)> = c["operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let k = [
                "a_count",
                "b_count",
                "a_cpu_ns",
                "b_cpu_ns",
                "a_self_cpu_ns",
                "b_self_cpu_ns",
                "a_gpu_ns",
                "b_gpu_ns",
            ];
            assert_eq!(i(&r["cpu_delta_ns"]), i(&r["b_cpu_ns"]) - i(&r["a_cpu_ns"]));
            assert_eq!(i(&r["gpu_delta_ns"]), i(&r["b_gpu_ns"]) - i(&r["a_gpu_ns"]));
            (
                r["name"].as_str().unwrap().to_string(),
                k.map(|k| i(&r[k])),
                r["gpu_ratio"].as_f64(),
            )
        })
        .collect();
    let s = |n: &str| n.to_string();
    assert_eq!(
        got,
        [
            (
                s("aten::addmm"),
                [2, 2, 300_000, 300_000, 300_000, 300_000, 450_000, 300_000],
                Some(300_000.0 / 450_000.0)
            ),
            (
                s("aten::copy_"),
                [1, 1, 100_000, 100_000, 100_000, 100_000, 100_000, 100_000],
                Some(1.0)
            ),
            (
                s("aten::linear"),
                [1, 1, 300_000, 300_000, 80_000, 80_000, 0, 0],
                None
            ),
            (s("aten::mul"), [1, 0, 100_000, 0, 100_000, 0, 0, 0], None),
            (
                s("aten::t"),
                [1, 1, 20_000, 20_000, 20_000, 20_000, 0, 0],
                None
            ),
        ]
    );
    let text = cuprof_ok(&["compare", a, b]);
    assert!(
        text.contains(
            "  aten::addmm   450.000 µs  300.000 µs  0.667x  -150.000 µs  300.000 µs  300.000 µs         0 ns\n\
             \x20 aten::copy_   100.000 µs  100.000 µs  1.000x         0 ns  100.000 µs  100.000 µs         0 ns\n\
             \x20 aten::linear        0 ns        0 ns                 0 ns  300.000 µs  300.000 µs         0 ns\n\
             \x20 aten::mul           0 ns        0 ns                 0 ns  100.000 µs        0 ns  -100.000 µs\n"
        ),
        "{text}"
    );

    // Only one side with operators: no rows, and the text says why.
    let c: Value = serde_json::from_str(&cuprof_ok(&["compare", a, plain, "--json"])).unwrap();
    assert!(c.get("operators").is_none());
    let text = cuprof_ok(&["compare", a, plain]);
    assert!(
        text.ends_with("operators: only A has them (B has no cpu_op events)\n"),
        "{text}"
    );
    assert!(!cuprof_ok(&["compare", plain, plain]).contains("operators"));
}

/// A page carries no absolute source path: the call sites' chart, its tooltips and the flame
/// graph show a package's file from the package on and any other file as its folder and name,
/// while the terminal and summary.json keep each path whole.
#[test]
fn a_page_shows_source_paths_without_their_folders() {
    let dir = tempdir("ops-page-paths");
    let trace = dir.join("run-rank0.trace.json.gz");
    let mut t = with_operators(300_000, true);
    for e in &mut t.events {
        *e = e
            .replace("model.py(", "/home/alice/proj/model.py(")
            .replace("train.py(", "/v/lib/python3.12/site-packages/acc/train.py(");
    }
    t.write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    assert_eq!(
        s["operators"]["by_call_site"][0]["call_site"],
        "/home/alice/proj/model.py(12): forward"
    );
    assert!(
        stdout.contains("/home/alice/proj/model.py(12): forward"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!html.contains("/home/alice"), "{html}");
    assert!(!html.contains("site-packages"), "{html}");
    // The chart's tooltip, and the flame graph's frames (inferno's titles: name, then time).
    assert!(
        html.contains("<title>proj/model.py(20): head\n1 calls entered;"),
        "{html}"
    );
    let flame = &html[html.find(r#"id="cp-flame""#).unwrap()..];
    assert_eq!(
        flame
            .matches("<title>acc/train.py(40): &lt;module&gt; (")
            .count(),
        1
    );
    assert_eq!(
        flame.matches("<title>proj/model.py(12): forward (").count(),
        1
    );
    assert_eq!(flame.matches("<title>proj/model.py(20): head (").count(), 1);
}
