//! A fake libcuda subset (cuda.h signatures), enough to drive a test process like a CUDA
//! program: `cuInit` performs NVIDIA's injection (`CUDA_INJECTION64_PATH`), the device
//! queries answer like one H100 SXM. Every device's primary context is active once cuInit has
//! run; `cuMemGetInfo_v2` counts the double's allocations on the current context's device.
#![allow(non_snake_case)]

use crate::panic_guard::guard;
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};

/// `CUresult` values (cuda.h).
const CUDA_SUCCESS: c_int = 0;
const CUDA_ERROR_INVALID_VALUE: c_int = 1;
const CUDA_ERROR_NOT_INITIALIZED: c_int = 3;
const CUDA_ERROR_INVALID_DEVICE: c_int = 101;
const CUDA_ERROR_INVALID_CONTEXT: c_int = 201;
/// Every device's memory, as `cuDeviceTotalMem_v2` says.
const TOTAL_MEM: usize = 85_029_158_912;
const CUDA_ERROR_UNKNOWN: c_int = 999;

/// 0 = cuInit never called, 1 = first cuInit running the injection, 2 = done.
static INIT: AtomicU8 = AtomicU8::new(0);

thread_local! {
    static IN_INIT: Cell<bool> = const { Cell::new(false) };
    /// This thread's context stack: primary contexts, each its device's ordinal + 1.
    static CONTEXTS: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The driver counts as initialised from inside the first cuInit on (the injection may
/// query devices from `InitializeInjection`).
fn initialized() -> bool {
    INIT.load(Acquire) >= 1
}

/// Number of devices: `CUPTI_DOUBLE_DEVICES` (default 1).
pub fn device_count() -> c_int {
    std::env::var("CUPTI_DOUBLE_DEVICES")
        .ok()
        .and_then(|s| s.trim().parse::<c_int>().ok())
        .filter(|&n| n >= 0)
        .unwrap_or(1)
}

/// Like libcuda: on the first call, `dlopen(CUDA_INJECTION64_PATH, RTLD_NOW)` and call its
/// `int InitializeInjection(void)`. Re-entrant calls (the injection calling cuInit) and
/// later calls return at once; concurrent first calls wait for the injection.
#[no_mangle]
pub extern "C" fn cuInit(_flags: u32) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        if IN_INIT.with(Cell::get) {
            return CUDA_SUCCESS;
        }
        match INIT.compare_exchange(0, 1, AcqRel, Acquire) {
            Ok(_) => {
                IN_INIT.with(|c| c.set(true));
                run_injection();
                IN_INIT.with(|c| c.set(false));
                INIT.store(2, Release);
            }
            Err(_) => {
                while INIT.load(Acquire) != 2 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
        CUDA_SUCCESS
    })
}

fn run_injection() {
    let Ok(path) = std::env::var("CUDA_INJECTION64_PATH") else {
        return;
    };
    if path.is_empty() {
        return;
    }
    let Ok(cpath) = CString::new(path.clone()) else {
        return;
    };
    // SAFETY: cpath is NUL-terminated; loading the injection library is the point.
    let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW) };
    if handle.is_null() {
        eprintln!("cupti-double: cuInit: dlopen({path}) failed");
        return;
    }
    // SAFETY: handle is a live dlopen handle; the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(handle, c"InitializeInjection".as_ptr()) };
    if sym.is_null() {
        eprintln!("cupti-double: cuInit: {path} has no InitializeInjection");
        return;
    }
    // SAFETY: NVIDIA's injection contract: `int InitializeInjection(void)`.
    let init: extern "C" fn() -> c_int = unsafe { std::mem::transmute(sym) };
    init();
}

#[no_mangle]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        if version.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let v = if crate::layout::is_13(crate::state::version()) {
            13000
        } else {
            12090
        };
        // SAFETY: checked non-null; the caller passes a writable int.
        unsafe { *version = v };
        CUDA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        if !initialized() {
            return CUDA_ERROR_NOT_INITIALIZED;
        }
        if count.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        // SAFETY: checked non-null; the caller passes a writable int.
        unsafe { *count = device_count() };
        CUDA_SUCCESS
    })
}

fn check_device(dev: c_int) -> c_int {
    if !initialized() {
        CUDA_ERROR_NOT_INITIALIZED
    } else if dev < 0 || dev >= device_count() {
        CUDA_ERROR_INVALID_DEVICE
    } else {
        CUDA_SUCCESS
    }
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        if device.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let rc = check_device(ordinal);
        if rc == CUDA_SUCCESS {
            // SAFETY: checked non-null; the caller passes a writable CUdevice (int).
            unsafe { *device = ordinal };
        }
        rc
    })
}

const DEVICE_NAME: &[u8] = b"NVIDIA H100 80GB HBM3";

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: c_int) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        if name.is_null() || len <= 0 {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let rc = check_device(dev);
        if rc != CUDA_SUCCESS {
            return rc;
        }
        let n = DEVICE_NAME.len().min(len as usize - 1);
        // SAFETY: `name` has `len` writable bytes; we write n + 1 <= len.
        unsafe {
            std::ptr::copy_nonoverlapping(DEVICE_NAME.as_ptr(), name as *mut u8, n);
            *name.add(n) = 0;
        }
        CUDA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: c_int) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        if bytes.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let rc = check_device(dev);
        if rc == CUDA_SUCCESS {
            // SAFETY: checked non-null; the caller passes a writable size_t.
            unsafe { *bytes = TOTAL_MEM };
        }
        rc
    })
}

/// H100 SXM values for the `CUdevice_attribute` numbers of cuda.h (13.0).
pub fn device_attribute(attrib: c_int) -> Option<c_int> {
    Some(match attrib {
        1 => 1024,        // MAX_THREADS_PER_BLOCK
        2 => 1024,        // MAX_BLOCK_DIM_X
        3 => 1024,        // MAX_BLOCK_DIM_Y
        4 => 64,          // MAX_BLOCK_DIM_Z
        5 => i32::MAX,    // MAX_GRID_DIM_X
        6 => 65535,       // MAX_GRID_DIM_Y
        7 => 65535,       // MAX_GRID_DIM_Z
        8 => 49152,       // MAX_SHARED_MEMORY_PER_BLOCK
        9 => 65536,       // TOTAL_CONSTANT_MEMORY
        10 => 32,         // WARP_SIZE
        12 => 65536,      // MAX_REGISTERS_PER_BLOCK
        13 => 1_980_000,  // CLOCK_RATE (kHz)
        16 => 132,        // MULTIPROCESSOR_COUNT
        36 => 2_619_000,  // MEMORY_CLOCK_RATE (kHz)
        37 => 5120,       // GLOBAL_MEMORY_BUS_WIDTH
        38 => 52_428_800, // L2_CACHE_SIZE
        39 => 2048,       // MAX_THREADS_PER_MULTIPROCESSOR
        75 => 9,          // COMPUTE_CAPABILITY_MAJOR
        76 => 0,          // COMPUTE_CAPABILITY_MINOR
        81 => 233_472,    // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        82 => 65536,      // MAX_REGISTERS_PER_MULTIPROCESSOR
        97 => 232_448,    // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        106 => 32,        // MAX_BLOCKS_PER_MULTIPROCESSOR
        _ => return None,
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    value: *mut c_int,
    attrib: c_int,
    dev: c_int,
) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        if value.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let rc = check_device(dev);
        if rc != CUDA_SUCCESS {
            return rc;
        }
        match device_attribute(attrib) {
            Some(v) => {
                // SAFETY: checked non-null; the caller passes a writable int.
                unsafe { *value = v };
                CUDA_SUCCESS
            }
            None => CUDA_ERROR_INVALID_VALUE,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(
    dev: c_int,
    flags: *mut u32,
    active: *mut c_int,
) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        if flags.is_null() || active.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let rc = check_device(dev);
        if rc == CUDA_SUCCESS {
            // SAFETY: checked non-null; the caller passes a writable unsigned int and int.
            unsafe {
                *flags = 0;
                *active = 1;
            }
        }
        rc
    })
}

/// `CUcontext` is a pointer: the double's is the device's ordinal + 1.
#[no_mangle]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(ctx: *mut *mut c_void, dev: c_int) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        if ctx.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let rc = check_device(dev);
        if rc == CUDA_SUCCESS {
            // SAFETY: checked non-null; the caller passes a writable CUcontext.
            unsafe { *ctx = (dev as usize + 1) as *mut c_void };
        }
        rc
    })
}

#[no_mangle]
pub extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: c_int) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || check_device(dev))
}

#[no_mangle]
pub extern "C" fn cuCtxPushCurrent_v2(ctx: *mut c_void) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        let c = ctx as usize;
        if c == 0 || c > device_count() as usize {
            return CUDA_ERROR_INVALID_CONTEXT;
        }
        CONTEXTS.with(|s| s.borrow_mut().push(c));
        CUDA_SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(ctx: *mut *mut c_void) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        let Some(c) = CONTEXTS.with(|s| s.borrow_mut().pop()) else {
            return CUDA_ERROR_INVALID_CONTEXT;
        };
        if !ctx.is_null() {
            // SAFETY: non-null; the caller passes a writable CUcontext.
            unsafe { *ctx = c as *mut c_void };
        }
        CUDA_SUCCESS
    })
}

/// Free and total memory of the current context's device; the used part is what the program
/// allocated there (`double_malloc`) and has not freed.
#[no_mangle]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> c_int {
    guard(CUDA_ERROR_UNKNOWN, || {
        if free.is_null() || total.is_null() {
            return CUDA_ERROR_INVALID_VALUE;
        }
        let Some(c) = CONTEXTS.with(|s| s.borrow().last().copied()) else {
            return CUDA_ERROR_INVALID_CONTEXT;
        };
        let used = crate::control::device_used(c as u32 - 1) as usize;
        // SAFETY: checked non-null; the caller passes writable size_ts.
        unsafe {
            *free = TOTAL_MEM.saturating_sub(used);
            *total = TOTAL_MEM;
        }
        CUDA_SUCCESS
    })
}
