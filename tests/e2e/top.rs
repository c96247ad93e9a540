//! Issue 27, `cuprof top`: processes recording through the libcupti double are watched live;
//! what the view shows comes from the processes (the `live` request), and must equal what
//! their traces say of the same second. `cuprof serve`'s `/api/live` asks them the same way.

use crate::common::on_demand::*;
use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SECOND_NS: u64 = 1_000_000_000;

/// `cuprof capture --pid PID --duration 0 --dir CAPS`, running until interrupted.
fn capture_until_interrupted(job: &Job, pid: u32, caps: &Path) -> Child {
    Command::new(cuprof_bin())
        .args(["capture", "--pid", &pid.to_string(), "--duration", "0"])
        .args(["--no-report", "--dir"])
        .arg(caps)
        .env("XDG_RUNTIME_DIR", job.runtime_dir())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Ctrl-C to a capture until interrupted: it stops the processes and reports their files.
fn interrupt(capture: Child) -> String {
    // SAFETY: kill with a pid this test spawned and has not waited for.
    assert_eq!(
        unsafe { libc::kill(capture.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let out = capture.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

/// Waits (bounded) until every process of the job is in `state`.
fn wait_state(job: &Job, state: &str) {
    for _ in 0..600 {
        let (ps, _) = job.ok(&["ps"]);
        if ps_rows(&ps).values().all(|r| r.2 == state) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the processes never became {state}");
}

/// Waits (bounded) until `cuprof top -n 1 --detail` prints `want`; asserts it does.
fn top_prints(job: &Job, want: &str) {
    top_prints_with(job, &["--detail"], want)
}

/// [`top_prints`] of `cuprof top -n 1 ARGS`.
fn top_prints_with(job: &Job, args: &[&str], want: &str) {
    let mut got = String::new();
    for _ in 0..100 {
        let mut all = vec!["top", "-n", "1"];
        all.extend_from_slice(args);
        got = job.ok(&all).0;
        if got == want {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(got, want);
}

fn wait_for_file(p: &Path) {
    for _ in 0..600 {
        if p.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} never appeared", p.display());
}

#[test]
fn top_prints_plain_lines_when_not_a_terminal() {
    let mut job = Job::empty("plain");
    let go = job.dir.path().join("go");
    let done = job.dir.path().join("done");
    let stop = job.stop_file();
    let args = [&go, &done, &stop].map(|p| p.to_str().unwrap().to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mem = [("CUPROF_ACTIVITIES", "CPU,GPU,MEM")];
    job.spawn("top_burst.py", &args, "burst", (0, 1), &mem);
    job.wait_ready();
    let pid = job.pids()[0];
    let header = "cuprof top: 1 process, refreshed every second\n";
    top_prints(
        &job,
        &format!("{header}{pid}  rank 0  burst  ready  step 0  step time p50 - last -  device memory 0 B\n  not recording (cuprof capture --pid {pid} --duration 0 records until stopped)\n\n"),
    );

    let caps = job.dir.path().join("caps");
    let capture = capture_until_interrupted(&job, pid, &caps);
    wait_state(&job, "recording");
    std::fs::write(&go, "").unwrap();
    wait_for_file(&done);
    // gemm 200 ms, softmax 100 ms, gemm 200 ms, one after the other within 0.7 s; 3 MiB and
    // 1 MiB allocated, the 3 MiB freed.
    let kernels = "         2    400.000 ms  gemm()\n         1    100.000 ms  softmax()\n";
    top_prints(
        &job,
        &format!(
            "{header}{pid}  rank 0  burst  recording  step 0  step time p50 - last -  device memory 1.0 MiB\n  GPU busy 50.0% of the last second\n  kernels, last second:\n{kernels}  kernels, since the capture began:\n{kernels}  operators, last second: none\n  operators, since the capture began: none\n\n"
        ),
    );
    // The node's view, the same figures on one line: the busiest first.
    let columns = "RANK     PID STATE    BUSY HISTORY     STEP  STEP P50    MEMORY  TOP KERNEL";
    top_prints_with(
        &job,
        &["--sort", "busy"],
        &format!("cuprof top: 1 process, busiest first\n{columns}\n   0 {pid:>7} rec     50.0%        ▄       0         -   1.0 MiB  gemm()\n\n"),
    );
    let err = interrupt(capture);
    assert_eq!(wrote_lines(&err), 1, "{err}");
    top_prints(
        &job,
        &format!("{header}{pid}  rank 0  burst  ready  step 0  step time p50 - last -  device memory 1.0 MiB\n  not recording (cuprof capture --pid {pid} --duration 0 records until stopped)\n\n"),
    );
    top_prints_with(
        &job,
        &[],
        &format!("cuprof top: 1 process, by rank\n{columns}\n   0 {pid:>7} ready       -                0         -   1.0 MiB  -\n\n"),
    );
    std::fs::write(&stop, "").unwrap();
    for c in std::mem::take(&mut job.children) {
        assert!(c.wait_with_output().unwrap().status.success());
    }
}

/// A tmux server of its own (`-L`), with one session running a command in a window of
/// `size` (columns, rows).
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(command: &str, size: (u16, u16)) -> Tmux {
        // Tests run side by side in this process: a server each.
        static SERVERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = format!("cuprof-e2e-{}-{n}", std::process::id());
        let t = Tmux { socket };
        let ok = t
            .cmd(&[
                "new-session",
                "-d",
                "-s",
                "top",
                "-x",
                &size.0.to_string(),
                "-y",
                &size.1.to_string(),
                command,
            ])
            .status()
            .unwrap();
        assert!(ok.success());
        t
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]).args(args).env_remove("TMUX");
        c
    }

    /// The screen now, and the wall-clock time (ns) just after it was read.
    fn screen(&self) -> (String, u64) {
        let out = self
            .cmd(&["capture-pane", "-p", "-t", "top"])
            .output()
            .unwrap();
        let at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            at.as_nanos() as u64,
        )
    }

    fn running(&self) -> bool {
        self.cmd(&["has-session", "-t", "top"])
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).stderr(Stdio::null()).status();
    }
}

/// What a screen says of the last second: the busy share as shown, and per kernel name its
/// count and time as shown.
#[derive(Debug, PartialEq)]
struct LastSecond {
    busy: String,
    kernels: BTreeMap<String, (u64, String)>,
}

fn shown(screen: &str) -> Option<LastSecond> {
    let busy = screen
        .lines()
        .find_map(|l| l.strip_prefix("  GPU busy "))?
        .strip_suffix(" of the last second")?
        .to_owned();
    let mut lines = screen
        .lines()
        .skip_while(|l| *l != "  kernels, last second:")
        .skip(1);
    let mut kernels = BTreeMap::new();
    // Rows: count, time and its unit, name.
    while let Some(f) = lines
        .next()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
    {
        let [count, time, unit, name] = f[..] else {
            break;
        };
        let Ok(count) = count.parse() else { break };
        kernels.insert(name.to_owned(), (count, format!("{time} {unit}")));
    }
    (!kernels.is_empty()).then_some(LastSecond { busy, kernels })
}

/// The trace's GPU work: (name, start, end), absolute ns.
fn gpu_work(trace: &Value) -> Vec<(String, u64, u64)> {
    let base = trace["baseTimeNanoseconds"].as_u64().unwrap();
    let ns = |us: &Value| (us.as_f64().unwrap() * 1000.0).round() as u64;
    events(trace, "kernel")
        .iter()
        .map(|e| {
            let start = base + ns(&e["ts"]);
            (
                e["name"].as_str().unwrap().to_owned(),
                start,
                start + ns(&e["dur"]),
            )
        })
        .collect()
}

/// As `cuprof` prints a duration.
fn dur(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{:.3} µs", ns as f64 / 1e3),
        _ => format!("{:.3} ms", ns as f64 / 1e6),
    }
}

/// What the trace says of the second ending at `to`: the work overlapping it, counted inside
/// it.
fn in_trace(work: &[(String, u64, u64)], to: u64) -> LastSecond {
    let from = to - SECOND_NS;
    let mut spans: Vec<(u64, u64)> = Vec::new();
    let mut by_name: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (name, s, e) in work.iter().filter(|w| w.2 > from && w.1 < to) {
        let (s, e) = ((*s).max(from), (*e).min(to));
        spans.push((s, e));
        let k = by_name.entry(name.clone()).or_default();
        k.0 += 1;
        k.1 += e - s;
    }
    spans.sort();
    let mut busy = 0;
    let mut reach = 0;
    for (s, e) in spans {
        let s = s.max(reach);
        if e > s {
            busy += e - s;
        }
        reach = reach.max(e);
    }
    LastSecond {
        busy: format!("{:.1}%", busy as f64 / SECOND_NS as f64 * 100.0),
        kernels: by_name
            .into_iter()
            .map(|(n, (c, ns))| (n, (c, dur(ns))))
            .collect(),
    }
}

/// The ends of the seconds of the trace a screen read at `at` may show. The screen's second
/// ends at the newest GPU work the process had when it drew, which is within a refresh (1 s)
/// and the records' flush interval (1 s) of the time the screen was read: one such second of
/// the trace says exactly what the screen says.
fn seconds_before(work: &[(String, u64, u64)], at: u64) -> Vec<u64> {
    let candidates: Vec<u64> = work
        .iter()
        .map(|w| w.2)
        .filter(|&end| end <= at && end + 4 * SECOND_NS > at)
        .collect();
    assert!(!candidates.is_empty());
    candidates
}

/// One rank line of the node's view: (rank, pid, state, busy, top kernel, memory).
#[allow(clippy::type_complexity)]
fn rank_line(line: &str) -> Option<(u32, u32, String, String, String, String)> {
    // Columns: rank 0..4, pid 5..12, state 13..18, busy 19..26, history 27..35, step 36..43,
    // step p50 44..53, memory 54..63, top kernel from 65.
    let c: Vec<char> = line.chars().collect();
    let col = |a: usize, b: usize| -> String {
        c.get(a..b.min(c.len())).map_or(String::new(), |s| {
            s.iter().collect::<String>().trim().to_owned()
        })
    };
    Some((
        col(0, 4).parse().ok()?,
        col(5, 12).parse().ok()?,
        col(13, 18),
        col(19, 26),
        col(65, c.len()),
        col(54, 63),
    ))
}

#[test]
fn top_in_tmux_at_80x24_shows_eight_ranks_one_line_each_as_their_traces_say() {
    // gemm 4 ms and softmax 1 ms (overlapping it) every 20 ms or so, in each of 8 ranks; rank
    // R holds R + 1 MiB of device memory (no device memory records: the driver's figure).
    let env = [
        ("ON_DEMAND_KERNEL_SCALE", "100"),
        ("ON_DEMAND_MALLOC_MIB", "1"),
    ];
    let mut job = Job::start_with("tmux8", "n8", 8, 0, 20, &env);
    job.wait_ready();
    let pids = job.pids();
    let caps = job.dir.path().join("caps");
    let capture = Command::new(cuprof_bin())
        .args([
            "capture",
            "--name",
            "n8",
            "--duration",
            "0",
            "--no-report",
            "--dir",
        ])
        .arg(&caps)
        .env("XDG_RUNTIME_DIR", job.runtime_dir())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_state(&job, "recording");
    let tmux = Tmux::start(
        &format!(
            "env XDG_RUNTIME_DIR={} {} top",
            job.runtime_dir().display(),
            cuprof_bin().display()
        ),
        (80, 24),
    );
    // Once every rank's last second has kernels.
    let mut seen = None;
    for _ in 0..300 {
        let (screen, at) = tmux.screen();
        let rows: Vec<_> = screen.lines().filter_map(rank_line).collect();
        if rows.len() == 8 && rows.iter().all(|r| r.2 == "rec" && r.4 != "-") {
            seen = Some((screen, at, rows));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (screen, at, rows) = seen.expect("top never showed 8 recording ranks with kernels");
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "cuprof top: 8 processes, by rank; keys r b s sort, d detail, q quits",
            "RANK     PID STATE    BUSY HISTORY     STEP  STEP P50    MEMORY  TOP KERNEL",
        ],
        "{screen}"
    );
    // By rank, one line each, every pid once.
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    assert_eq!(
        rows.iter().map(|r| r.5.as_str()).collect::<Vec<_>>(),
        ["1.0 MiB", "2.0 MiB", "3.0 MiB", "4.0 MiB", "5.0 MiB", "6.0 MiB", "7.0 MiB", "8.0 MiB"],
        "{screen}"
    );
    let mut shown_pids: Vec<u32> = rows.iter().map(|r| r.1).collect();
    shown_pids.sort();
    let mut want = pids.clone();
    want.sort();
    assert_eq!(shown_pids, want);
    // A screen of 8 rows (7 drawn): 4 ranks and a line for the 4 others; j scrolls by one.
    let resized = tmux
        .cmd(&["resize-window", "-t", "top", "-x", "80", "-y", "8"])
        .status()
        .unwrap();
    assert!(resized.success());
    let ranks_shown = |want_last: &str| {
        let mut screen = String::new();
        for _ in 0..100 {
            screen = tmux.screen().0;
            if screen.lines().nth(6) == Some(want_last) {
                return screen
                    .lines()
                    .filter_map(rank_line)
                    .map(|r| r.0)
                    .collect::<Vec<_>>();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("never shown: {want_last}\n{screen}");
    };
    assert_eq!(ranks_shown("4 more (up/down or j/k scroll)"), [0, 1, 2, 3]);
    let sent = tmux.cmd(&["send-keys", "-t", "top", "j"]).status().unwrap();
    assert!(sent.success());
    assert_eq!(
        ranks_shown("4 more, 1 above (up/down or j/k scroll)"),
        [1, 2, 3, 4]
    );
    let sent = tmux.cmd(&["send-keys", "-t", "top", "q"]).status().unwrap();
    assert!(sent.success());
    let err = interrupt(capture);
    assert_eq!(wrote_lines(&err), 8, "{err}");
    // Each rank's busy share and top kernel are its trace's, for one second before the screen.
    for (rank, _, _, busy, kernel, _) in &rows {
        let trace = read_trace(&caps.join(format!("n8-rank{rank}-cycle1.trace.json.gz")));
        let work = gpu_work(&trace);
        let said: Vec<(String, String)> = seconds_before(&work, at)
            .into_iter()
            .map(|to| {
                let second = in_trace(&work, to);
                let top = top_kernel(&work, to);
                (second.busy, top)
            })
            .collect();
        assert!(
            said.contains(&(busy.clone(), kernel.clone())),
            "rank {rank}: the screen says {busy} {kernel}, no second of its trace before it does: {said:?}\n{screen}"
        );
    }
    job.finish();
}

/// The kernel with the most time in the second ending at `to`.
fn top_kernel(work: &[(String, u64, u64)], to: u64) -> String {
    let from = to - SECOND_NS;
    let mut by_name: BTreeMap<&str, u64> = BTreeMap::new();
    for (name, s, e) in work.iter().filter(|w| w.2 > from && w.1 < to) {
        *by_name.entry(name).or_default() += (*e).min(to) - (*s).max(from);
    }
    by_name
        .into_iter()
        .max_by_key(|(_, ns)| *ns)
        .map_or("-".into(), |(n, _)| n.to_owned())
}

#[test]
fn top_in_tmux_shows_what_the_trace_of_the_same_second_says() {
    // gemm 4 ms and softmax 1 ms (overlapping it) every 20 ms or so: about 20% busy.
    let scale = [("ON_DEMAND_KERNEL_SCALE", "100")];
    let mut job = Job::start_with("tmux", "tj", 1, 0, 20, &scale);
    job.wait_ready();
    let pid = job.pids()[0];
    let caps = job.dir.path().join("caps");
    let capture = capture_until_interrupted(&job, pid, &caps);
    wait_state(&job, "recording");
    let tmux = Tmux::start(
        &format!(
            "env XDG_RUNTIME_DIR={} {} top --detail",
            job.runtime_dir().display(),
            cuprof_bin().display()
        ),
        (200, 60),
    );
    // Past the first refreshes, once the last second has kernels.
    let mut seen = None;
    for _ in 0..300 {
        let (screen, at) = tmux.screen();
        if let Some(s) = shown(&screen) {
            assert!(
                screen.starts_with("cuprof top: 1 process, refreshed every second, q quits\n"),
                "{screen}"
            );
            assert!(
                screen.contains(&format!("\n{pid}  rank 0  tj  recording  step ")),
                "{screen}"
            );
            seen = Some((s, at, screen));
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (on_screen, at, screen) = seen.expect("top never showed the last second's kernels");
    let names: Vec<&str> = on_screen.kernels.keys().map(String::as_str).collect();
    assert_eq!(names, ["gemm()", "softmax()"], "{screen}");

    // q quits: the session's only command ends.
    let sent = tmux.cmd(&["send-keys", "-t", "top", "q"]).status().unwrap();
    assert!(sent.success());
    let mut quit = false;
    for _ in 0..100 {
        if !tmux.running() {
            quit = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(quit, "top did not quit on q");

    let err = interrupt(capture);
    assert_eq!(wrote_lines(&err), 1, "{err}");
    let trace = read_trace(&caps.join("tj-rank0-cycle1.trace.json.gz"));
    let work = gpu_work(&trace);
    let candidates = seconds_before(&work, at);
    let matching = candidates
        .iter()
        .filter(|&&to| in_trace(&work, to) == on_screen)
        .count();
    assert!(
        matching > 0,
        "no second of the trace ending in the 4 s before the screen was read says\n{on_screen:?}\n(the last one says {:?})",
        in_trace(&work, *candidates.last().unwrap())
    );
    job.finish();
}

#[test]
fn top_from_another_uid_is_refused_and_changes_nothing() {
    let mut job = Job::start("topsec", "s", 1, 0, 20);
    job.wait_ready();
    job.refused_to_nobody(&["top", "-n", "1"]);
    let live = job.socket_dir().join(format!("{}.sock", job.pids()[0]));
    std::fs::set_permissions(&live, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    assert_eq!(
        as_nobody_through(&live, "cuprof\t2\tlive\n"),
        "cuprof\t2\terror\tpermission denied: not the owner of this process\n",
    );
    let (ps, _) = job.ok(&["ps"]);
    assert_eq!(ps_rows(&ps).values().next().unwrap().2, "ready");
    let results = job.finish();
    assert!(results[0]
        .1
        .contains("cuprof: refused a control connection from uid 65534"));
}

#[test]
fn top_names_a_process_of_another_release_in_one_line() {
    let job = Job::empty("release");
    let dir = job.socket_dir();
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    // A process of the release before: protocol 1, answering as it would. This test's own pid
    // stands in for it (the socket of a live process is not stale).
    let pid = std::process::id();
    let path: PathBuf = dir.join(format!("{pid}.sock"));
    let listener = UnixListener::bind(&path).unwrap();
    // Two connections per top: the probe that tells a live socket from a stale one (a status
    // request), then top's own.
    let old = std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Write};
        let mut requests = Vec::new();
        for _ in 0..4 {
            let (mut c, _) = listener.accept().unwrap();
            let mut request = String::new();
            BufReader::new(&c).read_line(&mut request).unwrap();
            c.write_all(b"cuprof\t1\terror\tthe other side speaks control protocol 2, this cuprof speaks 1: use cuprof and libcuprof.so of the same release\n").unwrap();
            requests.push(request);
        }
        requests
    });
    let (out, _) = job.ok(&["top", "-n", "1"]);
    let (detail, _) = job.ok(&["top", "-n", "1", "--detail"]);
    assert_eq!(
        old.join().unwrap(),
        [
            "cuprof\t2\tstatus\n",
            "cuprof\t2\tlive\n",
            "cuprof\t2\tstatus\n",
            "cuprof\t2\tlive\n"
        ]
    );
    let why = format!("process {pid}'s answer: the other side speaks control protocol 1, this cuprof speaks 2: use cuprof and libcuprof.so of the same release");
    assert_eq!(
        out,
        format!("cuprof top: 1 process, by rank\nRANK     PID STATE    BUSY HISTORY     STEP  STEP P50    MEMORY  TOP KERNEL\n{why}\n\n")
    );
    assert_eq!(
        detail,
        format!("cuprof top: 1 process, refreshed every second\n{why}\n\n")
    );
}

/// The names of a list of a `cuprof top` screen (`  TITLE:` then its rows), with their counts.
fn listed(screen: &str, title: &str) -> BTreeMap<String, u64> {
    screen
        .lines()
        .skip_while(|l| *l != format!("  {title}:"))
        .skip(1)
        .map_while(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [count, _, _, name] = f[..] else {
                return None;
            };
            Some((name.to_owned(), count.parse().ok()?))
        })
        .collect()
}

#[test]
fn top_shows_the_operators_of_a_torch_process() {
    require_python("torch");
    let mut job = Job::start_with("toptorch", "tt", 1, 0, 20, &[("ON_DEMAND_TORCH", "1")]);
    job.wait_ready();
    let pid = job.pids()[0];
    // The recorder never imports torch: it records operators once the program has imported it,
    // which on_demand.py does after CUDA's initialisation, before its first step.
    for _ in 0..600 {
        let (ps, _) = job.ok(&["ps"]);
        if ps.lines().nth(1).and_then(|l| l.split('\t').nth(4)) != Some("0") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let caps = job.dir.path().join("caps");
    let capture = capture_until_interrupted(&job, pid, &caps);
    wait_state(&job, "recording");
    // One torch.mm a step, which calls aten::resolve_conj three times.
    let names = ["aten::mm", "aten::resolve_conj"];
    let mut screen = String::new();
    for _ in 0..100 {
        screen = job.ok(&["top", "-n", "1", "--detail"]).0;
        let total = listed(&screen, "operators, since the capture began");
        if names.iter().all(|n| total.get(*n).is_some_and(|&c| c > 0)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for title in [
        "operators, last second",
        "operators, since the capture began",
    ] {
        let ops = listed(&screen, title);
        assert_eq!(ops.keys().collect::<Vec<_>>(), names, "{title}:\n{screen}");
    }
    let err = interrupt(capture);
    assert_eq!(wrote_lines(&err), 1, "{err}");
    job.finish();
}

#[test]
fn serve_shows_the_on_demand_processes_live() {
    let mut job = Job::start("serve", "served", 2, 0, 20);
    job.wait_ready();
    let pids = job.pids();
    // A capture to serve: its trace, while the processes go on, ready again.
    let caps = job.dir.path().join("caps");
    job.capture_steps(&pids[0].to_string(), "2", &caps);
    let mut cmd = Command::new(cuprof_bin());
    cmd.arg("serve")
        .arg(&caps)
        .args(["--port", "0"])
        .env("XDG_RUNTIME_DIR", job.runtime_dir());
    let server = crate::serve_client::Server::start(cmd);
    let (status, body) = crate::serve_client::get(server.address, "/api/live");
    assert_eq!(status, 200, "{body}");
    let live: Value = serde_json::from_str(&body).unwrap();
    let mut got: Vec<(u64, u64, &str, &str, bool)> = live
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pid"].as_u64().unwrap(),
                p["rank"].as_u64().unwrap(),
                p["name"].as_str().unwrap(),
                p["state"].as_str().unwrap(),
                p["recording"].as_bool().unwrap(),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(u64, u64, &str, &str, bool)> = pids
        .iter()
        .enumerate()
        .map(|(rank, &pid)| (pid as u64, rank as u64, "served", "ready", false))
        .collect();
    want.sort();
    assert_eq!(got, want, "{body}");
    // The captured process has run its kernels: its totals name them.
    let first = live
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pids[0])
        .unwrap();
    let kernels: Vec<&str> = first["kernels_total"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(kernels, ["gemm()", "softmax()"], "{body}");
    drop(server);
    job.finish();
}
