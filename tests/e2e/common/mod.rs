//! Shared helpers of the end-to-end tests: run a real process with the real libcuprof.so
//! preloaded against the libcupti double, read what it wrote.
#![allow(dead_code)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn artifacts() -> PathBuf {
    PathBuf::from(env!("CUPROF_ARTIFACT_DIR"))
}

pub fn lib() -> PathBuf {
    let p = artifacts().join("libcuprof.so");
    assert!(
        p.exists(),
        "{} missing: run `cargo build --workspace` first (scripts/test.sh does)",
        p.display()
    );
    p
}

pub fn double() -> PathBuf {
    let p = artifacts().join("libcupti_double.so");
    assert!(
        p.exists(),
        "{} missing: run `cargo build --workspace` first (scripts/test.sh does)",
        p.display()
    );
    p
}

pub fn cuprof_bin() -> PathBuf {
    artifacts().join("cuprof")
}

pub fn apps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/apps")
}

/// A fresh, empty directory under the system temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("cuprof-e2e-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// File names in the directory, sorted.
    pub fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("CUPROF_KEEP_TEST_DIRS").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// torch.compile's inductor compiles in the program's own process: with more than one compile
/// thread it first starts a pool of worker processes, each a Python that imports torch (3.5 s of
/// CPU here), which the tests' small graphs never need (compile_events.py: 39.7 s with one
/// thread, 42.2 s with the pool).
const INDUCTOR_COMPILE_THREADS: &str = "1";

/// A test program run under the tracer.
pub struct Run {
    pub cmd: Command,
}

impl Run {
    /// `python3 tests/apps/SCRIPT ARGS` with libcuprof.so preloaded, tracing on, the double as
    /// libcupti, output into `dir` with name `t`.
    pub fn python(script: &str, args: &[&str], dir: &Path) -> Run {
        Run::python_under(&[], script, args, dir)
    }

    /// [`Run::python`] started through `wrapper` (`unshare --pid --fork`: `python3 ...` is
    /// its last arguments), with the same environment.
    pub fn python_under(wrapper: &[&str], script: &str, args: &[&str], dir: &Path) -> Run {
        let mut cmd = match wrapper {
            [] => Command::new("python3"),
            [program, rest @ ..] => {
                let mut c = Command::new(program);
                c.args(rest).arg("python3");
                c
            }
        };
        cmd.arg(apps().join(script)).args(args);
        cmd.env("PYTHONPATH", apps())
            .env("CUPTI_DOUBLE_LIB", double())
            .env("LD_PRELOAD", lib())
            .env("CUPROF_ENABLED", "1")
            .env("CUPROF_CUPTI_PATH", double())
            .env("CUPROF_DIR", dir)
            .env("CUPROF_NAME", "t")
            .env("PYTHONUNBUFFERED", "1")
            .env("TORCHINDUCTOR_COMPILE_THREADS", INDUCTOR_COMPILE_THREADS);
        for v in [
            "CUDA_INJECTION64_PATH",
            "NVTX_INJECTION64_PATH",
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
        ] {
            cmd.env_remove(v);
        }
        Run { cmd }
    }

    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Run {
        self.cmd.env(k, v);
        self
    }

    pub fn env_remove(mut self, k: &str) -> Run {
        self.cmd.env_remove(k);
        self
    }

    pub fn output(mut self) -> Output {
        let out = self.cmd.output().expect("python3 runs");
        if std::env::var_os("CUPROF_TEST_VERBOSE").is_some() {
            eprintln!("stdout: {}", String::from_utf8_lossy(&out.stdout));
            eprintln!("stderr: {}", String::from_utf8_lossy(&out.stderr));
        }
        out
    }

    /// Runs and asserts exit status 0, returning stdout's last line parsed as JSON.
    pub fn ok_json(self) -> (Value, String) {
        let out = self.output();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "program failed: {:?}\nstdout: {}\nstderr: {stderr}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
        // cuprof leaves no PyTorch profiler callback registered at exit.
        assert!(!stderr.contains("Leaked callback handle"), "{stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let last = stdout.lines().last().unwrap_or("{}");
        (serde_json::from_str(last).unwrap_or(Value::Null), stderr)
    }
}

/// [`Run::python`] with the window the operator tests record (wait=1, warmup=1, active=2: steps
/// 2 and 3 of 4) and `env` added.
pub fn windowed(script: &str, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Run {
    let mut run = Run::python(script, args, dir)
        .env("CUPROF_WAIT", "1")
        .env("CUPROF_WARMUP", "1")
        .env("CUPROF_ACTIVE", "2");
    for (k, v) in env {
        run = run.env(k, v);
    }
    run
}

/// A gzip (or plain) trace's text.
pub fn trace_text(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return String::from_utf8(bytes).unwrap();
    }
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_string(&mut text)
        .unwrap();
    text
}

/// Reads a gzip (or plain) JSON trace; a cuprof trace must keep Perfetto's rules
/// ([`rules::check_perfetto_rules`]).
pub fn read_trace(path: &Path) -> Value {
    let text = trace_text(path);
    let trace: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", path.display()));
    // Every cuprof trace a test reads is held to the rules its viewers apply.
    if trace.get("cuprof").is_some() {
        rules::check_perfetto_rules(&text);
    }
    trace
}

pub fn events<'a>(trace: &'a Value, cat: &str) -> Vec<&'a Value> {
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == cat)
        .collect()
}

pub fn phs<'a>(trace: &'a Value, ph: &str) -> Vec<&'a Value> {
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == ph)
        .collect()
}

pub fn names(evs: &[&Value]) -> Vec<String> {
    evs.iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

pub fn count_by_name(evs: &[&Value]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for n in names(evs) {
        *m.entry(n).or_insert(0) += 1;
    }
    m
}

/// `ns` relative to `base` as the trace writes it (µs with three decimals).
pub fn us(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

/// A number of the trace as its exact decimal text (serde_json keeps f64; format back).
pub fn num_text(v: &Value) -> String {
    let f = v.as_f64().unwrap();
    format!("{f:.3}")
}

pub mod dump;
pub mod on_demand;
pub mod rules;

/// One trace event with its `ts` and `dur` exactly as written (f64 parsing would lose
/// nanoseconds at epoch scale).
pub struct RawEvent {
    pub v: Value,
    pub ts: String,
    pub dur: String,
}

fn raw_field(line: &str, key: &str) -> String {
    let pat = format!("\"{key}\": ");
    match line.find(&pat) {
        Some(i) => line[i + pat.len()..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
            .collect(),
        None => String::new(),
    }
}

/// The events of a cuprof trace (one event per line), with raw `ts`/`dur` text.
pub fn raw_events(path: &Path) -> Vec<RawEvent> {
    let text = trace_text(path);
    let start =
        text.find("\"traceEvents\": [\n").expect("traceEvents") + "\"traceEvents\": [\n".len();
    let end = text.rfind("\n],").expect("end of traceEvents");
    text[start..end]
        .lines()
        .map(|l| {
            let l = l.strip_suffix(',').unwrap_or(l);
            RawEvent {
                v: serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")),
                ts: raw_field(l, "ts"),
                dur: raw_field(l, "dur"),
            }
        })
        .collect()
}

/// Holds a kernel event against the record CUPTI handed over: exact times, Kineto's args.
pub fn assert_kernel_matches(e: &RawEvent, rec: &dump::KernelRec, base: i64) {
    assert_eq!(e.ts, us(rec.start as i64 - base), "{rec:?}");
    assert_eq!(e.dur, us((rec.end - rec.start) as i64), "{rec:?}");
    assert_eq!(e.v["pid"], 0);
    assert_eq!(e.v["tid"], rec.stream);
    let a = &e.v["args"];
    assert_eq!(a["stream"], rec.stream);
    assert_eq!(a["device"], 0);
    assert_eq!(a["correlation"], rec.correlation);
    assert_eq!(a["grid"], serde_json::json!(rec.grid));
    assert_eq!(a["block"], serde_json::json!(rec.block));
    assert_eq!(a["registers per thread"], rec.registers);
    assert_eq!(a["shared memory"], rec.shared);
    if rec.graph_node_id != 0 {
        assert_eq!(a["graph node id"], rec.graph_node_id);
    }
}

/// A trace's PyTorch operators (ProfilerStep annotations aside), by start, outermost first.
pub fn torch_operators(trace: &Value) -> Vec<&Value> {
    not_steps_by_start(events(trace, "cpu_op"))
}

/// `evs` other than `ProfilerStep#N`, in start order, the enclosing one first.
pub fn not_steps_by_start(evs: Vec<&Value>) -> Vec<&Value> {
    let mut evs: Vec<&Value> = evs
        .into_iter()
        .filter(|e| !e["name"].as_str().unwrap().starts_with("ProfilerStep#"))
        .collect();
    evs.sort_by(|a, b| {
        let key = |e: &Value| (e["ts"].as_f64().unwrap(), -e["dur"].as_f64().unwrap());
        key(a).partial_cmp(&key(b)).unwrap()
    });
    evs
}

/// The `user_annotation`s of a trace other than its steps (`record_function` labels, NVTX
/// ranges), in start order, the enclosing one first.
pub fn labels(trace: &Value) -> Vec<&Value> {
    not_steps_by_start(events(trace, "user_annotation"))
}

/// Fails the test, naming the remedy, unless `python3` finds every module of `modules`
/// (comma-separated, as in an `import` statement). Asked once per list and run, with
/// `importlib.util.find_spec`, which imports nothing: importing them only to check for them
/// cost 3.1 s of CPU (torch) to 7.5 s (torch, diffusers and transformers) each time, 272 s over
/// the suite's 72 checks.
pub fn require_python(modules: &str) {
    static FOUND: std::sync::Mutex<BTreeMap<String, bool>> = std::sync::Mutex::new(BTreeMap::new());
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    let ok = *found.entry(modules.to_string()).or_insert_with(|| {
        let names: Vec<&str> = modules.split(',').map(str::trim).collect();
        let code = format!(
            "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None for m in {names:?}))"
        );
        Command::new("python3")
            .args(["-c", &code])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    assert!(
        ok,
        "python3 cannot import {modules}: run `bash scripts/test.sh`, which installs scripts/python-requirements.txt into a virtual environment and puts it first on PATH"
    );
}

/// `python3 tests/apps/SCRIPT ARGS` without the tracer, with `env` added; asserts success and
/// returns stdout.
pub fn untraced_python(
    script: &str,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &std::ffi::OsStr)],
) -> String {
    let mut cmd = Command::new("python3");
    cmd.arg(apps().join(script))
        .args(args)
        .env("PYTHONPATH", apps())
        .env("TORCHINDUCTOR_COMPILE_THREADS", INDUCTOR_COMPILE_THREADS);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the Python expression `expr` gives of the memory snapshot at `pickle` (read with
/// Python's own pickle as `s`), through JSON.
pub fn snapshot_json(pickle: &Path, expr: &str) -> Value {
    let code = format!(
        "import pickle,sys,json; s=pickle.load(open(sys.argv[1],'rb')); print(json.dumps({expr}))"
    );
    let out = Command::new("python3")
        .arg("-c")
        .arg(code)
        .arg(pickle)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs `cuprof ARGS`, which must succeed; its stdout.
pub fn cuprof_ok<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let out = Command::new(cuprof_bin()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `cuprof report TRACE -o DIR/report-NAME`'s summary.json.
pub fn report_summary(trace: &Path, dir: &Path) -> Value {
    let out_dir = dir.join(format!(
        "report-{}",
        trace.file_name().unwrap().to_string_lossy()
    ));
    let args: [&std::ffi::OsStr; 4] = [
        "report".as_ref(),
        trace.as_os_str(),
        "-o".as_ref(),
        out_dir.as_os_str(),
    ];
    cuprof_ok(&args);
    serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap()
}
