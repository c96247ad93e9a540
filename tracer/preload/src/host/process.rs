//! The host process as cuprof sees it: its ids, its clock, its stderr, and the panic guard
//! around every C entry point.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::OnceLock;

static QUIET: AtomicBool = AtomicBool::new(false);

/// Runs `f`, turning a panic into `fallback`: every C entry point goes through here, because a
/// panic unwinding into C aborts the host program.
pub fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Nanoseconds of CLOCK_REALTIME: CUPTI's clock on Linux, so NVTX ranges and GPU records
/// share one time base.
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Nanoseconds of the clock `id`.
pub fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's OS id (what CUPTI reports with CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM),
/// read once per thread: it is a system call, and NVTX ranges need it every time. A forked
/// child inherits the forking thread's value, but a forked child never traces.
pub fn tid() -> u32 {
    thread_local!(static TID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) });
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no preconditions.
            t.set(unsafe { libc::syscall(libc::SYS_gettid) } as u32);
        }
        t.get()
    })
}

/// This process's id, read once (getpid is a system call too). As with [`tid`], only the
/// process that started tracing uses it.
pub fn pid() -> u32 {
    static PID: OnceLock<u32> = OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// CUPROF_QUIET: no `cuprof:` lines on stderr.
pub fn set_quiet(q: bool) {
    QUIET.store(q, Relaxed);
}

/// One line on stderr, prefixed `cuprof:`, unless CUPROF_QUIET is set.
pub fn say(msg: &str) {
    if QUIET.load(Relaxed) {
        return;
    }
    warn(msg);
}

/// One line on stderr, prefixed `cuprof:`, even with CUPROF_QUIET (which silences
/// informational lines, not warnings).
pub fn warn(msg: &str) {
    let line = format!("cuprof: {msg}\n");
    // SAFETY: write(2) on fd 2 with a valid buffer; errors are ignored on purpose (stderr may
    // be closed by the host).
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

/// This process's run id: `CUPROF_RUN_ID`, else derived from its job, parent or itself
/// (`cuprof_core::config::run_id`), on `hostname` as the trace names it.
pub fn run_id(world_size: u32, hostname: &str) -> String {
    let stat = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| cuprof_core::config::run_id::parse_stat(&s))
    };
    let (ppid, start_ticks) = stat("self").unwrap_or((0, 0));
    let parent_start_ticks = stat(&ppid.to_string()).map_or(0, |(_, t)| t);
    let facts = cuprof_core::config::run_id::ProcessFacts {
        hostname: hostname.to_owned(),
        pid: pid(),
        start_ticks,
        ppid,
        parent_start_ticks,
    };
    cuprof_core::config::run_id::derive(|k| std::env::var_os(k), world_size, &facts)
}
