//! Symbolising allocation stacks (`--with-stack`) on the writer thread: return addresses
//! captured on the program's thread ([`crate::sources::stacks`]) become file, line and function, cached
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
    /// The stack symbolised, as the session takes it: from the first frame outside
    /// libcuprof.so (cuprof's own frames, which captured it, are known by address, whatever
    /// names the symboliser gives their inlined functions).
    pub fn resolve(&mut self, raw: RawStack) -> Input {
        let own = own_object();
        let skip = raw
            .addresses
            .iter()
            .take_while(|&&a| own.is_some() && object_of(a) == own)
            .count();
        let mut native = Vec::with_capacity(raw.addresses.len() - skip);
        for &a in &raw.addresses[skip..] {
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

/// The base address of the loaded object (library or executable) holding code address `a`.
fn object_of(a: usize) -> Option<usize> {
    // SAFETY: dladdr only reads the loader's tables and fills `info`.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // A return address points after the call: look up the call itself.
    let at = a.saturating_sub(1) as *const c_void;
    // SAFETY: as above; `at` is only compared against the loaded objects' ranges.
    let found = unsafe { libc::dladdr(at, &mut info) } != 0;
    (found && !info.dli_fbase.is_null()).then_some(info.dli_fbase as usize)
}

/// libcuprof.so's own base address.
fn own_object() -> Option<usize> {
    static OWN: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| object_of(own_object as *const () as usize + 1))
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
                .map(|n| readable(n.as_str(), format!("{n:#}")))
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

/// A frame's function name: `shown` is the symboliser's, which demangles Rust names but leaves
/// C++ ones (`_Z...`, from a library without debug info) as they are in the symbol table; those
/// are demangled as libstdc++ does, as kernel names are ([`crate::host::resolve::demangle`]).
fn readable(raw: Option<&str>, shown: String) -> String {
    match raw {
        Some(raw) if raw == shown => crate::host::resolve::demangle(raw),
        _ => shown,
    }
}

#[cfg(test)]
mod tests {
    use super::readable;

    #[test]
    fn cxx_frames_are_demangled_and_rust_frames_kept_as_shown() {
        assert_eq!(
            readable(
                Some("_ZN2at6native5emptyEN3c108ArrayRefIlEE"),
                "_ZN2at6native5emptyEN3c108ArrayRefIlEE".to_string()
            ),
            "at::native::empty(c10::ArrayRef<long>)"
        );
        assert_eq!(
            readable(Some("_Z6matmulPfS_i"), "_Z6matmulPfS_i".to_string()),
            "matmul(float*, float*, int)"
        );
        // Rust: the symboliser's own demangling (no hash), not libstdc++'s reading of it.
        assert_eq!(
            readable(
                Some("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
                "core::ptr::drop_in_place".to_string()
            ),
            "core::ptr::drop_in_place"
        );
        assert_eq!(readable(Some("malloc"), "malloc".to_string()), "malloc");
        assert_eq!(readable(None, "main".to_string()), "main");
    }
}
