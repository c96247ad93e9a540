//! `--with-stack`: the call stack of each device allocation, captured (unresolved: a walk of
//! return addresses with glibc's `backtrace`, which takes no lock of cuprof's or std's) on the
//! allocating thread inside CUPTI's API-entry callback, and symbolised by the writer thread
//! ([`resolve`], cached per address). Allocations through a caching allocator are rare, so the
//! walk's cost (microseconds) stays off the kernel-launch path, and symbolising (seconds, the
//! first time a large library is read) never holds up the program's thread.
//!
//! In a PyTorch program the allocation also gets the operators open on the thread and their
//! Python stack (read at the outermost operator's start). The GIL is never taken here: the
//! caching allocator calls cudaMalloc holding its own lock, which a thread holding the GIL may
//! be waiting for. Outside any operator, the Python stack is read only if this thread holds
//! the GIL already.

use crate::{tracer, Msg};
use cuprof_core::event::{Name, PyStack};
use cuprof_core::memory::Frame;
use cuprof_core::session::Input;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::Ordering::Relaxed;

/// The deepest native stack kept.
const MAX_DEPTH: usize = 128;
/// Addresses whose symbols the writer keeps; past it the cache starts over.
const MAX_CACHED: usize = 1 << 16;

/// An allocation's stack as captured on the program's thread, not yet symbolised.
pub struct RawStack {
    correlation: u32,
    /// Return addresses, innermost first.
    addresses: Vec<usize>,
    operators: Vec<Name>,
    python: Option<PyStack>,
}

pub fn capture(correlation: u32) {
    let Some(t) = tracer() else { return };
    let mut buf = [std::ptr::null_mut::<c_void>(); MAX_DEPTH];
    // SAFETY: glibc writes at most MAX_DEPTH return addresses into `buf`.
    let n = unsafe { libc::backtrace(buf.as_mut_ptr(), MAX_DEPTH as i32) }.max(0) as usize;
    let addresses = buf[..n].iter().map(|&p| p as usize).collect();
    let (operators, python) = crate::nvtx::open_operators();
    let python = match (operators.is_empty(), python) {
        (true, None) => crate::python::stack_if_held(),
        (_, python) => python,
    };
    let raw = RawStack {
        correlation,
        addresses,
        operators,
        python,
    };
    if t.tx.try_send(Msg::AllocationStack(raw)).is_err() {
        t.counters.dropped_channel.fetch_add(1, Relaxed);
    }
}

/// Symbols of return addresses, for the writer thread.
#[derive(Default)]
pub struct Resolver {
    cache: HashMap<usize, Vec<Frame>>,
}

impl Resolver {
    /// The stack symbolised, as the session takes it.
    pub fn resolve(&mut self, raw: RawStack) -> Input {
        let mut native = Vec::with_capacity(raw.addresses.len());
        for &a in &raw.addresses {
            if self.cache.len() >= MAX_CACHED {
                self.cache.clear();
            }
            native.extend_from_slice(self.cache.entry(a).or_insert_with(|| symbols(a)));
        }
        Input::AllocationStack {
            correlation: raw.correlation,
            native,
            operators: raw.operators,
            python: raw.python,
        }
    }
}

/// The frames at return address `a` (several where calls were inlined), innermost first.
fn symbols(a: usize) -> Vec<Frame> {
    let mut out = Vec::new();
    // A return address points after the call: look up the call itself.
    let at = a.saturating_sub(1) as *mut c_void;
    backtrace::resolve(at, |s| {
        out.push(Frame {
            filename: s
                .filename()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            line: s.lineno().map_or(0, i64::from),
            name: s
                .name()
                .map(|n| format!("{n:#}"))
                .unwrap_or_else(|| "<unknown>".to_string()),
        });
    });
    if out.is_empty() {
        out.push(Frame {
            filename: String::new(),
            line: 0,
            name: "<unknown>".to_string(),
        });
    }
    out
}
