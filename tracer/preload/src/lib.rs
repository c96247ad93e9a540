//! libcuprof.so: injected into CUDA programs (LD_PRELOAD or CUDA_INJECTION64_PATH).
//!
//! The data path, top to bottom:
//!
//! ```text
//! CUPTI buffer completed ── buffers::completed ── decode (cuprof_core::decode) ──┐
//! NVTX range pop/end ───── nvtx ─────────────────────────────────────────────────┤ bounded channel
//! step / start / stop ──── control (window, cuprof_core::window) ────────────────┘ (try_send, count drops)
//!                                                      │
//!                                writer thread: cuprof_core::session (route into cycles)
//!                                                      └─ cuprof_core::trace_writer (gzip JSON)
//! ```
//!
//! Wake-up: the constructor only reads CUPROF_ENABLED and points CUDA_INJECTION64_PATH and
//! NVTX_INJECTION64_PATH at this library. CUPTI, threads and files start in
//! `InitializeInjection` (libcuda calls it inside cuInit), so a process that never initialises
//! CUDA loads no CUPTI, starts no thread and writes nothing.

mod api;
mod buffers;
mod control;
mod cupti;
mod entry;
mod hooks;
mod nvtx;
mod op_batch;
mod pages;
mod pool;
mod python;
mod rawdump;
mod reclaim;
mod resolve;
mod stacks;
mod start;
mod writer;

use cuprof_core::decode::Decoder;
use cuprof_core::session::{Counters, Input};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

/// A message to the writer thread.
pub enum Msg {
    Input(Input),
    /// An allocation's stack (`--with-stack`), symbolised by the writer thread.
    AllocationStack(stacks::RawStack),
    /// PyTorch operators' ranges, batched by the thread that ran them.
    OpRanges(op_batch::Batch),
    /// Close everything and report; the sender waits on the reply (bounded).
    Shutdown(crossbeam_channel::Sender<()>),
    /// Make what is written so far survive a crash; the sender waits on the reply (bounded).
    SyncFlush(crossbeam_channel::Sender<()>),
}

/// Everything the running tracer holds. Built once, at CUDA initialisation.
pub struct Tracer {
    pub cupti: cupti::Cupti,
    /// Per-call API switches (`None`: the API kinds record every call).
    pub api: Option<api::ApiPlan>,
    pub cupti_version: u32,
    pub decoder: Mutex<Decoder>,
    pub names: Mutex<resolve::Names>,
    pub pool: pool::Pool,
    pub tx: crossbeam_channel::Sender<Msg>,
    pub counters: Arc<Counters>,
    pub kinds: Vec<u32>,
    pub cpu_activity: bool,
    /// Record PyTorch operators (`Some(with input shapes)`): CPU activity on, not turned off.
    pub torch_ops: Option<bool>,
    /// Python call stacks on operators (`--with-stack`).
    pub with_stack: bool,
    pub dump_dir: Option<PathBuf>,
    pub pid: u32,
    pub report_file: Option<PathBuf>,
    kinds_on: AtomicBool,
}

/// Where the library stands. Only moves forward, except `Running -> Aside` on a second profiler.
#[repr(u8)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// Not enabled, or a child after fork: do nothing.
    Inert = 0,
    /// Enabled; waiting for CUDA to initialise.
    Armed = 1,
    Running = 2,
    /// Another profiler took CUPTI; cuprof flushed and stepped aside.
    Aside = 3,
    /// Shut down (exit path ran).
    Stopped = 4,
}

static PHASE: AtomicU8 = AtomicU8::new(Phase::Inert as u8);
pub(crate) static TRACER: OnceLock<Tracer> = OnceLock::new();

pub fn phase() -> Phase {
    match PHASE.load(Relaxed) {
        1 => Phase::Armed,
        2 => Phase::Running,
        3 => Phase::Aside,
        4 => Phase::Stopped,
        _ => Phase::Inert,
    }
}

pub fn set_phase(p: Phase) {
    PHASE.store(p as u8, Relaxed);
}

/// The running tracer, if tracing is on in this process right now.
pub fn tracer() -> Option<&'static Tracer> {
    if phase() != Phase::Running || hooks::forked_child() {
        return None;
    }
    TRACER.get()
}

/// Runs `f`, turning a panic into `fallback`: every C entry point goes through here, because a
/// panic unwinding into C aborts the host program.
pub fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Nanoseconds of CLOCK_REALTIME: CUPTI's clock on Linux, so NVTX ranges and GPU records
/// share one time base.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
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

/// One line on stderr, prefixed `cuprof:`, unless CUPROF_QUIET is set.
pub fn say(msg: &str) {
    if hooks::quiet() {
        return;
    }
    let line = format!("cuprof: {msg}\n");
    // SAFETY: write(2) on fd 2 with a valid buffer; errors are ignored on purpose (stderr may
    // be closed by the host).
    unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

impl Tracer {
    /// Switches the configured CUPTI activity kinds on or off (window transitions).
    pub fn set_kinds(&self, on: bool) {
        if self.kinds_on.swap(on, Relaxed) == on {
            return;
        }
        for &k in &self.kinds {
            // SAFETY: plain CUPTI calls with integer arguments.
            unsafe {
                if on {
                    (self.cupti.cuptiActivityEnable)(k);
                } else {
                    (self.cupti.cuptiActivityDisable)(k);
                }
            }
        }
        if let Some(api) = self.api.as_ref().filter(|_| on) {
            api.silence();
        }
    }

    /// Asks CUPTI for its buffers: all of them (`forced`), or those whose records are complete.
    pub fn flush_cupti(&self, forced: bool) {
        let flag = if forced { cupti::FLUSH_FORCED } else { 0 };
        // SAFETY: a plain CUPTI call; our completion callback takes no lock the caller holds.
        unsafe { (self.cupti.cuptiActivityFlushAll)(flag) };
    }
}
