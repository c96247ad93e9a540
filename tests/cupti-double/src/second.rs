//! A second CUPTI client in the process, the way torch.profiler (kineto) is one: it calls
//! `cuptiSubscribe`, `cuptiActivityRegisterCallbacks` and `cuptiActivityEnable` through
//! the symbols a linked call would resolve to (`dlsym(RTLD_DEFAULT, ...)`), so a tracer
//! that interposes them from LD_PRELOAD sees the calls.

use crate::layout::{self, kind};
use crate::state::{self, lock, CallbackFn, CompleteFn, RequestFn};
use std::collections::HashSet;
use std::ffi::{c_void, CStr};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

pub static RECORDS: AtomicU64 = AtomicU64::new(0);
pub static UNKNOWN_BUFFERS: AtomicU64 = AtomicU64::new(0);
pub static BUFFERS: AtomicU64 = AtomicU64::new(0);
static OWN: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

const BUFFER_SIZE: usize = 1 << 20;

unsafe extern "C" fn requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let _ = std::panic::catch_unwind(|| {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: p is a valid out pointer; alignment 8 is a power of two multiple of
        // sizeof(void*).
        let rc = unsafe { libc::posix_memalign(&mut p, 8, BUFFER_SIZE) };
        if rc != 0 {
            p = std::ptr::null_mut();
        } else {
            lock(&OWN)
                .get_or_insert_with(HashSet::new)
                .insert(p as usize);
        }
        // SAFETY: CUPTI passes three valid out pointers.
        unsafe {
            *buffer = p as *mut u8;
            *size = BUFFER_SIZE;
            *max_records = 0;
        }
    });
}

unsafe extern "C" fn completed(
    _ctx: *mut c_void,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    let _ = std::panic::catch_unwind(|| {
        if buffer.is_null() {
            return;
        }
        // SAFETY: CUPTI hands over `valid` initialised bytes at `buffer`.
        let data = unsafe { std::slice::from_raw_parts(buffer, valid) };
        let n = layout::walk(state::version(), data).count() as u64;
        RECORDS.fetch_add(n, Relaxed);
        BUFFERS.fetch_add(1, Relaxed);
        let ours = lock(&OWN)
            .as_mut()
            .is_some_and(|s| s.remove(&(buffer as usize)));
        if ours {
            // SAFETY: allocated by posix_memalign in `requested` above, delivered once.
            unsafe { libc::free(buffer as *mut c_void) };
        } else {
            // What torch logs as "bufferCompleted called with unknown buffer".
            UNKNOWN_BUFFERS.fetch_add(1, Relaxed);
        }
    });
}

unsafe extern "C" fn callback(_ud: *mut c_void, _domain: u32, _cbid: u32, _data: *const c_void) {}

fn resolve(name: &CStr) -> *mut c_void {
    // SAFETY: RTLD_DEFAULT lookup of a NUL-terminated name.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

type SubscribeFn = unsafe extern "C" fn(*mut usize, Option<CallbackFn>, *mut c_void) -> u32;
type RegisterFn = unsafe extern "C" fn(Option<RequestFn>, Option<CompleteFn>) -> u32;
type EnableFn = unsafe extern "C" fn(u32) -> u32;

/// Subscribes, registers buffer callbacks and enables kernel, runtime, memcpy and memset
/// records. Returns cuptiSubscribe's result (0, or 39 while another client is subscribed).
pub fn subscribe() -> i32 {
    let sub = resolve(c"cuptiSubscribe");
    let reg = resolve(c"cuptiActivityRegisterCallbacks");
    let en = resolve(c"cuptiActivityEnable");
    // SAFETY: each symbol, when found, is the C function of that name with CUPTI's
    // signature (ours or an interposer's); otherwise fall back to ours directly.
    let (sub, reg, en): (SubscribeFn, RegisterFn, EnableFn) = unsafe {
        (
            if sub.is_null() {
                crate::cupti::cuptiSubscribe
            } else {
                std::mem::transmute::<*mut c_void, SubscribeFn>(sub)
            },
            if reg.is_null() {
                crate::cupti::cuptiActivityRegisterCallbacks
            } else {
                std::mem::transmute::<*mut c_void, RegisterFn>(reg)
            },
            if en.is_null() {
                crate::cupti::cuptiActivityEnable
            } else {
                std::mem::transmute::<*mut c_void, EnableFn>(en)
            },
        )
    };
    let mut handle = 0usize;
    // SAFETY: CUPTI signatures, valid arguments.
    let rc = unsafe { sub(&mut handle, Some(callback), std::ptr::null_mut()) };
    // SAFETY: as above.
    unsafe { reg(Some(requested), Some(completed)) };
    for k in [
        kind::CONCURRENT_KERNEL,
        kind::RUNTIME,
        kind::MEMCPY,
        kind::MEMSET,
    ] {
        // SAFETY: as above.
        unsafe { en(k) };
    }
    rc as i32
}
