//! The live figures `cuprof top` shows (`cuprof_core::live`), kept in on-demand processes
//! only: the writer thread feeds them every input it takes, the window each step's duration,
//! and the control thread reads a snapshot when asked (`live` request).
//!
//! One lock, taken once per channel message by the writer, once per step by the program
//! thread that marks it, and once a second by the control thread while `cuprof top` watches;
//! a snapshot is computed under it (bounded: two windows of intervals).

use cuprof_core::event::Range;
use cuprof_core::live::{LiveStats, Snapshot};
use cuprof_core::session::Input;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;

static LIVE: Mutex<Option<LiveStats>> = Mutex::new(None);
/// Set once [`enable`] ran: the hooks below return at once in other processes.
static ON: AtomicBool = AtomicBool::new(false);

/// Keeps live figures in this process (on-demand mode); `memory`: device memory records are
/// collected, so bytes in use can be counted.
pub fn enable(memory: bool) {
    if let Ok(mut l) = LIVE.lock() {
        *l = Some(LiveStats::new(memory));
        ON.store(true, Relaxed);
    }
}

fn with(f: impl FnOnce(&mut LiveStats)) {
    if !ON.load(Relaxed) {
        return;
    }
    if let Ok(mut l) = LIVE.lock() {
        if let Some(l) = l.as_mut() {
            f(l);
        }
    }
}

/// An input the writer is about to hand to the session.
pub fn input(i: &Input) {
    match i {
        Input::Events(e) => with(|l| l.events(e)),
        Input::Range(r) => with(|l| l.range(r)),
        Input::BeginRecording { ts, .. } => with(|l| l.begin(*ts)),
        Input::EndRecording { .. } => with(LiveStats::end),
        _ => {}
    }
}

/// Operator ranges of one batch, before the session takes them.
pub fn ranges<'a>(rs: impl IntoIterator<Item = &'a Range>) {
    with(|l| rs.into_iter().for_each(|r| l.range(r)));
}

/// A step ended after `ns` (from the window, on the thread that marked it).
pub fn step(ns: u64) {
    with(|l| l.step(ns));
}

/// The figures now; `None` outside on-demand mode.
pub fn snapshot() -> Option<Snapshot> {
    LIVE.lock().ok()?.as_ref().map(LiveStats::snapshot)
}
