//! `--with-stack`: the call stack of each device allocation, captured (unresolved: a walk of
//! return addresses) on the allocating thread inside CUPTI's API-entry callback, and symbolised
//! by the writer thread. Allocations through a caching allocator are rare, so the walk's cost
//! (microseconds) stays off the kernel-launch path.
//!
//! In a PyTorch program the allocation also gets the operators open on the thread and their
//! Python stack (read at the outermost operator's start). The GIL is never taken here: the
//! caching allocator calls cudaMalloc holding its own lock, which a thread holding the GIL may
//! be waiting for. Outside any operator, the Python stack is read only if this thread holds
//! the GIL already.

use crate::{tracer, Msg};
use cuprof_core::session::Input;
use std::sync::atomic::Ordering::Relaxed;

pub fn capture(correlation: u32) {
    let Some(t) = tracer() else { return };
    let backtrace = std::backtrace::Backtrace::force_capture();
    let (operators, python) = crate::nvtx::open_operators();
    let python = match (operators.is_empty(), python) {
        (true, None) => crate::python::stack_if_held(),
        (_, python) => python,
    };
    if t.tx
        .try_send(Msg::Input(Input::AllocationStack {
            correlation,
            backtrace,
            operators,
            python,
        }))
        .is_err()
    {
        t.counters.dropped_channel.fetch_add(1, Relaxed);
    }
}
