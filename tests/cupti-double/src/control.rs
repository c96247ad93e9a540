//! What the CUDA runtime + CUPTI produce for one CUDA call made on the calling thread:
//! subscriber callbacks (ENTER/EXIT), API records (with EXTERNAL_CORRELATION records
//! before them), and the device-side records.

use crate::cupti::{
    self, CallbackData, FreeAsyncParams, MallocAsyncParams, API_ENTER, API_EXIT, DOMAIN_DRIVER,
    DOMAIN_RUNTIME,
};
use crate::layout::{self, kind};
use crate::state::{self, lock};
use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, OnceLock};

/// Runtime and driver callback ids (cupti_runtime_cbid.h / cupti_driver_cbid.h, 13.0;
/// the numbers are the same in 12.x).
pub mod cbid {
    pub const CUDA_MALLOC: u32 = 20; // cudaMalloc_v3020
    pub const CUDA_FREE: u32 = 22; // cudaFree_v3020
    pub const CUDA_MEMCPY: u32 = 31; // cudaMemcpy_v3020
    pub const CUDA_MEMCPY_ASYNC: u32 = 41; // cudaMemcpyAsync_v3020
    pub const CUDA_MEMSET_ASYNC: u32 = 51; // cudaMemsetAsync_v3020
    pub const CUDA_STREAM_SYNCHRONIZE: u32 = 131; // cudaStreamSynchronize_v3020
    pub const CUDA_EVENT_RECORD: u32 = 135; // cudaEventRecord_v3020
    pub const CUDA_EVENT_SYNCHRONIZE: u32 = 137; // cudaEventSynchronize_v3020
    pub const CUDA_STREAM_WAIT_EVENT: u32 = 147; // cudaStreamWaitEvent_v3020
    pub const CUDA_DEVICE_RESET: u32 = 164; // cudaDeviceReset_v3020
    pub const CUDA_DEVICE_SYNCHRONIZE: u32 = 165; // cudaDeviceSynchronize_v3020
    pub const CUDA_PROFILER_START: u32 = 171; // cudaProfilerStart_v4000
    pub const CUDA_PROFILER_STOP: u32 = 172; // cudaProfilerStop_v4000
    pub const CUDA_LAUNCH_KERNEL: u32 = 211; // cudaLaunchKernel_v7000
    pub const CUDA_GRAPH_LAUNCH: u32 = 311; // cudaGraphLaunch_v10000
    pub const CUDA_MALLOC_ASYNC: u32 = 373; // cudaMallocAsync_v11020
    pub const CUDA_FREE_ASYNC: u32 = 375; // cudaFreeAsync_v11020

    pub const CU_LAUNCH_KERNEL: u32 = 307; // cuLaunchKernel
    pub const CU_MEMCPY_HTOD_V2: u32 = 276;
    pub const CU_MEMCPY_HTOD_ASYNC_V2: u32 = 277;
    pub const CU_MEMCPY_DTOH_V2: u32 = 278;
    pub const CU_MEMCPY_DTOH_ASYNC_V2: u32 = 279;
    pub const CU_MEMCPY_DTOD_V2: u32 = 280;
    pub const CU_MEMCPY_DTOD_ASYNC_V2: u32 = 281;
    pub const CU_MEMCPY: u32 = 305;
    pub const CU_MEMCPY_ASYNC: u32 = 306;
}

/// `CUPTI_ACTIVITY_MEMORY_KIND_DEVICE`.
const MEMORY_KIND_DEVICE: u32 = 3;
/// `CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC` / `CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC`.
const FLAG_ASYNC: u8 = 1;
/// `CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL`.
const POOL_TYPE_LOCAL: u32 = 1;

fn context_of(device: u32) -> u32 {
    device + 1
}

/// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel", interned (CUpti_CallbackData's
/// functionName is the plain API name).
fn function_name(domain: u32, cbid: u32) -> *const c_char {
    let Some(full) = cupti::callback_name(domain, cbid) else {
        return std::ptr::null();
    };
    let s = full.to_bytes();
    let plain = match s.iter().rposition(|&b| b == b'_') {
        Some(i) if s.get(i + 1) == Some(&b'v') && s[i + 2..].iter().all(u8::is_ascii_digit) => {
            &s[..i]
        }
        _ => s,
    };
    state::intern(plain)
}

/// One CUDA API call in flight: ENTER fired at `begin`, EXIT at `finish`.
pub struct ApiCall {
    domain: u32,
    cbid: u32,
    pub corr: u32,
    pub start: u64,
    symbol: *const c_char,
    callbacks: bool,
    /// The call's parameter struct (`functionParams`), the same at ENTER and EXIT; null for
    /// calls the double passes none for.
    params: *const c_void,
    correlation_data: u64,
    return_value: i32,
    /// The latest end its API records claim: a real call returns after CUPTI's end timestamp,
    /// so nothing the program does next (an NVTX pop, the next call) can start before it.
    returns_at: std::cell::Cell<u64>,
}

impl ApiCall {
    pub fn begin(domain: u32, cbid: u32, symbol: *const c_char, callbacks: bool) -> Self {
        Self::begin_with_params(domain, cbid, symbol, callbacks, std::ptr::null())
    }

    /// [`Self::begin`] of a call whose callbacks get `params` as `functionParams` (it must
    /// stay alive until [`Self::finish`]).
    pub fn begin_with_params(
        domain: u32,
        cbid: u32,
        symbol: *const c_char,
        callbacks: bool,
        params: *const c_void,
    ) -> Self {
        let mut call = ApiCall {
            domain,
            cbid,
            corr: state::next_correlation(),
            start: state::now_ns(),
            symbol,
            callbacks,
            params,
            correlation_data: 0,
            return_value: 0,
            returns_at: std::cell::Cell::new(0),
        };
        call.fire(API_ENTER);
        call
    }

    fn fire(&mut self, site: u32) {
        if !self.callbacks {
            return;
        }
        let data = CallbackData {
            callback_site: site,
            function_name: function_name(self.domain, self.cbid),
            function_params: self.params,
            function_return_value: &mut self.return_value as *mut i32 as *mut _,
            symbol_name: self.symbol,
            context: std::ptr::null_mut(),
            context_uid: 0,
            correlation_data: &mut self.correlation_data,
            correlation_id: self.corr,
        };
        cupti::fire_callback(self.domain, self.cbid, &data);
    }

    /// The API activity record (and EXTERNAL_CORRELATION records before it), if the
    /// RUNTIME/DRIVER switches for this cbid are on. Returns records emitted.
    pub fn record(&self, end: u64) -> u64 {
        self.returns_at.set(self.returns_at.get().max(end));
        api_record(self.domain, self.cbid, self.start, end, self.corr)
    }

    pub fn finish(mut self) {
        while state::now_ns() < self.returns_at.get() {
            std::hint::spin_loop();
        }
        self.fire(API_EXIT);
    }
}

fn api_record(domain: u32, cbid: u32, start: u64, end: u64, corr: u32) -> u64 {
    let (on, k) = if domain == DOMAIN_RUNTIME {
        (&state::RUNTIME_API_ON, kind::RUNTIME)
    } else {
        (&state::DRIVER_API_ON, kind::DRIVER)
    };
    // The kind must be on as well: CUPTI 13.0 (H100, driver 580) recorded no API call whose
    // kind was off, even one switched on by itself, although cupti_activity.h allows it.
    if !state::kind_enabled(k) || !on.get(cbid) {
        return 0;
    }
    let mut n = 0;
    if state::kind_enabled(kind::EXTERNAL_CORRELATION) {
        for (ext_kind, ext_id) in state::external_tops() {
            state::emit(kind::EXTERNAL_CORRELATION, |b| {
                layout::write_ext(b, ext_kind, ext_id, corr)
            });
            n += 1;
        }
    }
    let rec = layout::ApiRec {
        kind: k,
        cbid,
        start,
        end,
        process_id: state::process_id(),
        thread_id: state::thread_id(),
        correlation_id: corr,
        return_value: 0,
    };
    state::emit(k, |b| layout::write_api(b, &rec));
    n + 1
}

// ------------------------------------------------------------------ streams

static STREAM_END: OnceLock<Mutex<HashMap<(u32, u32), u64>>> = OnceLock::new();

/// Work on one stream runs in order: start = max(earliest, end of the previous work).
fn schedule(device: u32, stream: u32, earliest: u64, duration: u64) -> (u64, u64) {
    let mut m = lock(STREAM_END.get_or_init(Default::default));
    let prev = m.entry((device, stream)).or_insert(0);
    let start = earliest.max(*prev);
    let end = start + duration;
    *prev = end;
    (start, end)
}

// ------------------------------------------------------------------ kernels

static GRID_ID: AtomicU64 = AtomicU64::new(1);

fn kernel_kind() -> Option<u32> {
    if state::kind_enabled(kind::CONCURRENT_KERNEL) {
        Some(kind::CONCURRENT_KERNEL)
    } else if state::kind_enabled(kind::KERNEL) {
        Some(kind::KERNEL)
    } else {
        None
    }
}

pub struct KernelLaunch {
    pub name: *const c_char,
    pub device: u32,
    pub stream: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub duration: u64,
}

fn kernel_record(l: &KernelLaunch, corr: u32, t0: u64, graph: Option<(u32, u64)>) -> u64 {
    let (mut start, mut end) = schedule(l.device, l.stream, t0 + 5000, l.duration);
    let Some(k) = kernel_kind() else {
        return 0;
    };
    let zeroed = state::ZERO_KERNEL_TIMESTAMPS
        .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1))
        .is_ok();
    if zeroed {
        // CUPTI's device buffers overflowed: no timing for this kernel.
        (start, end) = (0, 0);
    }
    let latency = state::LATENCY_TIMESTAMPS.load(Relaxed) && !zeroed;
    let (graph_id, graph_node_id) = graph.unwrap_or((0, 0));
    let rec = layout::KernelRec {
        kind: k,
        device: l.device,
        context: context_of(l.device),
        stream: l.stream,
        grid: l.grid,
        block: l.block,
        registers_per_thread: 32,
        static_shared: 0,
        dynamic_shared: 1024,
        correlation_id: corr,
        grid_id: GRID_ID.fetch_add(1, Relaxed) as i64,
        name: l.name,
        start,
        end,
        // CUPTI_TIMESTAMP_UNKNOWN (0) unless cuptiActivityEnableLatencyTimestamps(1).
        queued: if latency { t0 + 1000 } else { 0 },
        submitted: if latency { t0 + 1500 } else { 0 },
        graph_node_id,
        graph_id,
    };
    let v = state::version();
    state::emit(k, |b| layout::write_kernel(b, v, &rec));
    1
}

/// cudaLaunchKernel. Returns (correlation id, records emitted).
pub fn launch_kernel(l: &KernelLaunch, callbacks: bool) -> (u32, u64) {
    launch_kernel_via(DOMAIN_RUNTIME, cbid::CUDA_LAUNCH_KERNEL, l, callbacks)
}

/// cuLaunchKernel, straight to the driver (as Triton's launcher does): driver-domain callbacks
/// and a DRIVER API record, no runtime one. Returns (correlation id, records emitted).
pub fn launch_kernel_driver(l: &KernelLaunch) -> (u32, u64) {
    launch_kernel_via(DOMAIN_DRIVER, cbid::CU_LAUNCH_KERNEL, l, true)
}

fn launch_kernel_via(domain: u32, cbid: u32, l: &KernelLaunch, callbacks: bool) -> (u32, u64) {
    let call = ApiCall::begin(domain, cbid, l.name, callbacks);
    let t0 = call.start;
    let mut n = call.record(t0 + 2000);
    n += kernel_record(l, call.corr, t0, None);
    let corr = call.corr;
    call.finish();
    (corr, n)
}

static GRAPH_IDS: OnceLock<Mutex<HashMap<Vec<u8>, u32>>> = OnceLock::new();

/// The graph id of the graph called `name` (relaunching "the same graph" keeps its id).
fn graph_id(name: &[u8]) -> u32 {
    let mut m = lock(GRAPH_IDS.get_or_init(Default::default));
    let next = m.len() as u32 + 1;
    *m.entry(name.to_vec()).or_insert(next)
}

/// cudaGraphLaunch of a graph of `n` kernel nodes, all sharing the launch's correlation id.
pub fn launch_graph(l: &KernelLaunch, name: &[u8], n: u32) -> u32 {
    let call = ApiCall::begin(
        DOMAIN_RUNTIME,
        cbid::CUDA_GRAPH_LAUNCH,
        std::ptr::null(),
        true,
    );
    let t0 = call.start;
    call.record(t0 + 2000);
    let gid = graph_id(name);
    for node in 1..=n {
        kernel_record(l, call.corr, t0, Some((gid, u64::from(node))));
    }
    let corr = call.corr;
    call.finish();
    corr
}

// ------------------------------------------------------------------ copies and sets

fn driver_memcpy_cbid(copy_kind: u32, is_async: bool) -> u32 {
    use cbid::*;
    match (copy_kind, is_async) {
        (1, false) => CU_MEMCPY_HTOD_V2,
        (1, true) => CU_MEMCPY_HTOD_ASYNC_V2,
        (2, false) => CU_MEMCPY_DTOH_V2,
        (2, true) => CU_MEMCPY_DTOH_ASYNC_V2,
        (8, false) => CU_MEMCPY_DTOD_V2,
        (8, true) => CU_MEMCPY_DTOD_ASYNC_V2,
        (_, false) => CU_MEMCPY,
        (_, true) => CU_MEMCPY_ASYNC,
    }
}

pub struct Memcpy {
    pub copy_kind: u32,
    pub src_kind: u32,
    pub dst_kind: u32,
    pub bytes: u64,
    pub device: u32,
    pub stream: u32,
    pub duration: u64,
    pub is_async: bool,
}

/// cudaMemcpy[Async]: runtime call R, nested driver call D; the MEMCPY record carries
/// correlationId = D and runtimeCorrelationId = R. Returns R.
pub fn memcpy(m: &Memcpy) -> u32 {
    let rt_cbid = if m.is_async {
        cbid::CUDA_MEMCPY_ASYNC
    } else {
        cbid::CUDA_MEMCPY
    };
    let call = ApiCall::begin(DOMAIN_RUNTIME, rt_cbid, std::ptr::null(), true);
    let t0 = call.start;
    let drv = ApiCall::begin(
        DOMAIN_DRIVER,
        driver_memcpy_cbid(m.copy_kind, m.is_async),
        std::ptr::null(),
        true,
    );
    let (start, end) = schedule(m.device, m.stream, t0 + 5000, m.duration);
    let drv_end = if m.is_async {
        drv.start + 1500
    } else {
        end + 500
    };
    drv.record(drv_end);
    let driver_corr = drv.corr;
    drv.finish();
    call.record(drv_end + 500);
    if state::kind_enabled(kind::MEMCPY) {
        let rec = layout::MemcpyRec {
            copy_kind: m.copy_kind as u8,
            src_kind: m.src_kind as u8,
            dst_kind: m.dst_kind as u8,
            flags: if m.is_async { FLAG_ASYNC } else { 0 },
            bytes: m.bytes,
            start,
            end,
            device: m.device,
            context: context_of(m.device),
            stream: m.stream,
            correlation_id: driver_corr,
            runtime_correlation_id: call.corr,
        };
        let v = state::version();
        state::emit(kind::MEMCPY, |b| layout::write_memcpy(b, v, &rec));
    }
    let corr = call.corr;
    call.finish();
    corr
}

/// cudaMemsetAsync on device memory.
pub fn memset(bytes: u64, value: u32, device: u32, stream: u32, duration: u64) -> u32 {
    let call = ApiCall::begin(
        DOMAIN_RUNTIME,
        cbid::CUDA_MEMSET_ASYNC,
        std::ptr::null(),
        true,
    );
    let t0 = call.start;
    call.record(t0 + 2000);
    let (start, end) = schedule(device, stream, t0 + 5000, duration);
    if state::kind_enabled(kind::MEMSET) {
        let rec = layout::MemsetRec {
            value,
            bytes,
            start,
            end,
            device,
            context: context_of(device),
            stream,
            correlation_id: call.corr,
            flags: u16::from(FLAG_ASYNC),
            memory_kind: MEMORY_KIND_DEVICE as u16,
        };
        let v = state::version();
        state::emit(kind::MEMSET, |b| layout::write_memset(b, v, &rec));
    }
    let corr = call.corr;
    call.finish();
    corr
}

// ------------------------------------------------------------------ synchronization

static EVENT_ID: AtomicU64 = AtomicU64::new(1);

/// 1 cudaEventSynchronize, 2 cudaStreamWaitEvent, 3 cudaStreamSynchronize,
/// 4 cudaDeviceSynchronize (CUpti_ActivitySynchronizationType). Returns 0 for others.
/// `event`: the CUDA event an event sync waits on (else a fresh id each time).
pub fn sync(sync_type: u32, stream: u32, duration: u64, event: Option<u32>) -> u32 {
    let c = match sync_type {
        1 => cbid::CUDA_EVENT_SYNCHRONIZE,
        2 => cbid::CUDA_STREAM_WAIT_EVENT,
        3 => cbid::CUDA_STREAM_SYNCHRONIZE,
        4 => cbid::CUDA_DEVICE_SYNCHRONIZE,
        _ => return 0,
    };
    let call = ApiCall::begin(DOMAIN_RUNTIME, c, std::ptr::null(), true);
    let t0 = call.start;
    call.record(t0 + duration + 1000);
    if state::kind_enabled(kind::SYNCHRONIZATION) {
        let is_event = matches!(sync_type, 1 | 2);
        let event = match (is_event, event) {
            (true, Some(id)) => u64::from(id),
            (true, None) => EVENT_ID.fetch_add(1, Relaxed),
            (false, _) => 0,
        };
        let rec = layout::SyncRec {
            sync_type,
            start: t0 + 500,
            end: t0 + 500 + duration,
            correlation_id: call.corr,
            context: 1,
            stream: if matches!(sync_type, 2 | 3) {
                stream
            } else {
                layout::SYNC_INVALID
            },
            cuda_event_id: if is_event {
                event as u32
            } else {
                layout::SYNC_INVALID
            },
            cuda_event_sync_id: if is_event {
                event
            } else {
                u64::from(layout::SYNC_INVALID)
            },
        };
        state::emit(kind::SYNCHRONIZATION, |b| layout::write_sync(b, &rec));
    }
    let corr = call.corr;
    call.finish();
    corr
}

/// cudaEventRecord (cbid 135) of event `event_id` on `stream`: API record + CUDA_EVENT record
/// (CudaEvent before CUDA 12.8, CudaEvent2 since). Returns the correlation id.
pub fn event_record(stream: u32, event_id: u32) -> u32 {
    let call = ApiCall::begin(
        DOMAIN_RUNTIME,
        cbid::CUDA_EVENT_RECORD,
        std::ptr::null(),
        true,
    );
    call.record(call.start + 1000);
    if state::kind_enabled(kind::CUDA_EVENT) {
        let rec = layout::CudaEventRec {
            correlation_id: call.corr,
            context: 1,
            stream,
            event_id,
            device: 0,
        };
        state::emit(kind::CUDA_EVENT, |b| layout::write_cuda_event(b, &rec));
    }
    let corr = call.corr;
    call.finish();
    corr
}

// ------------------------------------------------------------------ memory

const ADDRESS_BASE: u64 = 0x7f00_0000_0000;
const POOL_BASE: u64 = 0x7e00_0000_0000;
const TWO_MIB: u64 = 2 << 20;

struct Alloc {
    bytes: u64,
    device: u32,
    is_async: bool,
}

struct Memory {
    next: u64,
    live: HashMap<u64, Alloc>,
    /// Bytes allocated from each device's (stream-ordered) pool.
    pool_used: HashMap<u32, u64>,
}

static MEMORY: Mutex<Option<Memory>> = Mutex::new(None);

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

/// Result of one allocator step: (address, bytes, pool used after).
fn alloc(device: u32, bytes: u64, is_async: bool) -> (u64, u64) {
    let mut g = lock(&MEMORY);
    let m = g.get_or_insert_with(|| Memory {
        next: ADDRESS_BASE,
        live: HashMap::new(),
        pool_used: HashMap::new(),
    });
    let addr = m.next;
    m.next = round_up(addr + bytes.max(1), TWO_MIB);
    m.live.insert(
        addr,
        Alloc {
            bytes,
            device,
            is_async,
        },
    );
    let used = if is_async {
        let u = m.pool_used.entry(device).or_insert(0);
        *u += bytes;
        *u
    } else {
        0
    };
    (addr, used)
}

/// Returns (bytes, pool used after) of the released allocation (0 bytes if unknown).
/// Bytes allocated on `device` and not freed (what `cuMemGetInfo` counts as used).
pub fn device_used(device: u32) -> u64 {
    lock(&MEMORY).as_ref().map_or(0, |m| {
        m.live
            .values()
            .filter(|a| a.device == device)
            .map(|a| a.bytes)
            .sum()
    })
}

fn release(address: u64) -> (u64, u64) {
    let mut g = lock(&MEMORY);
    let Some(m) = g.as_mut() else {
        return (0, 0);
    };
    let Some(a) = m.live.remove(&address) else {
        return (0, 0);
    };
    let used = if a.is_async {
        let u = m.pool_used.entry(a.device).or_insert(0);
        *u = u.saturating_sub(a.bytes);
        *u
    } else {
        0
    };
    (a.bytes, used)
}

struct MemOp {
    op: u32,
    device: u32,
    stream: u32,
    address: u64,
    bytes: u64,
    is_async: bool,
    pool_used: u64,
}

fn memory_record(call: &ApiCall, o: &MemOp) {
    if !state::kind_enabled(kind::MEMORY2) {
        return;
    }
    let rec = layout::MemoryRec {
        operation_type: o.op,
        memory_kind: MEMORY_KIND_DEVICE,
        correlation_id: call.corr,
        address: o.address,
        bytes: o.bytes,
        timestamp: call.start + 1000,
        process_id: state::process_id(),
        device: o.device,
        context: context_of(o.device),
        stream: o.stream,
        is_async: u32::from(o.is_async),
        pool_type: if o.is_async { POOL_TYPE_LOCAL } else { 0 },
        pool_address: if o.is_async {
            POOL_BASE + (u64::from(o.device) << 36)
        } else {
            0
        },
        pool_release_threshold: 0,
        pool_size: if o.is_async {
            round_up(o.pool_used, TWO_MIB)
        } else {
            0
        },
        pool_utilized: o.pool_used,
    };
    state::emit(kind::MEMORY2, |b| layout::write_memory(b, &rec));
}

/// The stream a stream-ordered call is made on: what the program passes (`cudaStream_t`)
/// and CUPTI's id for it (in the records).
#[derive(Clone, Copy)]
pub struct Stream {
    pub id: u32,
    pub handle: u64,
}

/// cudaMalloc, or cudaMallocAsync on `stream`. Returns the device address.
pub fn malloc(device: u32, stream: Option<Stream>, bytes: u64) -> u64 {
    let is_async = stream.is_some();
    let mut out: *mut c_void = std::ptr::null_mut();
    let params = stream.map(|s| MallocAsyncParams {
        dev_ptr: &mut out,
        size: bytes as usize,
        h_stream: s.handle as usize as *mut c_void,
    });
    let call = match &params {
        Some(p) => ApiCall::begin_with_params(
            DOMAIN_RUNTIME,
            cbid::CUDA_MALLOC_ASYNC,
            std::ptr::null(),
            true,
            p as *const MallocAsyncParams as *const c_void,
        ),
        None => ApiCall::begin(DOMAIN_RUNTIME, cbid::CUDA_MALLOC, std::ptr::null(), true),
    };
    let (address, pool_used) = alloc(device, bytes, is_async);
    if let Some(p) = &params {
        // SAFETY: `dev_ptr` points at `out`, alive in this frame; the exit callback reads it.
        unsafe { *p.dev_ptr = address as usize as *mut c_void };
    }
    call.record(call.start + 2000);
    memory_record(
        &call,
        &MemOp {
            op: 1,
            device,
            stream: stream.map_or(0, |s| s.id),
            address,
            bytes,
            is_async,
            pool_used,
        },
    );
    call.finish();
    address
}

/// cudaFree, or cudaFreeAsync on `stream`.
pub fn free(device: u32, stream: Option<Stream>, address: u64) {
    let is_async = stream.is_some();
    let params = stream.map(|s| FreeAsyncParams {
        dev_ptr: address as usize as *mut c_void,
        h_stream: s.handle as usize as *mut c_void,
    });
    let call = match &params {
        Some(p) => ApiCall::begin_with_params(
            DOMAIN_RUNTIME,
            cbid::CUDA_FREE_ASYNC,
            std::ptr::null(),
            true,
            p as *const FreeAsyncParams as *const c_void,
        ),
        None => ApiCall::begin(DOMAIN_RUNTIME, cbid::CUDA_FREE, std::ptr::null(), true),
    };
    let (bytes, pool_used) = release(address);
    call.record(call.start + 2000);
    memory_record(
        &call,
        &MemOp {
            op: 2,
            device,
            stream: stream.map_or(0, |s| s.id),
            address,
            bytes,
            is_async,
            pool_used,
        },
    );
    call.finish();
}

// ------------------------------------------------------------------ misc calls

/// A runtime call with callbacks and an API record but no device work.
pub fn plain_call(c: u32) -> u32 {
    let call = ApiCall::begin(DOMAIN_RUNTIME, c, std::ptr::null(), true);
    call.record(call.start + 2000);
    let corr = call.corr;
    call.finish();
    corr
}

/// `n` kernel launches as fast as possible (no subscriber callbacks). Returns the
/// number of records produced.
pub fn burst(n: u64, stream: u32) -> u64 {
    let l = KernelLaunch {
        name: state::intern(b"_Z12burst_kernelv"),
        device: 0,
        stream,
        grid: [1, 1, 1],
        block: [128, 1, 1],
        duration: 1000,
    };
    (0..n).map(|_| launch_kernel(&l, false).1).sum()
}
