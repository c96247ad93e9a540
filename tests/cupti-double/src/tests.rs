//! In-process tests of the double: Rust callbacks registered through the exported C
//! entry points, records parsed back by byte offset.
//!
//! The double's state is process-wide, so every test holds `serial()` and starts from
//! `state::reset`.

use crate::cupti::*;
use crate::layout::{self, kind, off, rd_u32, rd_u64};
use crate::state::{self, lock};
use crate::*;
use std::ffi::{c_void, CStr};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

// ------------------------------------------------------------------ test client

static BUF_SIZE: AtomicUsize = AtomicUsize::new(1 << 20);
static MAX_RECORDS: AtomicUsize = AtomicUsize::new(0);
static DECLINE: AtomicBool = AtomicBool::new(false);
/// Calls CUPTI from inside the callbacks (must not deadlock).
static REENTER: AtomicBool = AtomicBool::new(false);
static REQUESTS: Mutex<Vec<(usize, u32)>> = Mutex::new(Vec::new());
static DELIVERIES: Mutex<Vec<Delivery>> = Mutex::new(Vec::new());
static CALLBACKS: Mutex<Vec<Cb>> = Mutex::new(Vec::new());

#[derive(Clone)]
struct Delivery {
    ptr: usize,
    size: usize,
    data: Vec<u8>,
    thread: Option<String>,
}

#[derive(Clone, Debug)]
struct Cb {
    domain: u32,
    cbid: u32,
    site: u32,
    function: String,
    symbol: String,
    correlation_id: u32,
    correlation_data_seen: u64,
    /// The stream handle in cudaMallocAsync's / cudaFreeAsync's parameters (0 for others).
    stream_argument: u64,
}

fn gettid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

unsafe extern "C" fn t_requested(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let n = BUF_SIZE.load(SeqCst);
    let p = if DECLINE.load(SeqCst) {
        std::ptr::null_mut()
    } else {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer, power-of-two alignment.
        assert_eq!(unsafe { libc::posix_memalign(&mut p, 8, n) }, 0);
        // Poison, so fields the double forgets to write show up.
        // SAFETY: p has n writable bytes.
        unsafe { std::ptr::write_bytes(p as *mut u8, 0xAB, n) };
        p as *mut u8
    };
    lock(&REQUESTS).push((p as usize, gettid()));
    if REENTER.load(SeqCst) {
        let mut ts = 0u64;
        // SAFETY: valid out pointer.
        unsafe { cuptiGetTimestamp(&mut ts) };
        assert_eq!(cuptiActivityFlushAll(0), 0);
    }
    // SAFETY: CUPTI passes valid out pointers.
    unsafe {
        *buffer = p;
        *size = n;
        *max = MAX_RECORDS.load(SeqCst);
    }
}

unsafe extern "C" fn t_completed(
    _ctx: *mut c_void,
    _stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    // SAFETY: `valid` initialised bytes at `buffer`.
    let data = unsafe { std::slice::from_raw_parts(buffer, valid) }.to_vec();
    lock(&DELIVERIES).push(Delivery {
        ptr: buffer as usize,
        size,
        data,
        thread: std::thread::current().name().map(str::to_owned),
    });
    if REENTER.load(SeqCst) {
        assert_eq!(cuptiActivityFlushAll(1), 0);
    }
    // SAFETY: allocated with posix_memalign in t_requested, delivered once.
    unsafe { libc::free(buffer as *mut c_void) };
}

unsafe extern "C" fn t_callback(_ud: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    // SAFETY: CUPTI passes a CUpti_CallbackData for API domains.
    let d = unsafe { &*(data as *const CallbackData) };
    let s = |p: *const std::ffi::c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: NUL-terminated strings owned by the double.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // SAFETY: correlationData points at a u64 valid for the call.
    let slot = unsafe { &mut *d.correlation_data };
    let seen = *slot;
    if d.callback_site == API_ENTER {
        *slot = 0xC0FFEE + u64::from(d.correlation_id);
    }
    let params = d.function_params;
    let stream_argument = match (domain, cbid) {
        // SAFETY: the double passes cudaMallocAsync's parameter struct with its cbid.
        (DOMAIN_RUNTIME, 373) => unsafe { &*(params as *const MallocAsyncParams) }.h_stream,
        // SAFETY: the double passes cudaFreeAsync's parameter struct with its cbid.
        (DOMAIN_RUNTIME, 375) => unsafe { &*(params as *const FreeAsyncParams) }.h_stream,
        _ => std::ptr::null_mut(),
    } as u64;
    lock(&CALLBACKS).push(Cb {
        domain,
        cbid,
        site: d.callback_site,
        function: s(d.function_name),
        symbol: s(d.symbol_name),
        correlation_id: d.correlation_id,
        correlation_data_seen: seen,
        stream_argument,
    });
}

fn serial(version: u32) -> MutexGuard<'static, ()> {
    let g = lock(&SERIAL);
    state::reset(version);
    BUF_SIZE.store(1 << 20, SeqCst);
    MAX_RECORDS.store(0, SeqCst);
    DECLINE.store(false, SeqCst);
    REENTER.store(false, SeqCst);
    lock(&REQUESTS).clear();
    lock(&DELIVERIES).clear();
    lock(&CALLBACKS).clear();
    g
}

fn subscribe(h: &mut usize) -> u32 {
    // SAFETY: valid out pointer.
    unsafe { cuptiSubscribe(h, Some(t_callback), std::ptr::null_mut()) }
}

fn dropped() -> usize {
    let mut n = 0usize;
    // SAFETY: valid out pointer.
    let rc = unsafe { cuptiActivityGetNumDroppedRecords(std::ptr::null_mut(), 0, &mut n) };
    assert_eq!(rc, 0);
    n
}

fn register() {
    assert_eq!(
        cuptiActivityRegisterCallbacks(Some(t_requested), Some(t_completed)),
        0
    );
}

fn enable(kinds: &[u32]) {
    for &k in kinds {
        assert_eq!(cuptiActivityEnable(k), 0);
    }
}

/// A record read back through cuptiActivityGetNextRecord.
#[derive(Clone, Debug)]
struct Rec {
    kind: u32,
    bytes: Vec<u8>,
}

impl Rec {
    fn u32(&self, at: usize) -> u32 {
        rd_u32(&self.bytes, at)
    }
    fn u64(&self, at: usize) -> u64 {
        rd_u64(&self.bytes, at)
    }
    fn cstr(&self, at: usize) -> String {
        let p = self.u64(at) as usize as *const std::ffi::c_char;
        assert!(!p.is_null());
        // SAFETY: pointer fields point at strings the double keeps alive.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Steps over one buffer's records with the exported iterator, on an 8-aligned copy.
fn parse(data: &[u8]) -> Vec<Rec> {
    let mut words = vec![0u64; data.len().div_ceil(8)];
    // SAFETY: words has at least data.len() bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(data.as_ptr(), words.as_mut_ptr() as *mut u8, data.len())
    };
    let base = words.as_mut_ptr() as *mut u8;
    let mut out = Vec::new();
    let mut rec: *mut u8 = std::ptr::null_mut();
    loop {
        // SAFETY: base has data.len() valid bytes; rec is null or a previous result.
        let rc = unsafe { cuptiActivityGetNextRecord(base, data.len(), &mut rec) };
        if rc == res::MAX_LIMIT_REACHED {
            break;
        }
        assert_eq!(rc, 0, "GetNextRecord failed after {} records", out.len());
        let at = rec as usize - base as usize;
        let k = rd_u32(data, at);
        let size = layout::record_size(state::version(), k);
        out.push(Rec {
            kind: k,
            bytes: data[at..at + size].to_vec(),
        });
    }
    out
}

fn delivered_records() -> Vec<Rec> {
    lock(&DELIVERIES)
        .iter()
        .flat_map(|d| parse(&d.data))
        .collect()
}

fn flush_forced() -> Vec<Rec> {
    assert_eq!(cuptiActivityFlushAll(1), 0);
    delivered_records()
}

fn launch(name: &CStr, stream: u32) -> u32 {
    // SAFETY: valid C string.
    unsafe { double_launch_kernel(name.as_ptr(), 0, stream, 2, 1, 1, 128, 1, 1, 10_000) }
}

// ------------------------------------------------------------------ layouts and ABI

#[test]
fn callback_data_matches_header_offsets() {
    use std::mem::{offset_of, size_of};
    assert_eq!(offset_of!(CallbackData, callback_site), 0);
    assert_eq!(offset_of!(CallbackData, function_name), 8);
    assert_eq!(offset_of!(CallbackData, function_params), 16);
    assert_eq!(offset_of!(CallbackData, function_return_value), 24);
    assert_eq!(offset_of!(CallbackData, symbol_name), 32);
    assert_eq!(offset_of!(CallbackData, context), 40);
    assert_eq!(offset_of!(CallbackData, context_uid), 48);
    assert_eq!(offset_of!(CallbackData, correlation_data), 56);
    assert_eq!(offset_of!(CallbackData, correlation_id), 64);
    assert_eq!(size_of::<CallbackData>(), 72);
    assert_eq!(offset_of!(FreeAsyncParams, dev_ptr), 0);
    assert_eq!(offset_of!(FreeAsyncParams, h_stream), 8);
    assert_eq!(size_of::<FreeAsyncParams>(), 16);
}

#[test]
fn names_and_results() {
    let _g = serial(layout::VERSION_13_0);
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: valid out pointer; the result is a static string.
    unsafe {
        assert_eq!(cuptiGetCallbackName(2, 211, &mut p), 0);
        assert_eq!(
            CStr::from_ptr(p).to_str().unwrap(),
            "cudaLaunchKernel_v7000"
        );
        assert_eq!(cuptiGetCallbackName(2, 311, &mut p), 0);
        assert_eq!(
            CStr::from_ptr(p).to_str().unwrap(),
            "cudaGraphLaunch_v10000"
        );
        assert_eq!(cuptiGetCallbackName(1, 307, &mut p), 0);
        assert_eq!(CStr::from_ptr(p).to_str().unwrap(), "cuLaunchKernel");
        assert_eq!(
            cuptiGetCallbackName(2, 9999, &mut p),
            res::INVALID_PARAMETER
        );
        assert!(p.is_null());
        assert_eq!(cuptiGetResultString(39, &mut p), 0);
        assert_eq!(
            CStr::from_ptr(p).to_str().unwrap(),
            "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
        );
        assert_eq!(cuptiGetResultString(12, &mut p), 0);
        assert_eq!(
            CStr::from_ptr(p).to_str().unwrap(),
            "CUPTI_ERROR_MAX_LIMIT_REACHED"
        );
    }
}

#[test]
fn version_selection() {
    assert_eq!(state::parse_version(None), 130001);
    assert_eq!(state::parse_version(Some("13")), 130001);
    assert_eq!(state::parse_version(Some("12")), 28);
    assert_eq!(state::parse_version(Some("19")), 19);
    assert_eq!(state::parse_version(Some("junk")), 130001);
    let _g = serial(28);
    let mut v = 0;
    // SAFETY: valid out pointer.
    assert_eq!(unsafe { cuptiGetVersion(&mut v) }, 0);
    assert_eq!(v, 28);
}

#[test]
fn fail_injection() {
    let f = state::parse_fail("subscribe=39, enable=35,register=15,version=15,enable.10=7,bad");
    assert_eq!(f.subscribe, Some(39));
    assert_eq!(f.enable, Some(35));
    assert_eq!(f.register, Some(15));
    assert_eq!(f.version, Some(15));
    assert_eq!(f.enable_kind.get(&10), Some(&7));
    let _g = serial(layout::VERSION_13_0);
    state::set_fail(state::parse_fail("subscribe=39,enable.10=35,register=15"));
    let mut h = 0usize;
    assert_eq!(subscribe(&mut h), 39);
    assert_eq!(cuptiActivityEnable(kind::CONCURRENT_KERNEL), 35);
    assert_eq!(cuptiActivityEnable(kind::RUNTIME), 0);
    assert_eq!(
        cuptiActivityRegisterCallbacks(Some(t_requested), Some(t_completed)),
        15
    );
    assert_eq!(cuptiActivityFlushAll(1), res::INVALID_OPERATION);
}

// ------------------------------------------------------------------ records by offset

#[test]
fn kernel_and_api_records_13() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::CONCURRENT_KERNEL, kind::RUNTIME]);
    assert_eq!(cuptiSetThreadIdType(1), 0);
    let before = state::now_ns();
    let corr = launch(c"_Z6kernelPfi", 7);
    let recs = flush_forced();
    assert_eq!(recs.len(), 2);
    let (api, k) = (&recs[0], &recs[1]);
    assert_eq!(api.kind, kind::RUNTIME);
    assert_eq!(api.bytes.len(), 40);
    assert_eq!(api.u32(off::api::CBID), 211);
    assert_eq!(api.u32(off::api::CORRELATION_ID), corr);
    assert_eq!(api.u32(off::api::PROCESS_ID), std::process::id());
    assert_eq!(api.u32(off::api::THREAD_ID), gettid());
    assert_eq!(api.u32(off::api::RETURN_VALUE), 0);
    let api_start = api.u64(off::api::START);
    assert!(api_start >= before);
    assert_eq!(api.u64(off::api::END), api_start + 2000);

    assert_eq!(k.kind, kind::CONCURRENT_KERNEL);
    assert_eq!(k.bytes.len(), 216);
    assert_eq!(k.u32(off::kernel::CORRELATION_ID), corr);
    assert_eq!(k.u32(off::kernel::STREAM_ID), 7);
    assert_eq!(k.u32(off::kernel::DEVICE_ID), 0);
    assert_eq!(k.u32(off::kernel::CONTEXT_ID), 1);
    assert_eq!(k.u32(off::kernel::GRID_X), 2);
    assert_eq!(k.u32(off::kernel::BLOCK_X), 128);
    assert_eq!(k.u32(off::kernel::DYNAMIC_SHARED_MEMORY), 1024);
    assert_eq!(u16::from_le_bytes([k.bytes[6], k.bytes[7]]), 32);
    assert_eq!(k.cstr(off::kernel::NAME), "_Z6kernelPfi");
    let start = k.u64(off::kernel::START);
    assert!(start >= api_start + 5000);
    assert_eq!(k.u64(off::kernel::END), start + 10_000);
    assert_eq!(k.u64(off::kernel::COMPLETED), start + 10_000);
    // Latency timestamps are off by default: CUPTI_TIMESTAMP_UNKNOWN.
    assert_eq!(k.u64(off::kernel::QUEUED), 0);
    assert_eq!(k.u64(off::kernel::SUBMITTED), 0);
    assert_eq!(k.bytes[off::kernel::IS_DEVICE_LAUNCHED], 0);
    assert!(
        k.bytes[209..216].iter().all(|&b| b == 0),
        "tail padding zeroed"
    );

    // Same stream: the next kernel starts after this one ends; name pointer is interned.
    assert_eq!(cuptiActivityEnableLatencyTimestamps(1), 0);
    lock(&DELIVERIES).clear();
    launch(c"_Z6kernelPfi", 7);
    let recs = flush_forced();
    let k2 = &recs[1];
    assert!(k2.u64(off::kernel::START) >= start + 10_000);
    assert_eq!(k2.u64(off::kernel::NAME), k.u64(off::kernel::NAME));
    assert!(k2.u64(off::kernel::GRID_ID) > k.u64(off::kernel::GRID_ID));
    assert!(k2.u64(off::kernel::QUEUED) > 0);
}

#[test]
fn default_thread_id_is_pthread_self() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::RUNTIME]);
    launch(c"k", 0);
    let recs = flush_forced();
    // SAFETY: no preconditions.
    let me = unsafe { libc::pthread_self() } as u32;
    assert_eq!(recs[0].u32(off::api::THREAD_ID), me);
}

#[test]
fn layouts_12_9_and_older() {
    for (v, kernel, memcpy, memory, sync) in [
        (28u32, 208usize, 96usize, 128usize, 56usize),
        (19, 208, 88, 120, 40),
        (layout::VERSION_13_0, 216, 96, 128, 56),
    ] {
        let _g = serial(v);
        register();
        enable(&[
            kind::CONCURRENT_KERNEL,
            kind::MEMCPY,
            kind::MEMORY2,
            kind::SYNCHRONIZATION,
        ]);
        launch(c"k", 1);
        double_memcpy(1, 1, 3, 4096, 0, 1, 1000, 1);
        double_malloc(0, 1 << 20);
        double_sync(3, 1, 500);
        let recs = flush_forced();
        let sizes: Vec<(u32, usize)> = recs.iter().map(|r| (r.kind, r.bytes.len())).collect();
        assert_eq!(
            sizes,
            vec![
                (kind::CONCURRENT_KERNEL, kernel),
                (kind::MEMCPY, memcpy),
                (kind::MEMORY2, memory),
                (kind::SYNCHRONIZATION, sync)
            ],
            "version {v}"
        );
        let total: usize = lock(&DELIVERIES).iter().map(|d| d.data.len()).sum();
        assert_eq!(total, kernel + memcpy + memory + sync);
        let m = &recs[1];
        if memcpy == 96 {
            assert_eq!(m.u64(off::memcpy::COPY_COUNT), 1);
        }
        // Byte 84: isDeviceLaunched in 13.0, padding (zero) in 12.x.
        assert_eq!(m.bytes[off::memcpy::IS_DEVICE_LAUNCHED], 0);
        assert_eq!(m.bytes[off::memcpy::FLAGS], 1, "async flag");
    }
}

#[test]
fn memcpy_carries_driver_and_runtime_ids() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::MEMCPY, kind::RUNTIME, kind::DRIVER]);
    let r = double_memcpy(2, 3, 2, 1 << 20, 0, 0, 5000, 0);
    let recs = flush_forced();
    let kinds: Vec<u32> = recs.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, vec![kind::DRIVER, kind::RUNTIME, kind::MEMCPY]);
    let drv = &recs[0];
    assert_eq!(drv.u32(off::api::CBID), 278, "cuMemcpyDtoH_v2");
    let d = drv.u32(off::api::CORRELATION_ID);
    assert_eq!(d, r + 1);
    assert_eq!(recs[1].u32(off::api::CBID), 31, "cudaMemcpy_v3020");
    assert_eq!(recs[1].u32(off::api::CORRELATION_ID), r);
    let m = &recs[2];
    assert_eq!(m.u32(off::memcpy::CORRELATION_ID), d);
    assert_eq!(m.u32(off::memcpy::RUNTIME_CORRELATION_ID), r);
    assert_eq!(m.bytes[off::memcpy::COPY_KIND], 2);
    assert_eq!(m.bytes[off::memcpy::SRC_KIND], 3);
    assert_eq!(m.bytes[off::memcpy::DST_KIND], 2);
    assert_eq!(m.bytes[off::memcpy::FLAGS], 0);
    assert_eq!(m.u64(off::memcpy::BYTES), 1 << 20);
    assert_eq!(m.u64(off::memcpy::END) - m.u64(off::memcpy::START), 5000);
    // The sync copy's API calls end after the copy.
    assert!(recs[1].u64(off::api::END) > m.u64(off::memcpy::END));
}

#[test]
fn memset_record() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::MEMSET, kind::RUNTIME]);
    let c = double_memset(4096, 0xFF, 0, 3, 700);
    let recs = flush_forced();
    assert_eq!(recs[0].u32(off::api::CBID), 51);
    let m = &recs[1];
    assert_eq!(m.kind, kind::MEMSET);
    assert_eq!(m.bytes.len(), 88);
    assert_eq!(m.u32(off::memset::VALUE), 0xFF);
    assert_eq!(m.u64(off::memset::BYTES), 4096);
    assert_eq!(m.u32(off::memset::STREAM_ID), 3);
    assert_eq!(m.u32(off::memset::CORRELATION_ID), c);
    assert_eq!(
        u16::from_le_bytes([m.bytes[50], m.bytes[51]]),
        3,
        "device memory"
    );
    assert_eq!(m.u64(off::memset::END) - m.u64(off::memset::START), 700);
}

#[test]
fn graph_kernels_share_the_launch_id() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::CONCURRENT_KERNEL, kind::RUNTIME]);
    // SAFETY: valid C strings.
    let (c1, c2) = unsafe {
        (
            double_launch_graph(0, 4, 3, c"_Z4stepv".as_ptr(), 100),
            double_launch_graph(0, 4, 2, c"_Z4stepv".as_ptr(), 100),
        )
    };
    let recs = flush_forced();
    let api: Vec<&Rec> = recs.iter().filter(|r| r.kind == kind::RUNTIME).collect();
    assert_eq!(api.len(), 2);
    assert_eq!(api[0].u32(off::api::CBID), 311);
    let ks: Vec<&Rec> = recs
        .iter()
        .filter(|r| r.kind == kind::CONCURRENT_KERNEL)
        .collect();
    assert_eq!(ks.len(), 5);
    let corr: Vec<u32> = ks
        .iter()
        .map(|k| k.u32(off::kernel::CORRELATION_ID))
        .collect();
    assert_eq!(corr, vec![c1, c1, c1, c2, c2]);
    let nodes: Vec<u64> = ks
        .iter()
        .map(|k| k.u64(off::kernel::GRAPH_NODE_ID))
        .collect();
    assert_eq!(nodes, vec![1, 2, 3, 1, 2]);
    let gid = ks[0].u32(off::kernel::GRAPH_ID);
    assert!(gid > 0);
    assert!(ks.iter().all(|k| k.u32(off::kernel::GRAPH_ID) == gid));
    // Back to back on the stream.
    for w in ks.windows(2) {
        assert!(w[1].u64(off::kernel::START) >= w[0].u64(off::kernel::END));
    }
}

#[test]
fn memory_records() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::MEMORY2, kind::RUNTIME]);
    let a = double_malloc(0, 1000);
    let b = double_malloc(0, 3 << 20);
    let c = double_malloc_async(0, 5, 0x7f00_dead_0000, 4096);
    double_free(0, a);
    double_free_async(0, 5, 0x7f00_dead_0000, c);
    assert_eq!(a % (2 << 20), 0);
    assert_eq!(b % (2 << 20), 0);
    assert!(a >= 0x7f00_0000_0000);
    assert!(b >= a + 1000 && c >= b + (3 << 20));
    let recs = flush_forced();
    let cbids: Vec<u32> = recs
        .iter()
        .filter(|r| r.kind == kind::RUNTIME)
        .map(|r| r.u32(off::api::CBID))
        .collect();
    assert_eq!(cbids, vec![20, 20, 373, 22, 375]);
    let mem: Vec<&Rec> = recs.iter().filter(|r| r.kind == kind::MEMORY2).collect();
    assert_eq!(mem.len(), 5);
    assert!(mem.iter().all(|m| m.bytes.len() == 128));
    let f = |m: &Rec| {
        (
            m.u32(off::memory::OPERATION_TYPE),
            m.u64(off::memory::ADDRESS),
            m.u64(off::memory::BYTES),
            m.u32(off::memory::IS_ASYNC),
            m.u32(off::memory::STREAM_ID),
        )
    };
    assert_eq!(f(mem[0]), (1, a, 1000, 0, 0));
    assert_eq!(f(mem[1]), (1, b, 3 << 20, 0, 0));
    assert_eq!(f(mem[2]), (1, c, 4096, 1, 5));
    assert_eq!(f(mem[3]), (2, a, 1000, 0, 0));
    assert_eq!(f(mem[4]), (2, c, 4096, 1, 5));
    assert_eq!(mem[0].u32(off::memory::MEMORY_KIND), 3);
    assert_eq!(mem[0].u32(off::memory::PROCESS_ID), std::process::id());
    assert_eq!(mem[0].u32(off::memory::CONTEXT_ID), 1);
    assert_eq!(mem[2].u32(off::memory::POOL_TYPE), 1);
    assert_ne!(mem[2].u64(off::memory::POOL_ADDRESS), 0);
    assert_eq!(mem[2].u64(off::memory::POOL_UTILIZED_SIZE), 4096);
    assert_eq!(mem[4].u64(off::memory::POOL_UTILIZED_SIZE), 0);
    assert_eq!(mem[0].u64(off::memory::POOL_ADDRESS), 0);
    // The allocation record shares the API call's correlation id.
    let api0 = recs.iter().find(|r| r.kind == kind::RUNTIME).unwrap();
    assert_eq!(
        mem[0].u32(off::memory::CORRELATION_ID),
        api0.u32(off::api::CORRELATION_ID)
    );
    assert_eq!(mem[0].u64(off::memory::SOURCE), 0);
}

#[test]
fn sync_records() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::SYNCHRONIZATION, kind::RUNTIME]);
    for t in 1..=4 {
        double_sync(t, 9, 1000);
    }
    assert_eq!(double_sync(5, 9, 1000), 0);
    let recs = flush_forced();
    let api: Vec<u32> = recs
        .iter()
        .filter(|r| r.kind == kind::RUNTIME)
        .map(|r| r.u32(off::api::CBID))
        .collect();
    assert_eq!(api, vec![137, 147, 131, 165]);
    let s: Vec<&Rec> = recs
        .iter()
        .filter(|r| r.kind == kind::SYNCHRONIZATION)
        .collect();
    assert_eq!(s.len(), 4);
    let streams: Vec<u32> = s.iter().map(|r| r.u32(off::sync::STREAM_ID)).collect();
    assert_eq!(streams, vec![u32::MAX, 9, 9, u32::MAX]);
    let events: Vec<bool> = s
        .iter()
        .map(|r| r.u32(off::sync::CUDA_EVENT_ID) != u32::MAX)
        .collect();
    assert_eq!(events, vec![true, true, false, false]);
    for (i, r) in s.iter().enumerate() {
        assert_eq!(r.u32(off::sync::TYPE), i as u32 + 1);
        assert_eq!(r.bytes.len(), 56);
        assert_eq!(r.u64(off::sync::END) - r.u64(off::sync::START), 1000);
        assert_eq!(r.u32(off::sync::RETURN_VALUE), 0);
    }
}

// ------------------------------------------------------------------ buffers

#[test]
fn per_thread_buffers_in_13_mode() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::CONCURRENT_KERNEL, kind::RUNTIME]);
    assert_eq!(cuptiSetThreadIdType(1), 0);
    let tids: Vec<u32> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                s.spawn(move || {
                    for _ in 0..100 {
                        launch(c"_Z1fv", i);
                    }
                    gettid()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Each thread asked for its own buffer, on itself.
    let reqs = lock(&REQUESTS).clone();
    assert_eq!(reqs.len(), 4);
    let mut req_tids: Vec<u32> = reqs.iter().map(|r| r.1).collect();
    req_tids.sort_unstable();
    let mut want = tids.clone();
    want.sort_unstable();
    assert_eq!(req_tids, want);
    assert_eq!(double_buffers_completed(), 0, "nothing full yet");
    // A default flush "returns all the activity buffers which have all the activity records
    // completed, buffers need not to be full" (cupti_activity.h, cuptiActivityFlushAll): in
    // the double every record is complete once written, so the four partial buffers (of
    // threads that have exited) all come back.
    assert_eq!(cuptiActivityFlushAll(0), 0);
    let dels = lock(&DELIVERIES).clone();
    assert_eq!(dels.len(), 4);
    let mut all_corr = Vec::new();
    for d in &dels {
        let req = reqs
            .iter()
            .find(|r| r.0 == d.ptr)
            .expect("a requested buffer");
        let recs = parse(&d.data);
        assert_eq!(recs.len(), 200);
        for r in recs.iter().filter(|r| r.kind == kind::RUNTIME) {
            assert_eq!(
                r.u32(off::api::THREAD_ID),
                req.1,
                "only its thread's records"
            );
            all_corr.push(r.u32(off::api::CORRELATION_ID));
        }
    }
    all_corr.sort_unstable();
    all_corr.dedup();
    assert_eq!(all_corr.len(), 400, "unique correlation ids");
    assert_eq!(double_records_produced(0), 800);
    assert_eq!(double_records_delivered(0), 800);
    assert_eq!(double_records_delivered(kind::CONCURRENT_KERNEL), 400);
    assert_eq!(double_buffers_requested(), 4);
    assert_eq!(double_buffers_completed(), 4);
    // A forced flush after it has nothing left: never the same buffer twice.
    assert_eq!(cuptiActivityFlushAll(1), 0);
    assert_eq!(lock(&DELIVERIES).len(), 4);
}

#[test]
fn default_flush_returns_partial_complete_buffers() {
    // cupti_activity.h, cuptiActivityFlushAll: "For default flush i.e. when flag is set as
    // 0, it returns all the activity buffers which have all the activity records completed,
    // buffers need not to be full though." Every record of the double is complete.
    for v in [layout::VERSION_13_0, layout::VERSION_12_9] {
        let _g = serial(v);
        register();
        enable(&[kind::CONCURRENT_KERNEL, kind::RUNTIME]);
        for _ in 0..3 {
            launch(c"k", 0);
        }
        assert_eq!(cuptiActivityFlushAll(0), 0);
        assert_eq!(lock(&DELIVERIES).len(), 1, "v{v}: the partial buffer");
        assert_eq!(delivered_records().len(), 6);
        assert_eq!(
            lock(&DELIVERIES)[0].thread.as_deref(),
            std::thread::current().name(),
            "delivered on the flushing thread"
        );
        // Nothing new: nothing delivered, not even an empty buffer.
        assert_eq!(cuptiActivityFlushAll(0), 0);
        assert_eq!(lock(&DELIVERIES).len(), 1);
        // Records go on into a fresh buffer, which the next default flush returns.
        launch(c"k", 0);
        assert_eq!(double_buffers_requested(), 2);
        assert_eq!(cuptiActivityFlushAll(0), 0);
        assert_eq!(lock(&DELIVERIES).len(), 2);
        assert_eq!(delivered_records().len(), 8);
        // An unused spare (too small for a kernel record) comes back only from a forced
        // flush, empty.
        BUF_SIZE.store(64, SeqCst);
        launch(c"k", 0);
        assert_eq!(cuptiActivityFlushAll(0), 0);
        assert_eq!(lock(&DELIVERIES).len(), 3, "the API record's buffer");
        assert_eq!(cuptiActivityFlushAll(1), 0);
        let sizes: Vec<usize> = lock(&DELIVERIES).iter().map(|d| d.data.len()).collect();
        assert_eq!(sizes.len(), 4, "v{v}: {sizes:?}");
        assert_eq!(sizes[3], 0, "the spare, handed back empty");
        assert_eq!(double_records_delivered(0), 9);
    }
}

#[test]
fn shared_buffer_in_12_mode() {
    let _g = serial(28);
    register();
    enable(&[kind::CONCURRENT_KERNEL, kind::RUNTIME]);
    launch(c"_Z1fv", 9); // installs the shared buffer before the threads race
    std::thread::scope(|s| {
        for i in 0..4 {
            s.spawn(move || {
                for _ in 0..50 {
                    launch(c"_Z1fv", i);
                }
            });
        }
    });
    assert_eq!(double_buffers_requested(), 1);
    let recs = flush_forced();
    assert_eq!(lock(&DELIVERIES).len(), 1);
    assert_eq!(recs.len(), 402);
    // The attribute switches 13.0 to the shared buffer as well.
    let _g2 = {
        drop(_g);
        serial(layout::VERSION_13_0)
    };
    register();
    enable(&[kind::RUNTIME]);
    let mut off_: u8 = 0;
    let mut sz = 1usize;
    // SAFETY: valid pointers.
    let rc = unsafe { cuptiActivitySetAttribute(9, &mut sz, &mut off_ as *mut u8 as *mut c_void) };
    assert_eq!(rc, 0);
    launch(c"k", 9);
    std::thread::scope(|s| {
        for i in 0..3 {
            s.spawn(move || launch(c"k", i));
        }
    });
    assert_eq!(double_buffers_requested(), 1);
}

#[test]
fn full_buffers_go_to_the_worker() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::RUNTIME]);
    BUF_SIZE.store(400, SeqCst); // 10 API records of 40 bytes
    for _ in 0..25 {
        launch(c"k", 0);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while lock(&DELIVERIES).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    {
        let dels = lock(&DELIVERIES);
        assert_eq!(dels.len(), 2, "two full buffers, delivered without a flush");
        for d in dels.iter() {
            assert_eq!(d.thread.as_deref(), Some("cupti-double-worker"));
            assert_eq!(d.size, 400);
            assert_eq!(d.data.len(), 400);
        }
    }
    assert_eq!(double_buffers_requested(), 3);
    let recs = flush_forced();
    assert_eq!(recs.len(), 25);
    assert_eq!(lock(&DELIVERIES)[2].data.len(), 200);
    assert_eq!(
        lock(&DELIVERIES)[2].thread.as_deref(),
        std::thread::current().name()
    );
}

#[test]
fn max_records_is_honoured() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::RUNTIME]);
    MAX_RECORDS.store(3, SeqCst);
    for _ in 0..7 {
        launch(c"k", 0);
    }
    flush_forced();
    let counts: Vec<usize> = lock(&DELIVERIES)
        .iter()
        .map(|d| parse(&d.data).len())
        .collect();
    let mut sorted = counts.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![1, 3, 3]);
}

#[test]
fn declined_buffers_drop_and_count() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::CONCURRENT_KERNEL, kind::RUNTIME]);
    DECLINE.store(true, SeqCst);
    for _ in 0..5 {
        launch(c"k", 0);
    }
    assert_eq!(dropped(), 10);
    assert_eq!(dropped(), 0, "read and reset");
    assert_eq!(double_records_produced(0), 10);
    assert_eq!(double_records_dropped(), 10);
    double_set_dropped(7);
    assert_eq!(dropped(), 7);
    // Too small for a kernel record (216) but fine for API records (40).
    DECLINE.store(false, SeqCst);
    BUF_SIZE.store(64, SeqCst);
    launch(c"k", 0);
    assert_eq!(dropped(), 1);
    let recs = flush_forced();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].kind, kind::RUNTIME);
    // Every buffer the client gave came back (the unused one empty).
    assert_eq!(double_buffers_completed() as usize, lock(&DELIVERIES).len());
    let given = lock(&REQUESTS).iter().filter(|r| r.0 != 0).count();
    assert_eq!(given, lock(&DELIVERIES).len());
}

#[test]
fn callbacks_may_call_cupti() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::RUNTIME, kind::CONCURRENT_KERNEL]);
    REENTER.store(true, SeqCst);
    BUF_SIZE.store(512, SeqCst);
    for _ in 0..40 {
        launch(c"k", 0);
    }
    REENTER.store(true, SeqCst);
    let recs = flush_forced();
    assert_eq!(recs.len(), 80);
}

#[test]
fn enable_and_disable_at_any_time() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::CONCURRENT_KERNEL, kind::RUNTIME]);
    launch(c"k", 0);
    assert_eq!(cuptiActivityDisable(kind::CONCURRENT_KERNEL), 0);
    launch(c"k", 0);
    assert_eq!(cuptiActivityEnable(kind::CONCURRENT_KERNEL), 0);
    launch(c"k", 0);
    // Per-cbid: silence cudaLaunchKernel, keep cudaMemsetAsync.
    assert_eq!(cuptiActivityEnableRuntimeApi(211, 0), 0);
    launch(c"k", 0);
    double_memset(16, 0, 0, 0, 10);
    assert_eq!(double_api_enabled(2, 211), 0);
    assert_eq!(double_api_enabled(2, 51), 1);
    let kinds: Vec<u32> = flush_forced().iter().map(|r| r.kind).collect();
    assert_eq!(kinds, vec![5, 10, 5, 5, 10, 10, 5]);
    // Enabling the RUNTIME kind again overrides the per-cbid switch (cupti_activity.h).
    assert_eq!(cuptiActivityEnable(kind::RUNTIME), 0);
    assert_eq!(double_api_enabled(2, 211), 1);
    // Enabling a single cbid without the kind: the switch is kept, but records nothing (real
    // CUPTI 13.0 behaves so).
    assert_eq!(cuptiActivityDisable(kind::RUNTIME), 0);
    assert_eq!(cuptiActivityEnableRuntimeApi(211, 1), 0);
    assert_eq!(double_api_enabled(2, 211), 1);
    assert_eq!(double_api_enabled(2, 311), 0);
    lock(&DELIVERIES).clear();
    launch(c"k", 0);
    let kinds: Vec<u32> = flush_forced().iter().map(|r| r.kind).collect();
    assert_eq!(kinds, vec![10]);
    assert_eq!(cuptiActivityEnable(0), res::INVALID_KIND);
    assert_eq!(cuptiActivityEnable(99), res::INVALID_KIND);
    // KERNEL (3) serialises; its records carry kind 3.
    assert_eq!(cuptiActivityDisable(kind::CONCURRENT_KERNEL), 0);
    assert_eq!(cuptiActivityEnable(kind::KERNEL), 0);
    lock(&DELIVERIES).clear();
    launch(c"k", 0);
    let kinds: Vec<u32> = flush_forced().iter().map(|r| r.kind).collect();
    assert_eq!(kinds, vec![3]);
}

#[test]
fn external_correlation_before_api_records() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[
        kind::EXTERNAL_CORRELATION,
        kind::RUNTIME,
        kind::CONCURRENT_KERNEL,
    ]);
    assert_eq!(cuptiActivityPushExternalCorrelationId(3, 41), 0);
    assert_eq!(cuptiActivityPushExternalCorrelationId(3, 42), 0);
    assert_eq!(cuptiActivityPushExternalCorrelationId(5, 7), 0);
    assert_eq!(
        cuptiActivityPushExternalCorrelationId(0, 7),
        res::INVALID_PARAMETER
    );
    let c = launch(c"k", 0);
    // Another thread has its own (empty) stacks.
    std::thread::scope(|s| {
        s.spawn(|| launch(c"k", 1));
    });
    let mut last = 0u64;
    // SAFETY: valid out pointer.
    unsafe {
        assert_eq!(cuptiActivityPopExternalCorrelationId(5, &mut last), 0);
        assert_eq!(last, 7);
        assert_eq!(
            cuptiActivityPopExternalCorrelationId(5, &mut last),
            res::QUEUE_EMPTY
        );
        assert_eq!(
            cuptiActivityPopExternalCorrelationId(3, std::ptr::null_mut()),
            0
        );
    }
    launch(c"k", 0);
    let recs = flush_forced();
    let summary: Vec<(u32, u64)> = recs
        .iter()
        .filter(|r| r.kind == kind::EXTERNAL_CORRELATION)
        .map(|r| (r.u32(off::ext::EXTERNAL_KIND), r.u64(off::ext::EXTERNAL_ID)))
        .collect();
    assert_eq!(summary, vec![(3, 42), (5, 7), (3, 41)]);
    // Layout: ext, ext, api, kernel for the first launch on this thread.
    let first: Vec<u32> = recs
        .iter()
        .take_while(|r| r.kind != kind::CONCURRENT_KERNEL)
        .map(|r| r.kind)
        .collect();
    assert!(first.ends_with(&[39, 39, 5]), "{first:?}");
    let e = recs.iter().find(|r| r.kind == 39).unwrap();
    assert_eq!(e.u32(off::ext::CORRELATION_ID), c);
    assert_eq!(e.bytes.len(), 24);
}

#[test]
fn stream_ordered_allocations_pass_their_stream_handle_in_the_parameters() {
    let _g = serial(layout::VERSION_13_0);
    let mut h = 0usize;
    assert_eq!(subscribe(&mut h), 0);
    for cbid in [20, 22, 373, 375] {
        assert_eq!(cuptiEnableCallback(1, h, DOMAIN_RUNTIME, cbid), 0);
    }
    let a = double_malloc(0, 4096);
    let p = double_malloc_async(0, 5, 0x7f00_dead_0000, 4096);
    double_free_async(0, 5, 0x7f00_dead_0000, p);
    double_free(0, a);
    let seen: Vec<(u32, u32, u64)> = lock(&CALLBACKS)
        .iter()
        .map(|c| (c.cbid, c.site, c.stream_argument))
        .collect();
    assert_eq!(
        seen,
        vec![
            (20, API_ENTER, 0),
            (20, API_EXIT, 0),
            (373, API_ENTER, 0x7f00_dead_0000),
            (373, API_EXIT, 0x7f00_dead_0000),
            (375, API_ENTER, 0x7f00_dead_0000),
            (375, API_EXIT, 0x7f00_dead_0000),
            (22, API_ENTER, 0),
            (22, API_EXIT, 0),
        ]
    );
}

#[test]
fn subscriber_callbacks() {
    let _g = serial(layout::VERSION_13_0);
    let mut h = 0usize;
    assert_eq!(subscribe(&mut h), 0);
    assert_ne!(h, 0);
    let mut h2 = 0usize;
    assert_eq!(subscribe(&mut h2), 39);
    assert_eq!(cuptiEnableCallback(1, h, 2, 211), 0);
    assert_eq!(
        cuptiEnableCallback(1, h + 8, 2, 211),
        res::INVALID_PARAMETER
    );
    launch(c"_Z3fooi", 0);
    double_memset(1, 0, 0, 0, 1); // not enabled
    let cbs = lock(&CALLBACKS).clone();
    assert_eq!(cbs.len(), 2);
    assert_eq!((cbs[0].site, cbs[1].site), (API_ENTER, API_EXIT));
    for cb in &cbs {
        assert_eq!((cb.domain, cb.cbid), (2, 211));
        assert_eq!(cb.function, "cudaLaunchKernel");
        assert_eq!(cb.symbol, "_Z3fooi");
    }
    assert_eq!(cbs[0].correlation_id, cbs[1].correlation_id);
    assert_eq!(
        cbs[1].correlation_data_seen,
        0xC0FFEE + u64::from(cbs[0].correlation_id),
        "correlationData kept from ENTER to EXIT"
    );
    // A whole domain; memcpy fires the nested driver callbacks only if enabled.
    assert_eq!(cuptiEnableDomain(1, h, 2), 0);
    assert_eq!(cuptiEnableCallback(1, h, 1, 276), 0);
    lock(&CALLBACKS).clear();
    double_memcpy(1, 1, 3, 8, 0, 0, 1, 0);
    double_device_reset();
    let seq: Vec<(u32, u32, u32)> = lock(&CALLBACKS)
        .iter()
        .map(|c| (c.domain, c.cbid, c.site))
        .collect();
    assert_eq!(
        seq,
        vec![
            (2, 31, 0),
            (1, 276, 0),
            (1, 276, 1),
            (2, 31, 1),
            (2, 164, 0),
            (2, 164, 1)
        ]
    );
    assert_eq!(cuptiUnsubscribe(h), 0);
    assert_eq!(double_callback_enabled(2, 211), 0);
    assert_eq!(subscribe(&mut h2), 0);
    assert_eq!(cuptiUnsubscribe(h2), 0);
}

#[test]
fn get_next_record_edges() {
    let _g = serial(layout::VERSION_13_0);
    let mut rec: *mut u8 = std::ptr::null_mut();
    // SAFETY: testing argument checks; pointers valid where dereferenced.
    unsafe {
        assert_eq!(
            cuptiActivityGetNextRecord(std::ptr::null_mut(), 8, &mut rec),
            res::INVALID_PARAMETER
        );
        let mut words = [0u64; 8];
        let base = words.as_mut_ptr() as *mut u8;
        assert_eq!(
            cuptiActivityGetNextRecord(base, 0, &mut rec),
            res::MAX_LIMIT_REACHED
        );
        // Kind 0 (zeroed memory) is not a record.
        assert_eq!(
            cuptiActivityGetNextRecord(base, 64, &mut rec),
            res::INVALID_KIND
        );
        // An API record cut short.
        layout::write_api(
            &mut std::slice::from_raw_parts_mut(base, 64)[..40],
            &layout::ApiRec {
                kind: 5,
                cbid: 1,
                start: 1,
                end: 2,
                process_id: 1,
                thread_id: 1,
                correlation_id: 1,
                return_value: 0,
            },
        );
        assert_eq!(
            cuptiActivityGetNextRecord(base, 32, &mut rec),
            res::INVALID_KIND
        );
        rec = std::ptr::null_mut();
        assert_eq!(cuptiActivityGetNextRecord(base, 40, &mut rec), 0);
        assert_eq!(rec, base);
        assert_eq!(
            cuptiActivityGetNextRecord(base, 40, &mut rec),
            res::MAX_LIMIT_REACHED
        );
    }
}

#[test]
fn attributes() {
    let _g = serial(layout::VERSION_13_0);
    let mut v: usize = 8 << 20;
    let mut sz = std::mem::size_of::<usize>();
    // SAFETY: valid pointers of the stated sizes.
    unsafe {
        assert_eq!(
            cuptiActivitySetAttribute(0, &mut sz, &mut v as *mut usize as *mut c_void),
            0
        );
        let mut out: usize = 0;
        let mut osz = std::mem::size_of::<usize>();
        assert_eq!(
            cuptiActivityGetAttribute(0, &mut osz, &mut out as *mut usize as *mut c_void),
            0
        );
        assert_eq!(out, 8 << 20);
        assert_eq!(
            cuptiActivitySetAttribute(99, &mut sz, &mut v as *mut usize as *mut c_void),
            res::INVALID_PARAMETER
        );
        let mut per_thread: u8 = 0;
        let mut one = 1usize;
        assert_eq!(
            cuptiActivityGetAttribute(9, &mut one, &mut per_thread as *mut u8 as *mut c_void),
            0
        );
        assert_eq!(per_thread, 1, "13.0 defaults to per-thread buffers");
        let mut zero = 0usize;
        assert_eq!(
            cuptiActivitySetAttribute(0, &mut zero, &mut v as *mut usize as *mut c_void),
            res::PARAMETER_SIZE_NOT_SUFFICIENT
        );
    }
    drop(_g);
    let _g = serial(28);
    let mut per_thread: u8 = 9;
    let mut one = 1usize;
    // SAFETY: valid pointers.
    unsafe { cuptiActivityGetAttribute(9, &mut one, &mut per_thread as *mut u8 as *mut c_void) };
    assert_eq!(per_thread, 0, "12.x defaults to the shared buffer");
}

#[test]
fn burst_counts() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::CONCURRENT_KERNEL, kind::RUNTIME]);
    assert_eq!(double_burst(1000, 3), 2000);
    flush_forced();
    assert_eq!(double_records_delivered(0), 2000);
    assert_eq!(double_records_produced(kind::CONCURRENT_KERNEL), 1000);
}

#[test]
fn zeroed_kernel_timestamps() {
    let _g = serial(layout::VERSION_13_0);
    register();
    enable(&[kind::CONCURRENT_KERNEL]);
    double_zero_kernel_timestamps(1);
    launch(c"k", 0);
    launch(c"k", 0);
    let recs = flush_forced();
    assert_eq!(recs[0].u64(off::kernel::START), 0);
    assert_eq!(recs[0].u64(off::kernel::END), 0);
    assert_ne!(recs[1].u64(off::kernel::START), 0);
}

// ------------------------------------------------------------------ replay

#[test]
fn replay_round_trip() {
    let _g = serial(layout::VERSION_13_0);
    register();
    // Build a "real" buffer: API record, kernel record (name pointer zeroed + patch), API.
    let mut data = vec![0u8; 40 + 216 + 40];
    let api = |corr| layout::ApiRec {
        kind: 5,
        cbid: 211,
        start: 100,
        end: 200,
        process_id: 1,
        thread_id: 2,
        correlation_id: corr,
        return_value: 0,
    };
    layout::write_api(&mut data[..40], &api(1));
    layout::write_kernel(
        &mut data[40..256],
        layout::VERSION_13_0,
        &layout::KernelRec {
            kind: 10,
            device: 0,
            context: 1,
            stream: 7,
            grid: [1, 1, 1],
            block: [1, 1, 1],
            registers_per_thread: 16,
            static_shared: 0,
            dynamic_shared: 0,
            correlation_id: 1,
            grid_id: 5,
            name: std::ptr::null(),
            start: 300,
            end: 400,
            queued: 0,
            submitted: 0,
            graph_node_id: 0,
            graph_id: 0,
        },
    );
    layout::write_api(&mut data[256..], &api(2));
    let name_at = 40 + off::kernel::NAME as u64;
    let dump = replay::encode(
        layout::VERSION_13_0,
        &data,
        &[(name_at, b"_Z10real_kernelv".as_slice())],
    );
    // 1 MiB buffers: the three records fit in one.
    let before = state::now_ns();
    assert_eq!(replay::replay_bytes(&dump), Ok(3));
    let after = state::now_ns();
    let recs = delivered_records();
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[1].cstr(off::kernel::NAME), "_Z10real_kernelv");
    assert_eq!(recs[1].u32(off::kernel::STREAM_ID), 7);
    // Rebased: the earliest timestamp (the first API start, 100) is now + 1 ms, every other
    // one keeps its distance to it; unknown (0) queued/submitted stay 0; pids are ours,
    // thread ids as recorded.
    let t = recs[0].u64(off::api::START);
    assert!(before + 1_000_000 <= t && t <= after + 1_000_000);
    assert_eq!(recs[0].u64(off::api::END), t + 100);
    assert_eq!(recs[1].u64(off::kernel::START), t + 200);
    assert_eq!(recs[1].u64(off::kernel::END), t + 300);
    assert_eq!(recs[1].u64(off::kernel::COMPLETED), t + 300);
    assert_eq!(recs[1].u64(off::kernel::QUEUED), 0);
    assert_eq!(recs[1].u64(off::kernel::SUBMITTED), 0);
    assert_eq!(recs[2].u64(off::api::START), t);
    for r in [&recs[0], &recs[2]] {
        assert_eq!(r.u32(off::api::PROCESS_ID), std::process::id());
        assert_eq!(r.u32(off::api::THREAD_ID), 2);
    }
    // Small buffers: split at record boundaries.
    lock(&DELIVERIES).clear();
    BUF_SIZE.store(256, SeqCst);
    assert_eq!(replay::replay_bytes(&dump), Ok(3));
    let sizes: Vec<usize> = lock(&DELIVERIES).iter().map(|d| d.data.len()).collect();
    assert_eq!(sizes, vec![256, 40]);
    // Through the C entry point, from a file.
    let path = std::env::temp_dir().join(format!("cupti-double-{}.bin", std::process::id()));
    std::fs::write(&path, &dump).unwrap();
    let cpath = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: valid C string.
    assert_eq!(unsafe { double_replay(cpath.as_ptr()) }, 3);
    std::fs::remove_file(&path).unwrap();
    // Errors.
    let other = replay::encode(28, &data, &[]);
    assert_eq!(replay::replay_bytes(&other).unwrap_err().code(), -2);
    assert_eq!(replay::replay_bytes(b"CUPROFB1").unwrap_err().code(), -1);
    let bad = replay::encode(layout::VERSION_13_0, &[0u8; 16], &[]);
    assert_eq!(replay::replay_bytes(&bad).unwrap_err().code(), -4);
    DECLINE.store(true, SeqCst);
    assert_eq!(replay::replay_bytes(&dump).unwrap_err().code(), -3);
}

#[test]
fn rebase_every_time_field() {
    // One record of each kind with time fields, built by offset; target 10^18.
    let v = layout::VERSION_13_0;
    let kinds = [
        kind::CONCURRENT_KERNEL,
        kind::MEMCPY,
        kind::MEMCPY2,
        kind::MEMSET,
        kind::DRIVER,
        kind::RUNTIME,
        kind::SYNCHRONIZATION,
        kind::MEMORY2,
        kind::MEMORY_POOL,
        kind::MARKER,
        kind::OVERHEAD,
        kind::EXTERNAL_CORRELATION,
    ];
    let mut data = Vec::new();
    for &k in &kinds {
        let mut r = vec![0u8; layout::record_size(v, k)];
        layout::W(&mut r).u32(0, k);
        for (i, &f) in replay::time_fields(k).iter().enumerate() {
            layout::W(&mut r).u64(f, 5_000 + 10 * i as u64);
        }
        for &f in replay::pid_fields(k) {
            layout::W(&mut r).u32(f, 4242);
        }
        data.extend_from_slice(&r);
    }
    // The kernel's queued is unknown (0); a memset starts earliest.
    layout::W(&mut data).u64(off::kernel::QUEUED, 0);
    let records: Vec<(usize, u32, usize)> = layout::walk(v, &data).collect();
    assert_eq!(records.len(), kinds.len());
    let memset_at = records.iter().find(|r| r.1 == kind::MEMSET).unwrap().0;
    layout::W(&mut data).u64(memset_at + off::memset::START, 4_000);
    let target = 1_000_000_000_000_000_000u64;
    let delta = replay::rebase(&mut data, &records, target, 77);
    assert_eq!(delta, target - 4_000);
    for &(at, k, _) in &records {
        for (i, &f) in replay::time_fields(k).iter().enumerate() {
            let got = rd_u64(&data, at + f);
            let want = if k == kind::CONCURRENT_KERNEL && f == off::kernel::QUEUED {
                0
            } else if k == kind::MEMSET && f == off::memset::START {
                target
            } else {
                target + 1_000 + 10 * i as u64
            };
            assert_eq!(got, want, "kind {k} field @{f}");
        }
        for &f in replay::pid_fields(k) {
            assert_eq!(rd_u32(&data, at + f), 77, "kind {k} pid @{f}");
        }
    }
    assert_eq!(
        replay::time_fields(kind::EXTERNAL_CORRELATION),
        &[] as &[usize]
    );
    // The external correlation record is untouched.
    let ext_at = records.last().unwrap().0;
    assert!(data[ext_at + 4..].iter().all(|&b| b == 0));
    // Nothing to rebase: delta 0, nothing written.
    let mut empty = vec![0u8; 24];
    layout::W(&mut empty).u32(0, kind::EXTERNAL_CORRELATION);
    let recs: Vec<_> = layout::walk(v, &empty).collect();
    assert_eq!(replay::rebase(&mut empty, &recs, target, 1), 0);
}

/// The H100 recording in tests/data (see tests/data/README.md), replayed in process.
#[test]
fn replay_real_h100_buffer() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../data/cupti-130001-h100-steps10.bin"
    );
    let bytes = std::fs::read(path).unwrap();
    let orig = replay::parse(&bytes).unwrap();
    assert_eq!(orig.version, 130_001);
    assert_eq!(orig.data.len(), 29_816);
    let orig_recs: Vec<(usize, u32, usize)> = layout::walk(orig.version, &orig.data).collect();
    let stamps = |data: &[u8]| -> Vec<u64> {
        orig_recs
            .iter()
            .flat_map(|&(at, k, _)| replay::time_fields(k).iter().map(move |&f| at + f))
            .map(|at| rd_u64(data, at))
            .collect()
    };
    let before = stamps(&orig.data);
    let earliest = *before.iter().filter(|&&t| t != 0).min().unwrap();

    let _g = serial(layout::VERSION_13_0);
    register();
    let t0 = state::now_ns();
    assert_eq!(replay::replay_bytes(&bytes), Ok(299));
    let t1 = state::now_ns();
    let dels = lock(&DELIVERIES).clone();
    assert_eq!(dels.len(), 1, "fits one 1 MiB buffer");
    let data = &dels[0].data;
    assert_eq!(data.len(), orig.data.len());
    let after = stamps(data);
    let base = *after.iter().filter(|&&t| t != 0).min().unwrap();
    assert!(t0 + 1_000_000 <= base && base <= t1 + 1_000_000);
    for (b, a) in before.iter().zip(&after) {
        if *b == 0 {
            assert_eq!(*a, 0);
        } else {
            assert_eq!(a - base, b - earliest, "relative timing kept exactly");
        }
    }
    let mut counts = std::collections::BTreeMap::new();
    for r in parse(data) {
        *counts.entry(r.kind).or_insert(0) += 1;
        match r.kind {
            kind::RUNTIME => {
                assert_eq!(r.u32(off::api::PROCESS_ID), std::process::id());
            }
            kind::MEMORY2 => {
                assert_eq!(r.u32(off::memory::PROCESS_ID), std::process::id());
            }
            kind::CONCURRENT_KERNEL => {
                let name = r.cstr(off::kernel::NAME);
                assert!(name.starts_with("_ZN2at6native29vectorized_elementwise_kernelILi4E"));
            }
            _ => {}
        }
    }
    let want: std::collections::BTreeMap<u32, i32> =
        [(1, 1), (5, 66), (10, 51), (38, 12), (39, 60), (49, 109)].into();
    assert_eq!(counts, want);
    // Everything but timestamps and pids is byte-for-byte the recording (pointer fields
    // aside: they point at this process's copies of the strings).
    for &(at, k, size) in &orig_recs {
        let mut skip: Vec<usize> = replay::time_fields(k)
            .iter()
            .flat_map(|&f| f..f + 8)
            .collect();
        skip.extend(replay::pid_fields(k).iter().flat_map(|&f| f..f + 4));
        match k {
            kind::CONCURRENT_KERNEL => skip.extend(off::kernel::NAME..off::kernel::NAME + 8),
            kind::MEMORY2 => skip.extend(off::memory::NAME..off::memory::NAME + 8),
            _ => {}
        }
        for i in (0..size).filter(|i| !skip.contains(i)) {
            assert_eq!(data[at + i], orig.data[at + i], "kind {k} byte {i}");
        }
    }
}

// ------------------------------------------------------------------ a second client

#[test]
fn second_client_takes_the_buffers() {
    let _g = serial(layout::VERSION_13_0);
    second::RECORDS.store(0, Relaxed);
    second::UNKNOWN_BUFFERS.store(0, Relaxed);
    let mut h = 0usize;
    assert_eq!(subscribe(&mut h), 0);
    register();
    enable(&[kind::RUNTIME]);
    launch(c"k", 0); // into a buffer the first client gave
    assert_eq!(double_second_client_subscribe(), 39);
    launch(c"k", 0);
    assert_eq!(cuptiActivityFlushAll(1), 0);
    // Real CUPTI hands the first client's buffer to the callbacks registered last.
    assert_eq!(lock(&DELIVERIES).len(), 0);
    // 1 API record before it enabled kernels, then API + kernel.
    assert_eq!(double_second_client_records(), 3);
    assert_eq!(double_second_client_unknown_buffers(), 1);
    // After the first client steps aside, the second subscribes fine.
    assert_eq!(cuptiUnsubscribe(h), 0);
    assert_eq!(double_second_client_subscribe(), 0);
    launch(c"k", 0);
    assert_eq!(cuptiActivityFlushAll(1), 0);
    assert_eq!(double_second_client_records(), 5);
    assert_eq!(double_second_client_unknown_buffers(), 1);
}

#[test]
fn finalize_is_only_counted() {
    let _g = serial(layout::VERSION_13_0);
    assert_eq!(double_finalize_calls(), 0);
    assert_eq!(cuptiFinalize(), 0);
    assert_eq!(double_finalize_calls(), 1);
}

#[test]
fn h100_attributes() {
    assert_eq!(cuda::device_attribute(16), Some(132));
    assert_eq!(cuda::device_attribute(75), Some(9));
    assert_eq!(cuda::device_attribute(97), Some(232_448));
    assert_eq!(cuda::device_attribute(106), Some(32));
    assert_eq!(cuda::device_attribute(100_000), None);
}

#[test]
fn subscribe_v2_names_the_owner() {
    let _g = serial(layout::VERSION_13_0);
    use std::mem::offset_of;
    assert_eq!(offset_of!(SubscriberParams, subscriber_name), 8);
    assert_eq!(offset_of!(SubscriberParams, old_subscriber_name), 16);
    assert_eq!(offset_of!(SubscriberParams, old_subscriber_size), 24);
    let mut h = 0usize;
    let mut p = SubscriberParams {
        struct_size: 32,
        subscriber_name: c"cuprof".as_ptr(),
        old_subscriber_name: std::ptr::null_mut(),
        old_subscriber_size: 0,
    };
    // SAFETY: valid pointers.
    let rc = unsafe { cuptiSubscribe_v2(&mut h, Some(t_callback), std::ptr::null_mut(), &mut p) };
    assert_eq!(rc, 0);
    let mut old = [0 as std::ffi::c_char; 64];
    let mut p2 = SubscriberParams {
        struct_size: 32,
        subscriber_name: c"torch".as_ptr(),
        old_subscriber_name: old.as_mut_ptr(),
        old_subscriber_size: old.len(),
    };
    let mut h2 = 0usize;
    // SAFETY: valid pointers.
    let rc = unsafe { cuptiSubscribe_v2(&mut h2, None, std::ptr::null_mut(), &mut p2) };
    assert_eq!(rc, 39);
    // SAFETY: NUL-terminated by the double.
    let got = unsafe { CStr::from_ptr(old.as_ptr()) };
    assert_eq!(got.to_str().unwrap(), "CUPTI for cuprof");
    assert_eq!(subscribe(&mut h2), 39, "v1 obeys the same rule");
    p2.struct_size = 0;
    // SAFETY: valid pointers.
    let rc = unsafe { cuptiSubscribe_v2(&mut h2, None, std::ptr::null_mut(), &mut p2) };
    assert_eq!(rc, res::INVALID_PARAMETER);
    assert_eq!(cuptiUnsubscribe(h), 0);
}

/// The double's hand-written tables against bindgen's view of the same headers.
#[test]
fn agrees_with_cupti_sys() {
    use cupti_sys as s;
    use std::mem::{offset_of, size_of};
    let v13 = layout::VERSION_13_0;
    let v12 = layout::VERSION_12_9;
    assert_eq!(
        layout::record_size(v13, 10),
        size_of::<s::CUpti_ActivityKernel10>()
    );
    assert_eq!(
        layout::record_size(v12, 10),
        size_of::<s::CUpti_ActivityKernel9>()
    );
    assert_eq!(
        layout::record_size(v13, 1),
        size_of::<s::CUpti_ActivityMemcpy6>()
    );
    assert_eq!(
        layout::record_size(19, 1),
        size_of::<s::CUpti_ActivityMemcpy5>()
    );
    assert_eq!(
        layout::record_size(v13, 2),
        size_of::<s::CUpti_ActivityMemset4>()
    );
    assert_eq!(
        layout::record_size(v13, 5),
        size_of::<s::CUpti_ActivityAPI>()
    );
    assert_eq!(
        layout::record_size(v13, 49),
        size_of::<s::CUpti_ActivityMemory4>()
    );
    assert_eq!(
        layout::record_size(23, 49),
        size_of::<s::CUpti_ActivityMemory3>()
    );
    assert_eq!(
        layout::record_size(v13, 38),
        size_of::<s::CUpti_ActivitySynchronization2>()
    );
    assert_eq!(
        layout::record_size(25, 38),
        size_of::<s::CUpti_ActivitySynchronization>()
    );
    assert_eq!(
        layout::record_size(v13, 36),
        size_of::<s::CUpti_ActivityCudaEvent2>()
    );
    assert_eq!(
        layout::record_size(25, 36),
        size_of::<s::CUpti_ActivityCudaEvent>()
    );
    assert_eq!(
        layout::record_size(v13, 39),
        size_of::<s::CUpti_ActivityExternalCorrelation>()
    );
    assert_eq!(
        layout::record_size(v13, 12),
        size_of::<s::CUpti_ActivityMarker2>()
    );
    assert_eq!(
        layout::record_size(v13, 13),
        size_of::<s::CUpti_ActivityMarkerData2>()
    );
    assert_eq!(
        layout::record_size(v12, 13),
        size_of::<s::CUpti_ActivityMarkerData>()
    );
    assert_eq!(
        layout::record_size(v13, 17),
        size_of::<s::CUpti_ActivityOverhead3>()
    );
    assert_eq!(
        layout::record_size(v13, 11),
        size_of::<s::CUpti_ActivityName>()
    );
    assert_eq!(
        layout::record_size(v13, 22),
        size_of::<s::CUpti_ActivityMemcpyPtoP4>()
    );
    assert_eq!(
        layout::record_size(v13, 50),
        size_of::<s::CUpti_ActivityMemoryPool3>()
    );
    assert_eq!(
        layout::record_size(v12, 50),
        size_of::<s::CUpti_ActivityMemoryPool2>()
    );
    assert_eq!(
        layout::record_size(v13, 36),
        size_of::<s::CUpti_ActivityCudaEvent2>()
    );
    assert_eq!(
        layout::record_size(v13, 8),
        size_of::<s::CUpti_ActivityDevice5>()
    );
    assert_eq!(
        layout::record_size(v13, 9),
        size_of::<s::CUpti_ActivityContext3>()
    );
    assert_eq!(
        size_of::<CallbackData>(),
        size_of::<s::CUpti_CallbackData>()
    );
    type P = s::cudaMallocAsync_v11020_params;
    assert_eq!(
        offset_of!(MallocAsyncParams, dev_ptr),
        offset_of!(P, devPtr)
    );
    assert_eq!(offset_of!(MallocAsyncParams, size), offset_of!(P, size));
    assert_eq!(
        offset_of!(MallocAsyncParams, h_stream),
        offset_of!(P, hStream)
    );
    assert_eq!(size_of::<MallocAsyncParams>(), size_of::<P>());

    type K = s::CUpti_ActivityKernel10;
    assert_eq!(
        off::kernel::REGISTERS_PER_THREAD,
        offset_of!(K, registersPerThread)
    );
    assert_eq!(off::kernel::START, offset_of!(K, start));
    assert_eq!(off::kernel::COMPLETED, offset_of!(K, completed));
    assert_eq!(off::kernel::STREAM_ID, offset_of!(K, streamId));
    assert_eq!(off::kernel::GRID_X, offset_of!(K, gridX));
    assert_eq!(off::kernel::BLOCK_X, offset_of!(K, blockX));
    assert_eq!(
        off::kernel::DYNAMIC_SHARED_MEMORY,
        offset_of!(K, dynamicSharedMemory)
    );
    assert_eq!(off::kernel::CORRELATION_ID, offset_of!(K, correlationId));
    assert_eq!(off::kernel::GRID_ID, offset_of!(K, gridId));
    assert_eq!(off::kernel::NAME, offset_of!(K, name));
    assert_eq!(off::kernel::QUEUED, offset_of!(K, queued));
    assert_eq!(off::kernel::SUBMITTED, offset_of!(K, submitted));
    assert_eq!(off::kernel::LAUNCH_TYPE, offset_of!(K, launchType));
    assert_eq!(off::kernel::GRAPH_NODE_ID, offset_of!(K, graphNodeId));
    assert_eq!(off::kernel::GRAPH_ID, offset_of!(K, graphId));
    assert_eq!(off::kernel::CHANNEL_TYPE, offset_of!(K, channelType));
    assert_eq!(off::kernel::CLUSTER_X, offset_of!(K, clusterX));
    assert_eq!(
        off::kernel::LOCAL_MEMORY_TOTAL_V2,
        offset_of!(K, localMemoryTotal_v2)
    );
    assert_eq!(
        off::kernel::IS_DEVICE_LAUNCHED,
        offset_of!(K, isDeviceLaunched)
    );
    type M = s::CUpti_ActivityMemcpy6;
    assert_eq!(off::memcpy::BYTES, offset_of!(M, bytes));
    assert_eq!(off::memcpy::CORRELATION_ID, offset_of!(M, correlationId));
    assert_eq!(
        off::memcpy::RUNTIME_CORRELATION_ID,
        offset_of!(M, runtimeCorrelationId)
    );
    assert_eq!(off::memcpy::GRAPH_ID, offset_of!(M, graphId));
    assert_eq!(
        off::memcpy::IS_DEVICE_LAUNCHED,
        offset_of!(M, isDeviceLaunched)
    );
    assert_eq!(off::memcpy::COPY_COUNT, offset_of!(M, copyCount));
    type S = s::CUpti_ActivityMemset4;
    assert_eq!(off::memset::FLAGS, offset_of!(S, flags));
    assert_eq!(off::memset::MEMORY_KIND, offset_of!(S, memoryKind));
    assert_eq!(
        off::memset::IS_DEVICE_LAUNCHED,
        offset_of!(S, isDeviceLaunched)
    );
    type Mem = s::CUpti_ActivityMemory4;
    assert_eq!(off::memory::ADDRESS, offset_of!(Mem, address));
    assert_eq!(off::memory::TIMESTAMP, offset_of!(Mem, timestamp));
    assert_eq!(off::memory::STREAM_ID, offset_of!(Mem, streamId));
    assert_eq!(off::memory::IS_ASYNC, offset_of!(Mem, isAsync));
    assert_eq!(off::memory::POOL_TYPE, offset_of!(Mem, memoryPoolConfig));
    assert_eq!(off::memory::SOURCE, offset_of!(Mem, source));
    type Sy = s::CUpti_ActivitySynchronization2;
    assert_eq!(off::sync::CUDA_EVENT_ID, offset_of!(Sy, cudaEventId));
    assert_eq!(
        off::sync::CUDA_EVENT_SYNC_ID,
        offset_of!(Sy, cudaEventSyncId)
    );
    assert_eq!(off::sync::RETURN_VALUE, offset_of!(Sy, returnValue));
    type Ev = s::CUpti_ActivityCudaEvent2;
    assert_eq!(
        off::cuda_event::CORRELATION_ID,
        offset_of!(Ev, correlationId)
    );
    assert_eq!(off::cuda_event::CONTEXT_ID, offset_of!(Ev, contextId));
    assert_eq!(off::cuda_event::STREAM_ID, offset_of!(Ev, streamId));
    assert_eq!(off::cuda_event::EVENT_ID, offset_of!(Ev, eventId));
    assert_eq!(off::cuda_event::DEVICE_ID, offset_of!(Ev, deviceId));
    assert_eq!(
        off::cuda_event::CUDA_EVENT_SYNC_ID,
        offset_of!(Ev, cudaEventSyncId)
    );
    type Ev1 = s::CUpti_ActivityCudaEvent;
    assert_eq!(off::cuda_event::EVENT_ID, offset_of!(Ev1, eventId));
    type A = s::CUpti_ActivityAPI;
    assert_eq!(off::api::THREAD_ID, offset_of!(A, threadId));
    assert_eq!(off::api::RETURN_VALUE, offset_of!(A, returnValue));
    type E = s::CUpti_ActivityExternalCorrelation;
    assert_eq!(off::ext::EXTERNAL_ID, offset_of!(E, externalId));
    assert_eq!(off::ext::CORRELATION_ID, offset_of!(E, correlationId));

    assert_eq!(
        res::MAX_LIMIT_REACHED,
        s::CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED.0
    );
    assert_eq!(
        res::MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
        s::CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED.0
    );
    type R = s::CUpti_runtime_api_trace_cbid_enum;
    assert_eq!(
        control::cbid::CUDA_LAUNCH_KERNEL,
        R::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000.0
    );
    assert_eq!(
        control::cbid::CUDA_GRAPH_LAUNCH,
        R::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000.0
    );
    assert_eq!(
        control::cbid::CUDA_MALLOC_ASYNC,
        R::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020.0
    );
    assert_eq!(
        control::cbid::CUDA_PROFILER_STOP,
        R::CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000.0
    );
    type D = s::CUpti_driver_api_trace_cbid_enum;
    assert_eq!(
        control::cbid::CU_MEMCPY_DTOH_ASYNC_V2,
        D::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2.0
    );
    assert_eq!(
        crate::names::RUNTIME_CBID_NAMES.len() as u32,
        R::CUPTI_RUNTIME_TRACE_CBID_SIZE.0
    );
    assert_eq!(
        crate::names::DRIVER_CBID_NAMES.len() as u32,
        D::CUPTI_DRIVER_TRACE_CBID_SIZE.0
    );
}
