//! `cuprof run` end to end, with `sh -c` programs standing in for the traced program and a
//! dummy file standing in for libcuprof.so (`CUPROF_LIB`): the environment the program sees,
//! exit codes and signals passed through, the summary printed from the report file.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const CUPROF: &str = env!("CARGO_BIN_EXE_cuprof");

/// A fresh directory holding a dummy `libcuprof.so`.
struct Fixture {
    dir: PathBuf,
    lib: PathBuf,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir =
            std::env::temp_dir().join(format!("cuprof-run-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("libcuprof.so");
        std::fs::write(&lib, b"").unwrap();
        let lib = lib.canonicalize().unwrap();
        Fixture { dir, lib }
    }

    /// `cuprof run ARGS` with this fixture's library and no inherited CUPROF_*/LD_PRELOAD.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(CUPROF);
        c.arg("run").args(args);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("CUPROF_") || k == "LD_PRELOAD" {
                c.env_remove(&*k);
            }
        }
        c.env("CUPROF_LIB", &self.lib);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `KEY=VALUE` lines of `env -0` output.
fn parse_env(out: &[u8]) -> HashMap<String, String> {
    out.split(|&b| b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

const NOTHING: &str = "cuprof: nothing traced: the program never initialised CUDA (or no step matched / libcupti missing: see messages above)";

#[test]
fn child_sees_every_option_as_env() {
    let f = Fixture::new("env");
    let out_dir = f.dir.join("out");
    let out_dir_s = out_dir.to_str().unwrap();
    let o = f
        .cmd(&[
            "--name",
            "run1",
            "--dir",
            out_dir_s,
            "--activities",
            "CPU",
            "gpu",
            "MEM",
            "--with-stack",
            "--wait",
            "1",
            "--warmup",
            "2",
            "--active",
            "3",
            "--repeat",
            "4",
            "--skip-first",
            "5",
            "--step-nvtx",
            "train_*",
            "--capture-range",
            "cudaProfilerApi",
            "--delay",
            "1.5",
            "--duration",
            "2",
            "--ranks",
            "0,3",
            "--api",
            "all",
            "--max-mem-events",
            "77",
            "--cupti",
            "/opt/cupti/libcupti.so.12",
            "--",
            "env",
            "-0",
        ])
        .env("LD_PRELOAD", "/existing/one.so /existing/two.so")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let env = parse_env(&o.stdout);
    let lib = f.lib.to_str().unwrap();
    let want = [
        (
            "LD_PRELOAD",
            format!("{lib}:/existing/one.so /existing/two.so"),
        ),
        ("CUPROF_ENABLED", "1".into()),
        ("CUPROF_NAME", "run1".into()),
        ("CUPROF_DIR", out_dir_s.into()),
        ("CUPROF_ACTIVITIES", "CPU,GPU,MEM".into()),
        ("CUPROF_WITH_STACK", "1".into()),
        ("CUPROF_WAIT", "1".into()),
        ("CUPROF_WARMUP", "2".into()),
        ("CUPROF_ACTIVE", "3".into()),
        ("CUPROF_REPEAT", "4".into()),
        ("CUPROF_SKIP_FIRST", "5".into()),
        ("CUPROF_STEP_NVTX", "train_*".into()),
        ("CUPROF_CAPTURE_RANGE", "cudaProfilerApi".into()),
        ("CUPROF_DELAY", "1.5".into()),
        ("CUPROF_DURATION", "2".into()),
        ("CUPROF_RANKS", "0,3".into()),
        ("CUPROF_API", "all".into()),
        ("CUPROF_MAX_MEM_EVENTS", "77".into()),
        ("CUPROF_CUPTI_PATH", "/opt/cupti/libcupti.so.12".into()),
    ];
    for (k, v) in want {
        assert_eq!(env.get(k), Some(&v), "{k}");
    }
    let report = env.get("CUPROF_REPORT_FILE").expect("CUPROF_REPORT_FILE");
    assert!(Path::new(report).is_absolute());
    assert!(
        !Path::new(report).exists(),
        "the report file is removed afterwards"
    );
    // Nothing written by a program that never used CUDA: said so.
    assert!(stderr(&o).contains(NOTHING), "{}", stderr(&o));
}

#[test]
fn defaults_and_preload_without_existing_value() {
    let f = Fixture::new("defaults");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let o = f.run(&["--", "env", "-0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let env = parse_env(&o.stdout);
    assert_eq!(env.get("LD_PRELOAD").map(String::as_str), f.lib.to_str());
    assert_eq!(env.get("CUPROF_ENABLED").map(String::as_str), Some("1"));
    let name = env.get("CUPROF_NAME").unwrap();
    let t: u64 = name.strip_prefix("profile_").unwrap().parse().unwrap();
    assert!(t >= before && t <= before + 60, "{name}");
    for k in [
        "CUPROF_WAIT",
        "CUPROF_ACTIVE",
        "CUPROF_DIR",
        "CUPROF_ACTIVITIES",
        "CUPROF_STEP_NVTX",
    ] {
        assert!(!env.contains_key(k), "{k} set without its option");
    }
}

#[test]
fn exit_code_is_the_programs() {
    let f = Fixture::new("exit");
    let o = f.run(&["--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains(NOTHING));
    let o = f.run(&["--", "true"]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn death_by_signal_is_the_programs() {
    let f = Fixture::new("signal");
    let o = f.run(&["--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), None, "{}", stderr(&o));
    assert_eq!(o.status.signal(), Some(libc::SIGTERM));
    // The summary still comes first.
    assert!(stderr(&o).contains(NOTHING));
}

#[test]
fn program_starts_with_no_blocked_signal() {
    let f = Fixture::new("mask");
    let o = f.run(&["--", "grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let field = |name: &str| {
        let line = out.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    assert_eq!(field("SigBlk:"), 0, "{out}");
    let bit = |s: i32| 1u64 << (s - 1);
    let ignored = field("SigIgn:");
    // What this test was started with ignored (`nohup`, a background job of a non-interactive
    // shell) the program inherits ignored, as it would without cuprof; nothing more. SIGPIPE is
    // never among them: Rust ignores it in its own processes and restores it for what they run.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let inherited = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap()
        & !bit(libc::SIGPIPE);
    for s in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGPIPE,
    ] {
        assert_eq!(
            ignored & bit(s),
            inherited & bit(s),
            "signal {s} ignored in the program: {out}"
        );
    }
}

#[test]
fn signals_sent_to_the_launcher_reach_the_program() {
    let f = Fixture::new("forward");
    let mut child = f
        .cmd(&[
            "--",
            "sh",
            "-c",
            "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    // SAFETY: signalling our own child process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "got-term\n");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(7));
}

#[test]
fn summary_from_the_report_file() {
    let f = Fixture::new("report");
    let script = r#"printf 'file\t/data/prof/run-rank0.trace.json.gz\t1234\t2097152\n' >> "$CUPROF_REPORT_FILE"
printf 'note\trun-rank1.trace.json.gz existed: wrote run-rank1-pid9.trace.json.gz\n' >> "$CUPROF_REPORT_FILE"
printf 'file\t/data/prof/run-rank1-pid9.trace.json.gz\t1\t100\n' >> "$CUPROF_REPORT_FILE"
exit 0"#;
    let o = f.run(&["--", "sh", "-c", script]);
    assert!(o.status.success());
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("cuprof: ")).collect();
    assert_eq!(
        lines,
        [
            "cuprof: wrote /data/prof/run-rank0.trace.json.gz (1234 events, 2.0 MiB)",
            "cuprof: run-rank1.trace.json.gz existed: wrote run-rank1-pid9.trace.json.gz",
            "cuprof: wrote /data/prof/run-rank1-pid9.trace.json.gz (1 event, 100 B)",
        ],
        "{err}"
    );
    assert!(!err.contains("nothing traced"));
}

#[test]
fn a_program_killed_with_traces_open_is_told_with_each_files_state() {
    let f = Fixture::new("killed");
    // One trace closed before the kill (its `file` line never came: the library reports at
    // exit), one cut in the middle of an event.
    let done = f.dir.join("k-rank0-cycle1.trace.json");
    let cut = f.dir.join("k-rank0-cycle2.trace.json");
    std::fs::write(&done, r#"{"traceEvents": [{"ph": "i"}]}"#).unwrap();
    std::fs::write(&cut, r#"{"traceEvents": [{"ph": "i"}, {"ph": "i"}, {"ph""#).unwrap();
    let script = format!(
        "printf 'open\\t7\\t{}\\n' >> \"$CUPROF_REPORT_FILE\"\nprintf 'open\\t7\\t{}\\n' >> \"$CUPROF_REPORT_FILE\"\nkill -KILL $$",
        done.display(),
        cut.display()
    );
    let o = f.run(&["--", "sh", "-c", &script]);
    assert_eq!(o.status.signal(), Some(libc::SIGKILL));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("cuprof: ")).collect();
    let why = "cuprof: not reported (the program was killed by signal 9)";
    assert_eq!(
        lines,
        [
            format!("{why}: {} is complete (1 event, 30 B)", done.display()),
            format!(
                "{why}: {} is unfinished: 2 events readable up to its last flush (48 B); cuprof repair {} closes it",
                cut.display(),
                cut.display()
            ),
        ],
        "{err}"
    );
}

#[test]
fn missing_library_is_a_clear_error() {
    let f = Fixture::new("nolib");
    let marker = f.dir.join("ran");
    let o = f
        .cmd(&["--", "touch", marker.to_str().unwrap()])
        .env("CUPROF_LIB", "/nonexistent/dir/libcuprof.so")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("CUPROF_LIB=/nonexistent/dir/libcuprof.so"),
        "{err}"
    );
    assert!(err.contains("libcuprof.so"), "{err}");
    assert!(
        !marker.exists(),
        "the program must not run without the library"
    );
}

#[test]
fn unknown_command() {
    let f = Fixture::new("nocmd");
    let o = f.run(&["--", "/nonexistent/program"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(
        stderr(&o).contains("cannot run /nonexistent/program"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn help_shows_an_example() {
    let o = Command::new(CUPROF)
        .args(["run", "--help"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("cuprof run --active 3 --step-nvtx 'train_step' -- python train.py"),
        "{help}"
    );
    for opt in [
        "--wait",
        "--warmup",
        "--active",
        "--repeat",
        "--step-nvtx",
        "--capture-range",
        "--ranks",
    ] {
        assert!(help.contains(opt), "{opt} missing from --help");
    }
}

#[test]
fn invalid_option_value_is_rejected_before_running() {
    let f = Fixture::new("badopt");
    let marker = f.dir.join("ran");
    let o = f.run(&["--active", "0", "--", "touch", marker.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--active"), "{}", stderr(&o));
    assert!(!marker.exists());
}
