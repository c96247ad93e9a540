//! The control protocol between `cuprof capture`/`cuprof ps` and a process started with
//! `--on-demand`, over its Unix socket (served by the library's `control` module).
//!
//! One request line, one reply line, then the connection closes. A line is tab-separated
//! fields, at most [`MAX_LINE`] bytes with its newline, and starts with `cuprof` and the
//! protocol [`VERSION`], so that a `cuprof` of another release gets one clear line:
//!
//! ```text
//! cuprof 2 status                       -> cuprof 2 status PID RANK NAME STATE STEP FILES CAPTURES_DONE
//! cuprof 2 steps START COUNT DIR REPORT OPTIONS -> cuprof 2 started CYCLE FIRST_STEP
//! cuprof 2 duration MS DIR REPORT OPTIONS       -> cuprof 2 started CYCLE -
//! cuprof 2 stop                         -> cuprof 2 stopped CYCLE
//! cuprof 2 cancel CYCLE                 -> cuprof 2 cancelled CYCLE FIRST_STEP
//! cuprof 2 live                         -> cuprof 2 live STATUS... SNAPSHOT...
//! anything refused                      -> cuprof 2 error MESSAGE
//! ```
//!
//! `DIR` (empty: the process's own directory) receives the capture's trace; the process appends
//! one [`crate::config::report::ReportLine`] per file it opens, then one per file it writes,
//! to the file `REPORT`, which the requester created (a process that dies leaves the first
//! without the second). A duration of 0 ms records until `stop`. `OPTIONS` is what the
//! capture records if not what the process started with ([`CaptureOptions`]; empty: as
//! started).
//!
//! `live` (for `cuprof top`) answers the status fields, then the process's
//! [`crate::live::Snapshot`]: `SINCE GPU_TO BUSY_NS OPS_TO STEP_LAST STEP_P50 MEMORY` (`-` for
//! none), then four lists (kernels in the last window, kernels since the recording began,
//! operators likewise), each its length then `NAME COUNT NS` per entry. Names are cut to
//! [`MAX_NAME`] bytes, so that the longest reply fits in [`MAX_LINE`].
//!
//! `cancel` drops the step capture that waits for its first step (`CYCLE`: only if it is that
//! capture; `-`: whichever waits); the reply names it and the step it was to begin at. A
//! capture already recording is not cancelled (an error says so).
//!
//! Version 2 added `stop` and `live`, then `cancel` (a library without it answers `cancel`
//! with an error: unknown request).

use crate::capture_options::CaptureOptions;
use crate::live::{Snapshot, Top};
use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use thiserror::Error;

pub const VERSION: u32 = 2;
/// The longest line either side accepts, newline included (two paths fit with room).
pub const MAX_LINE: usize = 8192;
const MAGIC: &str = "cuprof";
/// The longest name in a `live` reply (the process's and each kernel's or operator's), bytes:
/// 21 names of this length and every number at its longest fit in [`MAX_LINE`].
pub const MAX_NAME: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Status,
    Steps {
        start: u64,
        count: u64,
        dir: Option<PathBuf>,
        report: PathBuf,
        options: CaptureOptions,
    },
    Duration {
        ms: u64,
        dir: Option<PathBuf>,
        report: PathBuf,
        options: CaptureOptions,
    },
    /// Ends a capture of duration 0 (until stopped).
    Stop,
    /// The process's live figures (`cuprof top`).
    Live,
    /// Drops the step capture waiting for its first step (`Some`: only if it is that cycle).
    Cancel {
        cycle: Option<u32>,
    },
}

/// A process's answer to [`Request::Status`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub pid: u32,
    pub rank: u32,
    pub name: String,
    /// `ready`, `pending`, `recording`, `stepped-aside` or `stopped`.
    pub state: String,
    /// The step now running (`cuprof_step()` calls so far).
    pub step: u64,
    pub files: u64,
    /// Captures finished (their files written).
    pub captures_done: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Status(Status),
    /// A capture was taken: its cycle number and first step (`None` for a duration).
    Started {
        cycle: u32,
        first_step: Option<u64>,
    },
    /// A capture until stopped was stopped: its cycle is being written.
    Stopped {
        cycle: u32,
    },
    /// The waiting step capture `cycle`, which was to begin at step `first_step`, is dropped:
    /// nothing was recorded.
    Cancelled {
        cycle: u32,
        first_step: u64,
    },
    Live(Box<Live>),
    Error(String),
}

/// A process's answer to [`Request::Live`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    pub status: Status,
    pub snapshot: Snapshot,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtocolError {
    #[error("the message is longer than {MAX_LINE} bytes")]
    TooLong,
    #[error("the message is not a cuprof control message")]
    NotCuprof,
    #[error("the other side speaks control protocol {0}, this cuprof speaks {VERSION}: use cuprof and libcuprof.so of the same release")]
    Version(String),
    #[error("malformed control message: {0}")]
    Malformed(&'static str),
    #[error("a path in a control message may not contain tabs or newlines, and must be UTF-8")]
    BadPath,
}

/// A field fit for a line: no tab, no newline (names are made printable, never refused).
fn field(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

fn path_field(p: &Option<PathBuf>) -> Result<String, ProtocolError> {
    let Some(p) = p else { return Ok(String::new()) };
    let s = p.to_str().ok_or(ProtocolError::BadPath)?;
    if s.contains(['\t', '\n', '\r']) {
        return Err(ProtocolError::BadPath);
    }
    Ok(s.to_owned())
}

fn line(fields: &[String]) -> Result<String, ProtocolError> {
    let l = format!("{MAGIC}\t{VERSION}\t{}\n", fields.join("\t"));
    if l.len() > MAX_LINE {
        return Err(ProtocolError::TooLong);
    }
    Ok(l)
}

/// The fields after the magic and version, checked.
fn body(text: &str) -> Result<Vec<&str>, ProtocolError> {
    if text.len() > MAX_LINE {
        return Err(ProtocolError::TooLong);
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    let mut f = text.split('\t');
    if f.next() != Some(MAGIC) {
        return Err(ProtocolError::NotCuprof);
    }
    match f.next() {
        Some(v) if v == VERSION.to_string() => Ok(f.collect()),
        Some(v) => Err(ProtocolError::Version(field(v).chars().take(16).collect())),
        None => Err(ProtocolError::Malformed("no version")),
    }
}

fn number<T: std::str::FromStr>(s: Option<&&str>, what: &'static str) -> Result<T, ProtocolError> {
    s.and_then(|s| s.parse().ok())
        .ok_or(ProtocolError::Malformed(what))
}

fn dir_of(s: Option<&&str>) -> Result<Option<PathBuf>, ProtocolError> {
    match s {
        Some(&"") => Ok(None),
        Some(d) => Ok(Some(PathBuf::from(d))),
        None => Err(ProtocolError::Malformed("no directory")),
    }
}

fn report_of(s: Option<&&str>) -> Result<PathBuf, ProtocolError> {
    match s {
        Some(r) if !r.is_empty() => Ok(PathBuf::from(r)),
        _ => Err(ProtocolError::Malformed("no report file")),
    }
}

impl Request {
    pub fn to_line(&self) -> Result<String, ProtocolError> {
        let report = |r: &PathBuf| path_field(&Some(r.clone()));
        match self {
            Request::Status => line(&["status".into()]),
            Request::Steps {
                start,
                count,
                dir,
                report: r,
                options,
            } => line(&[
                "steps".into(),
                start.to_string(),
                count.to_string(),
                path_field(dir)?,
                report(r)?,
                options.to_field(),
            ]),
            Request::Duration {
                ms,
                dir,
                report: r,
                options,
            } => line(&[
                "duration".into(),
                ms.to_string(),
                path_field(dir)?,
                report(r)?,
                options.to_field(),
            ]),
            Request::Stop => line(&["stop".into()]),
            Request::Live => line(&["live".into()]),
            Request::Cancel { cycle } => line(&["cancel".into(), optional(cycle.map(u64::from))]),
        }
    }

    pub fn parse(text: &str) -> Result<Request, ProtocolError> {
        let f = body(text)?;
        match f.first().copied() {
            Some("status") if f.len() == 1 => Ok(Request::Status),
            Some("steps") if f.len() == 6 => Ok(Request::Steps {
                start: number(f.get(1), "step number")?,
                count: number(f.get(2), "step count")?,
                dir: dir_of(f.get(3))?,
                report: report_of(f.get(4))?,
                options: CaptureOptions::parse(f[5]).map_err(ProtocolError::Malformed)?,
            }),
            Some("duration") if f.len() == 5 => Ok(Request::Duration {
                ms: number(f.get(1), "duration")?,
                dir: dir_of(f.get(2))?,
                report: report_of(f.get(3))?,
                options: CaptureOptions::parse(f[4]).map_err(ProtocolError::Malformed)?,
            }),
            Some("stop") if f.len() == 1 => Ok(Request::Stop),
            Some("live") if f.len() == 1 => Ok(Request::Live),
            Some("cancel") if f.len() == 2 => Ok(Request::Cancel {
                cycle: match f[1] {
                    "-" => None,
                    c => Some(number(Some(&c), "cycle")?),
                },
            }),
            _ => Err(ProtocolError::Malformed("unknown request")),
        }
    }
}

impl Reply {
    pub fn to_line(&self) -> String {
        let fields = match self {
            Reply::Status(s) => {
                let mut f = vec!["status".into()];
                status_fields(s, &mut f);
                f
            }
            Reply::Stopped { cycle } => vec!["stopped".into(), cycle.to_string()],
            Reply::Cancelled { cycle, first_step } => vec![
                "cancelled".into(),
                cycle.to_string(),
                first_step.to_string(),
            ],
            Reply::Live(l) => {
                let mut f = vec!["live".into()];
                status_fields(&l.status, &mut f);
                snapshot_fields(&l.snapshot, &mut f);
                f
            }
            Reply::Started { cycle, first_step } => vec![
                "started".into(),
                cycle.to_string(),
                first_step.map_or("-".into(), |s| s.to_string()),
            ],
            Reply::Error(m) => vec!["error".into(), field(m)],
        };
        // Only a very long name or message can overflow: cut it rather than fail.
        line(&fields).unwrap_or_else(|_| format!("{MAGIC}\t{VERSION}\terror\treply too long\n"))
    }

    pub fn parse(text: &str) -> Result<Reply, ProtocolError> {
        let f = body(text)?;
        match f.first().copied() {
            Some("status") if f.len() == 8 => Ok(Reply::Status(parse_status(&f[1..])?)),
            Some("stopped") if f.len() == 2 => Ok(Reply::Stopped {
                cycle: number(f.get(1), "cycle")?,
            }),
            Some("cancelled") if f.len() == 3 => Ok(Reply::Cancelled {
                cycle: number(f.get(1), "cycle")?,
                first_step: number(f.get(2), "first step")?,
            }),
            Some("live") if f.len() >= 8 => {
                let status = parse_status(&f[1..8])?;
                let snapshot = parse_snapshot(&f[8..])?;
                Ok(Reply::Live(Box::new(Live { status, snapshot })))
            }
            Some("started") if f.len() == 3 => Ok(Reply::Started {
                cycle: number(f.get(1), "cycle")?,
                first_step: match f[2] {
                    "-" => None,
                    s => Some(number(Some(&s), "first step")?),
                },
            }),
            Some("error") if f.len() == 2 => Ok(Reply::Error(f[1].to_owned())),
            _ => Err(ProtocolError::Malformed("unknown reply")),
        }
    }
}

fn status_fields(s: &Status, f: &mut Vec<String>) {
    f.extend([
        s.pid.to_string(),
        s.rank.to_string(),
        field(cut(&s.name)),
        field(&s.state),
        s.step.to_string(),
        s.files.to_string(),
        s.captures_done.to_string(),
    ]);
}

fn parse_status(f: &[&str]) -> Result<Status, ProtocolError> {
    Ok(Status {
        pid: number(f.first(), "pid")?,
        rank: number(f.get(1), "rank")?,
        name: f[2].to_owned(),
        state: f[3].to_owned(),
        step: number(f.get(4), "step")?,
        files: number(f.get(5), "files")?,
        captures_done: number(f.get(6), "captures")?,
    })
}

/// `name` cut to at most [`MAX_NAME`] bytes, on a character boundary.
fn cut(name: &str) -> &str {
    if name.len() <= MAX_NAME {
        return name;
    }
    let mut end = MAX_NAME;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

fn optional(n: Option<u64>) -> String {
    n.map_or("-".into(), |n| n.to_string())
}

fn snapshot_fields(s: &Snapshot, f: &mut Vec<String>) {
    f.extend([
        optional(s.since),
        s.gpu_to.to_string(),
        s.busy_ns.to_string(),
        s.ops_to.to_string(),
        optional(s.step_last_ns),
        optional(s.step_p50_ns),
        optional(s.memory_bytes),
    ]);
    for list in [&s.kernels_last, &s.kernels_total, &s.ops_last, &s.ops_total] {
        let list = &list[..list.len().min(crate::live::TOP)];
        f.push(list.len().to_string());
        for t in list {
            f.extend([field(cut(&t.name)), t.count.to_string(), t.ns.to_string()]);
        }
    }
}

fn parse_optional(s: Option<&&str>, what: &'static str) -> Result<Option<u64>, ProtocolError> {
    match s {
        Some(&"-") => Ok(None),
        other => number(other, what).map(Some),
    }
}

fn parse_snapshot(f: &[&str]) -> Result<Snapshot, ProtocolError> {
    let mut s = Snapshot {
        since: parse_optional(f.first(), "recording start")?,
        gpu_to: number(f.get(1), "GPU window")?,
        busy_ns: number(f.get(2), "busy time")?,
        ops_to: number(f.get(3), "operator window")?,
        step_last_ns: parse_optional(f.get(4), "last step")?,
        step_p50_ns: parse_optional(f.get(5), "median step")?,
        memory_bytes: parse_optional(f.get(6), "memory")?,
        ..Snapshot::default()
    };
    let mut rest = f.get(7..).unwrap_or_default();
    for list in [
        &mut s.kernels_last,
        &mut s.kernels_total,
        &mut s.ops_last,
        &mut s.ops_total,
    ] {
        let n: usize = number(rest.first(), "list length")?;
        if n > crate::live::TOP || rest.len() < 1 + 3 * n {
            return Err(ProtocolError::Malformed("list length"));
        }
        for e in rest[1..1 + 3 * n].chunks(3) {
            list.push(Top {
                name: e[0].to_owned(),
                count: number(e.get(1), "count")?,
                ns: number(e.get(2), "time")?,
            });
        }
        rest = &rest[1 + 3 * n..];
    }
    if !rest.is_empty() {
        return Err(ProtocolError::Malformed("trailing fields"));
    }
    Ok(s)
}

/// The socket directory is not a private directory of this user.
#[derive(Debug, Error)]
pub enum DirError {
    #[error("cannot create the control directory {0}: {1}")]
    Create(PathBuf, std::io::Error),
    #[error("{0} is not a directory of its own (a symlink or a file?): remove it, or set XDG_RUNTIME_DIR to a private directory")]
    NotDir(PathBuf),
    #[error("{0} belongs to uid {1}, not to this user (uid {2}): remove it, or set XDG_RUNTIME_DIR to a private directory")]
    Owner(PathBuf, u32, u32),
    #[error(
        "{0} has mode {1:o}: others may reach its sockets; make it 0700 (chmod 700) or remove it"
    )]
    Mode(PathBuf, u32),
}

/// Where this user's control sockets live: `$XDG_RUNTIME_DIR/cuprof` when that variable names
/// an absolute path, else `TMP/cuprof-UID` (never the shared temporary directory itself).
pub fn socket_dir(xdg_runtime_dir: Option<OsString>, tmp: &Path, uid: u32) -> PathBuf {
    match xdg_runtime_dir.map(PathBuf::from) {
        Some(x) if x.is_absolute() => x.join("cuprof"),
        _ => tmp.join(format!("cuprof-{uid}")),
    }
}

/// Checks that `dir` is a real directory (not a symlink) owned by `uid` that nobody else may
/// enter; with `create`, makes it (mode 0700) first if it is missing.
pub fn check_private_dir(dir: &Path, uid: u32, create: bool) -> Result<(), DirError> {
    if create {
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(DirError::Create(dir.to_owned(), e)),
        }
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| DirError::Create(dir.to_owned(), e))?;
    if !m.file_type().is_dir() {
        return Err(DirError::NotDir(dir.to_owned()));
    }
    if m.uid() != uid {
        return Err(DirError::Owner(dir.to_owned(), m.uid(), uid));
    }
    if m.mode() & 0o077 != 0 {
        return Err(DirError::Mode(dir.to_owned(), m.mode() & 0o7777));
    }
    Ok(())
}

/// The socket of process `pid` in `dir`: `pid` is the socket's number, the process's own pid
/// or, when another process with that pid (in another PID namespace) holds that name, one of
/// [`socket_numbers`]'s others.
pub fn socket_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.sock"))
}

/// Linux's ceiling on pids (`PID_MAX_LIMIT`, 2^22): no pid reaches it, so a socket numbered from
/// it on is known for one whose process's own pid was taken.
const PID_LIMIT: u32 = 1 << 22;

/// The socket numbers a process with pid `pid` may take, in order: its pid, then `pid + k *
/// 2^22` for k = 1..1023 (containers that share the folder each have their own pid 1, 2, ...).
pub fn socket_numbers(pid: u32) -> impl Iterator<Item = u32> {
    let ks = if pid < PID_LIMIT { 0..1024u32 } else { 0..0 };
    ks.map(move |k| pid + k * PID_LIMIT)
}

/// The pid of the process that took socket number `socket` ([`socket_numbers`]), in its own
/// PID namespace.
pub fn socket_owner_pid(socket: u32) -> u32 {
    socket % PID_LIMIT
}

/// The pids with a socket in `dir` (entries that are sockets named `PID.sock`), sorted.
pub fn socket_pids(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
        .filter_map(|e| {
            let name = e.file_name();
            name.to_str()?.strip_suffix(".sock")?.parse().ok()
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Process `pid` exists (it may belong to another user; /proc lists every process).
pub fn alive(pid: u32) -> bool {
    pid != 0 && Path::new("/proc").join(pid.to_string()).exists()
}

/// Whether a process listens on the socket at `path`: it accepts a connection. Unlike
/// [`alive`], this holds across PID namespaces (`unshare --pid`, a container sharing the
/// folder), where /proc neither sees the listener nor gives its pid the socket's number. The
/// probe asks for the status and reads the answer, so the listener never answers a closed
/// connection.
pub fn listening(path: &Path) -> bool {
    use std::io::{Read, Write};
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(mut s) => {
            let wait = Some(std::time::Duration::from_millis(500));
            let _ = s.set_write_timeout(wait);
            let _ = s.set_read_timeout(wait);
            if let Ok(line) = Request::Status.to_line() {
                if s.write_all(line.as_bytes()).is_ok() {
                    let _ = s.read(&mut [0u8; 256]);
                }
            }
            true
        }
        // Refused: a socket file nobody listens on any more; gone: nothing to remove.
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
        ),
    }
}

/// Removes the sockets in `dir` nobody listens on any more (their processes ended without
/// removing them). A socket whose pid /proc does not know is kept while it is listened on: its
/// process may live in another PID namespace.
pub fn remove_stale(dir: &Path) {
    for pid in socket_pids(dir) {
        let path = socket_path(dir, pid);
        if !listening(&path) {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_numbers_after_the_pid_are_beyond_every_pid_and_name_their_owner() {
        let numbers: Vec<u32> = socket_numbers(1).collect();
        assert_eq!(numbers.len(), 1024);
        assert_eq!(numbers[..3], [1, 4_194_305, 8_388_609]);
        assert_eq!(*numbers.last().unwrap(), 1 + 1023 * 4_194_304);
        let last: Vec<u32> = socket_numbers(4_194_303).collect();
        assert_eq!(*last.last().unwrap(), u32::MAX);
        assert!(numbers
            .iter()
            .chain(&last)
            .skip(1)
            .all(|&n| n >= 1 << 22 || n == 4_194_303));
        assert_eq!(socket_owner_pid(8_388_609), 1);
        assert_eq!(socket_owner_pid(u32::MAX), 4_194_303);
        assert_eq!(socket_owner_pid(77), 77);
        // Not a pid: no name.
        assert_eq!(socket_numbers(1 << 22).count(), 0);
    }

    #[test]
    fn requests_and_replies_round_trip() {
        let reqs = [
            Request::Status,
            Request::Steps {
                start: 12,
                count: 3,
                dir: Some("/tmp/a b".into()),
                report: "/tmp/r".into(),
                options: CaptureOptions::default(),
            },
            Request::Duration {
                ms: 1500,
                dir: None,
                report: "/tmp/r".into(),
                options: CaptureOptions {
                    gpu: Some(true),
                    cpu: Some(false),
                    with_stack: Some(true),
                    ..CaptureOptions::default()
                },
            },
            Request::Stop,
            Request::Live,
            Request::Cancel { cycle: None },
            Request::Cancel { cycle: Some(3) },
        ];
        for r in reqs {
            assert_eq!(Request::parse(&r.to_line().unwrap()), Ok(r));
        }
        let replies = [
            Reply::Status(Status {
                pid: 7,
                rank: 3,
                name: "job".into(),
                state: "ready".into(),
                step: 41,
                files: 2,
                captures_done: 1,
            }),
            Reply::Started {
                cycle: 2,
                first_step: Some(9),
            },
            Reply::Started {
                cycle: 1,
                first_step: None,
            },
            Reply::Error("busy".into()),
            Reply::Stopped { cycle: 4 },
            Reply::Cancelled {
                cycle: 2,
                first_step: 40,
            },
            Reply::Live(Box::new(Live {
                status: status(),
                snapshot: Snapshot {
                    since: Some(100),
                    gpu_to: 2_000_000_000,
                    busy_ns: 250_000_000,
                    kernels_last: vec![top("gemm()", 3), top("softmax()", 2)],
                    kernels_total: vec![top("gemm()", 30)],
                    ops_to: 0,
                    ops_last: vec![],
                    ops_total: vec![top("aten::mm", 1)],
                    step_last_ns: Some(20_000_000),
                    step_p50_ns: None,
                    memory_bytes: Some(1 << 30),
                },
            })),
            Reply::Live(Box::new(Live {
                status: status(),
                snapshot: Snapshot::default(),
            })),
        ];
        for r in replies {
            assert_eq!(Reply::parse(&r.to_line()), Ok(r));
        }
        assert_eq!(
            Request::Status.to_line().unwrap(),
            "cuprof\t2\tstatus\n".to_string()
        );
        assert_eq!(
            Request::Cancel { cycle: None }.to_line().unwrap(),
            "cuprof\t2\tcancel\t-\n"
        );
        assert_eq!(
            Request::parse("cuprof\t2\tcancel\tx\n"),
            Err(ProtocolError::Malformed("cycle"))
        );
    }

    fn status() -> Status {
        Status {
            pid: 7,
            rank: 3,
            name: "job".into(),
            state: "recording".into(),
            step: 41,
            files: 2,
            captures_done: 1,
        }
    }

    fn top(name: &str, count: u64) -> Top {
        Top {
            name: name.into(),
            count,
            ns: count * 1000,
        }
    }

    #[test]
    fn the_longest_live_reply_fits_with_its_names_cut() {
        let long = "é".repeat(MAX_LINE);
        let full = |n: u64| {
            (0..crate::live::TOP)
                .map(|_| Top {
                    name: long.clone(),
                    count: n,
                    ns: n,
                })
                .collect::<Vec<_>>()
        };
        let mut s = status();
        s.name = long.clone();
        s.state = "stepped-aside".into();
        (s.pid, s.rank, s.step, s.files, s.captures_done) =
            (u32::MAX, u32::MAX, u64::MAX, u64::MAX, u32::MAX);
        let m = Some(u64::MAX);
        let reply = Reply::Live(Box::new(Live {
            status: s,
            snapshot: Snapshot {
                since: m,
                gpu_to: u64::MAX,
                busy_ns: u64::MAX,
                kernels_last: full(u64::MAX),
                kernels_total: full(u64::MAX),
                ops_to: u64::MAX,
                ops_last: full(u64::MAX),
                ops_total: full(u64::MAX),
                step_last_ns: m,
                step_p50_ns: m,
                memory_bytes: m,
            },
        }));
        let line = reply.to_line();
        assert!(line.len() <= MAX_LINE, "{}", line.len());
        let Ok(Reply::Live(back)) = Reply::parse(&line) else {
            panic!("{line}")
        };
        // "é" is two bytes: a cut at 256 bytes keeps 128 of them.
        assert_eq!(back.status.name, "é".repeat(MAX_NAME / 2));
        assert_eq!(back.snapshot.ops_total[4].name, "é".repeat(MAX_NAME / 2));
        // A list longer than TOP, or cut short, is refused.
        let six = line.replacen("\t5\t", "\t6\t", 1);
        assert_eq!(
            Reply::parse(&six),
            Err(ProtocolError::Malformed("list length"))
        );
    }

    #[test]
    fn the_socket_directory_is_private_and_checked() {
        let tmp = std::env::temp_dir().join(format!("cuprof-ctl-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        assert_eq!(
            socket_dir(Some("/run/user/5".into()), &tmp, 5),
            PathBuf::from("/run/user/5/cuprof")
        );
        assert_eq!(
            socket_dir(Some("rel".into()), &tmp, 5),
            tmp.join("cuprof-5")
        );
        assert_eq!(socket_dir(None, &tmp, 5), tmp.join("cuprof-5"));
        let me = std::fs::metadata(&tmp).unwrap().uid();
        let d = tmp.join("ok");
        check_private_dir(&d, me, true).unwrap();
        assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
        assert!(matches!(
            check_private_dir(&d, me + 1, false),
            Err(DirError::Owner(..))
        ));
        let open = tmp.join("open");
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&open)
            .unwrap();
        std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        assert!(matches!(
            check_private_dir(&open, me, true),
            Err(DirError::Mode(_, 0o755))
        ));
        let link = tmp.join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        assert!(matches!(
            check_private_dir(&link, me, true),
            Err(DirError::NotDir(_))
        ));
        let file = tmp.join("file");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(
            check_private_dir(&file, me, true),
            Err(DirError::NotDir(_))
        ));
        // Sockets only; of those, the ones nobody listens on are removed. A listened-on socket
        // whose pid /proc does not know (its process in another PID namespace) is kept.
        std::fs::write(d.join("1.sock"), "").unwrap();
        let dead = u32::try_from(libc::pid_t::MAX).unwrap();
        drop(std::os::unix::net::UnixListener::bind(socket_path(&d, dead)).unwrap());
        let elsewhere = dead - 1;
        assert!(!alive(elsewhere));
        let listener = std::os::unix::net::UnixListener::bind(socket_path(&d, elsewhere)).unwrap();
        // The other namespace's process answers the probe, as libcuprof.so's server does.
        let server = std::thread::spawn(move || {
            use std::io::{BufRead, Write};
            let (mut conn, _) = listener.accept().unwrap();
            let mut line = String::new();
            std::io::BufReader::new(&conn).read_line(&mut line).unwrap();
            conn.write_all(b"cuprof error x\n").unwrap();
            line
        });
        let me_pid = std::process::id();
        let _b = std::os::unix::net::UnixListener::bind(socket_path(&d, me_pid)).unwrap();
        assert_eq!(socket_pids(&d), [me_pid, elsewhere, dead]);
        // `_b` is listened on but never accepts: a pending connection counts as listening.
        remove_stale(&d);
        assert_eq!(socket_pids(&d), [me_pid, elsewhere]);
        assert_eq!(server.join().unwrap(), Request::Status.to_line().unwrap());
        assert!(d.join("1.sock").exists());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn bad_messages_are_refused() {
        assert_eq!(
            Request::parse("GET / HTTP/1.1\r\n"),
            Err(ProtocolError::NotCuprof)
        );
        assert_eq!(
            Request::parse("cuprof\t1\tstatus\n"),
            Err(ProtocolError::Version("1".into()))
        );
        assert_eq!(
            Request::parse("cuprof\t2\tsteps\tx\t3\t\t/r\t\n"),
            Err(ProtocolError::Malformed("step number"))
        );
        assert_eq!(
            Request::parse("cuprof\t2\tsteps\t1\t3\n"),
            Err(ProtocolError::Malformed("unknown request"))
        );
        assert_eq!(
            Request::parse("cuprof\t2\tduration\t5\t\t\t\n"),
            Err(ProtocolError::Malformed("no report file"))
        );
        assert_eq!(
            Request::parse(&"x".repeat(MAX_LINE + 1)),
            Err(ProtocolError::TooLong)
        );
        assert_eq!(
            Request::parse("cuprof\t2\tduration\t5\t\t/r\tmem=1\n"),
            Err(ProtocolError::Malformed("unknown capture option"))
        );
        let bad = Request::Duration {
            ms: 1,
            dir: Some("/a\tb".into()),
            report: "/r".into(),
            options: CaptureOptions::default(),
        };
        assert_eq!(bad.to_line(), Err(ProtocolError::BadPath));
    }
}
