//! A libcupti test double (and a tiny libcuda).
//!
//! One cdylib, `libcupti_double.so` (soname `libcuda.so.1`), that real test processes load
//! instead of NVIDIA's libraries. It exports:
//! - the CUPTI entry points the tracer calls, with CUPTI's signatures and documented
//!   semantics ([`cupti`]): subscriber callbacks, activity kinds, buffer request/complete
//!   callbacks with per-thread buffers (13.0) or one shared buffer (12.x), flushes,
//!   dropped-record counts, external correlation;
//! - a fake libcuda subset ([`cuda`]) whose `cuInit` performs NVIDIA's injection
//!   (`CUDA_INJECTION64_PATH` -> `InitializeInjection`);
//! - `double_*` control functions that test programs call to simulate CUDA calls on the
//!   calling thread, plus counters to assert on.
//!
//! Records are written by explicit byte offsets ([`layout`]), not via bindgen structs, so
//! the double checks the tracer's decoder independently.
//!
//! Environment: `CUPTI_DOUBLE_VERSION` (`13` default = 130001, `12` = 28, or a raw
//! number), `CUPTI_DOUBLE_DEVICES` (default 1), `CUPTI_DOUBLE_FAIL` (error injection,
//! e.g. `subscribe=39,enable=35,enable.10=35,register=15,version=15`),
//! `CUDA_INJECTION64_PATH` (read by `cuInit`).
//!
//! Every export is a C ABI entry point whose contract is the one of the CUPTI/CUDA header
//! (or of this file's docs for `double_*`); pointer arguments must be valid as C callers
//! would pass them.
#![allow(clippy::missing_safety_doc)]

mod control;
pub mod cuda;
pub mod cupti;
pub mod layout;
mod names;
mod panic_guard;
pub mod replay;
mod second;
pub mod state;

#[cfg(test)]
mod tests;

use panic_guard::guard;
use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::Ordering::Relaxed;

fn bytes_of(s: *const c_char, default: &[u8]) -> Vec<u8> {
    if s.is_null() {
        default.to_vec()
    } else {
        // SAFETY: a non-null C string from the caller, NUL-terminated, alive for the call.
        unsafe { CStr::from_ptr(s) }.to_bytes().to_vec()
    }
}

// ------------------------------------------------------------------ simulated CUDA calls

fn kernel_launch(
    name: *const c_char,
    device: u32,
    stream: u32,
    grid: [c_int; 3],
    block: [c_int; 3],
    duration: u64,
) -> control::KernelLaunch {
    control::KernelLaunch {
        name: state::intern(&bytes_of(name, b"kernel")),
        device,
        stream,
        grid,
        block,
        duration,
    }
}

/// cudaLaunchKernel of `name` (mangled) on `device`/`stream`: runtime callbacks, a RUNTIME
/// API record (cbid 211), EXTERNAL_CORRELATION records, a kernel record. Returns the
/// correlation id.
#[no_mangle]
pub unsafe extern "C" fn double_launch_kernel(
    name: *const c_char,
    device: u32,
    stream: u32,
    gx: c_int,
    gy: c_int,
    gz: c_int,
    bx: c_int,
    by: c_int,
    bz: c_int,
    duration_ns: u64,
) -> u32 {
    guard(0, || {
        let l = kernel_launch(
            name,
            device,
            stream,
            [gx, gy, gz],
            [bx, by, bz],
            duration_ns,
        );
        control::launch_kernel(&l, true).0
    })
}

/// cuLaunchKernel (driver cbid 307) of `name`, as a program launching through the driver API
/// directly does (Triton): driver callbacks, a DRIVER API record (when that kind and cbid are
/// on), EXTERNAL_CORRELATION records, a kernel record. Returns the correlation id.
#[no_mangle]
pub unsafe extern "C" fn double_driver_launch_kernel(
    name: *const c_char,
    device: u32,
    stream: u32,
    gx: c_int,
    gy: c_int,
    gz: c_int,
    bx: c_int,
    by: c_int,
    bz: c_int,
    duration_ns: u64,
) -> u32 {
    guard(0, || {
        let l = kernel_launch(
            name,
            device,
            stream,
            [gx, gy, gz],
            [bx, by, bz],
            duration_ns,
        );
        control::launch_kernel_driver(&l).0
    })
}

/// cudaGraphLaunch (cbid 311) of a graph called `name` with `n_kernels` kernel nodes, all
/// named `name`, sharing the launch's correlation id; graphId is fixed per graph name,
/// graphNodeId = 1..=n. Returns the correlation id.
#[no_mangle]
pub unsafe extern "C" fn double_launch_graph(
    device: u32,
    stream: u32,
    n_kernels: u32,
    name: *const c_char,
    duration_ns: u64,
) -> u32 {
    guard(0, || {
        let name = bytes_of(name, b"graph_kernel");
        let l = control::KernelLaunch {
            name: state::intern(&name),
            device,
            stream,
            grid: [1, 1, 1],
            block: [128, 1, 1],
            duration: duration_ns,
        };
        control::launch_graph(&l, &name, n_kernels)
    })
}

/// An API call that makes no GPU work (a query such as cudaGetDevice, cbid 17, or the driver's
/// cuCtxGetCurrent, 304): callbacks and, if switched on, its API record. Returns the
/// correlation id.
#[no_mangle]
pub extern "C" fn double_api_call(domain: u32, cbid: u32, duration_ns: u64) -> u32 {
    guard(0, || {
        let call = control::ApiCall::begin(domain, cbid, std::ptr::null(), true);
        call.record(call.start + duration_ns);
        let corr = call.corr;
        call.finish();
        corr
    })
}

/// cudaMemcpy (cbid 31) or cudaMemcpyAsync (41) with a nested driver call: the MEMCPY
/// record has correlationId = the driver call's id and runtimeCorrelationId = the runtime
/// call's id, which is returned.
#[no_mangle]
pub extern "C" fn double_memcpy(
    copy_kind: u32,
    src_kind: u32,
    dst_kind: u32,
    bytes: u64,
    device: u32,
    stream: u32,
    duration_ns: u64,
    is_async: c_int,
) -> u32 {
    guard(0, || {
        control::memcpy(&control::Memcpy {
            copy_kind,
            src_kind,
            dst_kind,
            bytes,
            device,
            stream,
            duration: duration_ns,
            is_async: is_async != 0,
        })
    })
}

/// cudaMemsetAsync (cbid 51) + a MEMSET record on device memory. Returns the correlation id.
#[no_mangle]
pub extern "C" fn double_memset(
    bytes: u64,
    value: u32,
    device: u32,
    stream: u32,
    duration_ns: u64,
) -> u32 {
    guard(0, || {
        control::memset(bytes, value, device, stream, duration_ns)
    })
}

/// 1 cudaEventSynchronize, 2 cudaStreamWaitEvent, 3 cudaStreamSynchronize,
/// 4 cudaDeviceSynchronize: API record + SYNCHRONIZATION record. Returns the correlation
/// id (0 for an unknown type).
#[no_mangle]
pub extern "C" fn double_sync(sync_type: u32, stream: u32, duration_ns: u64) -> u32 {
    guard(0, || control::sync(sync_type, stream, duration_ns, None))
}

/// An event sync (1 cudaEventSynchronize, 2 cudaStreamWaitEvent on `stream`) waiting on the
/// CUDA event `event_id`. Returns the correlation id.
#[no_mangle]
pub extern "C" fn double_wait_event(
    sync_type: u32,
    stream: u32,
    event_id: u32,
    duration_ns: u64,
) -> u32 {
    guard(0, || {
        control::sync(sync_type, stream, duration_ns, Some(event_id))
    })
}

/// cudaEventRecord of the CUDA event `event_id` on `stream`: API record + CUDA_EVENT record.
/// Returns the correlation id.
#[no_mangle]
pub extern "C" fn double_event_record(stream: u32, event_id: u32) -> u32 {
    guard(0, || control::event_record(stream, event_id))
}

/// cudaMalloc: API record + MEMORY2 allocation record. Returns the device address.
#[no_mangle]
pub extern "C" fn double_malloc(device: u32, bytes: u64) -> u64 {
    guard(0, || control::malloc(device, None, bytes))
}

/// cudaFree: API record + MEMORY2 release record.
#[no_mangle]
pub extern "C" fn double_free(device: u32, address: u64) {
    guard((), || control::free(device, None, address))
}

/// cudaMallocAsync from the device's pool on the stream the program knows as
/// `stream_handle` (its `cudaStream_t`, passed in the callbacks' parameters) and CUPTI as
/// `stream_id` (in the records). Returns the device address.
#[no_mangle]
pub extern "C" fn double_malloc_async(
    device: u32,
    stream_id: u32,
    stream_handle: u64,
    bytes: u64,
) -> u64 {
    let stream = control::Stream {
        id: stream_id,
        handle: stream_handle,
    };
    guard(0, || control::malloc(device, Some(stream), bytes))
}

/// cudaFreeAsync on a stream, as for [`double_malloc_async`].
#[no_mangle]
pub extern "C" fn double_free_async(device: u32, stream_id: u32, stream_handle: u64, address: u64) {
    let stream = control::Stream {
        id: stream_id,
        handle: stream_handle,
    };
    guard((), || control::free(device, Some(stream), address))
}

/// cudaProfilerStart (cbid 171).
#[no_mangle]
pub extern "C" fn double_profiler_start() {
    guard((), || {
        control::plain_call(control::cbid::CUDA_PROFILER_START);
    })
}

/// cudaProfilerStop (cbid 172).
#[no_mangle]
pub extern "C" fn double_profiler_stop() {
    guard((), || {
        control::plain_call(control::cbid::CUDA_PROFILER_STOP);
    })
}

/// cudaDeviceReset (cbid 164): ENTER and EXIT callbacks, API record.
#[no_mangle]
pub extern "C" fn double_device_reset() {
    guard((), || {
        control::plain_call(control::cbid::CUDA_DEVICE_RESET);
    })
}

/// `n` kernel launches on device 0, `stream`, without subscriber callbacks. Returns the
/// number of records produced.
#[no_mangle]
pub extern "C" fn double_burst(n: u64, stream: u32) -> u64 {
    guard(0, || control::burst(n, stream))
}

// ------------------------------------------------------------------ fault injection

/// The next `cuptiActivityGetNumDroppedRecords` reports `n` more dropped records.
#[no_mangle]
pub extern "C" fn double_set_dropped(n: u64) {
    state::INJECTED_DROPS.store(n, Relaxed);
}

/// The next `n` kernel records get start = end = completed = 0 (CUPTI's device buffers
/// overflowed).
#[no_mangle]
pub extern "C" fn double_zero_kernel_timestamps(n: u64) {
    state::ZERO_KERNEL_TIMESTAMPS.store(n, Relaxed);
}

/// Replays a raw buffer dump, its timestamps rebased to start at now + 1 ms and its
/// processIds set to this process's (see [`replay`]). Returns the number of records delivered, or
/// -1 malformed/unreadable, -2 version differs from the double's, -3 no buffer, -4 record
/// of unknown kind.
#[no_mangle]
pub unsafe extern "C" fn double_replay(path: *const c_char) -> c_int {
    guard(-1, || {
        if path.is_null() {
            return -1;
        }
        // SAFETY: non-null NUL-terminated path from the caller.
        let p = unsafe { CStr::from_ptr(path) };
        let Ok(p) = p.to_str() else {
            return -1;
        };
        let Ok(bytes) = std::fs::read(p) else {
            return -1;
        };
        match replay::replay_bytes(&bytes) {
            Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
            Err(e) => {
                eprintln!("cupti-double: replay of {p} failed: {e:?}");
                e.code()
            }
        }
    })
}

// ------------------------------------------------------------------ a second profiler

/// Subscribes and registers buffer callbacks like torch.profiler would (through
/// `dlsym(RTLD_DEFAULT, ...)`, so an interposing tracer sees it), then enables kernel,
/// runtime, memcpy and memset records. Returns cuptiSubscribe's result.
#[no_mangle]
pub extern "C" fn double_second_client_subscribe() -> c_int {
    guard(-1, second::subscribe)
}

/// Same as `double_second_client_subscribe`.
#[no_mangle]
pub extern "C" fn double_take_over() -> c_int {
    double_second_client_subscribe()
}

/// Records the second client received in its `completed` callback.
#[no_mangle]
pub extern "C" fn double_second_client_records() -> u64 {
    second::RECORDS.load(Relaxed)
}

/// Buffers the second client received that it had not requested (torch's "unknown buffer").
#[no_mangle]
pub extern "C" fn double_second_client_unknown_buffers() -> u64 {
    second::UNKNOWN_BUFFERS.load(Relaxed)
}

// ------------------------------------------------------------------ counters and state

/// Records generated for enabled kinds (kind 0 = all kinds), delivered or not.
#[no_mangle]
pub extern "C" fn double_records_produced(kind: u32) -> u64 {
    state::produced(kind)
}

/// Records handed to a `completed` callback (kind 0 = all kinds).
#[no_mangle]
pub extern "C" fn double_records_delivered(kind: u32) -> u64 {
    state::delivered(kind)
}

/// Records dropped for lack of a buffer since the start (not reset by reads).
#[no_mangle]
pub extern "C" fn double_records_dropped() -> u64 {
    state::DROPPED_TOTAL.load(Relaxed)
}

#[no_mangle]
pub extern "C" fn double_buffers_requested() -> u64 {
    state::BUFFERS_REQUESTED.load(Relaxed)
}

#[no_mangle]
pub extern "C" fn double_buffers_completed() -> u64 {
    state::BUFFERS_COMPLETED.load(Relaxed)
}

/// Complete buffers that could not be delivered because no `completed` callback was set.
#[no_mangle]
pub extern "C" fn double_buffers_lost() -> u64 {
    state::BUFFERS_LOST.load(Relaxed)
}

#[no_mangle]
pub extern "C" fn double_finalize_calls() -> u64 {
    state::FINALIZE_CALLS.load(Relaxed)
}

#[no_mangle]
pub extern "C" fn double_subscribe_calls() -> u64 {
    state::SUBSCRIBE_CALLS.load(Relaxed)
}

#[no_mangle]
pub extern "C" fn double_register_calls() -> u64 {
    state::REGISTER_CALLS.load(Relaxed)
}

/// 1 if activity kind `kind` is enabled now.
#[no_mangle]
pub extern "C" fn double_kind_enabled(kind: u32) -> c_int {
    c_int::from(state::kind_enabled(kind))
}

/// 1 if API records of runtime (domain 2) / driver (domain 1) `cbid` are switched on now.
#[no_mangle]
pub extern "C" fn double_api_enabled(domain: u32, cbid: u32) -> c_int {
    let on = match domain {
        cupti::DOMAIN_RUNTIME => state::RUNTIME_API_ON.get(cbid),
        cupti::DOMAIN_DRIVER => state::DRIVER_API_ON.get(cbid),
        _ => false,
    };
    c_int::from(on)
}

/// 1 if the subscriber has the callback for (domain, cbid) enabled now.
#[no_mangle]
pub extern "C" fn double_callback_enabled(domain: u32, cbid: u32) -> c_int {
    c_int::from(domain < 7 && state::CALLBACK_ON[domain as usize].get(cbid))
}

/// 1 if a subscriber is registered now.
#[no_mangle]
pub extern "C" fn double_subscribed() -> c_int {
    guard(0, || c_int::from(state::lock(&state::SUBSCRIBER).is_some()))
}

/// The `cuptiGetVersion` value the double plays.
#[no_mangle]
pub extern "C" fn double_version() -> u32 {
    guard(0, state::version)
}
