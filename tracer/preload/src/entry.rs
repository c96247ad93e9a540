//! The C entry points of libcuprof.so. Each one catches panics (`guard`): a panic unwinding
//! into C would abort the host program.

use crate::{control, guard, hooks, phase, say, set_phase, Phase};
use cuprof_core::config::Config;
use cuprof_core::trace_writer::DeviceProps;
use cuprof_core::window::{Capture, RangeSource};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::OnceLock;

static CONFIG: OnceLock<Config> = OnceLock::new();
static STEPS_EXPECTED: AtomicBool = AtomicBool::new(false);
static WARNINGS: OnceLock<Vec<String>> = OnceLock::new();
static STARTED: AtomicBool = AtomicBool::new(false);

pub fn expects_steps() -> bool {
    STEPS_EXPECTED.load(Relaxed)
}

/// This library's own path, for pointing the injection variables at it.
fn own_path() -> Option<CString> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr on a function of this library fills `info` with static strings.
    let ok = unsafe { libc::dladdr(own_path as *const c_void, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_owned())
}

fn env_is(name: &str, value: &CStr) -> bool {
    std::env::var_os(name).is_some_and(|v| v.as_encoded_bytes() == value.to_bytes())
}

/// Runs when the library is loaded (LD_PRELOAD: before main; injection: inside cuInit).
/// Under the dynamic loader's lock: nothing here may block or start threads.
#[ctor::ctor(unsafe)]
fn on_load() {
    guard((), || {
        let (cfg, warnings) = Config::from_env();
        hooks::set_quiet(cfg.quiet);
        if !cfg.enabled {
            // Only a malformed CUPROF_ENABLED gets here with something to say. Said once per
            // process tree (a `python3` may be a shim that starts dozens of processes): the
            // marker is inherited by the children.
            if !warnings.is_empty() && std::env::var_os("CUPROF_WARNED").is_none() {
                for w in &warnings {
                    say(w.trim_start_matches("cuprof: "));
                }
                // SAFETY: setenv with valid C strings, before the program's threads exist.
                unsafe { libc::setenv(c"CUPROF_WARNED".as_ptr(), c"1".as_ptr(), 1) };
            }
            return;
        }
        // Said at CUDA initialisation, once per CUDA process, not in every helper process.
        let _ = WARNINGS.set(warnings);
        if !cfg.traces_this_process() {
            return;
        }
        // A panic inside cuprof is caught at its entry points (`guard`); the default hook would
        // still print it into the host's stderr. This hook is cuprof's own (its own copy of std),
        // so a Rust host keeps its hook.
        std::panic::set_hook(Box::new(|info| {
            tracing::error!("cuprof: internal error: {info}")
        }));
        let Some(me) = own_path() else { return };
        // SAFETY: setenv with valid C strings; the constructor runs before the program's own
        // threads, so nothing reads the environment concurrently.
        unsafe {
            for var in [c"CUDA_INJECTION64_PATH", c"NVTX_INJECTION64_PATH"] {
                let name = var.to_str().unwrap_or_default();
                match std::env::var_os(name) {
                    None => {
                        libc::setenv(var.as_ptr(), me.as_ptr(), 1);
                    }
                    Some(_) if env_is(name, &me) => {}
                    Some(other) => say(&format!(
                        "{name} is already set to {} (another tool?); cuprof leaves it alone{}",
                        other.to_string_lossy(),
                        if name.starts_with("NVTX") {
                            ": NVTX ranges will not be traced"
                        } else {
                            ""
                        }
                    )),
                }
            }
        }
        STEPS_EXPECTED.store(matches!(cfg.capture, Capture::Steps(_)), Relaxed);
        let _ = CONFIG.set(cfg);
        set_phase(Phase::Armed);
    })
}

/// libcuda calls this inside `cuInit` when CUDA_INJECTION64_PATH names this library: the moment
/// CUDA starts in this process, and so the moment cuprof starts.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    guard(1, || {
        if hooks::forked_child() {
            return 1;
        }
        if phase() == Phase::Inert && CONFIG.get().is_none() {
            // Loaded through CUDA_INJECTION64_PATH alone: tracing is on unless CUPROF_ENABLED=0.
            if std::env::var("CUPROF_ENABLED").is_ok_and(|v| v.trim() == "0") {
                return 1;
            }
            // Parse as if CUPROF_ENABLED=1, so that the other CUPROF_* variables count.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let (cfg, warnings) = Config::from_lookup(
                |k| {
                    if k == "CUPROF_ENABLED" {
                        Some("1".into())
                    } else {
                        std::env::var_os(k)
                    }
                },
                now,
            );
            let _ = WARNINGS.set(warnings);
            if !cfg.traces_this_process() {
                return 1;
            }
            STEPS_EXPECTED.store(matches!(cfg.capture, Capture::Steps(_)), Relaxed);
            let _ = CONFIG.set(cfg);
            set_phase(Phase::Armed);
        }
        if phase() != Phase::Armed || STARTED.swap(true, Relaxed) {
            return 1;
        }
        let Some(cfg) = CONFIG.get() else { return 1 };
        for w in WARNINGS.get().into_iter().flatten() {
            say(w.trim_start_matches("cuprof: "));
        }
        if let Err(e) = crate::start::start(cfg) {
            say(&e);
            if let Some(rf) = &cfg.report_file {
                let note =
                    cuprof_core::config::report::ReportLine::Note(format!("not traced: {e}"));
                let _ = cuprof_core::config::report::append(rf, &note);
            }
            set_phase(Phase::Inert);
        }
        1
    })
}

/// The NVTX3 loader calls this on the program's first NVTX call (NVTX_INJECTION64_PATH).
///
/// # Safety
/// Called by the NVTX loader with its export-table function.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtx2(
    get_export_table: Option<unsafe extern "C" fn(u32) -> *const c_void>,
) -> c_int {
    guard(0, || match get_export_table {
        // SAFETY: the loader's export-table function.
        Some(f) if phase() != Phase::Inert => unsafe { crate::nvtx::initialize(f) },
        _ => 0,
    })
}

/// Marks a step boundary: the running step ends and the next begins (torch's `prof.step()`).
/// From Python: `ctypes.CDLL(None).cuprof_step()`.
#[no_mangle]
pub extern "C" fn cuprof_step() {
    guard((), control::api_step)
}

/// Adds `n` units of work (tokens, samples) to the running step, for throughput figures.
#[no_mangle]
pub extern "C" fn cuprof_step_tokens(n: u64) {
    guard((), || control::add_work(n as f64))
}

/// Starts a capture range (with CUPROF_CAPTURE_RANGE=cuprof).
#[no_mangle]
pub extern "C" fn cuprof_start() {
    guard((), || {
        if CONFIG.get().is_some() {
            control::range_start(RangeSource::Cuprof)
        }
    })
}

/// Ends a capture range (with CUPROF_CAPTURE_RANGE=cuprof).
#[no_mangle]
pub extern "C" fn cuprof_stop() {
    guard((), || {
        if CONFIG.get().is_some() {
            control::range_stop(RangeSource::Cuprof, None)
        }
    })
}

/// Another CUPTI client is starting (torch.profiler, a second tracer): CUPTI has one
/// subscriber and one set of buffer callbacks per process, so cuprof finishes its trace and
/// steps aside, and the other tool gets a working CUPTI.
fn step_aside(who: &str) {
    if phase() != Phase::Running || hooks::forked_child() {
        return;
    }
    say(&format!(
        "another profiler in this process called {who} (torch.profiler?): cuprof finishes its trace now and steps aside"
    ));
    crate::writer::shutdown();
    if let Some(t) = crate::TRACER.get() {
        let sub = crate::start::SUBSCRIBER.swap(std::ptr::null_mut(), Relaxed);
        if !sub.is_null() {
            // SAFETY: our own subscriber handle, unsubscribed once.
            unsafe { (t.cupti.cuptiUnsubscribe)(sub) };
        }
    }
    set_phase(Phase::Aside);
}

/// The real libcupti function `name`, for forwarding interposed calls.
fn real(name: &CStr) -> *mut c_void {
    if let Some(t) = crate::TRACER.get() {
        if let Some(p) = t.cupti.raw_symbol(name) {
            return p;
        }
    }
    for so in [c"libcupti.so.13", c"libcupti.so.12", c"libcupti.so"] {
        // SAFETY: RTLD_NOLOAD only finds an already loaded copy.
        let h = unsafe { libc::dlopen(so.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if !h.is_null() {
            // SAFETY: live handle, valid name.
            let p = unsafe { libc::dlsym(h, name.as_ptr()) };
            if !p.is_null() {
                return p;
            }
        }
    }
    // SAFETY: RTLD_NEXT lookup by name.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

use crate::cupti::ERROR_NOT_INITIALIZED as CUPTI_ERROR_NOT_INITIALIZED;

/// Interposed `cuptiSubscribe`: a second CUPTI client is starting.
///
/// # Safety
/// Same contract as CUPTI's `cuptiSubscribe`.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut *mut c_void,
    callback: *const c_void,
    userdata: *mut c_void,
) -> u32 {
    guard(CUPTI_ERROR_NOT_INITIALIZED, || {
        step_aside("cuptiSubscribe");
        let f = real(c"cuptiSubscribe");
        if f.is_null() {
            return CUPTI_ERROR_NOT_INITIALIZED;
        }
        // SAFETY: forwarding to CUPTI's function of the same signature.
        unsafe {
            let f: unsafe extern "C" fn(*mut *mut c_void, *const c_void, *mut c_void) -> u32 =
                std::mem::transmute(f);
            f(subscriber, callback, userdata)
        }
    })
}

/// Interposed `cuptiSubscribe_v2` (CUPTI 13+): a second CUPTI client is starting.
///
/// # Safety
/// Same contract as CUPTI's `cuptiSubscribe_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe_v2(
    subscriber: *mut *mut c_void,
    callback: *const c_void,
    userdata: *mut c_void,
    params: *mut c_void,
) -> u32 {
    guard(CUPTI_ERROR_NOT_INITIALIZED, || {
        step_aside("cuptiSubscribe_v2");
        let f = real(c"cuptiSubscribe_v2");
        if f.is_null() {
            return CUPTI_ERROR_NOT_INITIALIZED;
        }
        // SAFETY: forwarding to CUPTI's function of the same signature.
        unsafe {
            let f: unsafe extern "C" fn(
                *mut *mut c_void,
                *const c_void,
                *mut c_void,
                *mut c_void,
            ) -> u32 = std::mem::transmute(f);
            f(subscriber, callback, userdata, params)
        }
    })
}

/// Interposed `cuptiActivityRegisterCallbacks`: a second activity client is starting.
///
/// # Safety
/// Same contract as CUPTI's `cuptiActivityRegisterCallbacks`.
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    requested: *const c_void,
    completed: *const c_void,
) -> u32 {
    guard(CUPTI_ERROR_NOT_INITIALIZED, || {
        step_aside("cuptiActivityRegisterCallbacks");
        let f = real(c"cuptiActivityRegisterCallbacks");
        if f.is_null() {
            return CUPTI_ERROR_NOT_INITIALIZED;
        }
        // SAFETY: forwarding to CUPTI's function of the same signature.
        unsafe {
            let f: unsafe extern "C" fn(*const c_void, *const c_void) -> u32 =
                std::mem::transmute(f);
            f(requested, completed)
        }
    })
}

type CuResult = c_int;

/// Device properties from the driver, by ordinal (the `deviceProperties` of the trace).
pub fn device_properties() -> Vec<DeviceProps> {
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
