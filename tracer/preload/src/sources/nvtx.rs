//! cuprof as the NVTX injection library: the NVTX3 loader in the program (torch.cuda.nvtx, the
//! `nvtx` package, C code) `dlopen`s the library named by NVTX_INJECTION64_PATH, which the
//! constructor points at libcuprof.so, and calls `InitializeInjectionNvtx2`. cuprof then owns the
//! NVTX callbacks: it records ranges itself (so it sees their names for step detection), and
//! while recording pushes each range's id as a CUPTI external correlation id, so that GPU work
//! launched inside a range can be projected onto the GPU (`gpu_user_annotation`).
//!
//! This file is the NVTX3 injection ABI only: the export tables, the callbacks' C signatures and
//! reading what they are handed. The ranges themselves (ids, parents, the per-thread stack,
//! operators) are [`super::ranges`]'.

use super::ranges::{end, mark, pop, push, start, Message};
use crate::host::process::guard;
use cuprof_core::event::Name;
use std::ffi::{c_char, c_int, c_void, CStr};
type GetExportTable = unsafe extern "C" fn(u32) -> *const c_void;
type FunctionTable = *mut *mut *const c_void;

#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table: unsafe extern "C" fn(
        module: u32,
        out_table: *mut FunctionTable,
        out_size: *mut u32,
    ) -> c_int,
}

/// nvtxEventAttributes_v2 (x86-64 layout).
#[repr(C)]
struct EventAttributes {
    version: u16,
    size: u16,
    category: u32,
    color_type: i32,
    color: u32,
    payload_type: i32,
    reserved0: i32,
    payload: u64,
    message_type: i32,
    message: *const c_void,
}

const ETID_CALLBACKS: u32 = 1;
const MODULE_CORE: u32 = 1;
const MODULE_CORE2: u32 = 5;
const MESSAGE_ASCII: i32 = 1;
const MESSAGE_UNICODE: i32 = 2;
const MESSAGE_REGISTERED: i32 = 3;

/// A domain handle given to the program: a leaked box holding the domain's name.
struct Domain {
    name: Name,
}

fn wide(ptr: *const i32) -> String {
    let mut s = String::new();
    let mut p = ptr;
    // SAFETY: NVTX's W functions take NUL-terminated wchar_t (i32 on Linux) strings.
    unsafe {
        while !p.is_null() && *p != 0 {
            s.push(char::from_u32(*p as u32).unwrap_or('\u{fffd}'));
            p = p.add(1);
        }
    }
    s
}

/// A C string's bytes, valid for the NVTX call that passed it.
fn c_bytes<'a>(ptr: *const c_char) -> Message<'a> {
    if ptr.is_null() {
        return Message::Bytes(b"");
    }
    // SAFETY: NVTX's A functions take NUL-terminated strings, alive for the call.
    Message::Bytes(unsafe { CStr::from_ptr(ptr) }.to_bytes())
}

fn ascii(ptr: *const c_char) -> Name {
    c_bytes(ptr).into_name()
}

fn attr_message<'a>(a: *const EventAttributes) -> (Message<'a>, Option<f64>) {
    if a.is_null() {
        return (Message::Bytes(b""), None);
    }
    // SAFETY: NVTX passes a valid attributes struct for the duration of the call.
    let a = unsafe { &*a };
    let name = match a.message_type {
        MESSAGE_ASCII => c_bytes(a.message as *const c_char),
        MESSAGE_UNICODE => Message::Made(Name::from(wide(a.message as *const i32))),
        // SAFETY: registered handles are the leaked `Name`s made by register_string.
        MESSAGE_REGISTERED if !a.message.is_null() => unsafe {
            Message::Made((*(a.message as *const Name)).clone())
        },
        _ => Message::Bytes(b""),
    };
    let p = a.payload;
    let payload = match a.payload_type {
        1 => Some(p as f64),
        2 => Some(p as i64 as f64),
        3 => Some(f64::from_bits(p)),
        4 => Some((p as u32) as f64),
        5 => Some((p as u32 as i32) as f64),
        6 => Some(f32::from_bits(p as u32) as f64),
        _ => None,
    };
    (name, payload)
}

fn domain_name(d: *const c_void) -> Option<Name> {
    // SAFETY: domain handles come from domain_create (leaked `Domain`s) or are NULL.
    (!d.is_null()).then(|| unsafe { (*(d as *const Domain)).name.clone() })
}

// The callbacks NVTX calls. Each is a C entry point: `guard` catches panics.
unsafe extern "C" fn mark_ex(a: *const EventAttributes) {
    let (n, p) = attr_message(a);
    mark(n.into_name(), None, p)
}
unsafe extern "C" fn mark_a(m: *const c_char) {
    mark(ascii(m), None, None)
}
unsafe extern "C" fn mark_w(m: *const i32) {
    mark(Name::from(wide(m)), None, None)
}
unsafe extern "C" fn range_start_ex(a: *const EventAttributes) -> u64 {
    let (n, p) = attr_message(a);
    start(n, None, p)
}
unsafe extern "C" fn range_start_a(m: *const c_char) -> u64 {
    start(c_bytes(m), None, None)
}
unsafe extern "C" fn range_start_w(m: *const i32) -> u64 {
    start(Message::Made(Name::from(wide(m))), None, None)
}
unsafe extern "C" fn range_end(id: u64) {
    end(id)
}
unsafe extern "C" fn range_push_ex(a: *const EventAttributes) -> c_int {
    let (n, p) = attr_message(a);
    push(n, None, p)
}
unsafe extern "C" fn range_push_a(m: *const c_char) -> c_int {
    push(c_bytes(m), None, None)
}
unsafe extern "C" fn range_push_w(m: *const i32) -> c_int {
    push(Message::Made(Name::from(wide(m))), None, None)
}
unsafe extern "C" fn range_pop() -> c_int {
    pop()
}
unsafe extern "C" fn domain_mark_ex(d: *const c_void, a: *const EventAttributes) {
    let (n, p) = attr_message(a);
    mark(n.into_name(), domain_name(d), p)
}
unsafe extern "C" fn domain_range_start_ex(d: *const c_void, a: *const EventAttributes) -> u64 {
    let (n, p) = attr_message(a);
    start(n, domain_name(d), p)
}
unsafe extern "C" fn domain_range_end(_d: *const c_void, id: u64) {
    end(id)
}
unsafe extern "C" fn domain_range_push_ex(d: *const c_void, a: *const EventAttributes) -> c_int {
    let (n, p) = attr_message(a);
    push(n, domain_name(d), p)
}
unsafe extern "C" fn domain_range_pop(_d: *const c_void) -> c_int {
    pop()
}
unsafe extern "C" fn domain_register_string_a(
    _d: *const c_void,
    s: *const c_char,
) -> *const c_void {
    guard(std::ptr::null(), || {
        Box::into_raw(Box::new(ascii(s))) as *const c_void
    })
}
unsafe extern "C" fn domain_register_string_w(_d: *const c_void, s: *const i32) -> *const c_void {
    guard(std::ptr::null(), || {
        Box::into_raw(Box::new(Name::from(wide(s)))) as *const c_void
    })
}
unsafe extern "C" fn domain_create_a(name: *const c_char) -> *const c_void {
    guard(std::ptr::null(), || {
        Box::into_raw(Box::new(Domain { name: ascii(name) })) as *const c_void
    })
}
unsafe extern "C" fn domain_create_w(name: *const i32) -> *const c_void {
    guard(std::ptr::null(), || {
        Box::into_raw(Box::new(Domain {
            name: Name::from(wide(name)),
        })) as *const c_void
    })
}
unsafe extern "C" fn domain_destroy(_d: *const c_void) {
    // Handles may still be used by ranges in flight: keep the (small) allocation.
}

/// Fills one NVTX module's function table with `(slot, function)` pairs.
///
/// # Safety
/// `callbacks` must be the NVTX loader's live callbacks export table.
unsafe fn install(
    callbacks: &ExportTableCallbacks,
    module: u32,
    slots: &[(usize, *const c_void)],
) -> bool {
    let mut table: FunctionTable = std::ptr::null_mut();
    let mut size: u32 = 0;
    // SAFETY: the NVTX loader's function writes a table pointer and its size.
    let ok = unsafe { (callbacks.get_module_function_table)(module, &mut table, &mut size) };
    if ok == 0 || table.is_null() {
        return false;
    }
    for &(slot, f) in slots {
        if slot < size as usize {
            // SAFETY: slot < size; each entry points at the loader's function-pointer slot.
            unsafe {
                let entry = *table.add(slot);
                if !entry.is_null() {
                    *entry = f;
                }
            }
        }
    }
    true
}

/// Called by the NVTX loader in the program, once, on the program's first NVTX call.
///
/// # Safety
/// `get_export_table` must be the NVTX loader's export-table function.
pub unsafe fn initialize(get_export_table: GetExportTable) -> c_int {
    // SAFETY: the loader's function returns its static callbacks table or NULL.
    let callbacks = unsafe { get_export_table(ETID_CALLBACKS) } as *const ExportTableCallbacks;
    if callbacks.is_null() {
        return 0;
    }
    // SAFETY: non-null export tables are valid for the life of the process.
    let callbacks = unsafe { &*callbacks };
    macro_rules! f {
        ($e:expr) => {
            $e as *const c_void
        };
    }
    let core = [
        (1, f!(mark_ex as unsafe extern "C" fn(_))),
        (2, f!(mark_a as unsafe extern "C" fn(_))),
        (3, f!(mark_w as unsafe extern "C" fn(_))),
        (4, f!(range_start_ex as unsafe extern "C" fn(_) -> _)),
        (5, f!(range_start_a as unsafe extern "C" fn(_) -> _)),
        (6, f!(range_start_w as unsafe extern "C" fn(_) -> _)),
        (7, f!(range_end as unsafe extern "C" fn(_))),
        (8, f!(range_push_ex as unsafe extern "C" fn(_) -> _)),
        (9, f!(range_push_a as unsafe extern "C" fn(_) -> _)),
        (10, f!(range_push_w as unsafe extern "C" fn(_) -> _)),
        (11, f!(range_pop as unsafe extern "C" fn() -> _)),
    ];
    let core2 = [
        (1, f!(domain_mark_ex as unsafe extern "C" fn(_, _))),
        (
            2,
            f!(domain_range_start_ex as unsafe extern "C" fn(_, _) -> _),
        ),
        (3, f!(domain_range_end as unsafe extern "C" fn(_, _))),
        (
            4,
            f!(domain_range_push_ex as unsafe extern "C" fn(_, _) -> _),
        ),
        (5, f!(domain_range_pop as unsafe extern "C" fn(_) -> _)),
        (
            10,
            f!(domain_register_string_a as unsafe extern "C" fn(_, _) -> _),
        ),
        (
            11,
            f!(domain_register_string_w as unsafe extern "C" fn(_, _) -> _),
        ),
        (12, f!(domain_create_a as unsafe extern "C" fn(_) -> _)),
        (13, f!(domain_create_w as unsafe extern "C" fn(_) -> _)),
        (14, f!(domain_destroy as unsafe extern "C" fn(_))),
    ];
    // SAFETY: callbacks is the loader's live table.
    let ok = unsafe {
        install(callbacks, MODULE_CORE, &core) && install(callbacks, MODULE_CORE2, &core2)
    };
    ok as c_int
}
