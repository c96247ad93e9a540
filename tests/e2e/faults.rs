//! Issue 6's fault matrix, with the libcupti double: for each way a program can end or go
//! wrong, the host's exit status is exactly what it is without cuprof, the trace is valid (or
//! repairable when the process was killed), and it holds the events that were produced.

use crate::common::*;
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus};

const PRODUCED: usize = 300;

struct Case {
    without: ExitStatus,
    with: ExitStatus,
    dir: TempDir,
    out: Value,
    stderr: String,
}

fn status_text(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (_, Some(sig)) => format!("signal {sig}"),
        _ => "?".into(),
    }
}

fn run_case(case: &str, env: &[(&str, &str)]) -> Case {
    let dir = TempDir::new(&format!("fault-{case}"));
    let mut base = Command::new("python3");
    base.arg(apps().join("fault.py"))
        .arg(case)
        .env("PYTHONPATH", apps())
        .env("CUPTI_DOUBLE_LIB", double());
    // The program without cuprof runs beside the traced one: only its exit status is compared.
    let without = base
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut run = Run::python("fault.py", &[case], dir.path());
    for (k, v) in env {
        run = run.env(k, v);
    }
    let out = run.output();
    let without = without.wait_with_output().unwrap().status;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or(Value::Null);
    Case {
        without,
        with: out.status,
        dir,
        out: json,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Kernels in the trace, after `cuprof repair` when the file was cut short.
fn kernels_kept(c: &Case, must_be_complete: bool) -> usize {
    let path = c.dir.path().join("t-rank0.trace.json.gz");
    assert!(
        path.exists(),
        "no trace in {:?}; stderr: {}",
        c.dir.files(),
        c.stderr
    );
    let complete = std::panic::catch_unwind(|| read_trace(&path)).is_ok();
    if must_be_complete {
        assert!(complete, "trace not valid JSON; stderr: {}", c.stderr);
    } else if !complete {
        let r = Command::new(cuprof_bin())
            .arg("repair")
            .arg("--in-place")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            r.status.success(),
            "repair: {}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    let t = read_trace(&path);
    events(&t, "kernel").len()
}

fn same_status(c: &Case) {
    assert_eq!(
        status_text(c.with),
        status_text(c.without),
        "host status changed; stderr: {}",
        c.stderr
    );
}

/// Runs `case` with and without cuprof: the same status both ways, `status` it is, and every
/// kernel produced is in the trace (valid, or repaired unless `complete`).
fn ends_as(case: &str, status: &str, complete: bool) -> Case {
    let c = run_case(case, &[]);
    same_status(&c);
    assert_eq!(status_text(c.with), status);
    assert_eq!(kernels_kept(&c, complete), PRODUCED);
    c
}

/// cuprof said exactly one line, holding `words`, and wrote nothing.
fn one_line_no_trace(c: &Case, words: &str, what: &str) {
    assert!(c.dir.files().is_empty(), "{what}: {:?}", c.dir.files());
    let lines: Vec<&str> = c
        .stderr
        .lines()
        .filter(|l| l.starts_with("cuprof:"))
        .collect();
    assert_eq!(lines.len(), 1, "{what}: {}", c.stderr);
    assert!(lines[0].contains(words), "{what}: {}", lines[0]);
}

#[test]
fn normal_exit() {
    ends_as("normal", "exit 0", true);
}

#[test]
fn sigterm_closes_the_trace_then_kills_as_before() {
    ends_as("sigterm", "signal 15", true);
}

#[test]
fn sigint_through_pythons_own_handler() {
    // Python turns SIGINT into KeyboardInterrupt, then exits by re-sending SIGINT to itself
    // with the default disposition (skipping atexit): the trace is closed on the way.
    let c = ends_as("sigint", "signal 2", true);
    assert!(c.stderr.contains("KeyboardInterrupt"));
}

#[test]
fn sigkill_leaves_a_repairable_trace_with_everything_flushed() {
    ends_as("sigkill", "signal 9", false);
}

#[test]
fn abort_closes_the_trace_and_still_aborts() {
    ends_as("abort", "signal 6", true);
}

#[test]
fn os_exit_closes_the_trace_and_keeps_the_status() {
    ends_as("os_exit", "exit 7", true);
}

#[test]
fn a_forked_child_writes_nothing_and_the_parent_trace_is_whole() {
    let c = run_case("fork", &[]);
    same_status(&c);
    assert_eq!(c.out["child_status"], 0);
    assert_eq!(c.dir.files(), vec!["t-rank0.trace.json.gz"]);
    assert_eq!(kernels_kept(&c, true), PRODUCED);
}

#[test]
fn a_second_cupti_client_gets_cupti_and_cuprof_keeps_what_it_had() {
    let c = run_case("second_client", &[]);
    same_status(&c);
    assert_eq!(
        c.out["second_subscribe"], 0,
        "the second client's subscribe succeeds"
    );
    assert!(
        c.out["second_client_records"].as_u64().unwrap() >= 50,
        "{}",
        c.out
    );
    assert_eq!(
        c.out["second_client_unknown_buffers"], 0,
        "no cuprof buffer reaches the other tool"
    );
    assert_eq!(
        c.stderr
            .lines()
            .filter(|l| l.contains("steps aside"))
            .count(),
        1,
        "{}",
        c.stderr
    );
    assert_eq!(kernels_kept(&c, true), PRODUCED);
}

#[test]
fn a_full_disk_costs_the_trace_not_the_program() {
    let c = run_case("full_disk", &[]);
    same_status(&c);
    assert_eq!(status_text(c.with), "exit 0");
    let errors: Vec<&str> = c
        .stderr
        .lines()
        .filter(|l| l.starts_with("cuprof:") && l.contains("failed"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", c.stderr);
}

#[test]
fn an_unwritable_directory_costs_the_trace_not_the_program() {
    let c = run_case("normal", &[("CUPROF_DIR", "/proc/cuprof-cannot-exist")]);
    same_status(&c);
    let errors: Vec<&str> = c
        .stderr
        .lines()
        .filter(|l| l.contains("/proc/cuprof-cannot-exist") || l.contains("CUPROF_DIR"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", c.stderr);
}

#[test]
fn missing_libcupti_is_one_line_and_no_trace() {
    let c = run_case(
        "normal",
        &[("CUPROF_CUPTI_PATH", "/nonexistent/libcupti.so.13")],
    );
    same_status(&c);
    one_line_no_trace(&c, "/nonexistent/libcupti.so.13", "missing libcupti");
}

#[test]
fn cupti_refusals_are_one_line_each_and_the_program_runs() {
    for (fail, words) in [
        ("subscribe=39", "another profiler already holds CUPTI"),
        ("subscribe=35", "admin"),
        ("register=15", "refused the activity callbacks"),
        ("version=15", "version"),
    ] {
        let c = run_case("normal", &[("CUPTI_DOUBLE_FAIL", fail)]);
        same_status(&c);
        one_line_no_trace(&c, words, fail);
    }
}

#[test]
fn an_unsupported_cupti_version_is_refused_in_one_line() {
    let c = run_case("normal", &[("CUPTI_DOUBLE_VERSION", "11")]);
    same_status(&c);
    one_line_no_trace(&c, "version 11", "CUPTI 11");
}
