//! Issue 27 end to end: processes started with CUPROF_ON_DEMAND=1 (what `cuprof run
//! --on-demand` sets) wait ready; `cuprof ps` lists them and `cuprof capture` records them
//! through their control sockets; the sockets are private and bad messages harm nothing.
//!
//! Every test has its own XDG_RUNTIME_DIR, so the processes of one test are the only ones its
//! `cuprof ps` sees.

use crate::common::on_demand::*;
use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn steps_of(trace: &Value) -> Vec<u64> {
    let mut s: Vec<u64> = events(trace, "user_annotation")
        .iter()
        .filter_map(|e| {
            e["name"]
                .as_str()?
                .strip_prefix("ProfilerStep#")?
                .parse()
                .ok()
        })
        .collect();
    s.sort();
    s
}

fn kernels(trace: &Value) -> BTreeMap<String, usize> {
    count_by_name(&events(trace, "kernel"))
}

fn rank_file(dir: &Path, name: &str, rank: u32, cycle: u32) -> PathBuf {
    dir.join(format!("{name}-rank{rank}-cycle{cycle}.trace.json.gz"))
}

/// Checks that the four rank files of capture `cycle` in `caps` record the same `n` steps, two
/// kernels each; returns the first step.
fn same_steps_in_every_rank(caps: &Path, cycle: u32, n: usize) -> u64 {
    let mut firsts = Vec::new();
    for rank in 0..4 {
        let t = read_trace(&rank_file(caps, "job", rank, cycle));
        let steps = steps_of(&t);
        assert_eq!(steps.len(), n, "{steps:?}");
        assert_eq!(steps[n - 1], steps[0] + n as u64 - 1);
        firsts.push(steps[0]);
        assert_eq!(
            kernels(&t),
            BTreeMap::from([("gemm()".into(), n), ("softmax()".into(), n)])
        );
        assert_eq!(t["cuprof"]["cycle"], cycle);
    }
    assert!(firsts.iter().all(|&s| s == firsts[0]), "{firsts:?}");
    firsts[0]
}

#[test]
fn a_four_rank_job_is_listed_then_captured_by_steps_twice_and_by_duration() {
    let mut job = Job::start("four", "job", 4, 0, 50);
    job.wait_ready();
    let (ps, _) = job.ok(&["ps"]);
    let rows = ps_rows(&ps);
    assert_eq!(rows.keys().copied().collect::<Vec<_>>(), {
        let mut p = job.pids();
        p.sort();
        p
    });
    let mut ranks: Vec<String> = rows.values().map(|r| r.0.clone()).collect();
    ranks.sort();
    assert_eq!(ranks, ["0", "1", "2", "3"]);
    for (_, name, state, files) in rows.values() {
        assert_eq!(
            (name.as_str(), state.as_str(), files.as_str()),
            ("job", "ready", "0")
        );
    }
    // Nothing is written while ready.
    assert!(!job.dir.path().join("out").exists());

    let caps = job.dir.path().join("caps");
    let caps_s = caps.to_str().unwrap();
    // Each capture writes one file per rank, one line each.
    let capture = |args: &[&str]| {
        let mut all = vec!["capture"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--dir", caps_s, "--no-report"]);
        let (_, err) = job.ok(&all);
        assert_eq!(wrote_lines(&err), 4, "{err}");
    };
    capture(&["--name", "job", "--steps", "3"]);
    let first = same_steps_in_every_rank(&caps, 1, 3);
    capture(&["--all", "--steps", "2"]);
    let second = same_steps_in_every_rank(&caps, 2, 2);
    assert!(second > first + 2, "{first} then {second}");
    capture(&["--name", "job", "--duration", "0.5"]);
    for rank in 0..4 {
        let t = read_trace(&rank_file(&caps, "job", rank, 3));
        let k = kernels(&t);
        assert!(k.keys().all(|n| n == "gemm()" || n == "softmax()"), "{k:?}");
        assert!(k.values().sum::<usize>() > 0);
        assert_eq!(t["cuprof"]["cycle"], 3);
    }
    let (ps, _) = job.ok(&["ps"]);
    for (_, _, state, files) in ps_rows(&ps).values() {
        assert_eq!((state.as_str(), files.as_str()), ("ready", "3"));
    }
    assert_eq!(std::fs::read_dir(&caps).unwrap().count(), 12);
    job.finish();
}

#[test]
fn a_process_that_exits_mid_capture_closes_its_file() {
    let mut job = Job::start("exit", "ex", 1, 120, 30);
    job.wait_ready();
    let pid = job.pids()[0].to_string();
    let caps = job.dir.path().join("caps");
    job.capture_steps(&pid, "100000", &caps);
    let results = job.finish();
    assert_eq!(results[0].0["steps"], 120);
    let t = read_trace(&rank_file(&caps, "ex", 0, 1));
    let steps = steps_of(&t);
    // From the first step recorded to step 120, running at exit (after the last cuprof_step).
    let start = steps[0];
    assert_eq!(steps, (start..=120).collect::<Vec<_>>());
    let n = (120 - start) as usize;
    assert_eq!(
        kernels(&t),
        BTreeMap::from([("gemm()".into(), n), ("softmax()".into(), n)])
    );
}

#[test]
fn a_second_capture_while_one_runs_gets_one_line() {
    let mut job = Job::start("busy", "busy", 1, 0, 20);
    job.wait_ready();
    let pid = job.pids()[0].to_string();
    let caps = job.dir.path().join("caps");
    let first = Command::new(cuprof_bin())
        .args([
            "capture",
            "--pid",
            &pid,
            "--steps",
            "100000",
            "--no-report",
            "--dir",
        ])
        .arg(&caps)
        .env("XDG_RUNTIME_DIR", job.runtime_dir())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Until the first capture records.
    for _ in 0..600 {
        let (ps, _) = job.ok(&["ps"]);
        if ps_rows(&ps).values().all(|r| r.2 == "recording") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = job.cuprof(&["capture", "--pid", &pid, "--steps", "1"]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("cuprof: process {pid}: a capture is already running in this process (capture 1); wait for it to end\n")
    );
    job.finish();
    let out = first.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(wrote_lines(&String::from_utf8_lossy(&out.stderr)), 1);
    assert_eq!(
        std::fs::read_dir(&caps).unwrap().count(),
        1,
        "only the first capture wrote"
    );
}

/// Waits (bounded) until `cuprof ps` shows every process of `job` in `state`.
fn wait_state(job: &Job, state: &str) {
    for _ in 0..600 {
        let (ps, _) = job.ok(&["ps"]);
        if ps_rows(&ps).values().all(|r| r.2 == state) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the processes never became {state}");
}

/// `cuprof capture --pid PID --steps 2 --dir CAPS --no-report`, started and left waiting.
fn spawn_capture(job: &Job, pid: &str, caps: &Path) -> std::process::Child {
    Command::new(cuprof_bin())
        .args([
            "capture",
            "--pid",
            pid,
            "--steps",
            "2",
            "--no-report",
            "--dir",
        ])
        .arg(caps)
        .env("XDG_RUNTIME_DIR", job.runtime_dir())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_waiting_step_capture_is_cancelled_by_cancel_or_ctrl_c_then_a_new_one_records() {
    let hold = TempDir::new("hold");
    let hold_file = hold.path().join("hold");
    std::fs::write(&hold_file, "").unwrap();
    // No step begins while the hold file exists: the captures asked wait for step 2.
    let mut job = Job::start_with(
        "cancel",
        "cn",
        1,
        0,
        20,
        &[("ON_DEMAND_HOLD", hold_file.to_str().unwrap())],
    );
    job.wait_ready();
    let pid = job.pids()[0].to_string();
    let sock = job.socket_dir().join(format!("{pid}.sock"));
    let caps = job.dir.path().join("caps");
    let row = |job: &Job| {
        let (ps, _) = job.ok(&["ps"]);
        let r = ps_rows(&ps).into_values().next().unwrap();
        (r.2, r.3)
    };

    // Cancelled by another command: the asking one ends with its process's note.
    let first = spawn_capture(&job, &pid, &caps);
    wait_state(&job, "pending");
    assert_eq!(
        raw(&sock, b"cuprof\t2\tstop\n"),
        "cuprof\t2\terror\tcapture 1 waits for step 2, it does not run by duration: cancel it with cuprof capture --cancel\n"
    );
    let (_, err) = job.ok(&["capture", "--pid", &pid, "--cancel"]);
    assert_eq!(
        err,
        format!("cuprof: process {pid}: capture 1, which was to record from step 2, is cancelled: nothing recorded\n")
    );
    let out = first.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("cuprof: process {pid}: capture 1 was cancelled before step 2 began: nothing recorded\n")
    );
    assert_eq!(row(&job), ("ready".into(), "0".into()));
    let out = job.cuprof(&["capture", "--pid", &pid, "--cancel"]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("cuprof: process {pid}: no capture waits in this process: nothing to cancel\n")
    );

    // Cancelled by the asking command's Ctrl-C.
    let second = spawn_capture(&job, &pid, &caps);
    wait_state(&job, "pending");
    // SAFETY: kill has no memory preconditions; the pid is our child's, not yet reaped.
    assert_eq!(
        unsafe { libc::kill(second.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let out = second.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("cuprof: process {pid}: capture 2 was cancelled before step 2 began: nothing recorded\n")
    );
    assert_eq!(row(&job), ("ready".into(), "0".into()));
    assert!(!caps.exists());

    // The steps run again: a new capture is taken, numbered after the cancelled ones.
    std::fs::remove_file(&hold_file).unwrap();
    job.capture_steps(&pid, "2", &caps);
    let t = read_trace(&rank_file(&caps, "cn", 0, 3));
    let steps = steps_of(&t);
    assert_eq!(steps, [steps[0], steps[0] + 1]);
    assert_eq!(
        kernels(&t),
        BTreeMap::from([("gemm()".into(), 2), ("softmax()".into(), 2)])
    );
    assert_eq!(std::fs::read_dir(&caps).unwrap().count(), 1);
    assert_eq!(row(&job), ("ready".into(), "1".into()));
    job.finish();
}

/// The pids of the processes whose parent is `parent` (from /proc).
fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // `PID (COMM) STATE PPID ...`: the parent is the second field after the name.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split(' ').nth(1)?.parse::<u32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}

/// Two processes, each pid 1 in a PID namespace of its own (two containers sharing the socket
/// folder): the first takes `1.sock`, the second `4194305.sock` (1 + 2^22: no pid reaches
/// 2^22); both are listed and captured by their pids here.
#[test]
fn processes_with_one_pid_in_two_child_pid_namespaces_are_listed_and_captured_by_their_pids_here() {
    let pid_ns = ["unshare", "--pid", "--fork", "--mount-proc"];
    let permitted = Command::new(pid_ns[0])
        .args(&pid_ns[1..])
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    if !permitted {
        eprintln!("skipped: unshare --pid is not permitted here");
        return;
    }
    let mut job = Job::empty("pidns");
    let stop = job.stop_file();
    let sockets = [
        job.socket_dir().join("1.sock"),
        job.socket_dir().join("4194305.sock"),
    ];
    for rank in 0..2 {
        job.spawn_under(
            &pid_ns,
            "on_demand.py",
            &[stop.to_str().unwrap(), "0", "20"],
            "ns",
            (rank, 2),
            &[],
        );
        // One after the other, so that which takes which name is known.
        for _ in 0..600 {
            if sockets[rank as usize].exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(sockets[rank as usize].exists(), "no control socket {rank}");
    }
    let here: Vec<u32> = job
        .pids()
        .iter()
        .map(|&p| {
            let c = children_of(p);
            assert_eq!(c.len(), 1, "{c:?}");
            assert_ne!(c[0], 1);
            c[0]
        })
        .collect();
    let (ps, err) = job.ok(&["ps"]);
    assert_eq!(err, "");
    assert_eq!(
        ps_rows(&ps),
        BTreeMap::from([
            (
                here[0],
                ("0".into(), "ns".into(), "ready".into(), "0".into())
            ),
            (
                here[1],
                ("1".into(), "ns".into(), "ready".into(), "0".into())
            ),
        ])
    );
    for (rank, pid) in here.iter().enumerate() {
        let caps = job.dir.path().join(format!("caps{rank}"));
        job.capture_steps(&pid.to_string(), "2", &caps);
        let t = read_trace(&rank_file(&caps, "ns", rank as u32, 1));
        assert_eq!(steps_of(&t).len(), 2);
        // The process's own word for its pid, in its namespace.
        assert_eq!(t["cuprof"]["pid"], 1);
    }
    job.finish();
}

#[test]
fn the_socket_directory_and_sockets_are_private() {
    let mut job = Job::start("modes", "m", 1, 0, 20);
    job.wait_ready();
    let dir = std::fs::symlink_metadata(job.socket_dir()).unwrap();
    assert!(dir.file_type().is_dir());
    assert_eq!(dir.permissions().mode() & 0o7777, 0o700);
    let sock = std::fs::symlink_metadata(job.socket_dir().join(format!("{}.sock", job.pids()[0])))
        .unwrap();
    assert!(sock.file_type().is_socket());
    assert_eq!(sock.permissions().mode() & 0o777, 0o600);

    // A file and a symlink planted at a socket's place are refused by capture.
    let planted = job.socket_dir().join("999999.sock");
    std::fs::write(&planted, "").unwrap();
    let out = job.cuprof(&["capture", "--pid", "999999", "--steps", "1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("999999.sock is not a socket"), "{err}");
    std::fs::remove_file(&planted).unwrap();
    let live = job.socket_dir().join(format!("{}.sock", job.pids()[0]));
    std::os::unix::fs::symlink(&live, &planted).unwrap();
    let out = job.cuprof(&["capture", "--pid", "999999", "--steps", "1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("999999.sock is not a socket"));
    std::fs::remove_file(&planted).unwrap();

    // Another user cannot even reach the directory, and the process records nothing.
    job.refused_to_nobody(&["capture", "--all", "--steps", "1"]);
    let (ps, _) = job.ok(&["ps"]);
    assert_eq!(ps_rows(&ps).values().next().unwrap().2, "ready");

    // Were the socket reachable (its mode opened, and the directory bypassed through an O_PATH
    // descriptor opened as root), the peer check still refuses another uid.
    std::fs::set_permissions(&live, PermissionsExt::from_mode(0o666)).unwrap();
    assert_eq!(
        as_nobody_through(&live, "cuprof\t2\tsteps\t0\t1\t\t/tmp/x\t\n"),
        "cuprof\t2\terror\tpermission denied: not the owner of this process\n",
    );
    let (ps, _) = job.ok(&["ps"]);
    assert_eq!(ps_rows(&ps).values().next().unwrap().2, "ready");
    let out = job.dir.path().join("out");
    let results = job.finish();
    assert!(results[0].1.contains(
        "cuprof: refused a control connection from uid 65534: only uid 0 and root may control this process"
    ));
    assert!(!job_out_has_files(&out));
}

/// Whether a finished job wrote traces (its output directory).
fn job_out_has_files(out: &Path) -> bool {
    out.exists() && std::fs::read_dir(out).unwrap().count() > 0
}

#[test]
fn ps_and_capture_without_on_demand_processes_say_so_in_one_line() {
    let dir = TempDir::new("none");
    for args in [&["ps"][..], &["capture", "--all", "--steps", "1"]] {
        let out = Command::new(cuprof_bin())
            .args(args)
            .env("XDG_RUNTIME_DIR", dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "cuprof: no process runs with --on-demand for this user on this host (start one with cuprof run --on-demand; cuprof ps lists them)\n"
        );
    }
}

#[test]
fn a_planted_symlink_or_file_as_the_socket_directory_turns_control_off_not_the_program() {
    for plant in ["symlink", "file"] {
        let dir = TempDir::new("plant");
        let rt = dir.path().join("rt");
        std::fs::create_dir(&rt).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, PermissionsExt::from_mode(0o700)).unwrap();
        if plant == "symlink" {
            std::os::unix::fs::symlink(&elsewhere, rt.join("cuprof")).unwrap();
        } else {
            std::fs::write(rt.join("cuprof"), "").unwrap();
        }
        let out = Run::python(
            "on_demand.py",
            &[dir.path().join("stop").to_str().unwrap(), "5", "1"],
            &dir.path().join("out"),
        )
        .env("CUPROF_ON_DEMAND", "1")
        .env("XDG_RUNTIME_DIR", &rt)
        .output();
        assert!(out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "cuprof: on-demand control is off: {} is not a directory of its own",
                rt.join("cuprof").display()
            )),
            "{plant}: {err}"
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            r#"{"steps": 5, "sum": 30}"#
        );
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert!(!dir.path().join("out").exists());
    }
}

/// Sends `bytes` on a fresh connection (then closes the writing side) and returns the reply.
fn raw(socket: &Path, bytes: &[u8]) -> String {
    let mut c = UnixStream::connect(socket).unwrap();
    let _ = c.write_all(bytes);
    let _ = c.shutdown(std::net::Shutdown::Write);
    let mut reply = String::new();
    let _ = c.read_to_string(&mut reply);
    reply
}

#[test]
fn garbage_truncated_and_oversized_messages_do_not_touch_the_program() {
    let mut job = Job::start("garbage", "g", 1, 0, 20);
    job.wait_ready();
    let socket = job.socket_dir().join(format!("{}.sock", job.pids()[0]));
    let cases: [(&[u8], &str); 10] = [
        (b"GET / HTTP/1.1\r\n\r\n", "cuprof\t2\terror\tthe message is not a cuprof control message\n"),
        (b"cuprof\t2\tste", "cuprof\t2\terror\tmalformed control message: unknown request\n"),
        (b"cuprof\t2\tsteps\t-1\t3\t\t/x\t\n", "cuprof\t2\terror\tmalformed control message: step number\n"),
        (b"\xff\xfe\x00\n", "cuprof\t2\terror\tthe request is not UTF-8\n"),
        (b"cuprof\t7\tstatus\n", "cuprof\t2\terror\tthe other side speaks control protocol 7, this cuprof speaks 2: use cuprof and libcuprof.so of the same release\n"),
        (b"", "cuprof\t2\terror\tthe message is not a cuprof control message\n"),
        // The release before `live` and `stop` (protocol 1).
        (b"cuprof\t1\tstatus\n", "cuprof\t2\terror\tthe other side speaks control protocol 1, this cuprof speaks 2: use cuprof and libcuprof.so of the same release\n"),
        (b"cuprof\t2\tlive\tmore\n", "cuprof\t2\terror\tmalformed control message: unknown request\n"),
        (b"cuprof\t2\tstop\n", "cuprof\t2\terror\tno capture by duration runs in this process: nothing to stop\n"),
        (b"cuprof\t2\tduration\t5\t\t/x\tmem=1\n", "cuprof\t2\terror\tmalformed control message: unknown capture option\n"),
    ];
    for (bytes, want) in cases {
        assert_eq!(raw(&socket, bytes), want, "{bytes:?}");
    }
    // A pid without a socket: one line naming it and why.
    let out = job.cuprof(&["capture", "--pid", "999998", "--steps", "1"]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "cuprof: process 999998 has no control socket ({}): it was not started with --on-demand, has ended, or belongs to another user: No such file or directory (os error 2)\n",
            job.socket_dir().join("999998.sock").display()
        )
    );
    let long = vec![b'x'; 100_000];
    assert_eq!(
        raw(&socket, &long),
        "cuprof\t2\terror\tthe message is longer than 8192 bytes\n"
    );
    // Still served, still ready, nothing recorded.
    let (ps, _) = job.ok(&["ps"]);
    assert_eq!(ps_rows(&ps).values().next().unwrap().2, "ready");
    let out = job.dir.path().join("out");
    let pid = job.pids()[0];
    let results = job.finish();
    assert!(!job_out_has_files(&out));
    assert_eq!(
        results[0].1,
        format!("cuprof: process {pid} was ready for cuprof capture and nothing was captured: no trace written\n")
    );
}

#[test]
fn cuprof_run_on_demand_starts_ready_and_reports_the_captures_at_the_end() {
    let dir = TempDir::new("run");
    let rt = dir.path().join("rt");
    std::fs::create_dir(&rt).unwrap();
    std::fs::set_permissions(&rt, PermissionsExt::from_mode(0o700)).unwrap();
    let out = dir.path().join("out");
    let stop = dir.path().join("stop");
    let run = Command::new(cuprof_bin())
        .args(["run", "--on-demand", "--name", "r", "--no-report", "--dir"])
        .arg(&out)
        .arg("--")
        .arg("python3")
        .arg(apps().join("on_demand.py"))
        .arg(&stop)
        .env("PYTHONPATH", apps())
        .env("CUPTI_DOUBLE_LIB", double())
        .env("CUPROF_CUPTI_PATH", double())
        .env("XDG_RUNTIME_DIR", &rt)
        .env_remove("LD_PRELOAD")
        .env_remove("CUDA_INJECTION64_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sockets = rt.join("cuprof");
    for _ in 0..600 {
        if socket_count(&sockets) == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let cap = Command::new(cuprof_bin())
        .args(["capture", "--name", "r", "--steps", "2", "--no-report"])
        .env("XDG_RUNTIME_DIR", &rt)
        .output()
        .unwrap();
    let cap_err = String::from_utf8_lossy(&cap.stderr).into_owned();
    assert!(cap.status.success(), "{cap_err}");
    let file = out.join("r-rank0-cycle1.trace.json.gz");
    assert_eq!(
        cap_err.lines().next().unwrap().split(" (").next().unwrap(),
        format!("cuprof: wrote {}", file.display())
    );
    let t = read_trace(&file);
    assert_eq!(steps_of(&t).len(), 2);
    // The run id the launcher chose: its host, its pid, its start.
    let host = t["cuprof"]["hostname"].as_str().unwrap();
    let run_id = t["cuprof"]["run_id"].as_str().unwrap();
    let launcher = format!("{host}-{}-", run.id());
    assert!(run_id.starts_with(&launcher), "{run_id} {launcher}");
    assert_eq!(t["cuprof"]["name"], "r");
    std::fs::write(&stop, "").unwrap();
    let done = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr).into_owned();
    assert!(done.status.success(), "{err}");
    // The launcher's end-of-run lines list the capture's file.
    assert_eq!(wrote_lines(&err), 1, "{err}");
    assert!(
        err.contains(&format!("cuprof: wrote {}", file.display())),
        "{err}"
    );
    assert_eq!(socket_count(&sockets), 0, "the socket is removed at exit");
}

/// Sockets in the control directory.
fn socket_count(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
            .count()
    })
}

#[test]
fn a_process_that_stepped_aside_says_so_and_takes_no_capture() {
    let mut job = Job::start_with(
        "aside",
        "a",
        1,
        0,
        20,
        &[("ON_DEMAND_SECOND_CLIENT_AT", "3")],
    );
    job.wait_ready();
    let mut state = String::new();
    for _ in 0..600 {
        let (ps, _) = job.ok(&["ps"]);
        state = ps_rows(&ps).values().next().unwrap().2.clone();
        if state == "stepped-aside" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(state, "stepped-aside");
    let pid = job.pids()[0].to_string();
    let out = job.cuprof(&["capture", "--pid", &pid, "--steps", "1"]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("cuprof: process {pid}: cuprof stepped aside for another profiler in this process (torch.profiler?): nothing can be captured\n")
    );
    let out_dir = job.dir.path().join("out");
    let results = job.finish();
    assert_eq!(
        results[0]
            .1
            .lines()
            .filter(|l| l.contains("steps aside"))
            .count(),
        1,
        "{}",
        results[0].1
    );
    assert!(!job_out_has_files(&out_dir));
}

#[test]
fn operators_of_a_torch_process_are_recorded_only_while_captured() {
    require_python("torch");
    let mut job = Job::start_with("torch", "tq", 1, 0, 20, &[("ON_DEMAND_TORCH", "1")]);
    job.wait_ready();
    let pid = job.pids()[0].to_string();
    let caps = job.dir.path().join("caps");
    for cycle in 1..=2 {
        job.capture_steps(&pid, "2", &caps);
        let t = read_trace(&rank_file(&caps, "tq", 0, cycle));
        assert_eq!(steps_of(&t).len(), 2);
        // One torch.mm a step (which calls aten::resolve_conj three times, as torch.profiler
        // records it), nothing from before or between the captures.
        let ops = count_by_name(&torch_operators(&t));
        assert_eq!(
            ops,
            BTreeMap::from([("aten::mm".into(), 2), ("aten::resolve_conj".into(), 6)]),
            "cycle {cycle}"
        );
        assert_eq!(
            kernels(&t),
            BTreeMap::from([("gemm()".into(), 2), ("softmax()".into(), 2)])
        );
    }
    job.finish();
}

/// The python process `cuprof run` started (its only child), once it has its control socket.
fn traced_child(job: &Job, launcher: u32) -> u32 {
    for _ in 0..600 {
        if let [pid] = children_of(launcher)[..] {
            if job.socket_dir().join(format!("{pid}.sock")).exists() {
                return pid;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("process {launcher}'s program never opened its control socket");
}

/// Issue 51: two ranks, each under `cuprof run --on-demand`. A step capture waiting for a held
/// rank says which and where; its report (NAME-cycleC-report) holds both ranks' steps and is
/// still theirs once the ranks have exited (a run writes none). A rank SIGKILLed during a
/// capture is named with its file's state, and its own run says what it left.
#[test]
fn a_capture_names_the_ranks_it_waits_for_and_the_rank_that_died_and_writes_its_report_once() {
    let hold = TempDir::new("lag-hold");
    let hold_file = hold.path().join("hold");
    std::fs::write(&hold_file, "").unwrap();
    let mut job = Job::empty("lag");
    let stop = job.stop_file();
    let out = job.dir.path().join("out");
    let caps = job.dir.path().join("caps");
    let bin = cuprof_bin();
    let run = [
        bin.to_str().unwrap(),
        "run",
        "--on-demand",
        "--name",
        "job",
        "--dir",
        out.to_str().unwrap(),
        "--",
    ];
    let lib = lib();
    for rank in 0..2 {
        let mut env = vec![("CUPROF_LIB", lib.to_str().unwrap())];
        if rank == 1 {
            env.push(("ON_DEMAND_HOLD", hold_file.to_str().unwrap()));
        }
        let args = [stop.to_str().unwrap(), "0", "20"];
        job.spawn_under(&run, "on_demand.py", &args, "job", (rank, 2), &env);
    }
    let launchers = job.pids();
    let traced: Vec<u32> = launchers.iter().map(|&l| traced_child(&job, l)).collect();
    // Rank 1 is held before its first step.
    let (ps, _) = job.ok(&["ps"]);
    let row = ps
        .lines()
        .find(|l| l.starts_with(&format!("{}\t", traced[1])))
        .unwrap();
    assert_eq!(row.split('\t').nth(4), Some("0"), "{ps}");

    let mut capture = Command::new(cuprof_bin())
        .args(["capture", "--name", "job", "--steps", "2", "--dir"])
        .arg(&caps)
        .env("XDG_RUNTIME_DIR", job.runtime_dir())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(capture.stderr.take().unwrap());
    let mut waiting = String::new();
    while !waiting.starts_with("cuprof: waiting") {
        waiting.clear();
        assert_ne!(
            std::io::BufRead::read_line(&mut err, &mut waiting).unwrap(),
            0
        );
    }
    std::fs::remove_file(&hold_file).unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(capture.wait().unwrap().success(), "{rest}");
    let r0 = steps_of(&read_trace(&rank_file(&caps, "job", 0, 1)));
    assert_eq!(steps_of(&read_trace(&rank_file(&caps, "job", 1, 1))), r0);
    assert_eq!(
        waiting,
        format!(
            "cuprof: waiting for 1 of 2 processes to finish step {}: rank 1 (pid {}) at step 0\n",
            r0[1], traced[1]
        )
    );
    assert_eq!(wrote_lines(&rest), 2, "{rest}");
    let report = caps.join("job-cycle1-report");
    assert!(
        rest.contains(&format!("cuprof: full report in {} ", report.display())),
        "{rest}"
    );
    let summary = || -> Value {
        serde_json::from_slice(&std::fs::read(report.join("summary.json")).unwrap()).unwrap()
    };
    let steps = summary()["steps"].clone();
    assert_eq!(steps["count"], 4, "{steps}");

    // Rank 1 is killed while a capture records it.
    let capture = Command::new(cuprof_bin())
        .args(["capture", "--name", "job", "--duration", "0", "--no-report"])
        .args(["--dir"])
        .arg(&caps)
        .env("XDG_RUNTIME_DIR", job.runtime_dir())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let cut = rank_file(&caps, "job", 1, 2);
    for _ in 0..600 {
        if std::fs::metadata(&cut).is_ok_and(|m| m.len() > 0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: kill has no memory preconditions; the pid is rank 1's program, alive.
    assert_eq!(
        unsafe { libc::kill(traced[1] as libc::pid_t, libc::SIGKILL) },
        0
    );
    let killed = job.children.remove(1).wait_with_output().unwrap();
    let killed_err = String::from_utf8_lossy(&killed.stderr).into_owned();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&killed.status),
        Some(libc::SIGKILL)
    );
    // SAFETY: as above; the pid is the capture's, alive.
    assert_eq!(
        unsafe { libc::kill(capture.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let done = capture.wait_with_output().unwrap();
    let cap_err = String::from_utf8_lossy(&done.stderr).into_owned();
    assert!(done.status.success(), "{cap_err}");
    assert_eq!(wrote_lines(&cap_err), 1, "{cap_err}");
    let died = format!(
        "cuprof: process {} (rank 1) died during capture 2 (killed?): {} is unfinished: ",
        traced[1],
        cut.display()
    );
    let line = cap_err
        .lines()
        .find(|l| l.starts_with(&died))
        .unwrap_or_else(|| panic!("{cap_err}"));
    assert!(
        line.ends_with(&format!("; cuprof repair {} closes it", cut.display())),
        "{line}"
    );
    // Its run lists the first capture's file, complete, and this one's, unfinished.
    let not_reported = "cuprof: not reported (the program was killed by signal 9): ";
    let first = rank_file(&caps, "job", 1, 1);
    let lines: Vec<&str> = killed_err
        .lines()
        .filter(|l| l.starts_with(not_reported))
        .collect();
    assert_eq!(lines.len(), 2, "{killed_err}");
    assert!(
        lines[0].starts_with(&format!("{not_reported}{} is complete (", first.display())),
        "{killed_err}"
    );
    assert!(
        lines[1].starts_with(&format!("{not_reported}{} is unfinished: ", cut.display())),
        "{killed_err}"
    );
    assert!(!killed_err.contains("nothing traced"), "{killed_err}");

    // Rank 0 ends: its run lists both its files and writes no report.
    let results = job.finish();
    assert_eq!(wrote_lines(&results[0].1), 2, "{}", results[0].1);
    assert!(!results[0].1.contains("full report"), "{}", results[0].1);
    assert_eq!(summary()["steps"], steps);
    assert!(!out.join("job-report").exists() && !caps.join("job-report").exists());
}
