//! The control socket of an on-demand process (`cuprof run --on-demand`): `cuprof capture` and
//! `cuprof ps` and `cuprof top` talk to it (protocol: `cuprof_core::control`).
//!
//! One thread, `cuprof-control`, owns the socket for the life of the process: it accepts one
//! connection at a time, reads one bounded line (1 s at most), answers one line and closes.
//! Program threads never touch the socket; what a capture changes goes through the window
//! ([`crate::window::boundaries`]) like any other boundary, and its files are reported by the writer
//! thread ([`crate::state::captures::finished`]). Only started in on-demand mode: a process that did not ask to be
//! controlled opens nothing.
//!
//! Safety of the way in: the socket lives in a per-user directory of mode 0700 (checked: a
//! real directory, ours, private), is itself mode 0600, and every connection's peer
//! credentials (SO_PEERCRED) must be this uid or root. A malformed, oversized or slow message
//! gets an error line; the program is not involved.

use crate::host::process::{guard, pid, say};
use crate::pipe::tracer::Tracer;
use crate::state::captures;
use crate::state::phase::{phase, Phase};
use cuprof_core::control::{self as proto, Live, Reply, Request, Status};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// How long a client may take to send its line, or to take the reply.
const IO_TIMEOUT: Duration = Duration::from_secs(1);

static SOCKET: OnceLock<PathBuf> = OnceLock::new();

/// What the status line shows besides the window.
pub struct Identity {
    pub rank: u32,
    pub name: String,
}

/// Opens the socket and starts the thread that serves it. Errors are one line on stderr: the
/// program runs on, without control.
pub fn start(t: &'static Tracer, who: Identity) {
    let listener = match bind() {
        Ok(l) => l,
        Err(e) => {
            say(&format!(
                "on-demand control is off: {e}; the program runs untraced"
            ));
            return;
        }
    };
    let spawned = std::thread::Builder::new()
        .name("cuprof-control".into())
        .spawn(move || guard((), || serve(t, &who, listener)));
    if let Err(e) = spawned {
        say(&format!("on-demand control is off: no thread ({e})"));
        close();
    }
}

/// Removes the socket (at exit): `cuprof ps` no longer lists the process.
pub fn close() {
    if let Some(p) = SOCKET.get() {
        let _ = std::fs::remove_file(p);
    }
}

fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn bind() -> Result<UnixListener, String> {
    let dir = proto::socket_dir(
        std::env::var_os("XDG_RUNTIME_DIR"),
        &std::env::temp_dir(),
        uid(),
    );
    proto::check_private_dir(&dir, uid(), true).map_err(|e| e.to_string())?;
    proto::remove_stale(&dir);
    // The socket is named by the pid, unless another live process with this pid (in another
    // PID namespace: containers sharing the folder) holds that name: then the next free
    // number of `socket_numbers`.
    let mut taken = None;
    for number in proto::socket_numbers(pid()) {
        match bind_as(&dir, number) {
            Ok(listener) => return Ok(listener),
            Err(Bind::Taken(why)) => taken = Some(why),
            Err(Bind::Refused(why)) => return Err(why),
        }
    }
    Err(taken.unwrap_or_else(|| format!("no socket name is free in {}", dir.display())))
}

/// Why a socket number could not be taken.
enum Bind {
    /// Another live process holds it: try the next.
    Taken(String),
    /// Something is wrong with the place: control stays off.
    Refused(String),
}

/// Binds socket number `number` in `dir`.
fn bind_as(dir: &Path, number: u32) -> Result<UnixListener, Bind> {
    let path = proto::socket_path(dir, number);
    // Bound under a hidden name and made 0600 before it takes its name: a listed socket is
    // never reachable with the umask's mode.
    let bound = dir.join(format!(".{number}.sock.new"));
    replace_socket_only(&path)?;
    replace_socket_only(&bound)?;
    let listener = match UnixListener::bind(&bound) {
        Ok(l) => l,
        // Another process with this pid binds the same name at this moment.
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            return Err(Bind::Taken(format!("{}: {e}", bound.display())))
        }
        Err(e) => return Err(Bind::Refused(format!("{}: {e}", bound.display()))),
    };
    let placed = std::fs::set_permissions(&bound, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&bound, &path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&bound);
        return Err(Bind::Refused(format!("{}: {e}", path.display())));
    }
    let _ = SOCKET.set(path);
    Ok(listener)
}

/// Removes an earlier socket at `path` (a process with our pid, since gone); a socket still
/// listened on (a process with our pid number in another PID namespace) is taken, and
/// anything else planted there is refused: control stays off.
fn replace_socket_only(path: &Path) -> Result<(), Bind> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if proto::listening(path) {
                return Err(Bind::Taken(format!(
                    "{} is the control socket of another live process (in another PID namespace?)",
                    path.display()
                )));
            }
            let _ = std::fs::remove_file(path);
            Ok(())
        }
        Ok(_) => Err(Bind::Refused(format!(
            "{} exists and is not a socket: remove it",
            path.display()
        ))),
        Err(_) => Ok(()),
    }
}

fn serve(t: &'static Tracer, who: &Identity, listener: UnixListener) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        // One bad connection never ends the thread.
        guard((), || answer(t, who, conn));
    }
}

/// The peer's uid (SO_PEERCRED).
fn peer_uid(conn: &UnixStream) -> Option<u32> {
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
    (r == 0).then_some(cred.uid)
}

fn answer(t: &'static Tracer, who: &Identity, mut conn: UnixStream) {
    let _ = conn.set_read_timeout(Some(IO_TIMEOUT));
    let _ = conn.set_write_timeout(Some(IO_TIMEOUT));
    let reply = match peer_uid(&conn) {
        Some(u) if u == uid() || u == 0 => {
            let mut line = Vec::new();
            let read = BufReader::new(&conn)
                .take(proto::MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line);
            match read {
                Err(e) => Reply::Error(format!("reading the request failed: {e}")),
                Ok(_) => match std::str::from_utf8(&line) {
                    Err(_) => Reply::Error("the request is not UTF-8".into()),
                    Ok(text) => match Request::parse(text) {
                        Ok(req) => handle(t, who, req),
                        Err(e) => Reply::Error(e.to_string()),
                    },
                },
            }
        }
        other => {
            let who = other.map_or("an unknown uid".to_string(), |u| format!("uid {u}"));
            say(&format!(
                "refused a control connection from {who}: only uid {} and root may control this process",
                uid()
            ));
            Reply::Error("permission denied: not the owner of this process".into())
        }
    };
    let _ = conn.write_all(reply.to_line().as_bytes());
}

fn handle(t: &'static Tracer, who: &Identity, req: Request) -> Reply {
    match req {
        Request::Status => Reply::Status(status(who)),
        Request::Live => match crate::state::live::snapshot() {
            Some(mut snapshot) => {
                // Without device memory records (MEM), the driver's figure: asked here, once
                // per live request, never per event.
                if snapshot.memory_bytes.is_none() {
                    snapshot.memory_bytes = crate::host::devices::memory_in_use();
                }
                Reply::Live(Box::new(Live {
                    status: status(who),
                    snapshot,
                }))
            }
            None => Reply::Error("this process keeps no live figures".into()),
        },
        _ if phase() == Phase::Aside => Reply::Error(
            "cuprof stepped aside for another profiler in this process (torch.profiler?): nothing can be captured".into(),
        ),
        _ if phase() != Phase::Running => {
            Reply::Error("the process is exiting: nothing can be captured".into())
        }
        Request::Steps {
            start,
            count,
            dir,
            report,
            options,
        } => match crate::window::boundaries::demand_steps(start, count, options, |cycle| {
            captures::ask(cycle, dir, report)
        }) {
            Ok((cycle, first)) => Reply::Started {
                cycle,
                first_step: Some(first),
            },
            Err(e) => Reply::Error(e),
        },
        Request::Duration {
            ms,
            dir,
            report,
            options,
        } => {
            let d = Duration::from_millis(ms);
            match crate::window::boundaries::demand_duration(t, d, options, |cycle| captures::ask(cycle, dir, report)) {
                Ok(cycle) => Reply::Started {
                    cycle,
                    first_step: None,
                },
                Err(e) => Reply::Error(e),
            }
        }
        Request::Cancel { cycle } => {
            match crate::window::boundaries::demand_cancel(cycle, captures::cancelled) {
                Ok((cycle, first_step)) => Reply::Cancelled { cycle, first_step },
                Err(e) => Reply::Error(e),
            }
        }
        Request::Stop => match crate::window::boundaries::demand_stop(t) {
            Ok(cycle) => Reply::Stopped { cycle },
            Err(e) => Reply::Error(e),
        },
    }
}

fn state_name() -> String {
    match phase() {
        Phase::Running => crate::window::boundaries::demand_state().to_owned(),
        Phase::Aside => "stepped-aside".into(),
        _ => "stopped".into(),
    }
}

fn status(who: &Identity) -> Status {
    Status {
        pid: pid(),
        rank: who.rank,
        name: who.name.clone(),
        state: state_name(),
        step: crate::window::boundaries::steps_seen(),
        files: crate::writer::report::files_written().lines().count() as u64,
        captures_done: captures::done(),
    }
}
