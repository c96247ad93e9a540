//! CUPTI's subscriber callbacks: the API calls cuprof listens to, and what each one does.
//! Window ranges (cudaProfilerStart/Stop), flushes before the program tears CUDA down
//! (cudaDeviceReset, context destruction), allocation stacks (`--with-stack`), the stream
//! handles of stream-ordered allocations (device memory recorded: the snapshot writes them).

use crate::cupti::libcupti::{self as cupti, ApiCall, Callback, Cupti, STREAM_ORDERED_ALLOCATIONS};
use crate::host::process::guard;
use crate::pipe::tracer::running;
use crate::window::boundaries as window;
use cuprof_core::event::ApiDomain::{self, Driver, Runtime};
use cuprof_core::window::RangeSource;
use cupti_sys::CUpti_driver_api_trace_cbid_enum as Drv;
use cupti_sys::CUpti_runtime_api_trace_cbid_enum as Rt;
use std::ffi::c_void;

/// Allocation and free calls whose stacks `--with-stack` records: runtime (PyTorch's caching
/// allocator uses cudaMalloc/cudaFree) and driver. Frees get theirs so the memory viewer shows
/// where a block was released (without one it reads as freed before recording began).
const ALLOCATION_CALLS: [(ApiDomain, u32); 13] = [
    (Runtime, Rt::CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020.0),
    (Runtime, Rt::CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020.0),
    (
        Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_ptsz_v11020.0,
    ),
    (Driver, Drv::CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2.0),
    (Driver, Drv::CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync.0),
    (Runtime, Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020.0),
    (
        Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020.0,
    ),
    (
        Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020.0,
    ),
    (
        Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020.0,
    ),
    (
        Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000.0,
    ),
    (Driver, Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2.0),
    (Driver, Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync.0),
    (Driver, Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged.0),
];

const PROFILER_START: [(ApiDomain, u32); 2] = [
    (
        Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000.0,
    ),
    (Driver, Drv::CUPTI_DRIVER_TRACE_CBID_cuProfilerStart.0),
];
const PROFILER_STOP: [(ApiDomain, u32); 2] = [
    (
        Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000.0,
    ),
    (Driver, Drv::CUPTI_DRIVER_TRACE_CBID_cuProfilerStop.0),
];
const DEVICE_RESET: (ApiDomain, u32) = (
    Runtime,
    Rt::CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020.0,
);

/// Subscribes cuprof to CUPTI with [`on_callback`].
pub fn subscribe(cupti: &Cupti) -> Result<(), crate::host::error::StartError> {
    cupti.subscribe(on_callback)
}

/// Turns on the callbacks cuprof acts on: allocation stacks only with `with_stacks`, the
/// streams of stream-ordered allocations only with `memory` (device memory recorded).
pub fn enable(cupti: &Cupti, with_stacks: bool, memory: bool) {
    for (domain, cbid) in PROFILER_START.into_iter().chain(PROFILER_STOP) {
        cupti.enable_api_callback(domain, cbid);
    }
    cupti.enable_api_callback(DEVICE_RESET.0, DEVICE_RESET.1);
    cupti.enable_context_destroy_callback();
    if with_stacks {
        for (domain, cbid) in ALLOCATION_CALLS {
            cupti.enable_api_callback(domain, cbid);
        }
    }
    if memory {
        for (domain, cbid) in STREAM_ORDERED_ALLOCATIONS {
            cupti.enable_api_callback(domain, cbid);
        }
    }
}

unsafe extern "C" fn on_callback(
    _user: *mut c_void,
    domain: cupti_sys::CUpti_CallbackDomain,
    cbid: cupti_sys::CUpti_CallbackId,
    data: *const c_void,
) {
    guard((), || {
        let Some(t) = running() else { return };
        // SAFETY: CUPTI's own arguments, during its callback.
        match unsafe { cupti::read_callback(domain, cbid, data) } {
            Callback::Api(call) => on_api_call(t, call),
            // Records still inside CUPTI would be lost with the context: ask for them now.
            Callback::ContextDestroying => t.flush_cupti(true),
            Callback::Other => {}
        }
    })
}

fn on_api_call(t: &crate::pipe::tracer::Tracer, call: ApiCall) {
    if !call.entering {
        return;
    }
    let id = (call.domain, call.cbid);
    // At the call's entry, not its exit: the stack and stream must reach the writer before
    // the allocation's activity record, which CUPTI may hand over (a flush on another
    // thread) before the exit callback has run.
    // A stream-ordered allocation's callback is on without stacks too (for its stream).
    if ALLOCATION_CALLS.contains(&id) && t.options.with_stack {
        t.channel
            .send_stack(crate::sources::stacks::capture(call.correlation));
    }
    // A handle of 0 (a default stream) is what the snapshot writes when none came: no message.
    if let Some(stream) = call.stream_argument.filter(|&s| s != 0) {
        t.channel.send_allocation_stream(call.correlation, stream);
    }
    if PROFILER_START.contains(&id) {
        window::range_start(t, RangeSource::CudaProfilerApi);
    } else if PROFILER_STOP.contains(&id) {
        window::range_stop(t, RangeSource::CudaProfilerApi, Some(call.correlation));
    } else if id == DEVICE_RESET {
        // The program is about to tear CUDA down: records still inside CUPTI would be lost.
        t.flush_cupti(true);
    }
}
