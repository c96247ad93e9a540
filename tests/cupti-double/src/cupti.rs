//! The CUPTI entry points, with CUPTI's C signatures and documented semantics
//! (cupti_activity.h, cupti_callbacks.h, cupti_result.h, cupti_version.h of 13.0).
#![allow(non_snake_case)]

use crate::layout::{self, kind};
use crate::names;
use crate::panic_guard::guard;
use crate::state::{self, lock, CallbackFn, CompleteFn, RequestFn};
use std::ffi::{c_char, c_void};
use std::sync::atomic::Ordering::Relaxed;

/// `CUptiResult` values used here (cupti_result.h).
pub mod res {
    pub const SUCCESS: u32 = 0;
    pub const INVALID_PARAMETER: u32 = 1;
    pub const INVALID_OPERATION: u32 = 7;
    pub const PARAMETER_SIZE_NOT_SUFFICIENT: u32 = 10;
    pub const MAX_LIMIT_REACHED: u32 = 12;
    pub const QUEUE_EMPTY: u32 = 18;
    pub const INVALID_KIND: u32 = 21;
    pub const MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: u32 = 39;
    pub const UNKNOWN: u32 = 999;
}
use res::*;

/// `CUpti_CallbackDomain`: DRIVER_API.
pub const DOMAIN_DRIVER: u32 = 1;
/// `CUpti_CallbackDomain`: RUNTIME_API.
pub const DOMAIN_RUNTIME: u32 = 2;
/// `CUPTI_CB_DOMAIN_STATE`, the last real domain.
const DOMAIN_MAX: u32 = 6;

/// `CUpti_CallbackData` (cupti_callbacks.h). Offsets checked in tests: 0, 8, 16, 24, 32,
/// 40, 48, 56, 64; size 72.
#[repr(C)]
pub struct CallbackData {
    pub callback_site: u32,
    pub function_name: *const c_char,
    pub function_params: *const c_void,
    pub function_return_value: *mut c_void,
    pub symbol_name: *const c_char,
    pub context: *mut c_void,
    pub context_uid: u32,
    pub correlation_data: *mut u64,
    pub correlation_id: u32,
}

/// `cudaMallocAsync_v11020_params` (generated_cuda_runtime_api_meta.h): cudaMallocAsync's
/// `functionParams`. Offsets checked in tests against cupti-sys: 0, 8, 16; size 24.
#[repr(C)]
pub struct MallocAsyncParams {
    pub dev_ptr: *mut *mut c_void,
    pub size: usize,
    pub h_stream: *mut c_void,
}

/// `cudaFreeAsync_v11020_params` (generated_cuda_runtime_api_meta.h): cudaFreeAsync's
/// `functionParams`. Offsets checked in tests: 0, 8; size 16.
#[repr(C)]
pub struct FreeAsyncParams {
    pub dev_ptr: *mut c_void,
    pub h_stream: *mut c_void,
}

/// `CUPTI_API_ENTER` / `CUPTI_API_EXIT`.
pub const API_ENTER: u32 = 0;
pub const API_EXIT: u32 = 1;

fn cbid_limit(domain: u32) -> u32 {
    match domain {
        DOMAIN_DRIVER => names::DRIVER_CBID_NAMES.len() as u32,
        DOMAIN_RUNTIME => names::RUNTIME_CBID_NAMES.len() as u32,
        _ => 1024,
    }
}

// ------------------------------------------------------------------ version, names

#[no_mangle]
pub unsafe extern "C" fn cuptiGetVersion(version: *mut u32) -> u32 {
    guard(UNKNOWN, || {
        if let Some(code) = state::fail().version {
            return code;
        }
        if version.is_null() {
            return INVALID_PARAMETER;
        }
        // SAFETY: checked non-null; the caller passes a writable uint32_t.
        unsafe { *version = state::version() };
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetResultString(result: u32, out: *mut *const c_char) -> u32 {
    guard(UNKNOWN, || {
        if out.is_null() {
            return INVALID_PARAMETER;
        }
        let found = names::RESULT_NAMES.iter().find(|(v, _)| *v == result);
        // SAFETY: checked non-null; the caller passes a writable const char*.
        unsafe { *out = found.map_or(std::ptr::null(), |(_, n)| n.as_ptr()) };
        if found.is_some() {
            SUCCESS
        } else {
            INVALID_PARAMETER
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetErrorMessage(result: u32, out: *mut *const c_char) -> u32 {
    // SAFETY: same contract as cuptiGetResultString.
    unsafe { cuptiGetResultString(result, out) }
}

#[no_mangle]
pub extern "C" fn cuptiGetLastError() -> u32 {
    SUCCESS
}

/// Name of a runtime or driver cbid, e.g. "cudaLaunchKernel_v7000" for runtime 211.
pub fn callback_name(domain: u32, cbid: u32) -> Option<&'static std::ffi::CStr> {
    let table: &[&std::ffi::CStr] = match domain {
        DOMAIN_DRIVER => &names::DRIVER_CBID_NAMES,
        DOMAIN_RUNTIME => &names::RUNTIME_CBID_NAMES,
        _ => return None,
    };
    if cbid == 0 {
        return None;
    }
    table.get(cbid as usize).copied()
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetCallbackName(
    domain: u32,
    cbid: u32,
    name: *mut *const c_char,
) -> u32 {
    guard(UNKNOWN, || {
        if name.is_null() {
            return INVALID_PARAMETER;
        }
        let found = callback_name(domain, cbid);
        // SAFETY: checked non-null; the caller passes a writable const char*.
        unsafe { *name = found.map_or(std::ptr::null(), |n| n.as_ptr()) };
        if found.is_some() {
            SUCCESS
        } else {
            INVALID_PARAMETER
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetTimestamp(timestamp: *mut u64) -> u32 {
    guard(UNKNOWN, || {
        if timestamp.is_null() {
            return INVALID_PARAMETER;
        }
        // SAFETY: checked non-null; the caller passes a writable uint64_t.
        unsafe { *timestamp = state::now_ns() };
        SUCCESS
    })
}

// ------------------------------------------------------------------ subscriber

/// `CUpti_SubscriberParams` (cupti_callbacks.h, 13.0): structSize @0, subscriberName @8,
/// oldSubscriberName @16, oldSubscriberSize @24.
#[repr(C)]
pub struct SubscriberParams {
    pub struct_size: usize,
    pub subscriber_name: *const c_char,
    pub old_subscriber_name: *mut c_char,
    pub old_subscriber_size: usize,
}

/// `CUPTI_SUBSCRIBER_NAME_MAX_LEN`.
const SUBSCRIBER_NAME_MAX_LEN: usize = 53;

fn subscribe(
    subscriber: *mut usize,
    callback: Option<CallbackFn>,
    userdata: *mut c_void,
    name: Option<String>,
    old_name_out: Option<(*mut c_char, usize)>,
) -> u32 {
    state::SUBSCRIBE_CALLS.fetch_add(1, Relaxed);
    if let Some(code) = state::fail().subscribe {
        return code;
    }
    if subscriber.is_null() {
        return INVALID_PARAMETER;
    }
    let mut cur = lock(&state::SUBSCRIBER);
    if let Some(existing) = cur.as_ref() {
        if let Some((out, size)) = old_name_out {
            let old = existing.name.as_deref().unwrap_or("CUPTI");
            let n = old.len().min(size.saturating_sub(1));
            if size > 0 {
                // SAFETY: the caller gave `size` writable bytes at `out`; n + 1 <= size.
                unsafe {
                    std::ptr::copy_nonoverlapping(old.as_ptr(), out as *mut u8, n);
                    *out.add(n) = 0;
                }
            }
        }
        return MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    // An opaque, unique, never-freed handle (CUpti_SubscriberHandle is a pointer).
    let handle = Box::into_raw(Box::new(0u64)) as usize;
    *cur = Some(state::Subscriber {
        handle,
        callback,
        userdata: userdata as usize,
        name,
    });
    // SAFETY: checked non-null; the caller passes a writable CUpti_SubscriberHandle.
    unsafe { *subscriber = handle };
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut usize,
    callback: Option<CallbackFn>,
    userdata: *mut c_void,
) -> u32 {
    guard(UNKNOWN, || {
        subscribe(subscriber, callback, userdata, None, None)
    })
}

/// 13.0's named variant; the same single-subscriber rule (cupti_callbacks.h). On error 39
/// it writes the current subscriber's name into `oldSubscriberName`. (Real 12.9 does not
/// export it; the double always does.)
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe_v2(
    subscriber: *mut usize,
    callback: Option<CallbackFn>,
    userdata: *mut c_void,
    params: *mut SubscriberParams,
) -> u32 {
    guard(UNKNOWN, || {
        if params.is_null() {
            return subscribe(subscriber, callback, userdata, None, None);
        }
        // SAFETY: non-null CUpti_SubscriberParams from the caller.
        let p = unsafe { &*params };
        if p.struct_size == 0 {
            return INVALID_PARAMETER;
        }
        let name = (!p.subscriber_name.is_null()).then(|| {
            // SAFETY: a NUL-terminated name from the caller.
            let n = unsafe { std::ffi::CStr::from_ptr(p.subscriber_name) }.to_string_lossy();
            let n: String = n.chars().take(SUBSCRIBER_NAME_MAX_LEN).collect();
            format!("CUPTI for {n}")
        });
        let old = (!p.old_subscriber_name.is_null())
            .then_some((p.old_subscriber_name, p.old_subscriber_size));
        subscribe(subscriber, callback, userdata, name, old)
    })
}

fn is_current(subscriber: usize) -> bool {
    lock(&state::SUBSCRIBER)
        .as_ref()
        .is_some_and(|s| s.handle == subscriber && subscriber != 0)
}

#[no_mangle]
pub extern "C" fn cuptiUnsubscribe(subscriber: usize) -> u32 {
    guard(UNKNOWN, || {
        let mut cur = lock(&state::SUBSCRIBER);
        if subscriber == 0 || cur.as_ref().map(|s| s.handle) != Some(subscriber) {
            return INVALID_PARAMETER;
        }
        *cur = None;
        drop(cur);
        for b in &state::CALLBACK_ON {
            b.set_all(false);
        }
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cuptiEnableCallback(
    enable: u32,
    subscriber: usize,
    domain: u32,
    cbid: u32,
) -> u32 {
    guard(UNKNOWN, || {
        if !is_current(subscriber) || domain == 0 || domain > DOMAIN_MAX {
            return INVALID_PARAMETER;
        }
        if cbid >= cbid_limit(domain) {
            return INVALID_PARAMETER;
        }
        state::CALLBACK_ON[domain as usize].set(cbid, enable != 0);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cuptiEnableDomain(enable: u32, subscriber: usize, domain: u32) -> u32 {
    guard(UNKNOWN, || {
        if !is_current(subscriber) || domain == 0 || domain > DOMAIN_MAX {
            return INVALID_PARAMETER;
        }
        state::CALLBACK_ON[domain as usize].set_all(enable != 0);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cuptiEnableAllDomains(enable: u32, subscriber: usize) -> u32 {
    guard(UNKNOWN, || {
        if !is_current(subscriber) {
            return INVALID_PARAMETER;
        }
        for d in 1..=DOMAIN_MAX {
            state::CALLBACK_ON[d as usize].set_all(enable != 0);
        }
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetCallbackState(
    enable: *mut u32,
    subscriber: usize,
    domain: u32,
    cbid: u32,
) -> u32 {
    guard(UNKNOWN, || {
        if enable.is_null() || !is_current(subscriber) || domain == 0 || domain > DOMAIN_MAX {
            return INVALID_PARAMETER;
        }
        let on = state::CALLBACK_ON[domain as usize].get(cbid);
        // SAFETY: checked non-null; the caller passes a writable uint32_t.
        unsafe { *enable = u32::from(on) };
        SUCCESS
    })
}

/// Calls the subscriber's callback for (domain, cbid) if it enabled it. No lock is held
/// during the call.
pub fn fire_callback(domain: u32, cbid: u32, data: &CallbackData) {
    if !state::CALLBACK_ON[domain as usize].get(cbid) {
        return;
    }
    let Some((Some(cb), userdata)) = state::current_callback() else {
        return;
    };
    // SAFETY: CUPTI's contract for CUpti_CallbackFunc: (userdata, domain, cbid,
    // const CUpti_CallbackData*), valid for the duration of the call.
    unsafe {
        cb(
            userdata as *mut c_void,
            domain,
            cbid,
            data as *const _ as *const c_void,
        )
    };
}

// ------------------------------------------------------------------ activity settings

#[no_mangle]
pub extern "C" fn cuptiSetThreadIdType(kind: u32) -> u32 {
    guard(UNKNOWN, || {
        if kind > 1 {
            return INVALID_PARAMETER;
        }
        state::THREAD_ID_TYPE.store(kind, Relaxed);
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiGetThreadIdType(kind: *mut u32) -> u32 {
    guard(UNKNOWN, || {
        if kind.is_null() {
            return INVALID_PARAMETER;
        }
        // SAFETY: checked non-null; the caller passes a writable enum (32 bits).
        unsafe { *kind = state::THREAD_ID_TYPE.load(Relaxed) };
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivitySetAttribute(
    attr: u32,
    value_size: *mut usize,
    value: *mut c_void,
) -> u32 {
    guard(UNKNOWN, || {
        let Some(need) = state::attr_size(attr) else {
            return INVALID_PARAMETER;
        };
        if value_size.is_null() || value.is_null() {
            return INVALID_PARAMETER;
        }
        // SAFETY: checked non-null; the caller passes a readable size_t.
        let have = unsafe { *value_size };
        if have < need {
            return PARAMETER_SIZE_NOT_SUFFICIENT;
        }
        let mut bytes = [0u8; 8];
        // SAFETY: `value` points at `have >= need` readable bytes; need <= 8.
        unsafe { std::ptr::copy_nonoverlapping(value as *const u8, bytes.as_mut_ptr(), need) };
        state::set_attr(attr as usize, u64::from_le_bytes(bytes));
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityGetAttribute(
    attr: u32,
    value_size: *mut usize,
    value: *mut c_void,
) -> u32 {
    guard(UNKNOWN, || {
        let Some(need) = state::attr_size(attr) else {
            return INVALID_PARAMETER;
        };
        if value_size.is_null() || value.is_null() {
            return INVALID_PARAMETER;
        }
        // SAFETY: checked non-null; the caller passes a readable and writable size_t.
        if unsafe { *value_size } < need {
            return PARAMETER_SIZE_NOT_SUFFICIENT;
        }
        let bytes = state::attr_value(attr as usize).to_le_bytes();
        // SAFETY: `value` points at `*value_size >= need` writable bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), value as *mut u8, need);
            *value_size = need;
        }
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cuptiActivityRegisterCallbacks(
    requested: Option<RequestFn>,
    completed: Option<CompleteFn>,
) -> u32 {
    guard(UNKNOWN, || {
        if let Some(code) = state::fail().register {
            return code;
        }
        let (Some(r), Some(c)) = (requested, completed) else {
            return INVALID_PARAMETER;
        };
        state::set_buffer_callbacks(r, c);
        SUCCESS
    })
}

fn valid_kind(k: u32) -> bool {
    (1..=kind::MAX).contains(&k)
}

#[no_mangle]
pub extern "C" fn cuptiActivityEnable(k: u32) -> u32 {
    guard(UNKNOWN, || {
        {
            let f = state::fail();
            if let Some(&code) = f.enable_kind.get(&k) {
                return code;
            }
            if let Some(code) = f.enable {
                return code;
            }
        }
        if !valid_kind(k) {
            return INVALID_KIND;
        }
        state::set_kind(k, true);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cuptiActivityDisable(k: u32) -> u32 {
    guard(UNKNOWN, || {
        if !valid_kind(k) {
            return INVALID_KIND;
        }
        state::set_kind(k, false);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cuptiActivityEnableRuntimeApi(cbid: u32, enable: u8) -> u32 {
    guard(UNKNOWN, || {
        if cbid == 0 || cbid >= cbid_limit(DOMAIN_RUNTIME) {
            return INVALID_PARAMETER;
        }
        state::RUNTIME_API_ON.set(cbid, enable != 0);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cuptiActivityEnableDriverApi(cbid: u32, enable: u8) -> u32 {
    guard(UNKNOWN, || {
        if cbid == 0 || cbid >= cbid_limit(DOMAIN_DRIVER) {
            return INVALID_PARAMETER;
        }
        state::DRIVER_API_ON.set(cbid, enable != 0);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cuptiActivityEnableLatencyTimestamps(enable: u8) -> u32 {
    guard(UNKNOWN, || {
        state::LATENCY_TIMESTAMPS.store(enable != 0, Relaxed);
        SUCCESS
    })
}

/// Accepted and otherwise ignored: switches of real CUPTI 13.0 that change nothing the
/// double simulates.
macro_rules! accepted_switch {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        pub extern "C" fn $name(_enable: u8) -> u32 {
            SUCCESS
        }
    )*};
}

accepted_switch!(
    cuptiActivityEnableAllocationSource,
    cuptiActivityEnableAllSyncRecords,
    cuptiActivityEnableLaunchAttributes,
    cuptiActivityEnableDeviceGraph,
    cuptiActivityEnableCudaEventDeviceTimestamps,
);

// ------------------------------------------------------------------ buffers

/// `CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`.
const FLUSH_FORCED: u32 = 1;

#[no_mangle]
pub extern "C" fn cuptiActivityFlushAll(flag: u32) -> u32 {
    guard(UNKNOWN, || {
        if !state::callbacks_registered() {
            return INVALID_OPERATION;
        }
        state::flush_all(flag & FLUSH_FORCED != 0);
        SUCCESS
    })
}

#[no_mangle]
pub extern "C" fn cuptiActivityFlush(_context: *mut c_void, _stream_id: u32, flag: u32) -> u32 {
    // Deprecated: context and stream are ignored (cupti_activity.h).
    cuptiActivityFlushAll(flag)
}

#[no_mangle]
pub extern "C" fn cuptiActivityFlushPeriod(time_ms: u32) -> u32 {
    guard(UNKNOWN, || {
        state::FLUSH_PERIOD_MS.store(time_ms, Relaxed);
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityGetNextRecord(
    buffer: *mut u8,
    valid_size: usize,
    record: *mut *mut u8,
) -> u32 {
    guard(UNKNOWN, || {
        if buffer.is_null() || record.is_null() {
            return INVALID_PARAMETER;
        }
        let v = state::version();
        // SAFETY: checked non-null; in/out record pointer per CUPTI's contract.
        let cur = unsafe { *record };
        let next = if cur.is_null() {
            0
        } else {
            let at = (cur as usize).wrapping_sub(buffer as usize);
            if at >= valid_size {
                return MAX_LIMIT_REACHED;
            }
            // SAFETY: `cur` is a record this function returned: at least 4 valid bytes.
            let k = unsafe { (cur as *const u32).read_unaligned() };
            let size = layout::record_size(v, k);
            if size == 0 {
                return INVALID_KIND;
            }
            at + size
        };
        if next >= valid_size {
            return MAX_LIMIT_REACHED;
        }
        if next + 4 > valid_size {
            return INVALID_KIND;
        }
        // SAFETY: next + 4 <= valid_size bytes of the client's buffer.
        let k = unsafe { (buffer.add(next) as *const u32).read_unaligned() };
        let size = layout::record_size(v, k);
        if size == 0 || next + size > valid_size {
            return INVALID_KIND;
        }
        // SAFETY: checked non-null above; next < valid_size.
        unsafe { *record = buffer.add(next) };
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityGetNumDroppedRecords(
    _context: *mut c_void,
    _stream_id: u32,
    dropped: *mut usize,
) -> u32 {
    guard(UNKNOWN, || {
        if dropped.is_null() {
            return INVALID_PARAMETER;
        }
        // SAFETY: checked non-null; the caller passes a writable size_t.
        unsafe { *dropped = state::take_dropped() as usize };
        SUCCESS
    })
}

// ------------------------------------------------------------------ external correlation

#[no_mangle]
pub extern "C" fn cuptiActivityPushExternalCorrelationId(kind: u32, id: u64) -> u32 {
    guard(UNKNOWN, || {
        if !state::valid_external_kind(kind) {
            return INVALID_PARAMETER;
        }
        state::push_external(kind, id);
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn cuptiActivityPopExternalCorrelationId(
    kind: u32,
    last_id: *mut u64,
) -> u32 {
    guard(UNKNOWN, || {
        if !state::valid_external_kind(kind) {
            return INVALID_PARAMETER;
        }
        match state::pop_external(kind) {
            Some(id) => {
                if !last_id.is_null() {
                    // SAFETY: checked non-null; the caller passes a writable uint64_t.
                    unsafe { *last_id = id };
                }
                SUCCESS
            }
            None => QUEUE_EMPTY,
        }
    })
}

// ------------------------------------------------------------------ teardown

/// Recorded, and otherwise a no-op: the tracer must never call it (it tears down every
/// CUPTI client in the process). `double_finalize_calls()` reports the count.
#[no_mangle]
pub extern "C" fn cuptiFinalize() -> u32 {
    guard(UNKNOWN, || {
        state::FINALIZE_CALLS.fetch_add(1, Relaxed);
        SUCCESS
    })
}
