//! Issue 4 end to end: the profiling window and its step sources, ranks and file names, the
//! torchrun-like parent, invalid environment values, processes that never touch CUDA.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

fn steps_of(trace: &Value) -> Vec<String> {
    let mut s: Vec<String> = events(trace, "user_annotation")
        .iter()
        .filter_map(|e| {
            e["name"]
                .as_str()
                .filter(|n| n.starts_with("ProfilerStep#"))
                .map(String::from)
        })
        .collect();
    s.sort();
    s
}

fn kernels_by_name(trace: &Value) -> std::collections::BTreeMap<String, usize> {
    count_by_name(&events(trace, "kernel"))
}

fn trace(dir: &TempDir, file: &str) -> Value {
    read_trace(&dir.path().join(file))
}

#[test]
fn nvtx_steps_two_cycles_hold_exactly_their_recorded_steps() {
    let [c1, c2] = two_nvtx_cycles("nvtx-steps", &[]);
    assert_eq!(steps_of(&c1), vec!["ProfilerStep#2", "ProfilerStep#3"]);
    assert_eq!(steps_of(&c2), vec!["ProfilerStep#6", "ProfilerStep#7"]);
    for c in [&c1, &c2] {
        // Two steps of 3 kernels, 1 copy, 1 memset; the step ranges themselves are kept.
        assert_eq!(events(c, "kernel").len(), 6);
        assert_eq!(events(c, "gpu_memcpy").len(), 2);
        assert_eq!(events(c, "gpu_memset").len(), 2);
        assert_eq!(
            names(&events(c, "user_annotation"))
                .iter()
                .filter(|n| *n == "step")
                .count(),
            2
        );
        assert_eq!(
            c["cuprof"]["cycle"].as_u64().unwrap() as usize,
            if std::ptr::eq(c, &c1) { 1 } else { 2 }
        );
    }
    // gemm lasts 40+i us in step i: cycle 1 holds steps 2 and 3.
    let gemm: Vec<f64> = events(&c1, "kernel")
        .iter()
        .filter(|e| e["name"] == "gemm()")
        .map(|e| e["dur"].as_f64().unwrap())
        .collect();
    assert_eq!(gemm, vec![42.0, 43.0]);
}

/// Runs `steps.py nvtx 10` (plus `extra` arguments) with two cycles of two steps each, and
/// returns both cycles' traces.
fn two_nvtx_cycles(tag: &str, extra: &[&str]) -> [Value; 2] {
    let dir = TempDir::new(tag);
    let mut args = vec!["nvtx", "10"];
    args.extend_from_slice(extra);
    Run::python("steps.py", &args, dir.path())
        .env("CUPROF_STEP_NVTX", "step")
        .env("CUPROF_WAIT", "1")
        .env("CUPROF_WARMUP", "1")
        .env("CUPROF_ACTIVE", "2")
        .env("CUPROF_REPEAT", "2")
        .ok_json();
    assert_eq!(
        dir.files(),
        vec![
            "t-rank0-cycle1.trace.json.gz",
            "t-rank0-cycle2.trace.json.gz"
        ]
    );
    [
        trace(&dir, "t-rank0-cycle1.trace.json.gz"),
        trace(&dir, "t-rank0-cycle2.trace.json.gz"),
    ]
}

/// Events of `trace` that are misfiled against the other cycles' files: GPU work whose
/// launching call is in another file, and flow starts or ends without their other end here.
fn misfiled(traces: &[Value], i: usize) -> Vec<String> {
    let calls = |t: &Value| -> std::collections::BTreeSet<u64> {
        t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "cuda_runtime" || e["cat"] == "cuda_driver")
            .map(|e| e["args"]["correlation"].as_u64().unwrap())
            .collect()
    };
    let t = &traces[i];
    let mut bad = Vec::new();
    for (j, other) in traces.iter().enumerate() {
        if j == i {
            continue;
        }
        let theirs = calls(other);
        for e in t["traceEvents"].as_array().unwrap() {
            let gpu = ["kernel", "gpu_memcpy", "gpu_memset", "cuda_sync"];
            if gpu.iter().any(|c| e["cat"] == *c) {
                let corr = e["args"]["correlation"].as_u64().unwrap();
                if theirs.contains(&corr) {
                    bad.push(format!("{} {corr}: launched in cycle {}", e["name"], j + 1));
                }
            }
        }
    }
    let ids = |ph: &str| -> std::collections::BTreeSet<u64> {
        phs(t, ph)
            .iter()
            .map(|e| e["id"].as_u64().unwrap())
            .collect()
    };
    let (starts, ends) = (ids("s"), ids("f"));
    for id in starts.symmetric_difference(&ends) {
        bad.push(format!("flow {id} has one end only"));
    }
    bad
}

/// Busy threads, one per CPU, until dropped: the machine is as loaded as a busy CI runner.
struct CpuHog {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuHog {
    fn start() -> CpuHog {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        CpuHog { stop, threads }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[test]
fn each_cycle_holds_exactly_its_own_gpu_work_twenty_times_under_load() {
    let _hog = CpuHog::start();
    for run in 0..20 {
        let cycles = two_nvtx_cycles(&format!("loaded-{run}"), &[]);
        for (i, c) in cycles.iter().enumerate() {
            assert_eq!(
                misfiled(&cycles, i),
                Vec::<String>::new(),
                "run {run} cycle {}",
                i + 1
            );
            // Two steps of 3 kernels, 1 copy, 1 memset, each with its launching call.
            assert_eq!(events(c, "kernel").len(), 6, "run {run} cycle {}", i + 1);
            assert_eq!(
                events(c, "gpu_memcpy").len(),
                2,
                "run {run} cycle {}",
                i + 1
            );
            assert_eq!(
                events(c, "gpu_memset").len(),
                2,
                "run {run} cycle {}",
                i + 1
            );
            assert_eq!(phs(c, "s").len(), 10, "run {run} cycle {}", i + 1);
        }
    }
}

#[test]
fn gpu_work_running_behind_stays_in_the_cycle_that_launched_it() {
    // gemm lasts 30 ms: the last steps of cycle 1 run on the GPU after cycle 2 began.
    let cycles = two_nvtx_cycles("behind", &["--gpu-behind"]);
    for (i, c) in cycles.iter().enumerate() {
        assert_eq!(
            misfiled(&cycles, i),
            Vec::<String>::new(),
            "cycle {}",
            i + 1
        );
        assert_eq!(events(c, "kernel").len(), 6, "cycle {}", i + 1);
        assert_eq!(events(c, "gpu_memcpy").len(), 2, "cycle {}", i + 1);
        assert_eq!(events(c, "gpu_memset").len(), 2, "cycle {}", i + 1);
        assert_eq!(steps_of(c).len(), 2, "cycle {}", i + 1);
    }
    // What the case is about: cycle 1's work ran while cycle 2 recorded.
    let last_of_cycle1 = events(&cycles[0], "kernel")
        .iter()
        .map(|e| e["ts"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let cycle2_begins = events(&cycles[1], "user_annotation")
        .iter()
        .map(|e| e["ts"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    assert!(
        last_of_cycle1 > cycle2_begins,
        "{last_of_cycle1} {cycle2_begins}"
    );
}

#[test]
fn cuprof_step_calls_drive_the_schedule_and_report_work() {
    // Steps end through `cuprof.step(tokens=, **figures)` (even) and the C ABI (odd), each with
    // its figures; `cuprof report` reads them back.
    let dir = TempDir::new("api-steps");
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let (out, stderr) = Run::python("steps.py", &["api", "8", "--figures"], dir.path())
        .env(
            "PYTHONPATH",
            format!("{}:{}", apps().display(), python.display()),
        )
        .env("CUPROF_WAIT", "1")
        .env("CUPROF_WARMUP", "1")
        .env("CUPROF_ACTIVE", "2")
        .ok_json();
    assert_eq!(dir.files(), vec!["t-rank0.trace.json.gz"]);
    let t = trace(&dir, "t-rank0.trace.json.gz");
    assert_eq!(steps_of(&t), vec!["ProfilerStep#2", "ProfilerStep#3"]);
    for s in events(&t, "user_annotation") {
        assert_eq!(s["args"]["work"], 128.0);
    }
    let figures: Vec<&Value> = events(&t, "user_annotation")
        .into_iter()
        .map(|s| &s["args"]["figures"])
        .collect();
    assert_eq!(
        figures,
        [
            &serde_json::json!({"kv_len": 512, "accepted": 1}),
            &serde_json::json!({"kv_len": 768})
        ]
    );
    // Bad arguments raise before any step is marked; a NaN through the C ABI is refused, said
    // once.
    assert_eq!(
        out["errors"],
        serde_json::json!({
            "tokens=-1": "ValueError: tokens must be 0 or more (and under 2**64), got -1",
            "tokens=1.5": "TypeError: tokens must be an int, got 1.5",
            "tokens=True": "TypeError: tokens must be an int, got True",
            "kv_len=nan": "ValueError: step figure kv_len must be finite, got nan",
            "kv_len='x'": "TypeError: step figure kv_len must be a number, got 'x'",
            "long name": format!("ValueError: step figure name '{}'... must be at most 64 bytes, without NUL", "n".repeat(64)),
            "17 figures": "ValueError: a step keeps at most 16 named figures, got 17",
        })
    );
    assert_eq!(out["refused"], -1);
    let refusals: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cuprof: cuprof_step_figure"))
        .collect();
    assert_eq!(
        refusals,
        ["cuprof: cuprof_step_figure: step figure \"bad\" is not a finite number (NaN or infinite): pass a finite value (said once)"]
    );
    let report = dir.path().join("report");
    cuprof_ok(&[
        "report".as_ref(),
        dir.path().join("t-rank0.trace.json.gz").as_os_str(),
        "-o".as_ref(),
        report.as_os_str(),
        "--bin".as_ref(),
        "kv_len=0,600".as_ref(),
    ]);
    let s: Value =
        serde_json::from_slice(&std::fs::read(report.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["steps"]["work"], 256.0);
    let bins: Vec<(u64, f64)> = s["step_bins"]["bins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["steps"]["count"].as_u64().unwrap(),
                b["steps"]["work"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(bins, [(1, 128.0), (1, 128.0)]);
    assert_eq!(events(&t, "kernel").len(), 6);
    let gemm: Vec<f64> = events(&t, "kernel")
        .iter()
        .filter(|e| e["name"] == "gemm()")
        .map(|e| e["dur"].as_f64().unwrap())
        .collect();
    assert_eq!(gemm, vec![42.0, 43.0]);
}

fn check_ranges(kind: &str, capture: &str) {
    let dir = TempDir::new(&format!("ranges-{kind}"));
    Run::python("ranges.py", &[kind], dir.path())
        .env("CUPROF_CAPTURE_RANGE", capture)
        .env("CUPROF_REPEAT", "2")
        .ok_json();
    assert_eq!(
        dir.files(),
        vec![
            "t-rank0-cycle1.trace.json.gz",
            "t-rank0-cycle2.trace.json.gz"
        ]
    );
    let c1 = kernels_by_name(&trace(&dir, "t-rank0-cycle1.trace.json.gz"));
    let c2 = kernels_by_name(&trace(&dir, "t-rank0-cycle2.trace.json.gz"));
    assert_eq!(c1, [("inside0".to_string(), 2)].into_iter().collect());
    assert_eq!(c2, [("inside1".to_string(), 3)].into_iter().collect());
}

#[test]
fn cuda_profiler_api_ranges_are_the_capture_ranges() {
    check_ranges("cuda", "cudaProfilerApi");
}

#[test]
fn cuprof_start_stop_ranges_are_the_capture_ranges() {
    check_ranges("cuprof", "cuprof");
}

#[test]
fn delay_and_duration_bound_the_recording() {
    let dir = TempDir::new("timed");
    let (out, _) = Run::python("timed.py", &["1.2"], dir.path())
        .env("CUPROF_DELAY", "0.3")
        .env("CUPROF_DURATION", "0.4")
        .ok_json();
    let t = trace(&dir, "t-rank0.trace.json.gz");
    let base = t["baseTimeNanoseconds"].as_i64().unwrap();
    let init = t["cuprof"]["clock"]["realtime_ns"].as_i64().unwrap();
    let raw = raw_events(&dir.path().join("t-rank0.trace.json.gz"));
    let starts: Vec<i64> = raw
        .iter()
        .filter(|e| e.v["cat"] == "kernel")
        .map(|e| {
            let (a, b) = e.ts.split_once('.').unwrap();
            base + a.parse::<i64>().unwrap() * 1000 + b.parse::<i64>().unwrap()
        })
        .collect();
    let produced = out["kernels"].as_u64().unwrap() as usize;
    // ~40 kernels in 0.4 s at one per 10 ms; none before the delay or after the duration.
    assert!(
        starts.len() >= 10 && starts.len() < produced,
        "{} of {produced}",
        starts.len()
    );
    for s in &starts {
        let since = s - init;
        assert!(
            (300_000_000..=700_000_000 + 50_000_000).contains(&since),
            "kernel {since} ns after CUDA init"
        );
    }
}

#[test]
fn rank_comes_from_the_environment_and_names_never_collide() {
    let dir = TempDir::new("rank");
    for _ in 0..2 {
        Run::python("steps.py", &["api", "2"], dir.path())
            .env("RANK", "3")
            .env("WORLD_SIZE", "4")
            .ok_json();
    }
    let files = dir.files();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[1], "t-rank3.trace.json.gz");
    assert!(
        files[0].starts_with("t-rank3-pid") && files[0].ends_with(".trace.json.gz"),
        "{files:?}"
    );
    let t = trace(&dir, "t-rank3.trace.json.gz");
    assert_eq!(t["distributedInfo"]["rank"], 3);
    assert_eq!(t["distributedInfo"]["world_size"], 4);
    // HTA reads the rank with the regex `"rank":\s+(\d+)`.
    let text = {
        use std::io::Read;
        let mut s = String::new();
        flate2::read::GzDecoder::new(
            &std::fs::read(dir.path().join("t-rank3.trace.json.gz")).unwrap()[..],
        )
        .read_to_string(&mut s)
        .unwrap();
        s
    };
    assert!(text.contains("\"rank\": 3,"));
}

#[test]
fn a_torchrun_like_parent_writes_nothing_and_each_rank_one_trace() {
    let dir = TempDir::new("parent");
    let (out, _) = Run::python("launcher_parent.py", &[], dir.path()).ok_json();
    assert_eq!(out["codes"], serde_json::json!([0, 0]));
    assert_eq!(
        dir.files(),
        vec!["t-rank0.trace.json.gz", "t-rank1.trace.json.gz"]
    );
    let mut run_ids = Vec::new();
    for r in 0..2 {
        let t = trace(&dir, &format!("t-rank{r}.trace.json.gz"));
        assert_eq!(t["distributedInfo"]["rank"], r);
        assert_eq!(events(&t, "kernel").len(), 3 * 3);
        // No launcher, no job id: the ranks' run id is their parent's host, pid and start.
        let host = t["cuprof"]["hostname"].as_str().unwrap();
        let own = t["cuprof"]["pid"].as_u64().unwrap();
        run_ids.push(t["cuprof"]["run_id"].as_str().unwrap().to_owned());
        assert!(run_ids[r].starts_with(&format!("{host}-")), "{run_ids:?}");
        assert!(
            !run_ids[r].starts_with(&format!("{host}-{own}-")),
            "{run_ids:?}"
        );
        assert_eq!(t["cuprof"]["name"], "t");
    }
    assert_eq!(run_ids[0], run_ids[1]);
    let (_, ticks) = run_ids[0].rsplit_once('-').unwrap();
    assert!(ticks.parse::<u64>().unwrap() > 0, "{run_ids:?}");
}

/// Lines of `stderr` naming both `var` and its `value`.
fn lines_naming(stderr: &str, var: &str, value: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.contains(var) && l.contains(value))
        .count()
}

#[test]
fn invalid_values_are_named_and_the_program_runs_on() {
    let dir = TempDir::new("invalid");
    let out = Run::python("steps.py", &["api", "2"], dir.path())
        .env("CUPROF_WAIT", "abc")
        .env("CUPROF_ACTIVITIES", "CPU,GPU,BOGUS")
        .output();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(lines_naming(&stderr, "CUPROF_WAIT", "abc"), 1, "{stderr}");
    assert_eq!(
        lines_naming(&stderr, "CUPROF_ACTIVITIES", "BOGUS"),
        1,
        "{stderr}"
    );
    // Defaults used: the whole run is traced.
    assert_eq!(dir.files(), vec!["t-rank0.trace.json.gz"]);

    let off = TempDir::new("invalid-enabled");
    let out = Run::python("steps.py", &["api", "2"], off.path())
        .env("CUPROF_ENABLED", "maybe")
        .output();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        lines_naming(&stderr, "CUPROF_ENABLED", "maybe"),
        1,
        "{stderr}"
    );
    assert!(off.files().is_empty());
}

#[test]
fn a_process_that_never_initialises_cuda_loads_no_cupti_and_writes_nothing() {
    let dir = TempDir::new("nocuda");
    let (out, stderr) = Run::python("nocuda.py", &[], dir.path()).ok_json();
    assert_eq!(out["cupti_loaded"], false);
    assert!(dir.files().is_empty());
    assert_eq!(stderr, "");
    // A shell, too.
    let out = std::process::Command::new("sh")
        .args(["-c", "ls /proc/self/ > /dev/null"])
        .env("LD_PRELOAD", lib())
        .env("CUPROF_ENABLED", "1")
        .env("CUPROF_DIR", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success() && out.stderr.is_empty());
    assert!(dir.files().is_empty());
}

#[test]
fn cuprof_run_reports_the_files_after_the_program_ends() {
    let dir = TempDir::new("launcher");
    let out = std::process::Command::new(cuprof_bin())
        .args(["run", "--dir"])
        .arg(dir.path())
        .args([
            "--name", "job", "--wait", "1", "--active", "2", "--", "python3",
        ])
        .arg(apps().join("steps.py"))
        .args(["api", "5"])
        .env("PYTHONPATH", apps())
        .env("CUPTI_DOUBLE_LIB", double())
        .env("CUPROF_CUPTI_PATH", double())
        .env("CUPROF_LIB", lib())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The trace, and the report of the run in a folder beside it (not among the traces, where
    // HTA would read its JSON as one).
    assert_eq!(dir.files(), vec!["job-rank0.trace.json.gz", "job-report"]);
    let mut report: Vec<String> = std::fs::read_dir(dir.path().join("job-report"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    report.sort();
    assert_eq!(report, ["report.html", "report.md", "summary.json"]);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("job-report/summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["steps"]["count"], 2);
    // The short summary on stderr: GPU busy share, the steps, the top kernels.
    for start in [
        "cuprof: GPU busy ",
        "cuprof: 2 steps, p50 ",
        "cuprof: top kernels:",
    ] {
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with(start)).count(),
            1,
            "{start}: {stderr}"
        );
    }
    let t = trace(&dir, "job-rank0.trace.json.gz");
    assert_eq!(steps_of(&t), vec!["ProfilerStep#1", "ProfilerStep#2"]);
    let path = dir.path().join("job-rank0.trace.json.gz");
    let n = t["traceEvents"].as_array().unwrap().len();
    let line = format!("cuprof: wrote {} ({n} events,", path.display());
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with(&line)).count(),
        1,
        "{stderr}"
    );
    let _ = Path::new("");
}

#[test]
fn cuprof_run_no_report_writes_only_the_traces() {
    let dir = TempDir::new("launcher-noreport");
    let out = std::process::Command::new(cuprof_bin())
        .args(["run", "--no-report", "--dir"])
        .arg(dir.path())
        .args(["--name", "job", "--", "python3"])
        .arg(apps().join("steps.py"))
        .args(["api", "2"])
        .env("PYTHONPATH", apps())
        .env("CUPTI_DOUBLE_LIB", double())
        .env("CUPROF_CUPTI_PATH", double())
        .env("CUPROF_LIB", lib())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(dir.files(), vec!["job-rank0.trace.json.gz"]);
    assert!(!stderr.contains("GPU busy"), "{stderr}");
}
