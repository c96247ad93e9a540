//! `cuprof ps` and `cuprof capture`: the processes of this user on this host started with
//! `--on-demand`, reached through their control sockets (protocol:
//! `cuprof_core::control`; the library's side: `tracer/preload/src/life/control.rs`).
//!
//! A step capture of several processes (the ranks of one job) asks each for its step first,
//! then tells every one to start at the step after the highest: every rank records the same
//! step numbers, whatever host it runs on, because the decision is made of step numbers, not
//! clocks. Each process reports the files it wrote into one report file, which is then
//! printed as `cuprof run` prints its own.
//!
//! A step capture that has not begun yet is cancelled by `cuprof capture --cancel`, or by the
//! asking command's Ctrl-C (SIGINT, SIGTERM); Ctrl-C of a capture by duration stops it (its
//! files are written). A second signal ends the command at once.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use cuprof_analysis::escape::terminal::{printable_line, Shown};
use cuprof_core::capture_options::CaptureOptions;
use cuprof_core::control::{self as proto, Reply, Request, Status};

/// How long a process may take to answer one request.
const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// How often a capture asks whether the processes have written their files.
const POLL: Duration = Duration::from_millis(100);
/// How often a waiting capture looks at its interrupt flag.
const INTERRUPT_NAP: Duration = Duration::from_millis(20);

const CAPTURE_EXAMPLES: &str = "\
Examples:
  cuprof run --on-demand --name train -- torchrun --nproc_per_node=8 train.py
  cuprof capture --name train --steps 5        the same 5 steps in every rank
  cuprof capture --pid 4242 --duration 10      10 s of process 4242
  cuprof capture --all --duration 0            until Ctrl-C (cuprof top shows it live)
  cuprof capture --name train --cancel         drop the step capture not begun yet
  srun --overlap --nodes=4 --ntasks-per-node=1 cuprof capture --name train --steps 5
                                               every node of a Slurm job";

#[derive(Args, Debug)]
#[command(after_help = CAPTURE_EXAMPLES)]
pub struct CaptureArgs {
    /// The processes to capture
    #[arg(long, num_args = 1.., value_name = "PID", required_unless_present_any = ["all", "name"], conflicts_with_all = ["all", "name"])]
    pid: Vec<u32>,

    /// Every process of this user on this host started with --on-demand
    #[arg(long, conflicts_with = "name")]
    all: bool,

    /// The processes started with `cuprof run --on-demand --name NAME` (CUPROF_NAME)
    #[arg(long, value_name = "NAME")]
    name: Option<String>,

    /// Record N steps (cuprof_step() calls), from the next step boundary; across processes,
    /// from the step after the highest step any of them is at
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), required_unless_present_any = ["duration", "cancel"], conflicts_with_all = ["duration", "cancel"])]
    steps: Option<u64>,

    /// Cancel the step capture that waits for its first step in these processes (the asking
    /// command's Ctrl-C cancels its own): nothing is recorded, and the process is ready again
    #[arg(long, conflicts_with_all = ["duration", "dir", "no_report"])]
    cancel: bool,

    /// Record for this long, from now; 0: until this command is interrupted (Ctrl-C, SIGTERM)
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    duration: Option<Duration>,

    /// Where the traces go [default: each process's own directory]
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// Do not analyse the traces (by default: the short summary `cuprof run` prints)
    #[arg(long)]
    no_report: bool,

    #[command(flatten)]
    options: CaptureOptionArgs,
}

/// What this capture records, when not what each process started with (as `cuprof run`
/// spells it; an option not given keeps the process's own).
#[derive(Args, Debug)]
struct CaptureOptionArgs {
    /// What to trace in this capture: CPU (runtime/driver API, NVTX, PyTorch operators), GPU
    /// (kernels, copies, memsets, syncs) [default: what the process traces]. MEM is chosen
    /// when the process starts (cuprof run --activities ...,MEM)
    #[arg(long, num_args = 1.., value_delimiter = ',', value_enum, ignore_case = true)]
    activities: Vec<crate::run::Activity>,

    /// The Python call stacks of PyTorch operators, in this capture
    #[arg(long)]
    with_stack: bool,

    /// PyTorch operators with their input shapes, in this capture (for a process started with
    /// --no-record-shapes)
    #[arg(long, conflicts_with = "no_record_shapes")]
    record_shapes: bool,

    /// PyTorch operators without their input shapes, in this capture
    #[arg(long)]
    no_record_shapes: bool,

    /// No PyTorch operators in this capture
    #[arg(long)]
    no_torch_ops: bool,

    /// A `flops` arg on the PyTorch operators torch counts, in this capture
    #[arg(long)]
    with_flops: bool,

    /// Each nn.Module forward call as a range with its module path, in this capture
    #[arg(long)]
    with_modules: bool,
}

impl CaptureOptionArgs {
    fn options(&self) -> Result<CaptureOptions> {
        let activities =
            (!self.activities.is_empty()).then(|| crate::run::activities_of(&self.activities));
        if activities.is_some_and(|a| a.mem) {
            bail!("--activities MEM cannot be chosen per capture: device memory records run for the whole program (start it with cuprof run --activities CPU,GPU,MEM)");
        }
        let flag = |on: bool, value: bool| on.then_some(value);
        Ok(CaptureOptions {
            cpu: activities.map(|a| a.cpu),
            gpu: activities.map(|a| a.gpu),
            with_stack: flag(self.with_stack, true),
            record_shapes: flag(self.record_shapes, true).or(flag(self.no_record_shapes, false)),
            with_flops: flag(self.with_flops, true),
            torch_ops: flag(self.no_torch_ops, false),
            with_modules: flag(self.with_modules, true),
        })
    }
}

#[derive(Args, Debug)]
pub struct PsArgs {}

fn seconds(s: &str) -> Result<Duration, String> {
    cuprof_core::config::parse_seconds(s.trim())
        .ok_or_else(|| "a number of seconds, like 10 or 2.5 (0: until interrupted)".into())
}

/// This user's socket directory, checked private; `None` when it does not exist.
pub(crate) fn socket_dir() -> Result<Option<PathBuf>> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let dir = proto::socket_dir(
        std::env::var_os("XDG_RUNTIME_DIR"),
        &std::env::temp_dir(),
        uid,
    );
    match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("cannot reach the control directory {}: {e}", dir.shown()),
        Ok(_) => {}
    }
    proto::check_private_dir(&dir, uid, false)?;
    proto::remove_stale(&dir);
    Ok(Some(dir))
}

/// The pid of the process listening on `conn`'s other end as this process sees it
/// (SO_PEERCRED: the kernel translates it into the reader's PID namespace; 0 when the listener
/// lives in a namespace this one cannot see); `None` when the kernel does not say.
fn peer_pid(conn: &UnixStream) -> Option<u32> {
    use std::os::unix::io::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a ucred.
    let r = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then(|| u32::try_from(cred.pid).unwrap_or(0))
}

/// A process's pid as this command sees it: `own` is the pid the process gave (its socket's
/// name, in its own PID namespace), `peer` the kernel's translation ([`peer_pid`]). A process
/// in a child namespace (`unshare --pid`, a container) is shown with the pid it has here;
/// one in a namespace this one cannot see gets 0 (no pid here).
fn pid_here(own: u32, peer: Option<u32>) -> u32 {
    peer.unwrap_or(own)
}

/// One request to process `pid` (the pid in its socket's name), one reply; the pid in a status
/// is the one it has here ([`pid_here`]: 0 for a process whose PID namespace this one cannot
/// see).
pub(crate) fn ask(dir: &Path, pid: u32, req: &Request) -> Result<Reply> {
    let path = proto::socket_path(dir, pid);
    let meta = std::fs::symlink_metadata(&path).with_context(|| {
        format!("process {pid} has no control socket ({}): it was not started with --on-demand, has ended, or belongs to another user", path.shown())
    })?;
    if !meta.file_type().is_socket() {
        bail!(
            "{} is not a socket (a file or symlink put there?): refused; remove it",
            path.shown()
        );
    }
    let mut conn = UnixStream::connect(&path)
        .with_context(|| format!("process {pid} does not answer on {}", path.shown()))?;
    conn.set_read_timeout(Some(ANSWER_WAIT))?;
    conn.set_write_timeout(Some(ANSWER_WAIT))?;
    conn.write_all(req.to_line()?.as_bytes())
        .with_context(|| format!("sending to process {pid}"))?;
    let mut line = Vec::new();
    BufReader::new(&conn)
        .take(proto::MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut line)
        .with_context(|| format!("reading process {pid}'s answer"))?;
    let text = String::from_utf8_lossy(&line);
    let mut reply = Reply::parse(&text).with_context(|| format!("process {pid}'s answer"))?;
    let peer = peer_pid(&conn);
    match &mut reply {
        Reply::Status(s) => s.pid = pid_here(s.pid, peer),
        Reply::Live(l) => l.status.pid = pid_here(l.status.pid, peer),
        _ => {}
    }
    Ok(reply)
}

/// How messages name a process reached through socket `socket`, whose status is `s`.
pub(crate) fn shown(socket: u32, s: &Status) -> String {
    match s.pid {
        0 => format!(
            "{} (its pid in a PID namespace this one cannot see)",
            proto::socket_owner_pid(socket)
        ),
        p => p.to_string(),
    }
}

/// The socket (its pid) of the process that has pid `pid` here, with its status: `PID.sock`
/// when that process is the one with this pid here, else the socket of a process of a child
/// PID namespace that has it.
pub(crate) fn reach(dir: &Path, pid: u32) -> Result<(u32, Status)> {
    let direct = status(dir, pid);
    if let Ok(s) = &direct {
        if s.pid == pid {
            return direct.map(|s| (pid, s));
        }
    }
    for socket in proto::socket_pids(dir) {
        if let Ok(s) = status(dir, socket) {
            if s.pid == pid {
                return Ok((socket, s));
            }
        }
    }
    match direct {
        Err(e) => Err(e),
        Ok(_) => bail!("process {pid} has no control socket here: it was not started with --on-demand, has ended, or belongs to another user (cuprof ps lists the ones reached)"),
    }
}

fn status(dir: &Path, pid: u32) -> Result<Status> {
    match ask(dir, pid, &Request::Status)? {
        Reply::Status(s) => Ok(s),
        Reply::Error(e) => bail!("process {pid}: {e}"),
        other => bail!("process {pid} answered {other:?} to a status request"),
    }
}

pub(crate) fn no_process(what: &str) -> anyhow::Error {
    anyhow::anyhow!("no process {what}runs with --on-demand for this user on this host (start one with cuprof run --on-demand; cuprof ps lists them)")
}

pub fn ps(_: PsArgs) -> Result<()> {
    let Some(dir) = socket_dir()? else {
        return Err(no_process(""));
    };
    let pids = proto::socket_pids(&dir);
    if pids.is_empty() {
        return Err(no_process(""));
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "PID\tRANK\tNAME\tSTATE\tSTEPS\tFILES")?;
    let mut unseen = Vec::new();
    for pid in pids {
        match status(&dir, pid) {
            Ok(s) => {
                let name = printable_line(&s.name);
                let pid_col = match s.pid {
                    0 => {
                        unseen.push(format!("process {} named {name}", shown(pid, &s)));
                        "-".to_string()
                    }
                    p => p.to_string(),
                };
                writeln!(
                    out,
                    "{pid_col}\t{}\t{name}\t{}\t{}\t{}",
                    s.rank,
                    printable_line(&s.state),
                    s.step,
                    s.files
                )?
            }
            Err(e) => cuprof_analysis::io::console::eprint_line(&format!(
                "cuprof: {}",
                cuprof_analysis::io::console::one_line(&e)
            )),
        }
    }
    for u in unseen {
        cuprof_analysis::io::console::eprint_line(&format!(
            "cuprof: {u} has no pid here (PID column -): capture it with --name or --all"
        ));
    }
    Ok(())
}

/// The processes a capture is for: each one's socket (its pid), how messages name it, and its
/// status.
fn targets(dir: &Path, a: &CaptureArgs) -> Result<Vec<Target>> {
    let target = |(socket, status): (u32, Status)| Target {
        socket,
        shown: shown(socket, &status),
        status,
    };
    if !a.pid.is_empty() {
        return a.pid.iter().map(|&p| reach(dir, p).map(target)).collect();
    }
    let mut found = Vec::new();
    for pid in proto::socket_pids(dir) {
        match status(dir, pid) {
            Ok(s) if a.name.as_ref().is_none_or(|n| *n == s.name) => found.push(target((pid, s))),
            Ok(_) => {}
            Err(e) => cuprof_analysis::io::console::eprint_line(&format!(
                "cuprof: {}",
                cuprof_analysis::io::console::one_line(&e)
            )),
        }
    }
    if found.is_empty() {
        return Err(match &a.name {
            Some(n) => no_process(&format!("named {n} ")),
            None => no_process(""),
        });
    }
    Ok(found)
}

/// A process a capture is for.
struct Target {
    /// The pid in its socket's name.
    socket: u32,
    /// How messages name it ([`shown`]).
    shown: String,
    status: Status,
}

/// A process a capture started in, and the capture's cycle there.
struct Started {
    socket: u32,
    shown: String,
    rank: u32,
    cycle: u32,
    /// A step capture's steps there (a process past the common start records from later).
    steps: Option<std::ops::Range<u64>>,
}

pub fn capture(a: CaptureArgs) -> Result<()> {
    let Some(dir) = socket_dir()? else {
        return Err(no_process(""));
    };
    let options = a.options.options()?;
    if a.cancel {
        if options != CaptureOptions::default() {
            bail!("--cancel takes no capture options: it only cancels a waiting capture");
        }
        return cancel(&dir, &targets(&dir, &a)?);
    }
    // Before anything is asked: a Ctrl-C from here on cancels (or stops) what was asked.
    let interrupted = interrupt_flag()?;
    let targets = targets(&dir, &a)?;
    let trace_dir = a
        .dir
        .as_deref()
        .map(std::path::absolute)
        .transpose()
        .context("--dir")?;
    let report = crate::run::end_of_run::create_report_file()
        .context("creating the report file for the processes' answers")?;
    // The same steps everywhere: from the highest step any process is at, plus two (not one:
    // a rank that ends its step while the others are being asked still starts there).
    let start = targets.iter().map(|t| t.status.step + 2).max().unwrap_or(0);
    let mut started = Vec::new();
    let mut refused = Vec::new();
    for t in &targets {
        let req = match (a.steps, a.duration) {
            (Some(count), _) => Request::Steps {
                start,
                count,
                dir: trace_dir.clone(),
                report: report.clone(),
                options,
            },
            (None, d) => Request::Duration {
                ms: d.map_or(0, |d| d.as_millis() as u64),
                dir: trace_dir.clone(),
                report: report.clone(),
                options,
            },
        };
        match ask(&dir, t.socket, &req) {
            Ok(Reply::Started { cycle, first_step }) => {
                if let Some(first) = first_step.filter(|&f| f != start) {
                    cuprof_analysis::io::console::eprint_line(&format!(
                        "cuprof: process {} was past step {start}: it records from step {first}",
                        t.shown
                    ));
                }
                started.push(Started {
                    socket: t.socket,
                    shown: t.shown.clone(),
                    rank: t.status.rank,
                    cycle,
                    steps: a.steps.zip(first_step).map(|(n, f)| f..f + n),
                });
            }
            Ok(Reply::Error(e)) => refused.push(format!("process {}: {e}", t.shown)),
            Ok(other) => refused.push(format!("process {} answered {other:?}", t.shown)),
            Err(e) => refused.push(cuprof_analysis::io::console::one_line(&e)),
        }
    }
    if started.is_empty() {
        let _ = std::fs::remove_file(&report);
        if let [one] = &refused[..] {
            bail!("{one}");
        }
        for r in &refused {
            cuprof_analysis::io::console::eprint_line(&format!("cuprof: {r}"));
        }
        bail!("no capture started");
    }
    for r in &refused {
        cuprof_analysis::io::console::eprint_line(&format!("cuprof: {r}"));
    }
    if a.duration.is_some_and(|d| d.is_zero()) {
        cuprof_analysis::io::console::eprint_line(
            "cuprof: recording until interrupted (Ctrl-C); cuprof top shows it live",
        );
    }
    let on_interrupt = match a.steps {
        Some(_) => Interrupt::Cancel,
        None => Interrupt::Stop,
    };
    let died = wait_for_files(&dir, &mut started, &interrupted, on_interrupt);
    let lines = crate::run::end_of_run::take(&report);
    let said = died_lines(&died, &lines);
    crate::run::end_of_run::print_capture(&lines, said, !a.no_report);
    Ok(())
}

/// One line per process that died during its capture, naming it and the state of the trace it
/// had opened (from its `open` line in the capture's report file, `lines`).
fn died_lines(died: &[Started], lines: &[cuprof_core::config::report::ReportLine]) -> Vec<String> {
    let unfinished = crate::run::end_of_run::unfinished(lines);
    died.iter()
        .map(|d| {
            let who = format!(
                "cuprof: process {} (rank {}) died during capture {} (killed?)",
                d.shown, d.rank, d.cycle
            );
            let files: Vec<String> = unfinished
                .iter()
                .filter(|(pid, _)| *pid == proto::socket_owner_pid(d.socket))
                .map(|(_, path)| crate::run::end_of_run::file_state(path))
                .collect();
            match &files[..] {
                [] => format!("{who}: it had opened no trace of it, nothing was recorded"),
                files => format!("{who}: {}", files.join("; ")),
            }
        })
        .collect()
}

/// `cuprof capture --cancel`: each process's waiting step capture is dropped; one line per
/// process. Fails when none was cancelled.
fn cancel(dir: &Path, targets: &[Target]) -> Result<()> {
    let mut cancelled = 0;
    let mut refused = Vec::new();
    for t in targets {
        match ask(dir, t.socket, &Request::Cancel { cycle: None }) {
            Ok(Reply::Cancelled { cycle, first_step }) => {
                cancelled += 1;
                cuprof_analysis::io::console::eprint_line(&format!("cuprof: process {}: capture {cycle}, which was to record from step {first_step}, is cancelled: nothing recorded", t.shown));
            }
            Ok(Reply::Error(e)) => refused.push(format!("process {}: {e}", t.shown)),
            Ok(other) => refused.push(format!("process {} answered {other:?}", t.shown)),
            Err(e) => refused.push(cuprof_analysis::io::console::one_line(&e)),
        }
    }
    if cancelled == 0 {
        if let [one] = &refused[..] {
            bail!("{one}");
        }
    }
    for r in &refused {
        cuprof_analysis::io::console::eprint_line(&format!("cuprof: {r}"));
    }
    if cancelled == 0 {
        bail!("no capture cancelled");
    }
    Ok(())
}

/// A flag raised by the first SIGINT or SIGTERM; a second one ends this command as signals do.
fn interrupt_flag() -> Result<Arc<AtomicBool>> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, interrupted.clone())?;
        signal_hook::flag::register(sig, interrupted.clone())?;
    }
    Ok(interrupted)
}

/// What this command asks of its processes when it is interrupted.
#[derive(Clone, Copy)]
enum Interrupt {
    /// A step capture: cancelled if it still waits for its first step, else left to end.
    Cancel,
    /// A capture by duration: stopped now (its files are written).
    Stop,
}

/// Tells each process of `started` that this command was interrupted, and why it goes on
/// waiting where it does.
fn interrupt(dir: &Path, started: &[Started], how: Interrupt) {
    for Started {
        socket,
        shown,
        cycle,
        ..
    } in started
    {
        let req = match how {
            Interrupt::Cancel => Request::Cancel {
                cycle: Some(*cycle),
            },
            Interrupt::Stop => Request::Stop,
        };
        match ask(dir, *socket, &req) {
            // Its report line says so.
            Ok(Reply::Cancelled { .. } | Reply::Stopped { .. }) => {}
            Ok(Reply::Error(e)) => cuprof_analysis::io::console::eprint_line(&format!(
                "cuprof: process {shown}, capture {cycle}: {e}"
            )),
            Ok(other) => cuprof_analysis::io::console::eprint_line(&format!(
                "cuprof: process {shown} answered {other:?}"
            )),
            // Died meanwhile: named with its file once the waiting ends.
            Err(_) if died_here(dir, *socket) => {}
            // Ended meanwhile (exited: its file is closed on the way out).
            Err(e) => cuprof_analysis::io::console::eprint_line(&format!(
                "cuprof: {}",
                cuprof_analysis::io::console::one_line(&e)
            )),
        }
    }
}

/// Waits until every process has finished its capture, or has exited (it closes its trace
/// and reports it on the way out, before its socket goes). The first interruption is passed
/// on to the processes still waited for ([`interrupt`]); the waiting goes on until they
/// answer through their report lines. While a step capture waits, a line names the processes
/// that lag ([`Progress`]). Gives back the processes that died meanwhile: their socket stayed
/// behind, listened on by nobody (SIGKILL, a crash).
fn wait_for_files(
    dir: &Path,
    waiting: &mut Vec<Started>,
    interrupted: &AtomicBool,
    how: Interrupt,
) -> Vec<Started> {
    let mut passed_on = false;
    let mut polled = std::time::Instant::now();
    let mut progress = Progress::new(waiting.len());
    let mut died = Vec::new();
    while !waiting.is_empty() {
        std::thread::sleep(INTERRUPT_NAP);
        if !passed_on && interrupted.load(Relaxed) {
            passed_on = true;
            interrupt(dir, waiting, how);
        } else if polled.elapsed() < POLL {
            continue;
        }
        polled = std::time::Instant::now();
        let mut lagging = Vec::new();
        for w in std::mem::take(waiting) {
            match status(dir, w.socket) {
                // A process that stepped aside for another profiler records nothing more.
                Ok(s) if s.captures_done < w.cycle && s.state != "stepped-aside" => {
                    lagging.push(Lag {
                        rank: w.rank,
                        shown: w.shown.clone(),
                        step: s.step,
                        last: w.steps.as_ref().map(|r| r.end - 1),
                    });
                    waiting.push(w);
                }
                Ok(_) => {}
                Err(_) if died_here(dir, w.socket) => died.push(w),
                Err(_) => {}
            }
        }
        if let Some(line) = progress.line(&lagging, std::time::Instant::now()) {
            cuprof_analysis::io::console::eprint_line(&line);
        }
    }
    died
}

/// Process `socket` is gone without removing its socket: it died (an exit removes it).
fn died_here(dir: &Path, socket: u32) -> bool {
    let path = proto::socket_path(dir, socket);
    std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket())
        && !proto::listening(&path)
}

/// A process a step capture still waits for: where it is, and the capture's last step there.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lag {
    rank: u32,
    shown: String,
    step: u64,
    /// `None`: a capture by duration (it ends on time, nothing to wait for).
    last: Option<u64>,
}

/// How long a step capture waits before it says whom it waits for, when no process has
/// finished yet (once one has, the others lag, and it says so at once).
const FIRST_PROGRESS: Duration = Duration::from_secs(5);
/// The least time between two progress lines (one is printed only when what it says changed).
const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// Processes named in a progress line; the others are counted.
const PROGRESS_NAMED: usize = 8;

/// The progress line of a step capture: which processes lag, at which step, and the step they
/// must finish.
struct Progress {
    total: usize,
    started: std::time::Instant,
    last: Option<(std::time::Instant, String)>,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            started: std::time::Instant::now(),
            last: None,
        }
    }

    /// The line to print now, if any: when some process finished and others lag, or the
    /// capture has waited [`FIRST_PROGRESS`]; then again when it changed, at most every
    /// [`PROGRESS_EVERY`].
    fn line(&mut self, lagging: &[Lag], now: std::time::Instant) -> Option<String> {
        let steps: Vec<&Lag> = lagging.iter().filter(|l| l.last.is_some()).collect();
        if steps.is_empty() {
            return None;
        }
        let due = match &self.last {
            None => lagging.len() < self.total || now - self.started >= FIRST_PROGRESS,
            Some((at, _)) => now - *at >= PROGRESS_EVERY,
        };
        if !due {
            return None;
        }
        let text = lag_line(&steps, self.total);
        if self.last.as_ref().is_some_and(|(_, t)| *t == text) {
            return None;
        }
        self.last = Some((now, text.clone()));
        Some(text)
    }
}

/// `cuprof: waiting for 1 of 2 processes to finish step 13: rank 1 (pid 4242) at step 7`.
fn lag_line(lagging: &[&Lag], total: usize) -> String {
    let mut lagging = lagging.to_vec();
    lagging.sort_by_key(|l| (l.step, l.rank));
    let last = lagging[0].last;
    let same = lagging.iter().all(|l| l.last == last);
    let mut named: Vec<String> = lagging
        .iter()
        .take(PROGRESS_NAMED)
        .map(|l| {
            let of = match (same, l.last) {
                (false, Some(last)) => format!(" (to finish step {last})"),
                _ => String::new(),
            };
            format!("rank {} (pid {}) at step {}{of}", l.rank, l.shown, l.step)
        })
        .collect();
    if lagging.len() > PROGRESS_NAMED {
        named.push(format!("{} more", lagging.len() - PROGRESS_NAMED));
    }
    let target = match (same, last) {
        (true, Some(last)) => format!(" to finish step {last}"),
        _ => String::new(),
    };
    format!(
        "cuprof: waiting for {} of {total} processes{target}: {}",
        lagging.len(),
        named.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_shown_with_its_pid_here_or_as_having_none() {
        // The same namespace: the kernel's pid is the process's own.
        assert_eq!(pid_here(4242, Some(4242)), 4242);
        // A child PID namespace (unshare --pid, a container): pid 1 there is 90210 here.
        assert_eq!(pid_here(1, Some(90210)), 90210);
        // A namespace this one cannot see (cuprof ps inside a container, the process outside).
        assert_eq!(pid_here(4242, Some(0)), 0);
        // No credentials from the kernel: the process's word.
        assert_eq!(pid_here(7, None), 7);
        let mut s = Status {
            pid: 0,
            rank: 0,
            name: "job".into(),
            state: "ready".into(),
            step: 0,
            files: 0,
            captures_done: 0,
        };
        assert_eq!(
            shown(4242, &s),
            "4242 (its pid in a PID namespace this one cannot see)"
        );
        s.pid = 90210;
        assert_eq!(shown(1, &s), "90210");
    }

    #[test]
    fn the_progress_line_names_the_lagging_processes_when_one_is_done_or_after_a_while() {
        let lag = |rank: u32, step: u64, last: u64| Lag {
            rank,
            shown: (4240 + rank).to_string(),
            step,
            last: Some(last),
        };
        let t0 = std::time::Instant::now();
        let at = |s: f64| t0 + Duration::from_secs_f64(s);
        let mut p = Progress {
            total: 3,
            started: t0,
            last: None,
        };
        // Every process still waits, not for long: nothing said.
        let all = [lag(0, 7, 13), lag(1, 9, 13), lag(2, 3, 13)];
        assert_eq!(p.line(&all, at(1.0)), None);
        // Long enough: every one named, the furthest behind first.
        assert_eq!(
            p.line(&all, at(5.0)).as_deref(),
            Some("cuprof: waiting for 3 of 3 processes to finish step 13: rank 2 (pid 4242) at step 3, rank 0 (pid 4240) at step 7, rank 1 (pid 4241) at step 9")
        );
        // Changed, but too soon; then the same again: nothing.
        let two = [lag(2, 3, 13), lag(1, 12, 13)];
        assert_eq!(p.line(&two, at(6.0)), None);
        let one = [lag(2, 3, 13)];
        assert_eq!(
            p.line(&one, at(15.0)).as_deref(),
            Some("cuprof: waiting for 1 of 3 processes to finish step 13: rank 2 (pid 4242) at step 3")
        );
        assert_eq!(p.line(&one, at(30.0)), None);
        // One process done at once: said at once; different last steps are each said.
        let mut q = Progress {
            total: 2,
            started: t0,
            last: None,
        };
        assert_eq!(
            q.line(&[lag(1, 40, 45)], at(0.1)).as_deref(),
            Some("cuprof: waiting for 1 of 2 processes to finish step 45: rank 1 (pid 4241) at step 40")
        );
        assert_eq!(
            lag_line(&[&lag(1, 40, 45), &lag(0, 41, 46)], 2),
            "cuprof: waiting for 2 of 2 processes: rank 1 (pid 4241) at step 40 (to finish step 45), rank 0 (pid 4240) at step 41 (to finish step 46)"
        );
        // A capture by duration: nothing to say.
        let timed = Lag {
            last: None,
            ..lag(0, 1, 0)
        };
        assert_eq!(q.line(&[timed], at(60.0)), None);
        // Many: eight named, the rest counted.
        let many: Vec<Lag> = (0..10).map(|r| lag(r, u64::from(r), 99)).collect();
        let refs: Vec<&Lag> = many.iter().collect();
        assert!(lag_line(&refs, 16).ends_with("rank 7 (pid 4247) at step 7, 2 more"));
    }
}
