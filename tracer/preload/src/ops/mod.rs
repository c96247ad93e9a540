//! PyTorch operator recording, in a PyTorch process.
//!
//! - `observer.cpp`: cuprof's native observer, PyTorch's RecordFunction callbacks (the API
//!   Kineto uses). It is built against the torch the program imported, at first use, and cached
//!   per torch build (`build.py`); libcuprof.so itself never links libtorch.
//! - `recorder.py`: run in the program's Python by `python.rs` when the window starts or stops
//!   collecting; it loads the observer and registers its callbacks, or, where it cannot be
//!   built or loaded, turns on the fallback (`nvtx_fallback.py`: PyTorch's NVTX observer,
//!   whose ranges reach `nvtx.rs` as NVTX ranges). It also gives way to a profiler the program
//!   starts itself and takes operators back when that one stops.
//! - this module: the hooks the observer calls back into (`HOOKS`), which hand each operator
//!   to `nvtx.rs`'s per-thread range stack (correlation, Python stacks, batching), and each
//!   allocation PyTorch reports (with `MEM`) to the same thread's batch, and which path records
//!   (written in each trace's `cuprof` header).

use crate::process::guard;
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

/// How operators are recorded (the configuration's `record_shapes`, `all_threads`,
/// `with_flops`, and `memory`: the `MEM` activity, torch.profiler's `profile_memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub shapes: bool,
    pub all_threads: bool,
    pub flops: bool,
    pub memory: bool,
}

impl Options {
    /// The recorder's `level` (recorder.py): 0 off, else 1 plus a bit per option.
    pub fn level(self, on: bool) -> u8 {
        if !on {
            return 0;
        }
        1 | (self.shapes as u8) << 1
            | (self.all_threads as u8) << 2
            | (self.flops as u8) << 3
            | (self.memory as u8) << 4
    }
}

/// What libcuprof.so gives the observer (`CuprofHooks` in observer.cpp: keep the two in step).
#[repr(C)]
pub struct Hooks {
    version: u32,
    op_begin: unsafe extern "C" fn(*const u8, usize),
    op_end: unsafe extern "C" fn(),
    label_begin: unsafe extern "C" fn(*const u8, usize) -> u64,
    label_end: unsafe extern "C" fn(u64),
    memory: unsafe extern "C" fn(u64, i64, i64, i64, i8, i8),
}

pub static HOOKS: Hooks = Hooks {
    version: 4,
    op_begin,
    op_end,
    label_begin,
    label_end,
    memory,
};

/// The bytes the observer passes, valid for the call.
///
/// # Safety
/// `ptr` points at `len` readable bytes (or `len` is 0).
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        return &[];
    }
    // SAFETY: per the function's contract.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

unsafe extern "C" fn op_begin(record: *const u8, len: usize) {
    // SAFETY: the observer passes its thread's record buffer and its length.
    let record = unsafe { bytes(record, len) };
    guard((), || crate::nvtx::native_op_begin(record))
}

unsafe extern "C" fn op_end() {
    guard((), crate::nvtx::native_op_end)
}

unsafe extern "C" fn label_begin(record: *const u8, len: usize) -> u64 {
    // SAFETY: the observer passes its thread's record buffer and its length.
    let record = unsafe { bytes(record, len) };
    guard(0, || crate::nvtx::native_label_begin(record))
}

unsafe extern "C" fn label_end(id: u64) {
    guard((), || crate::nvtx::native_label_end(id))
}

/// A PyTorch allocation (`bytes` > 0) or free (< 0) on this thread, with the allocator's
/// totals after it and its device (`c10::DeviceType`, index -1 for the CPU).
extern "C" fn memory(
    addr: u64,
    bytes: i64,
    total_allocated: i64,
    total_reserved: i64,
    device_type: i8,
    device_index: i8,
) {
    let report = cuprof_core::native_record::MemoryReport {
        addr,
        bytes,
        total_allocated,
        total_reserved,
        device_type,
        device_index,
    };
    guard((), || crate::nvtx::native_memory(report))
}

/// Notes the recorder's path (its `_cuprof_path`) for the trace headers.
pub fn set_path(path: u8) {
    if let (Some(_), Some(t)) = (OperatorPath::from_u8(path), crate::tracer::running()) {
        t.counters.operator_path.store(path, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_carry_each_option_as_recorder_py_reads_them() {
        let none = Options {
            shapes: false,
            all_threads: false,
            flops: false,
            memory: false,
        };
        assert_eq!(none.level(false), 0);
        assert_eq!(none.level(true), 1);
        let all = Options {
            shapes: true,
            all_threads: true,
            flops: true,
            memory: true,
        };
        assert_eq!(all.level(true), 1 | 2 | 4 | 8 | 16);
        assert_eq!(all.level(false), 0);
        let shapes = Options {
            shapes: true,
            ..none
        };
        assert_eq!(shapes.level(true), 3);
    }
}
