//! Bringing CUPTI up at CUDA initialisation, in the order the design note gives: load,
//! version, subscribe, thread ids, buffer callbacks, API filter, callbacks, kinds.

use crate::cupti::{self, Cupti, SUCCESS};
use crate::{say, Tracer};
use cuprof_core::config::Config;
use cuprof_core::decode::{kind, Decoder, LayoutFamily};
use cuprof_core::window::RangeSource;
use cupti_sys::CUpti_driver_api_trace_cbid_enum as Drv;
use cupti_sys::CUpti_runtime_api_trace_cbid_enum as Rt;
use std::ffi::c_void;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Allocation and free calls whose stacks `--with-stack` records: runtime (PyTorch's caching
/// allocator uses cudaMalloc/cudaFree) and driver. Frees get theirs so the memory viewer shows
/// where a block was released (without one it reads as freed before recording began).
const ALLOCATION_CALLS: [(u32, u32); 13] = [
    (
        cupti::DOMAIN_RUNTIME,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020.0,
    ),
    (
        cupti::DOMAIN_RUNTIME,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020.0,
    ),
    (
        cupti::DOMAIN_RUNTIME,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020.0,
    ),
    (
        cupti::DOMAIN_DRIVER,
        Drv::CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2.0,
    ),
    (
        cupti::DOMAIN_DRIVER,
        Drv::CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync.0,
    ),
    (
        cupti::DOMAIN_RUNTIME,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020.0,
    ),
    (
        cupti::DOMAIN_RUNTIME,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020.0,
    ),
    (
        cupti::DOMAIN_RUNTIME,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020.0,
    ),
    (
        cupti::DOMAIN_RUNTIME,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020.0,
    ),
    (
        cupti::DOMAIN_RUNTIME,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000.0,
    ),
    (
        cupti::DOMAIN_DRIVER,
        Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2.0,
    ),
    (
        cupti::DOMAIN_DRIVER,
        Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync.0,
    ),
    (
        cupti::DOMAIN_DRIVER,
        Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged.0,
    ),
];

/// Messages the channel holds at least: each is one CUPTI buffer's batch or one NVTX range.
const CHANNEL_CAPACITY: usize = 4096;

/// Our CUPTI subscriber handle (null when not subscribed).
pub static SUBSCRIBER: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// CUPROF_LOG=error|warn|info|debug|trace: cuprof's own diagnostics on stderr (CUPTI setup,
/// window transitions, flushes, files). Off by default: the host's stderr is not ours.
fn init_logging() {
    let level = match std::env::var("CUPROF_LOG").as_deref().map(str::trim) {
        Ok("error") => tracing::Level::ERROR,
        Ok("warn") => tracing::Level::WARN,
        Ok("info") => tracing::Level::INFO,
        Ok("debug") => tracing::Level::DEBUG,
        Ok("trace") => tracing::Level::TRACE,
        _ => return,
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_target(false)
        .try_init();
}

fn kinds(cfg: &Config) -> Vec<u32> {
    let mut k = Vec::new();
    if cfg.activities.gpu {
        k.extend([
            kind::CONCURRENT_KERNEL,
            kind::MEMCPY,
            kind::MEMSET,
            kind::SYNCHRONIZATION,
        ]);
    }
    if cfg.activities.cpu {
        k.extend(crate::api::api_kinds(cfg.api));
        k.push(kind::EXTERNAL_CORRELATION);
    }
    k
}

/// The subscriber callback: window ranges (cudaProfilerStart/Stop), flushes before the
/// program tears CUDA down (cudaDeviceReset, context destruction), allocation stacks
/// (`--with-stack`).
unsafe extern "C" fn on_callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    crate::guard((), || {
        if data.is_null() {
            return;
        }
        let runtime = domain == cupti::DOMAIN_RUNTIME;
        if runtime || domain == cupti::DOMAIN_DRIVER {
            // SAFETY: for API domains CUPTI passes a CUpti_CallbackData.
            let site = unsafe { (*(data as *const cupti::CallbackData)).callback_site };
            let start = (runtime && cbid == Rt::CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000.0)
                || (!runtime && cbid == Drv::CUPTI_DRIVER_TRACE_CBID_cuProfilerStart.0);
            let stop = (runtime && cbid == Rt::CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000.0)
                || (!runtime && cbid == Drv::CUPTI_DRIVER_TRACE_CBID_cuProfilerStop.0);
            let reset = runtime && cbid == Rt::CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020.0;
            // At the call's entry, not its exit: the stack must reach the writer before the
            // allocation's activity record, which CUPTI may hand over (a flush on another
            // thread) before the exit callback has run.
            if site == cupti::API_ENTER && ALLOCATION_CALLS.contains(&(domain, cbid)) {
                // SAFETY: as above.
                let correlation = unsafe { (*(data as *const cupti::CallbackData)).correlation_id };
                crate::stacks::capture(correlation);
            } else if site == cupti::API_ENTER {
                if start {
                    crate::control::range_start(RangeSource::CudaProfilerApi);
                } else if stop {
                    // SAFETY: as above.
                    let correlation =
                        unsafe { (*(data as *const cupti::CallbackData)).correlation_id };
                    crate::control::range_stop(RangeSource::CudaProfilerApi, Some(correlation));
                } else if reset {
                    crate::writer::flush_before_teardown();
                }
            }
        } else if domain == cupti::DOMAIN_RESOURCE {
            crate::writer::flush_before_teardown();
        }
    })
}

/// Loads and configures CUPTI and starts the writer. Errors are one line for stderr.
pub fn start(cfg: &Config) -> Result<(), String> {
    init_logging();
    let explicit = cfg
        .cupti_path
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned());
    let (cupti, api_switches) = cupti::load(explicit.as_deref())?;
    let mut version = 0u32;
    // SAFETY: writes one u32.
    unsafe { (cupti.cuptiGetVersion)(&mut version) };
    let family = LayoutFamily::from_version(version).map_err(|e| e.to_string())?;
    tracing::debug!(path = %cupti.path, version, ?family, "libcupti loaded");
    subscribe(&cupti)?;
    // SAFETY: plain CUPTI calls; the callbacks are ours and live forever (nodelete).
    unsafe {
        (cupti.cuptiSetThreadIdType)(cupti::THREAD_ID_TYPE_SYSTEM);
        let r = (cupti.cuptiActivityRegisterCallbacks)(
            crate::buffers::requested,
            crate::buffers::completed,
        );
        if r != SUCCESS {
            return Err(format!(
                "CUPTI refused the activity callbacks: {}; tracing is off",
                cupti.result_string(r)
            ));
        }
    }
    let names = crate::resolve::Names::new(
        |d, c| cupti.callback_name(d, c),
        Rt::CUPTI_RUNTIME_TRACE_CBID_SIZE.0,
        Drv::CUPTI_DRIVER_TRACE_CBID_SIZE.0,
    );
    let sub = SUBSCRIBER.load(Relaxed);
    // SAFETY: enabling our subscriber's callbacks; integer arguments.
    unsafe {
        for cbid in [
            Rt::CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000.0,
            Rt::CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000.0,
            Rt::CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020.0,
        ] {
            (cupti.cuptiEnableCallback)(1, sub, cupti::DOMAIN_RUNTIME, cbid);
        }
        for cbid in [
            Drv::CUPTI_DRIVER_TRACE_CBID_cuProfilerStart.0,
            Drv::CUPTI_DRIVER_TRACE_CBID_cuProfilerStop.0,
        ] {
            (cupti.cuptiEnableCallback)(1, sub, cupti::DOMAIN_DRIVER, cbid);
        }
        // CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING
        (cupti.cuptiEnableCallback)(1, sub, cupti::DOMAIN_RESOURCE, 2);
        if cfg.with_stack && cfg.activities.mem {
            for (domain, cbid) in ALLOCATION_CALLS {
                (cupti.cuptiEnableCallback)(1, sub, domain, cbid);
            }
        }
    }
    // Queued/submitted times on kernel records (Kineto's `queued` arg) exist only when asked for,
    // and cost time on every launch (about 1.2 us on an H100): only with CUPROF_QUEUED.
    if let Some(f) = cupti
        .raw_symbol(c"cuptiActivityEnableLatencyTimestamps")
        .filter(|_| cfg.queued)
    {
        // SAFETY: CUPTI's `CUptiResult cuptiActivityEnableLatencyTimestamps(uint8_t)`.
        unsafe {
            let f: unsafe extern "C" fn(u8) -> u32 = std::mem::transmute(f);
            f(1);
        }
    }
    let mut memory_kinds = Vec::new();
    if cfg.activities.mem {
        memory_kinds.push(kind::MEMORY2);
    }
    for &k in &memory_kinds {
        // SAFETY: plain CUPTI call. Memory records stay on for the whole run: a snapshot needs
        // every live allocation, and allocations are rare in caching allocators.
        let r = unsafe { (cupti.cuptiActivityEnable)(k) };
        if r != SUCCESS {
            say(&format!(
                "CUPTI refused device-memory records: {}",
                cupti.result_string(r)
            ));
        }
    }
    let api = crate::api::ApiPlan::new(cfg, api_switches, &names);
    let kinds = kinds(cfg);
    tracing::debug!(kinds = ?kinds, memory = cfg.activities.mem, with_stack = cfg.with_stack, api = ?cfg.api, per_call = api.is_some(), "activity kinds");
    let pool = crate::pool::Pool::new(cfg.buffer_size, cfg.buffers);
    // A flush from the writer thread (periodic, or to reclaim buffers) sends every partly filled
    // buffer into the writer's own channel before it can drain any: room for all, twice.
    let capacity = CHANNEL_CAPACITY.max(2 * pool.max_out());
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let tracer = Tracer {
        api,
        cupti_version: version,
        decoder: Mutex::new(Decoder::new(family)),
        names: Mutex::new(names),
        pool,
        tx,
        counters: Arc::new(Default::default()),
        kinds,
        cpu_activity: cfg.activities.cpu,
        torch_ops: (cfg.activities.cpu && cfg.torch_ops).then_some(cfg.record_shapes),
        with_stack: cfg.with_stack,
        dump_dir: cfg.dump_buffers.clone(),
        pid: std::process::id(),
        report_file: cfg.report_file.clone(),
        kinds_on: Default::default(),
        cupti,
    };
    crate::writer::spawn(cfg, tracer, rx)
}

/// CUpti_SubscriberParams (CUPTI 13.0+): names cuprof to other tools and learns who holds CUPTI.
#[repr(C)]
struct SubscriberParams {
    struct_size: usize,
    subscriber_name: *const std::ffi::c_char,
    old_subscriber_name: *mut std::ffi::c_char,
    old_subscriber_size: usize,
}

type SubscribeV2 = unsafe extern "C" fn(
    *mut *mut c_void,
    cupti::CallbackFunc,
    *mut c_void,
    *mut SubscriberParams,
) -> u32;

fn subscribe(cupti: &Cupti) -> Result<(), String> {
    let mut sub: *mut c_void = std::ptr::null_mut();
    let mut holder = [0 as std::ffi::c_char; 256];
    let r = match cupti.raw_symbol(c"cuptiSubscribe_v2") {
        Some(f) => {
            let mut params = SubscriberParams {
                struct_size: std::mem::size_of::<SubscriberParams>(),
                subscriber_name: c"cuprof".as_ptr(),
                old_subscriber_name: holder.as_mut_ptr(),
                old_subscriber_size: holder.len(),
            };
            // SAFETY: CUPTI's cuptiSubscribe_v2; params and its buffer outlive the call.
            unsafe {
                let f: SubscribeV2 = std::mem::transmute(f);
                f(&mut sub, on_callback, std::ptr::null_mut(), &mut params)
            }
        }
        // SAFETY: CUPTI writes the handle; the callback lives forever.
        None => unsafe { (cupti.cuptiSubscribe)(&mut sub, on_callback, std::ptr::null_mut()) },
    };
    // SAFETY: the buffer is zeroed and CUPTI writes at most its size, NUL-terminated.
    let holder = unsafe { std::ffi::CStr::from_ptr(holder.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let who = if holder.is_empty() {
        "e.g. nsys, torch.profiler or another tracer".to_string()
    } else {
        format!("held by {holder:?}")
    };
    match r {
        SUCCESS => {
            SUBSCRIBER.store(sub, Relaxed);
            Ok(())
        }
        cupti::ERROR_MULTIPLE_SUBSCRIBERS => Err(format!(
            "another profiler already holds CUPTI in this process ({who}; {}); cuprof stays passive and the program runs untraced by it",
            cupti.result_string(r)
        )),
        cupti::ERROR_INSUFFICIENT_PRIVILEGES => Err(format!(
            "CUPTI refused: {} (GPU profiling may be restricted to admin users: NVreg_RestrictProfilingToAdminUsers); tracing is off",
            cupti.result_string(r)
        )),
        _ => Err(format!("CUPTI subscribe failed: {}; tracing is off", cupti.result_string(r))),
    }
}
