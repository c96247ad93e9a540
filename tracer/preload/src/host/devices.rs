//! The GPUs' properties from the CUDA driver (the trace's `deviceProperties`), asked once the
//! driver has finished initialising.

use cuprof_core::trace_writer::DeviceProps;
use std::ffi::{c_char, c_int, CStr};

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
