//! The library's life in this process: every transition of its one state ([`Phase`], kept in
//! [`crate::state::phase`], which only this module moves).
//!
//! ```text
//! Inert ─arm─▶ Armed ─claim_start─▶ Starting ─start─▶ Running ─shutdown─▶ ShuttingDown ─▶ Stopped
//!                                     └─ CUPTI refused ─▶ Inert       step_aside: Stopped ─▶ Aside
//! fork: any phase ─▶ Forked (in the child)
//! ```
//!
//! Shutdown comes from the exit paths (atexit, `_exit`, `kill` of the process itself), a fatal
//! signal ([`crate::life::signals`] catches it, [`serve_signal`] acts), or a second profiler taking
//! CUPTI ([`step_aside`]). While Running (and ShuttingDown, to take CUPTI's last buffers) the
//! tracer is lent out through [`crate::pipe::tracer::running`].

use crate::host::error::StartError;
use crate::host::process::{guard, say};
use crate::life::signals::{self, Request};
use crate::pipe::tracer::{self, Tracer};
use crate::state::phase::{phase, set, transition, Phase};
use crate::window::boundaries as window;
use cuprof_core::config::Config;
use cuprof_core::window::{Capture, StepPattern};
use std::time::Duration;

/// How long a signal that the program survives waits for the trace to be made durable.
const SYNC_FLUSH_WAIT: Duration = Duration::from_secs(1);

/// Tracing is enabled in this process: wait for CUDA.
pub fn arm() {
    transition(Phase::Inert, Phase::Armed);
}

/// Armed -> Starting: true for the one caller that gets to start tracing.
pub fn claim_start() -> bool {
    transition(Phase::Armed, Phase::Starting)
}

/// Starting -> Running: sets CUPTI up, starts the writer, installs the exit, fork and signal
/// hooks, opens the window. On an error (one line for stderr) the library goes inert.
pub fn start(cfg: &Config) -> Result<(), StartError> {
    let started = start_tracer(cfg);
    if started.is_err() {
        set(Phase::Inert);
    }
    started
}

fn start_tracer(cfg: &Config) -> Result<(), StartError> {
    let (tracer, inbox) = crate::life::setup::connect(cfg)?;
    // Lives as long as the process: CUPTI and NVTX call into it until the end.
    let t: &'static Tracer = Box::leak(Box::new(tracer));
    let session = crate::writer::output::session(cfg, t);
    if cfg.capture == Capture::OnDemand {
        crate::state::live::enable(cfg.activities.mem);
    }
    crate::writer::thread::spawn(t, session, inbox)?;
    set(Phase::Running);
    tracer::lend(t);
    install_exit_hooks();
    signals::install(serve_signal);
    window::start(
        t,
        &cfg.capture,
        cfg.step_nvtx.as_deref().map(StepPattern::new),
    );
    if cfg.capture == Capture::OnDemand {
        crate::life::control::start(
            t,
            crate::life::control::Identity {
                rank: cfg.rank.rank,
                name: cfg.name.clone(),
            },
        );
        // The operator recorder's Python is built now, while the process is idle (level 0:
        // records nothing), not when the first capture enables it: that ran on the program's
        // main thread at its first step's start (a pending call) and made the first capture's
        // first step 11-21 ms longer (31.9-41.9 ms against 20.3 ms on the libcupti double).
        crate::host::python::operators(0);
    }
    Ok(())
}

/// Ends tracing at exit: [`finish_tracing`], and the control socket goes (the process is no
/// longer listed). Safe to call more than once and from any thread but the writer.
pub fn shutdown() {
    finish_tracing();
    crate::life::control::close();
}

/// Closes the window, flushes CUPTI, waits (bounded) for the writer to finish the files.
fn finish_tracing() {
    if !transition(Phase::Running, Phase::ShuttingDown) {
        return;
    }
    if let Some(t) = tracer::running() {
        window::at_exit(t);
        crate::pipe::op_batch::flush(t);
        t.set_kinds(&[]);
        t.channel.start_draining();
        t.flush_cupti(true);
        if !t.channel.finish_writer(t.shutdown_wait) {
            crate::host::process::warn(&unfinished(t.channel.events_waiting(), t.shutdown_wait));
        }
    }
    tracer::take_back();
    transition(Phase::ShuttingDown, Phase::Stopped);
}

/// The line a shutdown prints when it stopped waiting for the writer after `wait`, with
/// `events_waiting` events still queued for it.
fn unfinished(events_waiting: usize, wait: Duration) -> String {
    let secs = wait.as_secs_f64();
    let lost = match events_waiting {
        0 => "the trace may be incomplete".to_string(),
        n => format!("{n} events still queued were not written"),
    };
    format!(
        "the trace writer did not finish within {secs} s: {lost} (`cuprof repair` closes the \
         file); set CUPROF_SHUTDOWN_WAIT above {secs} (seconds) to wait longer"
    )
}

/// Another CUPTI client is starting (torch.profiler, a second tracer): CUPTI has one
/// subscriber and one set of buffer callbacks per process, so cuprof finishes its trace and
/// steps aside, and the other tool gets a working CUPTI.
pub fn step_aside(who: &str) {
    if phase() != Phase::Running {
        return;
    }
    say(&format!(
        "another profiler in this process called {who} (torch.profiler?): cuprof finishes its trace now and steps aside"
    ));
    let t = tracer::running();
    // The control socket stays: `cuprof ps` shows the process stepped aside.
    finish_tracing();
    if let Some(t) = t {
        t.cupti.unsubscribe();
    }
    transition(Phase::Stopped, Phase::Aside);
}

/// A fatal signal, served on the `cuprof-signal` thread.
fn serve_signal(request: Request) {
    match request {
        Request::Close => shutdown(),
        Request::Flush => sync_flush(),
    }
}

/// A signal the program handles itself: make what is written so far survive, keep tracing.
fn sync_flush() {
    let Some(t) = tracer::running() else { return };
    crate::pipe::op_batch::flush(t);
    t.flush_cupti(false);
    t.channel.sync_flush(SYNC_FLUSH_WAIT);
}

extern "C" fn after_fork_in_child() {
    // Atomics only: the child has one thread, and the parent's locks may be held forever.
    set(Phase::Forked);
    tracer::take_back();
    // The native operator observer reads the window's flags, not the tracer: a child that
    // inherited a collecting window pushes no correlation ids into CUPTI.
    crate::window::boundaries::stop_collecting_in_child();
}

extern "C" fn at_exit() {
    guard((), shutdown);
}

/// Registers the fork and exit hooks. Called from CUDA initialisation, after libcuda registered
/// its own exit handlers, so that ours runs first (atexit runs in reverse order).
fn install_exit_hooks() {
    // SAFETY: registering plain extern "C" functions with libc.
    unsafe {
        libc::pthread_atfork(None, None, Some(after_fork_in_child));
        libc::atexit(at_exit);
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
        && signals::SIGNALS.contains(&sig)
        && phase() == Phase::Running
        && signals::is_default(sig)
    {
        guard((), shutdown);
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

fn next_exit(name: &std::ffi::CStr) -> Option<ExitFn> {
    // SAFETY: RTLD_NEXT lookup of libc's own function by a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    // SAFETY: `_exit`/`_Exit` have exactly this signature.
    (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, ExitFn>(p) })
}

/// `_exit` (Python's `os._exit`) skips atexit: finish the trace first, then exit for real.
///
/// # Safety
/// Called by the program as libc's `_exit`.
#[no_mangle]
pub unsafe extern "C" fn _exit(status: libc::c_int) -> ! {
    if phase() == Phase::Running {
        guard((), shutdown);
    }
    match next_exit(c"_exit") {
        // SAFETY: libc's _exit.
        Some(f) => unsafe { f(status) },
        // SAFETY: the raw syscall never returns.
        None => unsafe {
            libc::syscall(libc::SYS_exit_group, status);
            std::hint::unreachable_unchecked()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfinished_shutdown_says_what_was_lost_and_what_to_raise() {
        assert_eq!(
            unfinished(512, Duration::from_secs(10)),
            "the trace writer did not finish within 10 s: 512 events still queued were not \
             written (`cuprof repair` closes the file); set CUPROF_SHUTDOWN_WAIT above 10 \
             (seconds) to wait longer"
        );
        assert_eq!(
            unfinished(0, Duration::from_millis(2500)),
            "the trace writer did not finish within 2.5 s: the trace may be incomplete \
             (`cuprof repair` closes the file); set CUPROF_SHUTDOWN_WAIT above 2.5 (seconds) \
             to wait longer"
        );
    }
}
