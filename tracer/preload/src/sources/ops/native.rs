//! The native observer's hooks into libcuprof.so (`HOOKS` in `mod.rs`, `CuprofHooks` in
//! observer.cpp: keep the three in step).
//!
//! The observer keeps each thread's open operators itself: their records (written where they
//! wait, never copied while open), start times, ids (taken a block at a time), parents and
//! CUPTI correlation pushes, and the operators that finished while the window recorded them.
//! Its calls in here are:
//! - per outermost operator (about four operators on real models), one: [`ops_done`], which
//!   puts the operators that finished inside it into the thread's batch (`op_batch`);
//! - per outermost operator, with `--with-stack` only: [`python_stack`];
//! - per label (`record_function`), allocation report and thread: [`label_begin`] and
//!   [`label_end`] (onto `ranges.rs`' range stack, where labels and NVTX ranges nest),
//!   [`memory`], [`thread`];
//! - per `nn.Module` call with `--with-modules` (timed by recorder.py's module hooks, passed
//!   through the observer's `cuprof_observer_module`): [`module`].
//!
//! An operator's parent is the innermost range open on its thread, the observer's own or one of
//! libcuprof.so's (a label, an NVTX range, a step): the observer reads the id of libcuprof.so's
//! innermost one from a cell [`thread`] hands it, without a call.
//!
//! Python stacks cross as handles: a boxed [`PyStack`], made by [`python_stack`] at an
//! outermost operator's start, shared by the operators nested in it, and taken back when the
//! outermost operator is handed over in [`ops_done`] (or by [`release_stack`]).

use crate::cupti::libcupti::Correlated;
use crate::host::process::{guard, now_ns, pid, tid};
use crate::pipe::op_batch;
use crate::pipe::tracer::running;
use crate::window::boundaries as window;
use cuprof_core::event::{Name, PyStack, Range, RangeKind};
use cuprof_core::native_record::MemoryReport;
use cuprof_core::range_batch::{FinishedOp, OpKind};
use cuprof_core::torch_op;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// A finished operator (`CuprofDone` in observer.cpp).
pub use cuprof_core::range_batch::NativeOp as OpDone;

/// A PyTorch allocation or free (`CuprofMemory` in observer.cpp): `parent`, the innermost
/// operator open on the thread (0: none).
#[repr(C)]
pub struct Memory {
    addr: u64,
    bytes: i64,
    total_allocated: i64,
    total_reserved: i64,
    parent: u64,
    tid: u32,
    device_type: i8,
    device_index: i8,
}

/// An `nn.Module` forward call that ended (`CuprofModule` in observer.cpp): torch's event name
/// and the module's path (UTF-8, each valid for the call), the call's id and its enclosing
/// call's (0: none).
#[repr(C)]
pub struct ModuleCall {
    start: u64,
    end: u64,
    id: u64,
    parent: u64,
    name: *const u8,
    name_len: usize,
    path: *const u8,
    path_len: usize,
}

/// CUPTI's external correlation push and pop, and the kind operators are pushed on
/// (`CuprofCorrelation` in observer.cpp); null functions while no tracer runs.
#[repr(C)]
pub struct Correlation {
    push: Option<cupti_sys::cuptiActivityPushExternalCorrelationId_t>,
    pop: Option<cupti_sys::cuptiActivityPopExternalCorrelationId_t>,
    kind: u32,
}

/// Called by the observer's walk over a thread's open operators, innermost first, with each
/// one's record.
pub type EachOpenOp = unsafe extern "C" fn(*mut c_void, *const u8, usize);
/// The observer's walk over the calling thread's open operators: returns the stack handle of
/// the outermost one (0: none), valid while it stays open.
pub type OpenOpsFn = unsafe extern "C" fn(EachOpenOp, *mut c_void) -> u64;

/// The observer's [`OpenOpsFn`], once attached (0 before).
static OPEN_OPS: AtomicUsize = AtomicUsize::new(0);

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

/// The stack a handle holds, cloned.
///
/// # Safety
/// `handle` is 0 or a [`python_stack`] handle not yet taken back.
unsafe fn stack_of(handle: u64) -> Option<PyStack> {
    // SAFETY: per the function's contract, a live `Box<PyStack>`.
    (handle != 0).then(|| unsafe { (*(handle as *const PyStack)).clone() })
}

/// The stack a handle holds, taken back (the handle ends).
///
/// # Safety
/// `handle` is 0 or a [`python_stack`] handle not yet taken back, and is not used again.
unsafe fn take_stack(handle: u64) -> Option<PyStack> {
    // SAFETY: per the function's contract, a `Box<PyStack>` made by `python_stack`.
    (handle != 0).then(|| *unsafe { Box::from_raw(handle as *mut PyStack) })
}

/// This thread's OS id (into `tid`) and the cell holding the id of the innermost range
/// libcuprof.so has open on it, which lives as long as the thread.
pub unsafe extern "C" fn thread(tid: *mut u32) -> *const u64 {
    guard(std::ptr::null(), || {
        if !tid.is_null() {
            // SAFETY: the observer passes a u32 of its own.
            unsafe { *tid = crate::host::process::tid() };
        }
        crate::sources::ranges::innermost_range_cell()
    })
}

/// A block of range ids: the first, and (into `end`) one past the last.
pub unsafe extern "C" fn take_ids(end: *mut u64) -> u64 {
    let (first, last) = crate::sources::ranges::take_id_block();
    if !end.is_null() {
        // SAFETY: the observer passes a u64 of its own.
        unsafe { *end = last };
    }
    first
}

pub unsafe extern "C" fn correlation(out: *mut Correlation) {
    guard((), || {
        if out.is_null() {
            return;
        }
        let c = match running() {
            Some(t) => {
                let (push, pop, kind) = t.cupti.correlation_functions(Correlated::TorchOp);
                Correlation {
                    push: Some(push),
                    pop: Some(pop),
                    kind,
                }
            }
            None => Correlation {
                push: None,
                pop: None,
                kind: 0,
            },
        };
        // SAFETY: the observer passes a `CuprofCorrelation` of its own.
        unsafe { out.write(c) };
    })
}

/// The Python stack now, as a handle (0: none, or stacks not wanted).
pub unsafe extern "C" fn python_stack() -> u64 {
    guard(0, || {
        if running().is_none() || !window::wants_stacks() {
            return 0;
        }
        crate::host::python::stack().map_or(0, |s| Box::into_raw(Box::new(s)) as u64)
    })
}

/// Takes back a stack handle no operator's end took (its operator never ended).
pub unsafe extern "C" fn release_stack(handle: u64) {
    // SAFETY: the observer passes a handle once, when it drops it.
    guard((), || drop(unsafe { take_stack(handle) }))
}

/// Operators that finished on thread `tid` while the window recorded operators, in the order
/// they ended, and the observer's record buffer they lie in (each at its `record_at`): into
/// this thread's batch.
pub unsafe extern "C" fn ops_done(
    ops: *const OpDone,
    n: usize,
    records: *const u8,
    len: usize,
    tid: u32,
) {
    guard((), || {
        if ops.is_null() || n == 0 {
            return;
        }
        // SAFETY: the observer passes its `n` finished operators, valid for the call.
        let ops = unsafe { std::slice::from_raw_parts(ops, n) };
        // SAFETY: the buffer their records are in, valid for the call.
        let records = unsafe { bytes(records, len) };
        // SAFETY: each stack handle is live until the operator that took it is handed over,
        // which comes after those nested in it, once.
        let stack = |op: &OpDone| unsafe {
            if op.owns_stack != 0 {
                take_stack(op.stack)
            } else {
                stack_of(op.stack)
            }
        };
        let added = running().is_some_and(|t| op_batch::record_native(t, records, tid, ops, stack));
        if !added {
            // The handles end all the same.
            for op in ops.iter().filter(|op| op.owns_stack != 0) {
                // SAFETY: as above; not taken, since the operators were not added.
                drop(unsafe { take_stack(op.stack) });
            }
        }
    })
}

/// A `record_function` label's start (`record`: its fields, as an operator's), under `parent`
/// with the enclosing operator's stack handle (0: none): its range id (0: not opened).
pub unsafe extern "C" fn label_begin(
    record: *const u8,
    len: usize,
    parent: u64,
    stack: u64,
) -> u64 {
    // SAFETY: the observer passes its thread's record buffer and its length.
    let record = unsafe { bytes(record, len) };
    guard(0, || {
        // SAFETY: a handle the enclosing operator holds while it is open.
        let stack = unsafe { stack_of(stack) };
        crate::sources::ranges::native_label_begin(record, parent, stack)
    })
}

/// Module calls kept on a thread before they go to the writer together.
const MODULE_BATCH: usize = 256;

thread_local! {
    /// This thread's finished module calls not yet sent: they go when an outermost call ends
    /// (or [`MODULE_BATCH`] wait), one channel message for a model's call instead of one per
    /// module (a message per module cost about 8 µs of the program thread per call on Flux:
    /// scripts/bench/modules_cost.py).
    static MODULE_CALLS: std::cell::RefCell<Vec<cuprof_core::event::Event>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// An `nn.Module` call (`--with-modules`), to the writer while the window records CPU activity.
pub unsafe extern "C" fn module(m: *const ModuleCall) {
    guard((), || {
        // SAFETY: the observer passes its call, valid for the call.
        let Some(m) = (unsafe { m.as_ref() }) else {
            return;
        };
        let Some(t) = running().filter(|_| window::records_ranges()) else {
            return;
        };
        // SAFETY: recorder.py's bytes objects, alive for the call, with their lengths.
        let (name, path) = unsafe { (bytes(m.name, m.name_len), bytes(m.path, m.path_len)) };
        let call = Range {
            name: Name::from(String::from_utf8_lossy(name).as_ref()),
            domain: Some(Name::from(String::from_utf8_lossy(path).as_ref())),
            start: m.start,
            end: m.end.max(m.start),
            pid: pid(),
            tid: tid(),
            id: m.id,
            parent: m.parent,
            payload: None,
            kind: RangeKind::Module,
            stack: None,
        };
        let full = MODULE_CALLS.with(|calls| {
            let mut calls = calls.borrow_mut();
            calls.push(cuprof_core::event::Event::Range(call));
            (m.parent == 0 || calls.len() >= MODULE_BATCH).then(|| std::mem::take(&mut *calls))
        });
        if let Some(calls) = full {
            t.channel.send_events(calls);
        }
    })
}

pub unsafe extern "C" fn label_end(id: u64) {
    guard((), || crate::sources::ranges::native_label_end(id))
}

/// A PyTorch allocation (`bytes` > 0) or free (< 0) on this thread, with the allocator's
/// totals after it and its device: into the thread's batch while the window records
/// operators, between the operators it happens in.
pub unsafe extern "C" fn memory(m: *const Memory) {
    let at = now_ns();
    guard((), || {
        // SAFETY: the observer passes its report, valid for the call.
        let Some(m) = (unsafe { m.as_ref() }) else {
            return;
        };
        let Some(t) = running().filter(|_| window::records_ranges()) else {
            return;
        };
        let record = MemoryReport {
            addr: m.addr,
            bytes: m.bytes,
            total_allocated: m.total_allocated,
            total_reserved: m.total_reserved,
            device_type: m.device_type,
            device_index: m.device_index,
        }
        .to_record();
        op_batch::record(
            t,
            FinishedOp {
                name: &record,
                start: at,
                end: at,
                pid: pid(),
                tid: m.tid,
                id: 0,
                parent: m.parent,
                stack: None,
                kind: OpKind::Memory,
            },
            // The observer's operators never hold the batch between its calls.
            true,
        );
    })
}

/// The observer's walk over a thread's open operators, for [`open_operators`].
pub unsafe extern "C" fn attach(walk: OpenOpsFn) {
    OPEN_OPS.store(walk as usize, Relaxed);
}

/// Adds one open operator's name to the `Vec<Name>` at `names`.
unsafe extern "C" fn add_name(names: *mut c_void, record: *const u8, len: usize) {
    guard((), || {
        // SAFETY: `open_operators` passes its vector, and the observer the record.
        let (names, record) = unsafe { (&mut *(names as *mut Vec<Name>), bytes(record, len)) };
        let name = torch_op::native_record_name(record);
        names.push(Name::from(String::from_utf8_lossy(name).as_ref()));
    })
}

/// The PyTorch operators open on this thread (innermost first) and the Python stack of the
/// outermost one, for an allocation made inside them: the native observer's, else the NVTX
/// observer's.
pub fn open_operators() -> (Vec<Name>, Option<PyStack>) {
    let walk = OPEN_OPS.load(Relaxed);
    if walk != 0 {
        // SAFETY: only `attach` stores here, an `OpenOpsFn`.
        let walk: OpenOpsFn = unsafe { std::mem::transmute::<usize, OpenOpsFn>(walk) };
        let mut names: Vec<Name> = Vec::new();
        // SAFETY: the walk calls `add_name` with the vector it is given, on this thread.
        let handle = unsafe { walk(add_name, (&mut names as *mut Vec<Name>).cast()) };
        if !names.is_empty() {
            // SAFETY: the outermost operator's handle, held while it is open (it is: this
            // thread is inside it).
            return (names, unsafe { stack_of(handle) });
        }
    }
    crate::sources::ranges::open_operators()
}
