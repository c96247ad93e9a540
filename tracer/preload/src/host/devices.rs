//! The GPUs' properties from the CUDA driver (the trace's `deviceProperties`), asked once the
//! driver has finished initialising; and the device memory in use (`cuprof top`), asked once
//! per live request.

use cuprof_core::trace_writer::DeviceProps;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

type CuResult = c_int;

/// Device properties from the driver, by ordinal (the `deviceProperties` of the trace).
pub fn properties() -> Vec<DeviceProps> {
    // SAFETY: RTLD_NOLOAD: the driver is loaded since CUDA is initialising.
    let h = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return Vec::new();
    }
    let sym = |n: &CStr| {
        // SAFETY: live handle, valid name.
        let p = unsafe { libc::dlsym(h, n.as_ptr()) };
        (!p.is_null()).then_some(p)
    };
    let (Some(count), Some(get), Some(name), Some(mem), Some(attr)) = (
        sym(c"cuDeviceGetCount"),
        sym(c"cuDeviceGet"),
        sym(c"cuDeviceGetName"),
        sym(c"cuDeviceTotalMem_v2"),
        sym(c"cuDeviceGetAttribute"),
    ) else {
        return Vec::new();
    };
    // SAFETY: the driver API functions with their documented signatures.
    unsafe {
        let count: unsafe extern "C" fn(*mut c_int) -> CuResult = std::mem::transmute(count);
        let get: unsafe extern "C" fn(*mut c_int, c_int) -> CuResult = std::mem::transmute(get);
        let name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> CuResult =
            std::mem::transmute(name);
        let mem: unsafe extern "C" fn(*mut usize, c_int) -> CuResult = std::mem::transmute(mem);
        let attr: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> CuResult =
            std::mem::transmute(attr);
        let mut n = 0;
        // cuInit may still be finishing on the thread that woke cuprof: wait for it, briefly.
        let mut tries = 0;
        while count(&mut n) != 0 {
            tries += 1;
            if tries > 200 {
                return Vec::new();
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        (0..n.clamp(0, 64))
            .filter_map(|ordinal| {
                let mut dev = 0;
                if get(&mut dev, ordinal) != 0 {
                    return None;
                }
                let mut buf = [0 as c_char; 256];
                name(buf.as_mut_ptr(), buf.len() as c_int, dev);
                let mut total = 0usize;
                mem(&mut total, dev);
                let a = |id: c_int| {
                    let mut v = 0;
                    attr(&mut v, id, dev);
                    v
                };
                Some(DeviceProps {
                    id: ordinal as u32,
                    name: CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned(),
                    total_global_mem: total as u64,
                    compute_major: a(75),
                    compute_minor: a(76),
                    max_threads_per_block: a(1),
                    max_threads_per_multiprocessor: a(39),
                    regs_per_block: a(12),
                    warp_size: a(10),
                    shared_mem_per_block: a(8),
                    num_sms: a(16),
                    regs_per_multiprocessor: a(82),
                    shared_mem_per_block_optin: a(97),
                    shared_mem_per_multiprocessor: a(81),
                    max_blocks_per_multiprocessor: a(106),
                })
            })
            .collect()
    }
}

type CountFn = unsafe extern "C" fn(*mut c_int) -> CuResult;
type StateFn = unsafe extern "C" fn(c_int, *mut u32, *mut c_int) -> CuResult;
type RetainFn = unsafe extern "C" fn(*mut *mut c_void, c_int) -> CuResult;
type ReleaseFn = unsafe extern "C" fn(c_int) -> CuResult;
type PushFn = unsafe extern "C" fn(*mut c_void) -> CuResult;
type PopFn = unsafe extern "C" fn(*mut *mut c_void) -> CuResult;
type InfoFn = unsafe extern "C" fn(*mut usize, *mut usize) -> CuResult;

/// The driver entry points [`memory_in_use`] calls, with CUDA's signatures.
struct MemInfo {
    count: CountFn,
    state: StateFn,
    retain: RetainFn,
    release: ReleaseFn,
    push: PushFn,
    pop: PopFn,
    info: InfoFn,
}

/// The entry points, found once in the loaded driver; `None` when it is not loaded (no CUDA
/// yet: asked again next time) or lacks one.
fn mem_info() -> Option<&'static MemInfo> {
    static FOUND: OnceLock<Option<MemInfo>> = OnceLock::new();
    if let Some(found) = FOUND.get() {
        return found.as_ref();
    }
    // SAFETY: RTLD_NOLOAD: only a driver the program loaded; nothing is loaded here.
    let h = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return None;
    }
    let sym = |n: &CStr| {
        // SAFETY: live handle, valid name.
        let p = unsafe { libc::dlsym(h, n.as_ptr()) };
        (!p.is_null()).then_some(p)
    };
    let found = (|| {
        // SAFETY: the driver API functions with their documented signatures (cuda.h).
        unsafe {
            Some(MemInfo {
                count: std::mem::transmute::<*mut c_void, CountFn>(sym(c"cuDeviceGetCount")?),
                state: std::mem::transmute::<*mut c_void, StateFn>(sym(
                    c"cuDevicePrimaryCtxGetState",
                )?),
                retain: std::mem::transmute::<*mut c_void, RetainFn>(sym(
                    c"cuDevicePrimaryCtxRetain",
                )?),
                release: std::mem::transmute::<*mut c_void, ReleaseFn>(sym(
                    c"cuDevicePrimaryCtxRelease_v2",
                )?),
                push: std::mem::transmute::<*mut c_void, PushFn>(sym(c"cuCtxPushCurrent_v2")?),
                pop: std::mem::transmute::<*mut c_void, PopFn>(sym(c"cuCtxPopCurrent_v2")?),
                info: std::mem::transmute::<*mut c_void, InfoFn>(sym(c"cuMemGetInfo_v2")?),
            })
        }
    })();
    FOUND.get_or_init(|| found).as_ref()
}

/// Device memory in use on the devices whose primary context this process has made active
/// (the driver's own figure, `cuMemGetInfo`: used = total - free, every process on the device
/// counted); `None` when CUDA is not loaded or no device is in use. A context is only borrowed
/// (retained and pushed on the calling thread, then popped and released): none is created.
pub fn memory_in_use() -> Option<u64> {
    let m = mem_info()?;
    let mut used = None;
    // SAFETY: the driver's functions with their signatures; every pointer is to a local.
    unsafe {
        let mut n = 0;
        if (m.count)(&mut n) != 0 {
            return None;
        }
        for dev in 0..n.clamp(0, 64) {
            let (mut flags, mut active) = (0u32, 0);
            if (m.state)(dev, &mut flags, &mut active) != 0 || active == 0 {
                continue;
            }
            let mut ctx = std::ptr::null_mut();
            if (m.retain)(&mut ctx, dev) != 0 {
                continue;
            }
            if (m.push)(ctx) == 0 {
                let (mut free, mut total) = (0usize, 0usize);
                if (m.info)(&mut free, &mut total) == 0 {
                    *used.get_or_insert(0u64) += total.saturating_sub(free) as u64;
                }
                let mut popped = std::ptr::null_mut();
                (m.pop)(&mut popped);
            }
            (m.release)(dev);
        }
    }
    used
}
