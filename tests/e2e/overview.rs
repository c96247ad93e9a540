//! TensorBoard's profiler plugin (torch-tb-profiler, through its own parser and run generator:
//! tests/apps/tb_overview.py) on every kind of cuprof trace: the whole run, a capture range, a
//! trace repaired after SIGKILL (none of which has steps) and a schedule's cycles (which have).
//! Its Overview must show real step times and a GPU utilization that agrees with `cuprof
//! report`, its Kernel view the kernels, and its Trace view the file; and the plugin itself
//! (tests/apps/tb_logdir.py) must list the run and worker of traces written for it
//! (`CUPROF_TENSORBOARD`) in cuprof's output folder. Needs `torch-tb-profiler`
//! for `python3` (scripts/test.sh installs it).

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// What the plugin shows for one trace.
fn plugin(trace: &Path) -> Value {
    let out = Command::new("python3")
        .arg(apps().join("tb_overview.py"))
        .arg(trace)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "tb_overview.py failed (needs torch-tb-profiler: run `bash scripts/test.sh`, which installs scripts/python-requirements.txt): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

/// What the plugin itself lists for `tensorboard --logdir DIR` (tests/apps/tb_logdir.py).
fn plugin_logdir(dir: &Path) -> Value {
    let out = Command::new("python3")
        .arg(apps().join("tb_logdir.py"))
        .arg(dir)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "tb_logdir.py failed (needs torch-tb-profiler: run `bash scripts/test.sh`, which installs scripts/python-requirements.txt): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

/// First start and last end (µs) of the trace's kernels, copies and sets.
fn gpu_window(trace: &Value) -> (f64, f64) {
    let ops: Vec<&Value> = ["kernel", "gpu_memcpy", "gpu_memset"]
        .iter()
        .flat_map(|c| events(trace, c))
        .collect();
    let first = ops.iter().map(|e| f(&e["ts"])).fold(f64::MAX, f64::min);
    let last = ops
        .iter()
        .map(|e| f(&e["ts"]) + f(&e["dur"]))
        .fold(f64::MIN, f64::max);
    (first, last)
}

/// Share of `[from, to]` (µs) during which a kernel ran.
fn kernel_share(trace: &Value, from: f64, to: f64) -> f64 {
    let mut spans: Vec<(f64, f64)> = events(trace, "kernel")
        .iter()
        .map(|e| (f(&e["ts"]).max(from), (f(&e["ts"]) + f(&e["dur"])).min(to)))
        .filter(|(a, b)| a < b)
        .collect();
    spans.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (mut busy, mut reach) = (0.0, from);
    for (a, b) in spans {
        if b > reach {
            busy += b - a.max(reach);
            reach = b;
        }
    }
    busy / (to - from)
}

/// The plugin's figures for one device: its Kernel view and Trace view are there, the kernels
/// are all in the Kernel view, its advice is what its utilization calls for, and the plugin found nothing
/// to complain of in the input (it drops a range it cannot nest, such as one of two touching
/// steps whose ends its float arithmetic sees overlapping).
fn common_views(tb: &Value, kernels: u64) {
    assert_eq!(tb["complaints"], serde_json::json!([]));
    assert_eq!(
        tb["views"],
        serde_json::json!(["Overview", "Operator", "Kernel", "Trace"])
    );
    assert_eq!(tb["kernels"], serde_json::json!({ "gemm()": kernels }));
    assert_eq!(tb["trace_file"], true);
    // Its one recommendation comes from a utilization under 50%, which only a loaded host
    // makes of these steps (their sleeps overrun); the callers check the utilization itself
    // against the trace.
    let expected = if f(&tb["gpu_utilization"]["0"]) < 0.5 {
        "<ul><li>GPU 0 has low utilization. You could try to increase batch size to improve. \
         Note: Increasing batch size may affect the speed and stability of model \
         convergence.</li></ul>"
    } else {
        "<ul><li>N/A</li></ul>"
    };
    assert_eq!(tb["recommendations"], expected);
}

/// A trace without steps: the plugin's one step is the GPU window `cuprof report` measures
/// over, and its utilization is the report's kernel share of it, within 1% of its busy share.
fn check_without_steps(path: &Path, dir: &Path, kernels: u64) {
    let trace = read_trace(path);
    let (first, last) = gpu_window(&trace);
    let span: Vec<&Value> = events(&trace, "python");
    assert_eq!(span.len(), 1);
    assert_eq!(span[0]["name"], "GPU work (no steps recorded)");
    assert_eq!(span[0]["tid"], 0);
    assert_eq!(f(&span[0]["ts"]), first);
    assert!((f(&span[0]["dur"]) - (last - first)).abs() < 0.0015);

    let tb = plugin(path);
    common_views(&tb, kernels);
    let steps = tb["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{tb}");
    assert_eq!(steps[0][0], "0");
    // The plugin adds µs as floats: 1 ns of rounding either way.
    assert!((f(&steps[0][1]) - (last - first)).abs() < 0.0015, "{tb}");

    let summary = report_summary(path, dir);
    let gpu = &summary["ranks"][0]["gpu"];
    let wall = f(&gpu["wall_ns"]);
    assert!((wall / 1e3 - f(&steps[0][1])).abs() < 0.0015);
    let utilization = f(&tb["gpu_utilization"]["0"]);
    let kernel_time = f(&gpu["compute_ns"]) + f(&gpu["communication_ns"]);
    assert!(
        (utilization - kernel_time / wall).abs() < 1e-6,
        "{utilization} {gpu}"
    );
    let busy = f(&gpu["busy_ns"]) / wall;
    assert!((utilization - busy).abs() < 0.01, "{utilization} {busy}");
    // The double runs each kernel for exactly its 5 ms (tests/apps/overview.py): the GPU's
    // busy time is the program's at any load, where its share of the window is not (the gaps
    // between iterations are host time, longer on a loaded host).
    assert_eq!(f(&gpu["compute_ns"]), kernels as f64 * 5e6, "{gpu}");
}

#[test]
fn whole_run_trace() {
    let dir = TempDir::new("tb-whole");
    Run::python("overview.py", &["whole"], dir.path()).ok_json();
    check_without_steps(&dir.path().join("t-rank0.trace.json.gz"), dir.path(), 16);
}

#[test]
fn capture_range_traces() {
    let dir = TempDir::new("tb-capture");
    Run::python("overview.py", &["capture", "3"], dir.path())
        .env("CUPROF_CAPTURE_RANGE", "cudaProfilerApi")
        .env("CUPROF_REPEAT", "2")
        .ok_json();
    for cycle in [1, 2] {
        let path = dir
            .path()
            .join(format!("t-rank0-cycle{cycle}.trace.json.gz"));
        check_without_steps(&path, dir.path(), 4);
    }
}

#[test]
fn repaired_trace() {
    let dir = TempDir::new("tb-repaired");
    let out = Run::python("overview.py", &["sigkill", "3"], dir.path()).output();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(9)
    );
    let cut = dir.path().join("t-rank0.trace.json.gz");
    let repair = Command::new(cuprof_bin())
        .arg("repair")
        .arg(&cut)
        .output()
        .unwrap();
    assert!(
        repair.status.success(),
        "{}",
        String::from_utf8_lossy(&repair.stderr)
    );
    let repaired = dir.path().join("t-rank0.repaired.trace.json.gz");
    std::fs::remove_file(&cut).unwrap();
    check_without_steps(&repaired, dir.path(), 12);
}

/// Traced with `CUPROF_TENSORBOARD` (`cuprof run --tensorboard`): the plugin, given cuprof's
/// output folder as its log directory, lists it as a run whose worker is the rank and whose
/// spans are the cycles, and reads each file where cuprof wrote it.
#[test]
fn scheduled_cycles() {
    let dir = TempDir::new("tb-steps");
    Run::python("overview.py", &["steps", "6"], dir.path())
        .env("CUPROF_WAIT", "1")
        .env("CUPROF_ACTIVE", "2")
        .env("CUPROF_REPEAT", "2")
        .env("CUPROF_TENSORBOARD", "1")
        .ok_json();
    let run = dir.path().file_name().unwrap().to_str().unwrap();
    assert_eq!(
        plugin_logdir(dir.path()),
        serde_json::json!({
            "runs": [run],
            "workers": { run: ["t-rank0"] },
            "spans": { run: { "t-rank0": ["1", "2"] } },
        })
    );
    for (cycle, numbers) in [(1, ["1", "2"]), (2, ["4", "5"])] {
        let path = dir.path().join(format!("t-rank0.{cycle}.pt.trace.json.gz"));
        let trace = read_trace(&path);
        // The header's window, as docs/trace-format.md writes it.
        assert_eq!(
            trace["cuprof"]["window"],
            "wait=1 warmup=0 active=2 repeat=2 source=cuprof_step"
        );
        // Steps of their own: no GPU-work span.
        assert!(events(&trace, "python").is_empty());
        let tb = plugin(&path);
        common_views(&tb, 8);
        let summary = report_summary(&path, dir.path());
        // The plugin's steps are the report's, time for time.
        let theirs: Vec<(String, f64)> = tb["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s[0].as_str().unwrap().to_string(), f(&s[1])))
            .collect();
        let ours = summary["ranks"][0]["step_times"].as_array().unwrap();
        assert_eq!(theirs.len(), 2, "{tb}");
        for ((name, us), (number, step)) in theirs.iter().zip(numbers.iter().zip(ours)) {
            assert_eq!(name, number);
            assert_eq!(step["step"].to_string(), *number);
            assert!((us - f(&step["dur_ns"]) / 1e3).abs() < 0.0015, "{tb}");
            assert!(*us > 0.0);
        }
        // Utilization is over the steps (host time, the plugin's definition): the share of
        // them during which a kernel ran.
        let steps = events(&trace, "user_annotation");
        let from = steps.iter().map(|e| f(&e["ts"])).fold(f64::MAX, f64::min);
        let to = steps
            .iter()
            .map(|e| f(&e["ts"]) + f(&e["dur"]))
            .fold(f64::MIN, f64::max);
        let utilization = f(&tb["gpu_utilization"]["0"]);
        let expected = kernel_share(&trace, from, to);
        assert!(
            (utilization - expected).abs() < 1e-6,
            "{utilization} {expected}"
        );
    }
}
