//! Fatal signals (SIGTERM, SIGINT, SIGHUP, SIGABRT) while tracing: how they are caught and
//! handed on. What a signal means for the trace is [`crate::life::lifecycle`]'s.
//!
//! The handler itself only writes one byte to a pipe and waits (bounded, with poll) for the
//! `cuprof-signal` thread to flush or close the trace; then the program's own disposition
//! runs exactly as before: a chained handler is called with the same arguments, a default action
//! is restored and the signal re-raised, so the exit status is the program's own.

use crate::host::process::guard;
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::sync::OnceLock;

/// How long a fatal signal waits for the trace to be closed before the program's own
/// disposition runs.
const SIGNAL_WAIT_MS: i32 = 3000;

/// The signals cuprof finishes or flushes the trace on.
pub const SIGNALS: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGABRT];

/// What a signal asks of the tracer.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Request {
    /// The process is about to end: finish the trace.
    Close = 1,
    /// The program handles the signal itself and goes on: make what is written survive.
    Flush = 2,
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

fn old_action(sig: libc::c_int) -> Option<libc::sigaction> {
    OLD_ACTIONS
        .get()?
        .iter()
        .find(|(s, _)| *s == sig)
        .map(|(_, a)| *a)
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // Async-signal-safe only: read/write/poll on pipes, sigaction, raise, atomic loads.
    let Some(old) = old_action(sig) else { return };
    let handler = old.sa_sigaction;
    let default = handler == libc::SIG_DFL;
    if handler != libc::SIG_IGN && crate::pipe::tracer::running().is_some() {
        let w = PIPES.request_w.load(Relaxed);
        let r = PIPES.done_r.load(Relaxed);
        if w >= 0 && r >= 0 {
            let req = if default || sig == libc::SIGABRT {
                Request::Close
            } else {
                Request::Flush
            } as u8;
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

/// Installs the fatal-signal handlers and the `cuprof-signal` thread that serves their
/// requests with `serve` (outside the handler, so it may take locks and wait).
pub fn install(serve: impl Fn(Request) + Send + 'static) {
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
            let request = if b == Request::Close as u8 {
                Request::Close
            } else {
                Request::Flush
            };
            guard((), || serve(request));
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

/// Whether `sig`'s disposition is the default one (the process ends on it).
pub fn is_default(sig: libc::c_int) -> bool {
    // SAFETY: reading the current disposition into a zeroed struct.
    unsafe {
        let mut cur: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut cur) == 0 && cur.sa_sigaction == libc::SIG_DFL
    }
}
