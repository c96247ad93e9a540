//! PyTorch operator recording, in a PyTorch process.
//!
//! - `observer.cpp`: cuprof's native observer, PyTorch's RecordFunction callbacks (the API
//!   Kineto uses). It is built against the torch the program imported, at first use, and cached
//!   per torch build (`build.py`); libcuprof.so itself never links libtorch.
//! - `recorder.py`: run in the program's Python by `host/python.rs` when the window starts or stops
//!   collecting; it loads the observer and registers its callbacks, or, where it cannot be
//!   built or loaded, turns on the fallback (`nvtx_fallback.py`: PyTorch's NVTX observer,
//!   whose ranges reach `nvtx.rs` and `ranges.rs` as NVTX ranges). It also gives way to a profiler the program
//!   starts itself and takes operators back when that one stops, and writes torch.compile's
//!   graph breaks and recompilations, as dynamo reports them, as labels (docs/trace-format.md).
//! - `native.rs`: the hooks the observer calls back into (`HOOKS`): each finished operator and
//!   each allocation PyTorch reports (with `MEM`) into the thread's batch (`op_batch`), labels
//!   onto `ranges.rs`' range stack, Python stacks, ids and CUPTI's correlation functions.
//! - this module: the hooks' table, and which path records (written in each
//!   trace's `cuprof` header).

mod native;

pub use native::open_operators;

use cuprof_core::torch_op::OperatorPath;
use std::sync::atomic::Ordering::Relaxed;

/// The recorder's Python source, in the order it is run in one namespace.
pub const RECORDER: &str = concat!(
    include_str!("build.py"),
    include_str!("nvtx_fallback.py"),
    include_str!("recorder.py"),
);

/// The observer's C++ source, which the recorder builds.
pub const OBSERVER_SOURCE: &str = include_str!("observer.cpp");

/// What libcuprof.so gives the observer (`CuprofHooks` in observer.cpp: keep the two in step).
///
/// The observer keeps each thread's open operators itself (their records, start times, ids,
/// correlation pushes, finished operators) and calls in once per outermost operator, at its
/// end (`ops_done`, with every operator that finished inside it): an operator's start costs no
/// call into this library, nor does the end of one nested in another. What it needs of libcuprof.so on the way it reads
/// without a call (the window's flags) or fetches once per thread (`thread`) or per block of
/// ids (`take_ids`).
#[repr(C)]
pub struct Hooks {
    version: u32,
    /// The window collects; CPU activity is collected; Python stacks are wanted (relaxed loads).
    collecting: *const u8,
    cpu: *const u8,
    stacks: *const u8,
    thread: unsafe extern "C" fn(*mut u32) -> *const u64,
    take_ids: unsafe extern "C" fn(*mut u64) -> u64,
    correlation: unsafe extern "C" fn(*mut native::Correlation),
    python_stack: unsafe extern "C" fn() -> u64,
    release_stack: unsafe extern "C" fn(u64),
    ops_done: unsafe extern "C" fn(*const native::OpDone, usize, *const u8, usize, u32),
    label_begin: unsafe extern "C" fn(*const u8, usize, u64, u64) -> u64,
    label_end: unsafe extern "C" fn(u64),
    memory: unsafe extern "C" fn(*const native::Memory),
    attach: unsafe extern "C" fn(native::OpenOpsFn),
    module: unsafe extern "C" fn(*const native::ModuleCall),
}

// SAFETY: the flag pointers point at atomics that live as long as the process and are only
// ever read through them.
unsafe impl Sync for Hooks {}

/// The hooks' version (`kHooksVersion` in observer.cpp, `_HOOKS_VERSION` in recorder.py).
pub const HOOKS_VERSION: u32 = 8;

pub static HOOKS: Hooks = Hooks {
    version: HOOKS_VERSION,
    collecting: crate::window::boundaries::COLLECTING.as_ptr() as *const u8,
    cpu: crate::window::collect::CPU.as_ptr() as *const u8,
    stacks: crate::window::collect::STACKS.as_ptr() as *const u8,
    thread: native::thread,
    take_ids: native::take_ids,
    correlation: native::correlation,
    python_stack: native::python_stack,
    release_stack: native::release_stack,
    ops_done: native::ops_done,
    label_begin: native::label_begin,
    label_end: native::label_end,
    memory: native::memory,
    attach: native::attach,
    module: native::module,
};

/// Notes the recorder's path (its `_cuprof_path`) for the trace headers.
pub fn set_path(path: u8) {
    if let (Some(_), Some(t)) = (OperatorPath::from_u8(path), crate::pipe::tracer::running()) {
        t.counters.operator_path.store(path, Relaxed);
    }
}

/// Notes whether torch.distributed was initialised (the recorder's `_cuprof_distributed`) for
/// the trace headers.
pub fn set_distributed(on: bool) {
    if let Some(t) = crate::pipe::tracer::running() {
        t.counters.distributed.store(on, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    /// The top-level names a Python file defines (`def X`, `class X`, `X = ...`).
    fn top_level_names(src: &str) -> std::collections::BTreeSet<String> {
        let ident = |s: &str| -> String {
            s.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        };
        src.lines()
            .filter(|l| !l.starts_with([' ', '\t', '#']))
            .filter_map(|l| {
                if let Some(rest) = l.strip_prefix("def ").or_else(|| l.strip_prefix("class ")) {
                    return Some(ident(rest));
                }
                let name = ident(l);
                let after = l[name.len()..].trim_start();
                (!name.is_empty() && after.starts_with('=') && !after.starts_with("=="))
                    .then_some(name)
            })
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// The three files run in ONE namespace: a name one defines and another redefines breaks
    /// the first (a `_compile` dict once replaced build.py's `_compile()`, and the native
    /// observer's build failed with "'dict' object is not callable").
    #[test]
    fn the_recorders_files_define_no_name_twice() {
        let files = [
            ("build.py", include_str!("build.py")),
            ("nvtx_fallback.py", include_str!("nvtx_fallback.py")),
            ("recorder.py", include_str!("recorder.py")),
        ];
        let mut seen: std::collections::BTreeMap<String, &str> = Default::default();
        let mut twice = Vec::new();
        for (file, src) in files {
            for name in top_level_names(src) {
                if let Some(first) = seen.insert(name.clone(), file) {
                    twice.push(format!("{name}: {first} and {file}"));
                }
            }
        }
        // Names both define on purpose (the same value), listed here when there are any.
        assert_eq!(twice, Vec::<String>::new());
        assert!(top_level_names("_compile = {}\ndef _compile(a):\n  x = 1\n").contains("_compile"));
    }
}
