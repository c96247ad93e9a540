//! What the running tracer holds, built once at CUDA initialisation, and where every callback
//! finds it.
//!
//! [`running`] is the tracer while it runs: [`crate::lifecycle`] lends it out when tracing
//! starts and takes it back when it stops, steps aside or the process forks (the lifecycle's
//! state stays there; this is only the handle it hands out).

use crate::api::ApiPlan;
use crate::channel::Outbox;
use crate::cupti::{ActivityKind, Cupti};
use crate::pool::Pool;
use crate::resolve::Names;
use cuprof_core::decode::Decoder;
use cuprof_core::session::Counters;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

pub struct Tracer {
    pub cupti: Cupti,
    /// Per-call API switches (`None`: the API kinds record every call).
    pub api: Option<ApiPlan>,
    pub cupti_version: u32,
    pub decoder: Mutex<Decoder>,
    pub names: Mutex<Names>,
    pub pool: Pool,
    pub channel: Outbox,
    pub counters: Arc<Counters>,
    /// The activity kinds the window switches on and off.
    pub kinds: Vec<ActivityKind>,
    pub cpu_activity: bool,
    /// Record PyTorch operators, with these options: CPU activity on, not turned off.
    pub torch_ops: Option<crate::ops::Options>,
    /// Python call stacks on operators (`--with-stack`).
    pub with_stack: bool,
    pub dump_dir: Option<PathBuf>,
    pub pid: u32,
    pub report_file: Option<PathBuf>,
    /// `CUPROF_SHUTDOWN_WAIT`: how long the exit path waits for the writer.
    pub shutdown_wait: std::time::Duration,
    /// The activity kinds are on now (see [`Tracer::set_kinds`]).
    pub kinds_on: AtomicBool,
}

static RUNNING: AtomicPtr<Tracer> = AtomicPtr::new(std::ptr::null_mut());

/// The tracer, if tracing runs in this process right now.
pub fn running() -> Option<&'static Tracer> {
    // SAFETY: the pointer is null or a leaked `&'static Tracer` (see `lend`).
    unsafe { RUNNING.load(Relaxed).as_ref() }
}

/// Makes `t` the running tracer. For [`crate::lifecycle`] only.
pub fn lend(t: &'static Tracer) {
    RUNNING.store(t as *const Tracer as *mut Tracer, Relaxed);
}

/// No tracer runs any more. For [`crate::lifecycle`] only; async-signal-safe (an atomic
/// store), so the fork handler may call it.
pub fn take_back() {
    RUNNING.store(std::ptr::null_mut(), Relaxed);
}

impl Tracer {
    /// Switches the configured CUPTI activity kinds on or off (window transitions).
    pub fn set_kinds(&self, on: bool) {
        if self.kinds_on.swap(on, Relaxed) == on {
            return;
        }
        for &k in &self.kinds {
            if on {
                let _ = self.cupti.enable_kind(k);
            } else {
                self.cupti.disable_kind(k);
            }
        }
        if let Some(api) = self.api.as_ref().filter(|_| on) {
            api.silence(&self.cupti);
        }
    }

    /// Asks CUPTI for its buffers: all of them (`forced`), or those whose records are complete.
    pub fn flush_cupti(&self, forced: bool) {
        self.cupti.flush_all(forced);
    }
}
