//! Process lifecycle: fork, exit (atexit and `_exit`), and fatal signals.
//!
//! Signals: the handler itself only writes one byte to a pipe and waits (bounded, with poll) for
//! the `cuprof-signal` thread to flush or close the trace; then the program's own disposition
//! runs exactly as before: a chained handler is called with the same arguments, a default action
//! is restored and the signal re-raised, so the exit status is the program's own.

use crate::{guard, phase, Phase};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

static FORKED: AtomicBool = AtomicBool::new(false);
static QUIET: AtomicBool = AtomicBool::new(false);

/// How long the exit path waits for the writer to finish the trace.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);
/// How long a fatal signal waits for the trace to be closed before the program's own
/// disposition runs.
const SIGNAL_WAIT_MS: i32 = 3000;

const SIGNALS: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGABRT];

pub fn forked_child() -> bool {
    FORKED.load(Relaxed)
}

pub fn quiet() -> bool {
    QUIET.load(Relaxed)
}

pub fn set_quiet(q: bool) {
    QUIET.store(q, Relaxed);
}

extern "C" fn after_fork_in_child() {
    // Atomics only: the child has one thread, and the parent's locks may be held forever.
    FORKED.store(true, Relaxed);
}

extern "C" fn at_exit() {
    guard((), crate::writer::shutdown);
}

/// Registers the fork and exit hooks. Called from CUDA initialisation, after libcuda registered
/// its own exit handlers, so that ours runs first (atexit runs in reverse order).
pub fn install_lifecycle() {
    // SAFETY: registering plain extern "C" functions with libc.
    unsafe {
        libc::pthread_atfork(None, None, Some(after_fork_in_child));
        libc::atexit(at_exit);
    }
}

struct SignalPipes {
    request_w: AtomicI32,
    done_r: AtomicI32,
}

static PIPES: SignalPipes = SignalPipes {
    request_w: AtomicI32::new(-1),
    done_r: AtomicI32::new(-1),
};
static OLD_ACTIONS: OnceLock<Vec<(libc::c_int, libc::sigaction)>> = OnceLock::new();

/// Request bytes written to the signal thread.
const REQ_CLOSE: u8 = 1;
const REQ_FLUSH: u8 = 2;

fn old_action(sig: libc::c_int) -> Option<libc::sigaction> {
    OLD_ACTIONS
        .get()?
        .iter()
        .find(|(s, _)| *s == sig)
        .map(|(_, a)| *a)
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // Async-signal-safe only: read/write/poll on pipes, sigaction, raise.
    let Some(old) = old_action(sig) else { return };
    let handler = old.sa_sigaction;
    let default = handler == libc::SIG_DFL;
    if handler != libc::SIG_IGN && !FORKED.load(Relaxed) && phase() == Phase::Running {
        let w = PIPES.request_w.load(Relaxed);
        let r = PIPES.done_r.load(Relaxed);
        if w >= 0 && r >= 0 {
            let req = if default || sig == libc::SIGABRT {
                REQ_CLOSE
            } else {
                REQ_FLUSH
            };
            // SAFETY: write/poll/read are async-signal-safe; buffers are on the stack.
            unsafe {
                libc::write(w, (&req as *const u8).cast(), 1);
                let mut pfd = libc::pollfd {
                    fd: r,
                    events: libc::POLLIN,
                    revents: 0,
                };
                if libc::poll(&mut pfd, 1, SIGNAL_WAIT_MS) > 0 {
                    let mut b = 0u8;
                    libc::read(r, (&mut b as *mut u8).cast(), 1);
                }
            }
        }
    }
    if default {
        // Restore the program's disposition and deliver the signal again: the process ends
        // exactly as it would have without cuprof (same signal, same status, core dump if any).
        // SAFETY: sigaction/raise are async-signal-safe; old is the saved disposition.
        unsafe {
            libc::sigaction(sig, &old, std::ptr::null_mut());
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::raise(sig);
        }
        return;
    }
    if handler == libc::SIG_IGN {
        return;
    }
    // Chain to the program's own handler, as it asked to be called.
    // SAFETY: `handler` is the function the program installed with these flags.
    unsafe {
        if old.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(handler);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
            f(sig);
        }
    }
}

/// Installs the fatal-signal handlers and the thread that serves them.
pub fn install_signals() {
    let mut req = [0i32; 2];
    let mut done = [0i32; 2];
    // SAFETY: pipe2 fills two fds each.
    let ok = unsafe {
        libc::pipe2(req.as_mut_ptr(), libc::O_CLOEXEC) == 0
            && libc::pipe2(done.as_mut_ptr(), libc::O_CLOEXEC) == 0
    };
    if !ok {
        return;
    }
    let (req_r, req_w, done_r, done_w) = (req[0], req[1], done[0], done[1]);
    let spawned = std::thread::Builder::new()
        .name("cuprof-signal".into())
        .spawn(move || loop {
            let mut b = 0u8;
            // SAFETY: blocking read of one byte from our own pipe.
            let n = unsafe { libc::read(req_r, (&mut b as *mut u8).cast(), 1) };
            if n <= 0 {
                return;
            }
            guard((), || {
                if b == REQ_CLOSE {
                    crate::writer::shutdown();
                } else {
                    crate::writer::sync_flush();
                }
            });
            // SAFETY: one byte to our own pipe.
            unsafe { libc::write(done_w, (&b as *const u8).cast(), 1) };
        });
    if spawned.is_err() {
        return;
    }
    PIPES.request_w.store(req_w, Relaxed);
    PIPES.done_r.store(done_r, Relaxed);
    let mut saved = Vec::new();
    for sig in SIGNALS {
        // SAFETY: reading the current disposition, then installing ours with SA_SIGINFO.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction == libc::SIG_IGN {
                continue; // an ignored signal stays ignored, and costs nothing
            }
            saved.push((sig, old));
        }
    }
    if OLD_ACTIONS.set(saved).is_err() {
        return;
    }
    for (sig, old) in OLD_ACTIONS.get().into_iter().flatten() {
        // SAFETY: installing a handler that chains to `old`; keep the program's mask and flags.
        unsafe {
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_signal as *const () as usize;
            new.sa_mask = old.sa_mask;
            new.sa_flags = (old.sa_flags | libc::SA_SIGINFO) & !libc::SA_RESETHAND;
            libc::sigaction(*sig, &new, std::ptr::null_mut());
        }
    }
}

type KillFn = unsafe extern "C" fn(libc::pid_t, libc::c_int) -> libc::c_int;

/// `kill` of the program's own process with a fatal signal whose disposition is the default
/// (Python exits that way after an uncaught KeyboardInterrupt, skipping atexit): finish the trace
/// first, then deliver it.
///
/// # Safety
/// Called by the program as libc's `kill`.
#[no_mangle]
pub unsafe extern "C" fn kill(pid: libc::pid_t, sig: libc::c_int) -> libc::c_int {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    if (pid == me || pid == 0)
        && SIGNALS.contains(&sig)
        && phase() == Phase::Running
        && !forked_child()
    {
        // SAFETY: reading the current disposition into a zeroed struct.
        let default = unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut cur) == 0
                && cur.sa_sigaction == libc::SIG_DFL
        };
        if default {
            guard((), crate::writer::shutdown);
        }
    }
    // SAFETY: RTLD_NEXT lookup of libc's kill by a NUL-terminated name.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, c"kill".as_ptr()) };
    if next.is_null() {
        // SAFETY: the raw syscall with the caller's arguments.
        return unsafe { libc::syscall(libc::SYS_kill, pid, sig) as libc::c_int };
    }
    // SAFETY: libc's kill has exactly this signature.
    unsafe { std::mem::transmute::<*mut libc::c_void, KillFn>(next)(pid, sig) }
}

type ExitFn = unsafe extern "C" fn(libc::c_int) -> !;

fn next_exit(name: &[u8]) -> Option<ExitFn> {
    // SAFETY: RTLD_NEXT lookup of libc's own function by a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) };
    // SAFETY: `_exit`/`_Exit` have exactly this signature.
    (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, ExitFn>(p) })
}

/// `_exit` (Python's `os._exit`) skips atexit: finish the trace first, then exit for real.
///
/// # Safety
/// Called by the program as libc's `_exit`.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: libc::c_int) -> ! {
    if phase() == Phase::Running && !forked_child() {
        guard((), crate::writer::shutdown);
    }
    match next_exit(b"_exit\0") {
        // SAFETY: libc's _exit.
        Some(f) => unsafe { f(status) },
        // SAFETY: the raw syscall never returns.
        None => unsafe {
            libc::syscall(libc::SYS_exit_group, status);
            std::hint::unreachable_unchecked()
        },
    }
}
