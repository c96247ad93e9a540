//! `--with-stack`: the call stack of each device allocation, captured (unresolved: a walk of
//! return addresses with glibc's `backtrace`, which takes no lock of cuprof's or std's) on the
//! allocating thread inside CUPTI's API-entry callback, and symbolised by the writer thread
//! ([`crate::host::symbols`], cached per address). Allocations through a caching allocator are rare, so the
//! walk's cost (microseconds) stays off the kernel-launch path, and symbolising (seconds, the
//! first time a large library is read) never holds up the program's thread.
//!
//! In a PyTorch program the allocation also gets the operators open on the thread and their
//! Python stack (read at the outermost operator's start). The GIL is never taken here: the
//! caching allocator calls cudaMalloc holding its own lock, which a thread holding the GIL may
//! be waiting for. Outside any operator, the Python stack is read only if this thread holds
//! the GIL already.

use crate::host::symbols::RawStack;
use std::ffi::c_void;

/// The deepest native stack kept.
const MAX_DEPTH: usize = 128;

/// The stack of the allocation (or free) with CUPTI correlation id `correlation`, made on the
/// calling thread.
pub fn capture(correlation: u32) -> RawStack {
    let mut buf = [std::ptr::null_mut::<c_void>(); MAX_DEPTH];
    // SAFETY: glibc writes at most MAX_DEPTH return addresses into `buf`.
    let n = unsafe { libc::backtrace(buf.as_mut_ptr(), MAX_DEPTH as i32) }.max(0) as usize;
    let addresses = buf[..n].iter().map(|&p| p as usize).collect();
    let (operators, python) = crate::sources::ops::open_operators();
    let python = match (operators.is_empty(), python) {
        (true, None) => crate::host::python::stack_if_held(),
        (_, python) => python,
    };
    RawStack {
        correlation,
        addresses,
        operators,
        python,
    }
}
