//! `cuprof report`'s module view: CPU and GPU time per nn.Module path (self and inclusive),
//! rolled up to a depth, by class and by attribute name, from `nn.Module: ...` python_function
//! events as cuprof writes them (with `Module path`) and as torch.profiler does (without); the
//! one line of a trace without them; `cuprof flame --modules`.

use std::path::Path;

use crate::analysis_support::*;
use serde_json::{json, Value};

/// An operator on `tid` from `start` for `dur`, launching one kernel of `kernel_ns`.
fn op(t: &mut Trace, name: &str, tid: i64, ext: i64, start: i64, dur: i64, kernel_ns: i64) {
    t.cpu_op(name, tid, start, dur, ext, None, None);
    t.launch_in(
        ext,
        "cudaLaunchKernel",
        "kernel",
        &format!("kernel_{ext}"),
        tid,
        start + 500,
        1_000_000 + ext * 100_000,
        kernel_ns,
        true,
    );
}

/// One forward of `Net` (times in ns):
///
/// | module call (path) | span | operators inside it directly (kernel ns) |
/// | Net_0 (Net) | 0-100 µs | aten::mul 96-99 µs (2,000) |
/// | Block_0 (Net.layers.0) | 10-50 µs | aten::add 40-45 µs (1,000) |
/// | Linear_0 (Net.layers.0.q_proj) | 12-22 µs | aten::linear (5,000) |
/// | Linear_1 (Net.layers.0.k_proj) | 25-35 µs | aten::linear (3,000) |
/// | Block_1 (Net.layers.1) | 55-95 µs | |
/// | Linear_2 (Net.layers.1.q_proj) | 60-70 µs | aten::linear (7,000) |
/// | GELU_0 (Net.layers.1.act) | 75-80 µs | |
///
/// Outside every call: aten::sum at 200 µs (4,000) and a backward operator on the autograd
/// thread (6,000). `paths`: the calls carry `Module path` (cuprof), else not (torch).
fn net(paths: bool, modules: bool) -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN, OTHER]);
    let calls = [
        ("Net_0", "Net", 0, 100_000),
        ("Block_0", "Net.layers.0", 10_000, 40_000),
        ("Linear_0", "Net.layers.0.q_proj", 12_000, 10_000),
        ("Linear_1", "Net.layers.0.k_proj", 25_000, 10_000),
        ("Block_1", "Net.layers.1", 55_000, 40_000),
        ("Linear_2", "Net.layers.1.q_proj", 60_000, 10_000),
        ("GELU_0", "Net.layers.1.act", 75_000, 5_000),
    ];
    if modules {
        for (i, (name, path, start, dur)) in calls.into_iter().enumerate() {
            let id = i as i64 + 1;
            module_call(
                &mut t,
                name,
                paths.then_some(path),
                (start, dur),
                (id, id - 1),
            );
        }
    }
    op(&mut t, "aten::linear", MAIN, 1, 13_000, 7_000, 5_000);
    op(&mut t, "aten::linear", MAIN, 2, 26_000, 7_000, 3_000);
    op(&mut t, "aten::add", MAIN, 3, 40_000, 5_000, 1_000);
    op(&mut t, "aten::linear", MAIN, 4, 61_000, 7_000, 7_000);
    op(&mut t, "aten::mul", MAIN, 5, 96_000, 3_000, 2_000);
    op(&mut t, "aten::sum", MAIN, 6, 200_000, 10_000, 4_000);
    op(
        &mut t,
        "autograd::engine::evaluate_function: AddmmBackward0",
        OTHER,
        7,
        120_000,
        10_000,
        6_000,
    );
    t
}

/// `[name, calls, cpu_self_ns, cpu_inclusive_ns, gpu_self_ns, gpu_inclusive_ns]` per row.
fn rows(m: &Value) -> Vec<Value> {
    m["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            json!([
                r["name"],
                r["calls"],
                r["cpu_self_ns"],
                r["cpu_inclusive_ns"],
                r["gpu_self_ns"],
                r["gpu_inclusive_ns"]
            ])
        })
        .collect()
}

fn report_with(trace: &Path, out: &Path, extra: &[&str]) -> (String, Value) {
    let mut args = vec![
        "report",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let stdout = cuprof_ok(&args);
    (stdout, read_json(&out.join("summary.json")))
}

/// The lines of section `title` in the terminal report.
fn section<'a>(stdout: &'a str, title: &str) -> Vec<&'a str> {
    stdout
        .split(&format!("== {title} ==\n"))
        .nth(1)
        .and_then(|r| r.split("\n\n").next())
        .unwrap_or_else(|| panic!("no section {title} in {stdout}"))
        .lines()
        .collect()
}

#[test]
fn module_paths_self_and_inclusive_in_every_output() {
    let dir = tempdir("modules");
    let trace = dir.join("t-rank0.trace.json.gz");
    net(true, true).write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report_with(&trace, &out, &[]);
    let m = &s["modules"];
    assert_eq!(m["by"], "path");
    assert_eq!(m["depth"], Value::Null);
    assert_eq!(
        rows(m),
        [
            json!(["Net", 1, 20_000, 100_000, 2_000, 18_000]),
            json!(["Net.layers.0", 1, 20_000, 40_000, 1_000, 9_000]),
            json!(["Net.layers.1", 1, 25_000, 40_000, 0, 7_000]),
            json!(["Net.layers.1.q_proj", 1, 10_000, 10_000, 7_000, 7_000]),
            json!(["Net.layers.0.q_proj", 1, 10_000, 10_000, 5_000, 5_000]),
            json!(["Net.layers.0.k_proj", 1, 10_000, 10_000, 3_000, 3_000]),
            json!(["Net.layers.1.act", 1, 5_000, 5_000, 0, 0]),
        ]
    );
    // aten::sum outside the model, and the backward operator on the autograd thread.
    assert_eq!(m["outside_gpu_ns"], 10_000);
    assert_eq!(m.get("note"), None);
    assert_eq!(
        section(&stdout, "Modules (CPU and GPU time per nn.Module path)"),
        [
            "  module               calls   CPU self   CPU total  GPU self  GPU total",
            "  Net                      1  20.000 µs  100.000 µs  2.000 µs  18.000 µs",
            "  Net.layers.0             1  20.000 µs   40.000 µs  1.000 µs   9.000 µs",
            "  Net.layers.1             1  25.000 µs   40.000 µs      0 ns   7.000 µs",
            "  Net.layers.1.q_proj      1  10.000 µs   10.000 µs  7.000 µs   7.000 µs",
            "  Net.layers.0.q_proj      1  10.000 µs   10.000 µs  5.000 µs   5.000 µs",
            "  Net.layers.0.k_proj      1  10.000 µs   10.000 µs  3.000 µs   3.000 µs",
            "  Net.layers.1.act         1   5.000 µs    5.000 µs      0 ns       0 ns",
            "GPU time of kernels launched outside every module call (backward, optimizer, code outside the model): 10.000 µs",
        ]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Modules (CPU and GPU time per nn.Module path)"));
    assert!(
        md.contains("| Net.layers.0 | 1 | 20.000 µs | 40.000 µs | 1.000 µs | 9.000 µs |"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(r#"<section id="cp-modules"><h2>Modules</h2>"#));
    assert!(html.contains("<td><code>Net.layers.0</code></td>"));
    assert!(
        html.contains(r#"data-key="modules.rows.1.gpu_inclusive_ns" data-value="9000""#),
        "{html}"
    );
    assert!(html.contains(r#"data-key="modules.rows.2.cpu_self_ns" data-value="25000""#));
    assert!(html.contains(r#"data-key="modules.outside_gpu_ns" data-value="10000""#));
}

#[test]
fn module_rollups_to_a_depth_by_class_and_by_attribute() {
    let dir = tempdir("modules-rollup");
    let trace = dir.join("t-rank0.trace.json.gz");
    net(true, true).write_gz(&trace);
    // Depth 2: the blocks and all under them in `Net.layers`, counted once: 2 calls, 80 µs.
    let (stdout, s) = report_with(&trace, &dir.join("d2"), &["--module-depth", "2"]);
    assert_eq!(s["modules"]["depth"], 2);
    assert_eq!(
        rows(&s["modules"]),
        [
            json!(["Net", 1, 20_000, 100_000, 2_000, 18_000]),
            json!(["Net.layers", 2, 80_000, 80_000, 16_000, 16_000]),
        ]
    );
    assert!(stdout
        .contains("== Modules (CPU and GPU time per nn.Module path, rolled up to depth 2) =="));
    let (_, s) = report_with(&trace, &dir.join("d1"), &["--module-depth", "1"]);
    assert_eq!(
        rows(&s["modules"]),
        [json!(["Net", 1, 100_000, 100_000, 18_000, 18_000])]
    );
    let (stdout, s) = report_with(&trace, &dir.join("class"), &["--module-by", "class"]);
    assert_eq!(s["modules"]["by"], "class");
    assert_eq!(
        rows(&s["modules"]),
        [
            json!(["Net", 1, 20_000, 100_000, 2_000, 18_000]),
            json!(["Block", 2, 45_000, 80_000, 1_000, 16_000]),
            json!(["Linear", 3, 30_000, 30_000, 15_000, 15_000]),
            json!(["GELU", 1, 5_000, 5_000, 0, 0]),
        ]
    );
    assert!(stdout.contains("== Modules (CPU and GPU time per nn.Module class) =="));
    // Every q_proj in one bucket; list items as `*`.
    let (_, s) = report_with(&trace, &dir.join("attr"), &["--module-by", "attribute"]);
    assert_eq!(
        rows(&s["modules"]),
        [
            json!(["Net", 1, 20_000, 100_000, 2_000, 18_000]),
            json!(["layers.*", 2, 45_000, 80_000, 1_000, 16_000]),
            json!(["q_proj", 2, 20_000, 20_000, 12_000, 12_000]),
            json!(["k_proj", 1, 10_000, 10_000, 3_000, 3_000]),
            json!(["act", 1, 5_000, 5_000, 0, 0]),
        ]
    );
    let refused = cuprof(&[
        "report",
        trace.to_str().unwrap(),
        "--module-by",
        "class",
        "--module-depth",
        "2",
    ]);
    assert!(!refused.status.success());
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim_end(),
        "cuprof: --module-depth cuts module paths; it goes with --module-by path only, not class or attribute"
    );
}

/// torch.profiler's own trace has no `Module path`: the paths are the nested calls' names, and
/// attributes fall back to classes.
#[test]
fn torch_profilers_module_events_nest_into_paths() {
    let dir = tempdir("modules-torch");
    let trace = dir.join("torch.json");
    std::fs::write(&trace, net(false, true).json()).unwrap();
    let (_, s) = report_with(&trace, &dir.join("path"), &[]);
    assert_eq!(
        rows(&s["modules"]),
        [
            json!(["Net_0", 1, 20_000, 100_000, 2_000, 18_000]),
            json!(["Net_0.Block_0", 1, 20_000, 40_000, 1_000, 9_000]),
            json!(["Net_0.Block_1", 1, 25_000, 40_000, 0, 7_000]),
            json!(["Net_0.Block_1.Linear_2", 1, 10_000, 10_000, 7_000, 7_000]),
            json!(["Net_0.Block_0.Linear_0", 1, 10_000, 10_000, 5_000, 5_000]),
            json!(["Net_0.Block_0.Linear_1", 1, 10_000, 10_000, 3_000, 3_000]),
            json!(["Net_0.Block_1.GELU_0", 1, 5_000, 5_000, 0, 0]),
        ]
    );
    let (_, s) = report_with(&trace, &dir.join("attr"), &["--module-by", "attribute"]);
    let names: Vec<Value> = rows(&s["modules"]).iter().map(|r| r[0].clone()).collect();
    assert_eq!(
        names,
        [json!("Net"), json!("Block"), json!("Linear"), json!("GELU")]
    );
}

/// Without module calls, or without operators at all, the section is one line saying so.
#[test]
fn no_module_calls_or_no_operators_one_line() {
    let dir = tempdir("modules-none");
    let trace = dir.join("t-rank0.trace.json.gz");
    net(true, false).write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report_with(&trace, &out, &[]);
    let line = "no nn.Module calls in the trace(s): record them with `cuprof run --with-modules`, or torch.profiler's with_stack=True";
    assert_eq!(s["modules"]["note"], line);
    assert_eq!(s["modules"]["rows"], json!([]));
    assert_eq!(
        section(&stdout, "Modules (CPU and GPU time per nn.Module path)"),
        [line]
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(
        "<p>no nn.Module calls in the trace(s): record them with `cuprof run --with-modules`, or torch.profiler&#39;s with_stack=True</p></section>"
    ));

    let trace = dir.join("nvtx-rank0.trace.json.gz");
    sample().write_gz(&trace);
    let (stdout, s) = report_with(&trace, &dir.join("nvtx"), &[]);
    let line = "no PyTorch in the trace(s) (no `cpu_op` events): the module view needs a PyTorch program's trace";
    assert_eq!(s["modules"]["note"], line);
    assert_eq!(
        section(&stdout, "Modules (CPU and GPU time per nn.Module path)"),
        [line]
    );
    let svg = dir.join("m.svg");
    let refused = cuprof(&[
        "flame",
        trace.to_str().unwrap(),
        "--modules",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    assert_eq!(
        String::from_utf8_lossy(&refused.stderr).trim_end(),
        format!("cuprof: {}: {line}", trace.display())
    );
}

/// `cuprof flame --modules`: module path -> operators -> kernel.
#[test]
fn flame_by_module_path() {
    let dir = tempdir("modules-flame");
    let trace = dir.join("t-rank0.trace.json.gz");
    net(true, true).write_gz(&trace);
    let folded = dir.join("m.folded");
    let svg = dir.join("m.svg");
    cuprof_ok(&[
        "flame",
        trace.to_str().unwrap(),
        "--modules",
        "-o",
        svg.to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
    ]);
    assert_eq!(
        std::fs::read_to_string(&folded).unwrap(),
        "(no module);aten::sum;kernel_6 4000\n\
         (no module);autograd::engine::evaluate_function: AddmmBackward0;kernel_7 6000\n\
         Net;aten::mul;kernel_5 2000\n\
         Net;layers;0;aten::add;kernel_3 1000\n\
         Net;layers;0;k_proj;aten::linear;kernel_2 3000\n\
         Net;layers;0;q_proj;aten::linear;kernel_1 5000\n\
         Net;layers;1;q_proj;aten::linear;kernel_4 7000\n"
    );
    assert!(std::fs::read_to_string(&svg)
        .unwrap()
        .contains("GPU time by nn.Module path, operator and kernel"));
}

/// Leaks are grouped by the module path their operator ran in too.
#[test]
fn leaks_grouped_by_module() {
    let dir = tempdir("modules-leaks");
    let trace = dir.join("t-rank0.trace.json.gz");
    let mut t = net(true, true);
    // In q_proj's aten::linear, and in aten::sum outside every module; neither freed.
    t.tensor_memory_at(MAIN, 14_000, 4096, 1, 7);
    t.tensor_memory_at(MAIN, 201_000, 512, 1, 8);
    t.write_gz(&trace);
    let (stdout, s) = report_with(&trace, &dir.join("out"), &[]);
    assert_eq!(
        s["allocations"][0]["leaks"],
        json!([
            {"operator": "aten::linear", "module": "Net.layers.0.q_proj", "bytes": 4096, "count": 1},
            {"operator": "aten::sum", "bytes": 512, "count": 1},
        ])
    );
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains("leaked")).collect();
    assert_eq!(
        lines,
        [
            "  leaked   4.0 KiB            1  aten::linear  Net.layers.0.q_proj",
            "  leaked     512 B            1  aten::sum",
        ]
    );
}

/// `cuprof export`'s `modules` table holds every call as written, and docs/tables.md's two
/// module queries, run in DuckDB over it, give the report's calls, CPU and GPU inclusive time
/// per path.
#[test]
fn exported_module_calls_and_their_documented_queries() {
    use crate::export_support::{duckdb, query_after, Rows};
    let dir = tempdir("modules-export");
    let trace = dir.join("net-rank0.trace.json.gz");
    net(true, true).write_gz(&trace);
    let out = dir.join("ds");
    cuprof_ok(&[
        "export",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let m = Rows::read(&out.join("modules/rank=0/cycle=1/net-rank0.parquet"));
    assert_eq!(
        m.text("name"),
        ["Net_0", "Block_0", "Linear_0", "Linear_1", "Block_1", "Linear_2", "GELU_0"]
    );
    assert_eq!(
        m.text("class"),
        ["Net", "Block", "Linear", "Linear", "Block", "Linear", "GELU"]
    );
    assert_eq!(m.texts("path")[3].as_deref(), Some("Net.layers.0.k_proj"));
    assert_eq!(m.ints("tid"), [Some(MAIN); 7]);
    assert_eq!(
        m.int("start_ns"),
        [0, 10_000, 12_000, 25_000, 55_000, 60_000, 75_000]
    );
    assert_eq!(
        m.int("end_ns"),
        [100_000, 50_000, 22_000, 35_000, 95_000, 70_000, 80_000]
    );
    assert_eq!(m.ints("python_id"), (1..=7).map(Some).collect::<Vec<_>>());
    assert_eq!(
        m.ints("python_parent_id"),
        (0..7).map(Some).collect::<Vec<_>>()
    );

    let (_, summary) = report_with(&trace, &dir.join("report"), &[]);
    let report: Vec<(String, i64, i64, i64)> = summary["modules"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_i64().unwrap();
            let name = r["name"].as_str().unwrap().to_string();
            (
                name,
                n("calls"),
                n("cpu_inclusive_ns"),
                n("gpu_inclusive_ns"),
            )
        })
        .collect();
    let cpu: Vec<(String, i64, i64)> = duckdb(
        &out,
        &query_after("Time per `nn.Module` path (`cuprof report`'s module view"),
    );
    // The block after the CPU query's.
    let gpu_sql = query_after("FROM modules GROUP BY path ORDER BY path;");
    assert!(gpu_sql.starts_with("SELECT m.path"), "{gpu_sql}");
    let gpu: std::collections::BTreeMap<String, i64> = duckdb::<Vec<(String, i64)>>(&out, &gpu_sql)
        .into_iter()
        .collect();
    let queried: Vec<(String, i64, i64, i64)> = cpu
        .into_iter()
        .map(|(path, calls, cpu_ns)| {
            let g = gpu.get(&path).copied().unwrap_or(0);
            (path, calls, cpu_ns, g)
        })
        .collect();
    let mut report = report;
    report.sort();
    assert_eq!(queried, report);
    assert_eq!(queried[0], ("Net".to_string(), 1, 100_000, 18_000));
}
