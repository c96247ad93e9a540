//! What the running tracer holds, built once at CUDA initialisation, and where every callback
//! finds it.
//!
//! [`running`] is the tracer while it runs: [`crate::life::lifecycle`] lends it out when tracing
//! starts and takes it back when it stops, steps aside or the process forks (the lifecycle's
//! state stays there; this is only the handle it hands out).

use crate::cupti::api::ApiPlan;
use crate::cupti::libcupti::{ActivityKind, Cupti};
use crate::cupti::pool::Pool;
use crate::host::resolve::Names;
use crate::pipe::channel::Outbox;
use cuprof_core::collect::Collect;
use cuprof_core::decode::Decoder;
use cuprof_core::session::Counters;
use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};
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
    /// The activity kinds of each group the window switches on and off (whether or not the
    /// process traces that group: an on-demand capture may ask for it).
    pub cpu_kinds: Vec<ActivityKind>,
    pub gpu_kinds: Vec<ActivityKind>,
    /// The process's own options: what is collected unless a capture asks otherwise
    /// ([`crate::window::collect`]).
    pub options: Collect,
    pub dump_dir: Option<PathBuf>,
    pub pid: u32,
    pub report_file: Option<PathBuf>,
    /// `CUPROF_SHUTDOWN_WAIT`: how long the exit path waits for the writer.
    pub shutdown_wait: std::time::Duration,
    /// The activity kinds on now (see [`Tracer::set_kinds`]).
    pub kinds_on: Mutex<Vec<ActivityKind>>,
}

static RUNNING: AtomicPtr<Tracer> = AtomicPtr::new(std::ptr::null_mut());

/// The tracer, if tracing runs in this process right now.
pub fn running() -> Option<&'static Tracer> {
    // SAFETY: the pointer is null or a leaked `&'static Tracer` (see `lend`).
    unsafe { RUNNING.load(Relaxed).as_ref() }
}

/// Makes `t` the running tracer. For [`crate::life::lifecycle`] only.
pub fn lend(t: &'static Tracer) {
    RUNNING.store(t as *const Tracer as *mut Tracer, Relaxed);
}

/// No tracer runs any more. For [`crate::life::lifecycle`] only; async-signal-safe (an atomic
/// store), so the fork handler may call it.
pub fn take_back() {
    RUNNING.store(std::ptr::null_mut(), Relaxed);
}

impl Tracer {
    /// The activity kinds of the groups `c` collects.
    pub fn kinds(&self, c: &Collect) -> Vec<ActivityKind> {
        let mut k = Vec::new();
        if c.gpu {
            k.extend(&self.gpu_kinds);
        }
        if c.cpu {
            k.extend(&self.cpu_kinds);
        }
        k
    }

    /// Makes `kinds` the CUPTI activity kinds on (none: all off), from whichever were on
    /// (window transitions).
    pub fn set_kinds(&self, kinds: &[ActivityKind]) {
        let Ok(mut on) = self.kinds_on.lock() else {
            return;
        };
        if *on == kinds {
            return;
        }
        for &k in on.iter().filter(|k| !kinds.contains(k)) {
            self.cupti.disable_kind(k);
        }
        for &k in kinds.iter().filter(|k| !on.contains(k)) {
            let _ = self.cupti.enable_kind(k);
        }
        *on = kinds.to_vec();
        if let Some(api) = self.api.as_ref().filter(|_| !kinds.is_empty()) {
            api.silence(&self.cupti);
        }
    }

    /// Asks CUPTI for its buffers: all of them (`forced`), or those whose records are complete.
    pub fn flush_cupti(&self, forced: bool) {
        self.cupti.flush_all(forced);
    }
}
