//! The library's one state in this process ([`Phase`]): read by everyone, moved by
//! `life::lifecycle` alone (its transitions are described there).

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Where the library stands. Only moves forward (down the list), except `Stopped -> Aside`
/// when a second profiler made cuprof stop, and `Starting -> Inert` when CUPTI refused.
#[repr(u8)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Phase {
    /// Not enabled, or CUPTI could not be set up: do nothing.
    Inert = 0,
    /// Enabled; waiting for CUDA to initialise.
    Armed = 1,
    /// CUDA is initialising and cuprof is setting CUPTI up.
    Starting = 2,
    Running = 3,
    /// Closing the window, draining CUPTI and the writer.
    ShuttingDown = 4,
    /// Shut down (exit path ran).
    Stopped = 5,
    /// Another profiler took CUPTI; cuprof finished its trace and stepped aside.
    Aside = 6,
    /// A child after fork: it never traces (the parent's threads and locks are not here).
    Forked = 7,
}

const PHASES: [Phase; 8] = [
    Phase::Inert,
    Phase::Armed,
    Phase::Starting,
    Phase::Running,
    Phase::ShuttingDown,
    Phase::Stopped,
    Phase::Aside,
    Phase::Forked,
];

static PHASE: AtomicU8 = AtomicU8::new(Phase::Inert as u8);

/// Where the library stands now.
pub fn phase() -> Phase {
    PHASES
        .get(PHASE.load(Relaxed) as usize)
        .copied()
        .unwrap_or(Phase::Inert)
}

/// Sets the phase. For `life::lifecycle` only, the one writer of the phase.
pub fn set(p: Phase) {
    PHASE.store(p as u8, Relaxed);
}

/// `from -> to`, for one caller only. For `life::lifecycle` only.
pub fn transition(from: Phase, to: Phase) -> bool {
    PHASE
        .compare_exchange(from as u8, to as u8, Relaxed, Relaxed)
        .is_ok()
}
