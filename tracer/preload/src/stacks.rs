//! `--with-stack`: the call stack of each device allocation, captured (unresolved: a walk of
//! return addresses) on the allocating thread inside CUPTI's API-exit callback, and symbolised
//! by the writer thread. Allocations through a caching allocator are rare, so the walk's cost
//! (microseconds) stays off the kernel-launch path.

use crate::{tracer, Msg};
use cuprof_core::session::Input;
use std::sync::atomic::Ordering::Relaxed;

pub fn capture(correlation: u32) {
    let Some(t) = tracer() else { return };
    let backtrace = std::backtrace::Backtrace::force_capture();
    if t.tx
        .try_send(Msg::Input(Input::AllocationStack {
            correlation,
            backtrace,
        }))
        .is_err()
    {
        t.counters.dropped_channel.fetch_add(1, Relaxed);
    }
}
