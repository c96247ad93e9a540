//! Symbolising allocation stacks (`--with-stack`) on the writer thread: return addresses
//! captured on the program's thread ([`crate::stacks`]) become file, line and function, cached
//! per address, so symbolising (seconds, the first time a large library is read) never holds
//! up the program's thread.

use cuprof_core::event::{Name, PyStack};
use cuprof_core::memory::Frame;
use cuprof_core::session::Input;
use std::collections::HashMap;
use std::ffi::c_void;

/// Addresses whose symbols the writer keeps; past it the cache starts over.
const MAX_CACHED: usize = 1 << 16;

/// An allocation's stack as captured on the program's thread, not yet symbolised.
pub struct RawStack {
    pub correlation: u32,
    /// Return addresses, innermost first.
    pub addresses: Vec<usize>,
    pub operators: Vec<Name>,
    pub python: Option<PyStack>,
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
