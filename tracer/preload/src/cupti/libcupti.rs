//! libcupti behind a safe interface: the one module that calls CUPTI.
//!
//! The library is loaded at run time (never linked) and looked up with `dlsym`; every entry
//! point is typed with cupti-sys's function-pointer types (`cuptiActivityEnable_t`, ...), which
//! cupti-sys checks against the signatures bindgen generated from CUPTI's headers, and every
//! constant is cupti-sys's. Nothing outside this file holds a raw CUPTI function pointer.
//!
//! Search order (design note): a copy the process already has (RTLD_NOLOAD on libcupti.so.13,
//! .12 and the unversioned name), an explicit path (CUPROF_CUPTI_PATH), then the usual locations.
//! The library is never closed: CUPTI 13.0 leaves dangling pointers behind on dlclose.

use crate::host::error::{CuptiResult, StartError};
use cuprof_core::event::ApiDomain;
use cupti_sys::CUpti_driver_api_trace_cbid_enum as Drv;
use cupti_sys::CUpti_runtime_api_trace_cbid_enum as Rt;
use cupti_sys::{self as sys, symbols, CUptiResult};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};
use std::sync::OnceLock;

pub use sys::{BufferCompletedFn, BufferRequestedFn, CUpti_ActivityKind as ActivityKind};

/// The subscriber callback cuprof registers (`CUpti_CallbackFunc` without its `Option`).
pub type CallbackFn = unsafe extern "C" fn(
    userdata: *mut c_void,
    domain: sys::CUpti_CallbackDomain,
    cbid: sys::CUpti_CallbackId,
    data: *const c_void,
);

/// Which CUPTI external-correlation stack an id goes on: NVTX ranges and PyTorch operators
/// have one each, so an operator inside a range leaves the range's id in place.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Correlated {
    /// CUSTOM2: Kineto uses CUSTOM0 and CUSTOM1.
    Range,
    /// CUSTOM0, the kind Kineto gives PyTorch operators.
    TorchOp,
}

// The session tells ranges from operators by these kinds in the decoded records.
const _: () = {
    assert!(
        sys::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2.0
            == cuprof_core::EXTERNAL_KIND_CUPROF
    );
    assert!(
        sys::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0.0
            == cuprof_core::EXTERNAL_KIND_TORCH_OP
    );
};

impl Correlated {
    fn kind(self) -> sys::CUpti_ExternalCorrelationKind {
        match self {
            Correlated::Range => {
                sys::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2
            }
            Correlated::TorchOp => {
                sys::CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0
            }
        }
    }
}

/// What an API callback (runtime or driver domain) tells cuprof.
#[derive(Clone, Copy, Debug)]
pub struct ApiCall {
    pub domain: ApiDomain,
    pub cbid: u32,
    /// At the call's entry (not its exit).
    pub entering: bool,
    pub correlation: u32,
    /// For a call in [`STREAM_ORDERED_ALLOCATIONS`], at its entry: the stream handle
    /// (`cudaStream_t`/`CUstream`) it was given, as an integer. `None` for other calls.
    pub stream_argument: Option<u64>,
}

/// The stream-ordered allocation calls, whose stream argument [`read_callback`] reads. A
/// runtime call and the driver call it makes each have a callback (and correlation id).
pub const STREAM_ORDERED_ALLOCATIONS: [(ApiDomain, u32); 8] = [
    (
        ApiDomain::Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020.0,
    ),
    (
        ApiDomain::Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020.0,
    ),
    (
        ApiDomain::Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020.0,
    ),
    (
        ApiDomain::Runtime,
        Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020.0,
    ),
    (
        ApiDomain::Driver,
        Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync.0,
    ),
    (
        ApiDomain::Driver,
        Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz.0,
    ),
    (
        ApiDomain::Driver,
        Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync.0,
    ),
    (
        ApiDomain::Driver,
        Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz.0,
    ),
];

/// The stream argument of stream-ordered allocation call `cbid`, from its parameters
/// (cupti-sys's `*_params` structs of CUPTI's generated_*_meta.h); `None` for other calls.
///
/// # Safety
/// `params` must be the `functionParams` CUPTI passed with the callback of (`domain`,
/// `cbid`), during that callback, and not null.
unsafe fn stream_argument(domain: ApiDomain, cbid: u32, params: *const c_void) -> Option<u64> {
    use sys::{
        cuMemAllocAsync_params as CuAsync, cuMemAllocAsync_ptsz_params as CuAsyncPtsz,
        cuMemAllocFromPoolAsync_params as CuPool,
        cuMemAllocFromPoolAsync_ptsz_params as CuPoolPtsz,
        cudaMallocAsync_ptsz_v11020_params as RtAsyncPtsz,
        cudaMallocAsync_v11020_params as RtAsync,
        cudaMallocFromPoolAsync_ptsz_v11020_params as RtPoolPtsz,
        cudaMallocFromPoolAsync_v11020_params as RtPool,
    };
    use ApiDomain::{Driver, Runtime};
    // Each arm's SAFETY: CUPTI passes the parameter struct of the call its cbid names (the
    // caller's contract).
    let stream = match (domain, cbid) {
        (Runtime, c) if c == Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020.0 => {
            // SAFETY: see above.
            unsafe { field(params, |p: &RtAsync| p.hStream) }
        }
        (Runtime, c) if c == Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_ptsz_v11020.0 => {
            // SAFETY: see above.
            unsafe { field(params, |p: &RtAsyncPtsz| p.hStream) }
        }
        (Runtime, c) if c == Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020.0 => {
            // SAFETY: see above.
            unsafe { field(params, |p: &RtPool| p.stream) }
        }
        (Runtime, c) if c == Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_ptsz_v11020.0 => {
            // SAFETY: see above.
            unsafe { field(params, |p: &RtPoolPtsz| p.stream) }
        }
        (Driver, c) if c == Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync.0 => {
            // SAFETY: see above.
            unsafe { field(params, |p: &CuAsync| p.hStream) }
        }
        (Driver, c) if c == Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz.0 => {
            // SAFETY: see above.
            unsafe { field(params, |p: &CuAsyncPtsz| p.hStream) }
        }
        (Driver, c) if c == Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync.0 => {
            // SAFETY: see above.
            unsafe { field(params, |p: &CuPool| p.hStream) }
        }
        (Driver, c) if c == Drv::CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz.0 => {
            // SAFETY: see above.
            unsafe { field(params, |p: &CuPoolPtsz| p.hStream) }
        }
        _ => return None,
    };
    // torch writes a stream as the handle's bits (`int64_t(stream)`): keep them all.
    Some(stream as usize as u64)
}

/// Reads a field of the parameter struct `params` points to.
///
/// # Safety
/// `params` must point to a live `P`.
unsafe fn field<P, T>(params: *const c_void, read: impl FnOnce(&P) -> T) -> T {
    // SAFETY: the caller's contract.
    read(unsafe { &*params.cast::<P>() })
}

/// A subscriber callback, read: an API call, a resource event, or something cuprof ignores.
pub enum Callback {
    Api(ApiCall),
    /// A context is about to be destroyed.
    ContextDestroying,
    Other,
}

/// Reads the arguments CUPTI passed to a subscriber callback.
///
/// # Safety
/// The arguments must be those of a CUPTI subscriber callback, during that callback.
pub unsafe fn read_callback(
    domain: sys::CUpti_CallbackDomain,
    cbid: u32,
    data: *const c_void,
) -> Callback {
    use sys::CUpti_CallbackDomain as D;
    let api = match domain {
        D::CUPTI_CB_DOMAIN_RUNTIME_API => ApiDomain::Runtime,
        D::CUPTI_CB_DOMAIN_DRIVER_API => ApiDomain::Driver,
        D::CUPTI_CB_DOMAIN_RESOURCE
            if cbid
                == sys::CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING
                    .0 =>
        {
            return Callback::ContextDestroying
        }
        _ => return Callback::Other,
    };
    if data.is_null() {
        return Callback::Other;
    }
    // SAFETY: for the API domains CUPTI passes a CUpti_CallbackData (the caller's contract).
    let data = unsafe { &*(data as *const sys::CUpti_CallbackData) };
    let entering = data.callbackSite == sys::CUpti_ApiCallbackSite::CUPTI_API_ENTER;
    let params = data.functionParams;
    let stream_argument = if entering && !params.is_null() {
        // SAFETY: CUPTI's functionParams for this (domain, cbid), during its callback.
        unsafe { stream_argument(api, cbid, params) }
    } else {
        None
    };
    Callback::Api(ApiCall {
        domain: api,
        cbid,
        entering,
        correlation: data.correlationId,
        stream_argument,
    })
}

fn callback_domain(domain: ApiDomain) -> sys::CUpti_CallbackDomain {
    match domain {
        ApiDomain::Runtime => sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RUNTIME_API,
        ApiDomain::Driver => sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_DRIVER_API,
    }
}

/// The entry points cuprof cannot work without.
#[allow(non_snake_case)]
struct Required {
    cuptiGetVersion: sys::cuptiGetVersion_t,
    cuptiSubscribe: sys::cuptiSubscribe_t,
    cuptiUnsubscribe: sys::cuptiUnsubscribe_t,
    cuptiEnableCallback: sys::cuptiEnableCallback_t,
    cuptiSetThreadIdType: sys::cuptiSetThreadIdType_t,
    cuptiActivityRegisterCallbacks: sys::cuptiActivityRegisterCallbacks_t,
    cuptiActivityEnable: sys::cuptiActivityEnable_t,
    cuptiActivityDisable: sys::cuptiActivityDisable_t,
    cuptiActivityFlushAll: sys::cuptiActivityFlushAll_t,
    cuptiActivityGetNextRecord: sys::cuptiActivityGetNextRecord_t,
    cuptiActivityGetNumDroppedRecords: sys::cuptiActivityGetNumDroppedRecords_t,
    cuptiGetCallbackName: sys::cuptiGetCallbackName_t,
    cuptiGetResultString: sys::cuptiGetResultString_t,
    cuptiActivityPushExternalCorrelationId: sys::cuptiActivityPushExternalCorrelationId_t,
    cuptiActivityPopExternalCorrelationId: sys::cuptiActivityPopExternalCorrelationId_t,
}

/// Entry points of newer CUPTIs, used when present.
#[allow(non_snake_case)]
struct Optional {
    /// 13.0+: names cuprof to other tools and learns who holds CUPTI.
    cuptiSubscribe_v2: Option<sys::cuptiSubscribe_v2_t>,
    /// 12.5+, both or neither: switch the records of one API call on or off.
    api_switches: Option<(
        sys::cuptiActivityEnableRuntimeApi_t,
        sys::cuptiActivityEnableDriverApi_t,
    )>,
    cuptiActivityEnableLatencyTimestamps: Option<sys::cuptiActivityEnableLatencyTimestamps_t>,
}

/// The loaded libcupti.
pub struct Cupti {
    pub path: String,
    required: Required,
    optional: Optional,
    /// Our subscriber handle (null when not subscribed).
    subscriber: AtomicPtr<sys::CUpti_Subscriber_st>,
}

/// The dlopen handle of the libcupti cuprof loaded (never closed), for forwarding the calls
/// cuprof interposes.
static LOADED: OnceLock<usize> = OnceLock::new();

/// The function `name` of the library `handle` as the function-pointer type `F`.
///
/// # Safety
/// `handle` must be a live dlopen handle and `F` the C signature of the function `name`.
unsafe fn symbol<F: Copy>(handle: *mut c_void, name: &CStr) -> Option<F> {
    // SAFETY: handle is live (the caller's contract); dlsym only reads the symbol table.
    let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: per the function's contract, `p` is a function of type `F`.
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

/// `entry!(handle, name)`: cupti-sys's entry point `name`, typed `name_t` (the pairing
/// cupti-sys checks against the header's declaration).
macro_rules! entry {
    ($handle:expr, $name:ident, $ty:ident) => {
        // SAFETY: `$ty` is cupti-sys's checked signature of `$name`; the handle is live.
        unsafe { symbol::<sys::$ty>($handle, symbols::$name) }
    };
}

macro_rules! required {
    ($handle:expr, $($name:ident: $ty:ident),* $(,)?) => {
        Required {
            $($name: entry!($handle, $name, $ty)
                .ok_or(stringify!($name))?,)*
        }
    };
}

impl Cupti {
    /// # Safety
    /// `handle` must be a live dlopen handle of a CUPTI library.
    /// The error is the name of a required symbol the library lacks.
    unsafe fn from_handle(handle: *mut c_void, path: String) -> Result<Cupti, &'static str> {
        let required = required!(handle,
            cuptiGetVersion: cuptiGetVersion_t,
            cuptiSubscribe: cuptiSubscribe_t,
            cuptiUnsubscribe: cuptiUnsubscribe_t,
            cuptiEnableCallback: cuptiEnableCallback_t,
            cuptiSetThreadIdType: cuptiSetThreadIdType_t,
            cuptiActivityRegisterCallbacks: cuptiActivityRegisterCallbacks_t,
            cuptiActivityEnable: cuptiActivityEnable_t,
            cuptiActivityDisable: cuptiActivityDisable_t,
            cuptiActivityFlushAll: cuptiActivityFlushAll_t,
            cuptiActivityGetNextRecord: cuptiActivityGetNextRecord_t,
            cuptiActivityGetNumDroppedRecords: cuptiActivityGetNumDroppedRecords_t,
            cuptiGetCallbackName: cuptiGetCallbackName_t,
            cuptiGetResultString: cuptiGetResultString_t,
            cuptiActivityPushExternalCorrelationId: cuptiActivityPushExternalCorrelationId_t,
            cuptiActivityPopExternalCorrelationId: cuptiActivityPopExternalCorrelationId_t,
        );
        let runtime = entry!(
            handle,
            cuptiActivityEnableRuntimeApi,
            cuptiActivityEnableRuntimeApi_t
        );
        let driver = entry!(
            handle,
            cuptiActivityEnableDriverApi,
            cuptiActivityEnableDriverApi_t
        );
        let optional = Optional {
            cuptiSubscribe_v2: entry!(handle, cuptiSubscribe_v2, cuptiSubscribe_v2_t),
            api_switches: runtime.zip(driver),
            cuptiActivityEnableLatencyTimestamps: entry!(
                handle,
                cuptiActivityEnableLatencyTimestamps,
                cuptiActivityEnableLatencyTimestamps_t
            ),
        };
        Ok(Cupti {
            path,
            required,
            optional,
            subscriber: AtomicPtr::new(std::ptr::null_mut()),
        })
    }

    /// `cuptiGetVersion`: what decides the record layouts.
    pub fn version(&self) -> u32 {
        let mut version = 0u32;
        // SAFETY: writes one u32.
        unsafe { (self.required.cuptiGetVersion)(&mut version) };
        version
    }

    /// Becomes CUPTI's subscriber with `callback`. Errors are one line for stderr.
    pub fn subscribe(&self, callback: CallbackFn) -> Result<(), StartError> {
        let mut sub: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
        let mut holder = [0 as c_char; 256];
        let r = match self.optional.cuptiSubscribe_v2 {
            Some(subscribe_v2) => {
                let mut params = sys::CUpti_SubscriberParams {
                    structSize: std::mem::size_of::<sys::CUpti_SubscriberParams>(),
                    subscriberName: c"cuprof".as_ptr(),
                    oldSubscriberName: holder.as_mut_ptr(),
                    oldSubscriberSize: holder.len(),
                };
                // SAFETY: params and its buffer outlive the call; the callback lives forever
                // (the library is never unloaded).
                unsafe { subscribe_v2(&mut sub, Some(callback), std::ptr::null_mut(), &mut params) }
            }
            // SAFETY: CUPTI writes the handle; the callback lives forever.
            None => unsafe {
                (self.required.cuptiSubscribe)(&mut sub, Some(callback), std::ptr::null_mut())
            },
        };
        // SAFETY: the buffer is zeroed and CUPTI writes at most its size, NUL-terminated.
        let holder = unsafe { CStr::from_ptr(holder.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let who = if holder.is_empty() {
            "e.g. nsys, torch.profiler or another tracer".to_string()
        } else {
            format!("held by {holder:?}")
        };
        match r {
            CUptiResult::CUPTI_SUCCESS => {
                self.subscriber.store(sub, Relaxed);
                Ok(())
            }
            CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => {
                Err(StartError::CuptiHeld {
                    holder: who,
                    result: self.result_string(r),
                })
            }
            CUptiResult::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES => {
                Err(StartError::CuptiPrivileges(self.result_string(r)))
            }
            _ => Err(StartError::Subscribe(self.result_string(r))),
        }
    }

    /// Gives CUPTI's subscriber slot up (once; later calls do nothing).
    pub fn unsubscribe(&self) {
        let sub = self.subscriber.swap(std::ptr::null_mut(), Relaxed);
        if !sub.is_null() {
            // SAFETY: our own subscriber handle, unsubscribed once.
            unsafe { (self.required.cuptiUnsubscribe)(sub) };
        }
    }

    /// Turns on our subscriber's callback for one API call.
    pub fn enable_api_callback(&self, domain: ApiDomain, cbid: u32) {
        self.enable_callback(callback_domain(domain), cbid);
    }

    /// Turns on our subscriber's callback for a context about to be destroyed.
    pub fn enable_context_destroy_callback(&self) {
        self.enable_callback(
            sys::CUpti_CallbackDomain::CUPTI_CB_DOMAIN_RESOURCE,
            sys::CUpti_CallbackIdResource::CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING.0,
        );
    }

    fn enable_callback(&self, domain: sys::CUpti_CallbackDomain, cbid: u32) {
        let sub = self.subscriber.load(Relaxed);
        // SAFETY: integer arguments and our own subscriber handle.
        unsafe { (self.required.cuptiEnableCallback)(1, sub, domain, cbid) };
    }

    /// Thread ids in records are the OS's (gettid), as Kineto writes them.
    pub fn use_system_thread_ids(&self) {
        // SAFETY: a plain CUPTI call with an integer argument.
        unsafe {
            (self.required.cuptiSetThreadIdType)(
                sys::CUpti_ActivityThreadIdType::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM,
            )
        };
    }

    /// Registers the activity-buffer callbacks. Errors are CUPTI's words.
    pub fn register_buffer_callbacks(
        &self,
        requested: BufferRequestedFn,
        completed: BufferCompletedFn,
    ) -> Result<(), CuptiResult> {
        // SAFETY: the callbacks live forever (the library is never unloaded).
        let r = unsafe {
            (self.required.cuptiActivityRegisterCallbacks)(Some(requested), Some(completed))
        };
        self.check(r)
    }

    /// Turns an activity kind on. Errors are CUPTI's words.
    pub fn enable_kind(&self, kind: ActivityKind) -> Result<(), CuptiResult> {
        // SAFETY: a plain CUPTI call with an integer argument.
        let r = unsafe { (self.required.cuptiActivityEnable)(kind) };
        self.check(r)
    }

    pub fn disable_kind(&self, kind: ActivityKind) {
        // SAFETY: a plain CUPTI call with an integer argument.
        unsafe { (self.required.cuptiActivityDisable)(kind) };
    }

    /// Asks CUPTI for its buffers: all of them (`forced`), or those whose records are complete.
    pub fn flush_all(&self, forced: bool) {
        let flag = if forced {
            sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED.0
        } else {
            0
        };
        // SAFETY: a plain CUPTI call; our completion callback takes no lock the caller holds.
        unsafe { (self.required.cuptiActivityFlushAll)(flag) };
    }

    /// The offsets of the records in a completed buffer, in order.
    ///
    /// # Safety
    /// `buffer` must be the valid part of a buffer CUPTI filled and handed back.
    pub unsafe fn records<'a>(&'a self, buffer: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
        let start = buffer.as_ptr() as *mut u8;
        let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
        std::iter::from_fn(move || {
            // SAFETY: the caller's contract; CUPTI only reads the buffer (the pointer is
            // `*mut` in its signature) and advances `record` within it.
            let r = unsafe {
                (self.required.cuptiActivityGetNextRecord)(start, buffer.len(), &mut record)
            };
            if r != CUptiResult::CUPTI_SUCCESS || record.is_null() {
                return None;
            }
            let offset = (record as usize).checked_sub(start as usize)?;
            (offset < buffer.len()).then_some(offset)
        })
    }

    /// Records CUPTI dropped for this context and stream (its buffers were full).
    pub fn dropped_records(&self, context: sys::CUcontext, stream: u32) -> usize {
        let mut dropped = 0usize;
        // SAFETY: writes one usize; context/stream are what CUPTI passed to the completion.
        let r = unsafe {
            (self.required.cuptiActivityGetNumDroppedRecords)(context, stream, &mut dropped)
        };
        if r == CUptiResult::CUPTI_SUCCESS {
            dropped
        } else {
            0
        }
    }

    /// Pushes `id` as the calling thread's external correlation id on `stack`.
    pub fn push_correlation(&self, stack: Correlated, id: u64) -> bool {
        // SAFETY: a plain CUPTI call with integer arguments.
        let r = unsafe { (self.required.cuptiActivityPushExternalCorrelationId)(stack.kind(), id) };
        r == CUptiResult::CUPTI_SUCCESS
    }

    pub fn pop_correlation(&self, stack: Correlated) {
        let mut last = 0u64;
        // SAFETY: writes one u64.
        unsafe { (self.required.cuptiActivityPopExternalCorrelationId)(stack.kind(), &mut last) };
    }

    /// CUPTI's push and pop of external correlation ids and the kind of `stack`, for the
    /// native operator observer, which pushes and pops them itself (`ops::native`).
    pub fn correlation_functions(
        &self,
        stack: Correlated,
    ) -> (
        sys::cuptiActivityPushExternalCorrelationId_t,
        sys::cuptiActivityPopExternalCorrelationId_t,
        u32,
    ) {
        (
            self.required.cuptiActivityPushExternalCorrelationId,
            self.required.cuptiActivityPopExternalCorrelationId,
            stack.kind().0,
        )
    }

    /// The name of an API call (`cudaLaunchKernel_v7000`), if CUPTI knows it.
    pub fn callback_name(&self, domain: ApiDomain, cbid: u32) -> Option<String> {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: CUPTI writes a pointer to a static name or fails.
        let r =
            unsafe { (self.required.cuptiGetCallbackName)(callback_domain(domain), cbid, &mut s) };
        if r != CUptiResult::CUPTI_SUCCESS || s.is_null() {
            return None;
        }
        // SAFETY: CUPTI's callback names are static C strings.
        Some(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
    }

    /// Queued and submitted times on kernel records, where this CUPTI has them.
    pub fn enable_latency_timestamps(&self) {
        if let Some(f) = self.optional.cuptiActivityEnableLatencyTimestamps {
            // SAFETY: a plain CUPTI call with an integer argument.
            unsafe { f(1) };
        }
    }

    /// Whether this CUPTI can switch the records of single API calls (12.5+).
    pub fn has_api_switches(&self) -> bool {
        self.optional.api_switches.is_some()
    }

    /// Switches the records of one API call on or off (nothing without [`Self::has_api_switches`]).
    pub fn switch_api_call(&self, domain: ApiDomain, cbid: u32, on: bool) {
        let Some((runtime, driver)) = self.optional.api_switches else {
            return;
        };
        let set = match domain {
            ApiDomain::Runtime => runtime,
            ApiDomain::Driver => driver,
        };
        // SAFETY: CUPTI's per-call switch, integer arguments.
        unsafe { set(cbid, on as u8) };
    }

    fn check(&self, r: CUptiResult) -> Result<(), CuptiResult> {
        if r == CUptiResult::CUPTI_SUCCESS {
            Ok(())
        } else {
            Err(self.result_string(r))
        }
    }

    fn result_string(&self, r: CUptiResult) -> CuptiResult {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: CUPTI writes a pointer to a static string or leaves it NULL.
        let ok = unsafe { (self.required.cuptiGetResultString)(r, &mut s) }
            == CUptiResult::CUPTI_SUCCESS;
        if ok && !s.is_null() {
            // SAFETY: CUPTI's result strings are static C strings.
            let text = unsafe { CStr::from_ptr(s) }.to_string_lossy();
            CuptiResult(format!("{text} ({})", r.0))
        } else {
            CuptiResult(format!("CUPTI error {}", r.0))
        }
    }
}

const SONAMES: [&CStr; 3] = [c"libcupti.so.13", c"libcupti.so.12", c"libcupti.so"];

fn dlerror_string() -> String {
    // SAFETY: dlerror returns NULL or a thread-local NUL-terminated string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null dlerror strings are valid C strings.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn dlopen(path: &str, flags: c_int) -> Result<*mut c_void, String> {
    let c = CString::new(path).map_err(|_| format!("{path:?} contains a NUL byte"))?;
    // SAFETY: c is a valid C string; dlopen has no other preconditions.
    let h = unsafe { libc::dlopen(c.as_ptr(), flags) };
    if h.is_null() {
        Err(dlerror_string())
    } else {
        Ok(h)
    }
}

/// Where libcupti may be, in the order they are tried.
fn candidates(explicit: Option<&str>) -> Vec<String> {
    let sonames = SONAMES.map(|s| s.to_string_lossy().into_owned());
    let mut v = Vec::new();
    if let Some(p) = explicit {
        v.push(p.to_string());
    }
    v.extend(sonames.iter().cloned());
    let mut roots: Vec<String> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(r) = std::env::var(var) {
            roots.push(r);
        }
    }
    roots.push("/usr/local/cuda".into());
    for r in roots {
        for sub in ["lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib"] {
            for so in &sonames {
                v.push(format!("{r}/{sub}/{so}"));
            }
        }
    }
    v
}

/// Finds and loads libcupti. The error lists what was tried.
pub fn load(explicit: Option<&str>) -> Result<Cupti, StartError> {
    let flags_noload = libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL;
    let mut handle = None;
    if explicit.is_none() {
        for so in SONAMES {
            let so = so.to_string_lossy();
            if let Ok(h) = dlopen(&so, flags_noload) {
                handle = Some((h, format!("{so} (already loaded)")));
                break;
            }
        }
    }
    let mut errors = Vec::new();
    if handle.is_none() {
        for path in candidates(explicit) {
            match dlopen(&path, libc::RTLD_NOW | libc::RTLD_GLOBAL) {
                Ok(h) => {
                    handle = Some((h, path));
                    break;
                }
                Err(e) => {
                    if explicit.is_some() && errors.is_empty() {
                        // An explicit path that fails is the one error worth showing.
                        return Err(StartError::CuptiPath { path, reason: e });
                    }
                    errors.push(e);
                }
            }
        }
    }
    let Some((h, path)) = handle else {
        return Err(StartError::CuptiNotFound);
    };
    let _ = LOADED.set(h as usize);
    // SAFETY: h is a live handle from dlopen.
    unsafe { Cupti::from_handle(h, path.clone()) }
        .map_err(|symbol| StartError::CuptiSymbol { path, symbol })
}

/// The real libcupti function `name` (the copy cuprof loaded, else one already in the process,
/// else the next definition after libcuprof.so), for forwarding an interposed call.
///
/// # Safety
/// `F` must be the C signature of the CUPTI function `name`.
unsafe fn real<F: Copy>(name: &CStr) -> Option<F> {
    let mut handles: Vec<*mut c_void> = LOADED
        .get()
        .map(|&h| h as *mut c_void)
        .into_iter()
        .collect();
    for so in SONAMES {
        // SAFETY: RTLD_NOLOAD only finds an already loaded copy.
        let h = unsafe { libc::dlopen(so.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if !h.is_null() {
            handles.push(h);
        }
    }
    handles.push(libc::RTLD_NEXT);
    // SAFETY: live handles (or RTLD_NEXT); `F` per the function's contract.
    handles
        .into_iter()
        .find_map(|h| unsafe { symbol::<F>(h, name) })
}

/// The calls cuprof interposes (a second CUPTI client is starting), forwarded to libcupti.
/// Each returns CUPTI_ERROR_NOT_INITIALIZED when no libcupti can be found.
pub mod forward {
    use super::{real, symbols, sys, CUptiResult};
    use std::ffi::c_void;

    /// What an interposed call returns when it cannot be forwarded.
    pub const NOT_INITIALIZED: CUptiResult = CUptiResult::CUPTI_ERROR_NOT_INITIALIZED;

    /// # Safety
    /// CUPTI's `cuptiSubscribe` contract.
    pub unsafe fn subscribe(
        subscriber: *mut sys::CUpti_SubscriberHandle,
        callback: sys::CUpti_CallbackFunc,
        userdata: *mut c_void,
    ) -> CUptiResult {
        // SAFETY: cupti-sys's signature of the function; the caller's arguments.
        match unsafe { real::<sys::cuptiSubscribe_t>(symbols::cuptiSubscribe) } {
            // SAFETY: the caller's contract.
            Some(f) => unsafe { f(subscriber, callback, userdata) },
            None => NOT_INITIALIZED,
        }
    }

    /// # Safety
    /// CUPTI's `cuptiSubscribe_v2` contract.
    pub unsafe fn subscribe_v2(
        subscriber: *mut sys::CUpti_SubscriberHandle,
        callback: sys::CUpti_CallbackFunc,
        userdata: *mut c_void,
        params: *mut sys::CUpti_SubscriberParams,
    ) -> CUptiResult {
        // SAFETY: cupti-sys's signature of the function.
        match unsafe { real::<sys::cuptiSubscribe_v2_t>(symbols::cuptiSubscribe_v2) } {
            // SAFETY: the caller's contract.
            Some(f) => unsafe { f(subscriber, callback, userdata, params) },
            None => NOT_INITIALIZED,
        }
    }

    /// # Safety
    /// CUPTI's `cuptiActivityRegisterCallbacks` contract.
    pub unsafe fn register_callbacks(
        requested: sys::CUpti_BuffersCallbackRequestFunc,
        completed: sys::CUpti_BuffersCallbackCompleteFunc,
    ) -> CUptiResult {
        // SAFETY: cupti-sys's signature of the function.
        match unsafe {
            real::<sys::cuptiActivityRegisterCallbacks_t>(symbols::cuptiActivityRegisterCallbacks)
        } {
            // SAFETY: the caller's contract.
            Some(f) => unsafe { f(requested, completed) },
            None => NOT_INITIALIZED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HANDLE: u64 = 0x7f00_dead_0000;

    #[test]
    fn reads_the_stream_of_each_stream_ordered_allocation() {
        // Parameter structs as CUPTI lays them out, the stream at 16 (`devPtr, size,
        // hStream`) or at 24 (`ptr, size, memPool, stream`).
        let after_size = [0x1000u64, 4096, HANDLE, 0];
        let after_pool = [0x1000u64, 4096, 0x5000, HANDLE];
        let read = |(domain, cbid): (ApiDomain, u32), params: &[u64; 4]| {
            // SAFETY: a 32-byte struct of the layout the call's cbid names, alive here.
            unsafe { stream_argument(domain, cbid, params.as_ptr().cast()) }
        };
        let [rt_async, rt_async_ptsz, rt_pool, rt_pool_ptsz, cu_async, cu_async_ptsz, cu_pool, cu_pool_ptsz] =
            STREAM_ORDERED_ALLOCATIONS;
        for call in [rt_async, rt_async_ptsz, cu_async, cu_async_ptsz] {
            assert_eq!(read(call, &after_size), Some(HANDLE), "{call:?}");
        }
        for call in [rt_pool, rt_pool_ptsz, cu_pool, cu_pool_ptsz] {
            assert_eq!(read(call, &after_pool), Some(HANDLE), "{call:?}");
        }
        let cuda_malloc = (
            ApiDomain::Runtime,
            Rt::CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020.0,
        );
        assert_eq!(read(cuda_malloc, &after_size), None);
    }
}
