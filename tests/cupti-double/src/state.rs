//! Process-wide state of the double: configuration, enabled kinds, subscriber, and the
//! activity buffer machinery (per-thread buffers in 13.0 mode, one shared buffer in 12.x
//! mode, a queue of complete buffers, and the double's own delivery worker thread).
//!
//! Locking rules (the tracer may call CUPTI from its callbacks):
//! - no double-internal lock is held while `requested`, `completed` or the subscriber
//!   callback runs;
//! - nested order is registry -> slot -> queue; nothing else nests.

use crate::layout::{self, kind};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// `CUpti_BuffersCallbackRequestFunc`.
pub type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
/// `CUpti_BuffersCallbackCompleteFunc`.
pub type CompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
/// `CUpti_CallbackFunc`.
pub type CallbackFn = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);

/// Locks, ignoring poisoning (a panicking test thread must not wedge the double).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------- configuration

static VERSION: AtomicU32 = AtomicU32::new(0);

/// The CUPTI version the double plays (`CUPTI_DOUBLE_VERSION`: `13` (default, 130001),
/// `12` (28 = 12.9 Update 1), or a raw `cuptiGetVersion` number such as 19 or 130000).
pub fn version() -> u32 {
    let v = VERSION.load(Relaxed);
    if v != 0 {
        return v;
    }
    let v = parse_version(std::env::var("CUPTI_DOUBLE_VERSION").ok().as_deref());
    VERSION.store(v, Relaxed);
    v
}

pub fn parse_version(s: Option<&str>) -> u32 {
    match s.map(str::trim) {
        None | Some("") | Some("13") | Some("13.0") => layout::VERSION_13_0,
        Some("12") | Some("12.9") => layout::VERSION_12_9,
        Some(other) => match other.parse::<u32>() {
            Ok(n) if n > 0 => n,
            _ => layout::VERSION_13_0,
        },
    }
}

#[cfg(test)]
pub fn set_version(v: u32) {
    VERSION.store(v, Relaxed);
}

/// Error injection from `CUPTI_DOUBLE_FAIL` (comma list of `name=code`).
#[derive(Default, Debug)]
pub struct Fail {
    pub subscribe: Option<u32>,
    pub enable: Option<u32>,
    pub enable_kind: HashMap<u32, u32>,
    pub register: Option<u32>,
    pub version: Option<u32>,
}

pub fn parse_fail(s: &str) -> Fail {
    let mut f = Fail::default();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((name, code)) = item.split_once('=') else {
            continue;
        };
        let Ok(code) = code.trim().parse::<u32>() else {
            continue;
        };
        match name.trim() {
            "subscribe" => f.subscribe = Some(code),
            "enable" => f.enable = Some(code),
            "register" => f.register = Some(code),
            "version" => f.version = Some(code),
            other => {
                if let Some(k) = other.strip_prefix("enable.").and_then(|k| k.parse().ok()) {
                    f.enable_kind.insert(k, code);
                }
            }
        }
    }
    f
}

static FAIL: OnceLock<Mutex<Fail>> = OnceLock::new();

pub fn fail() -> MutexGuard<'static, Fail> {
    lock(FAIL.get_or_init(|| {
        Mutex::new(parse_fail(
            &std::env::var("CUPTI_DOUBLE_FAIL").unwrap_or_default(),
        ))
    }))
}

// ---------------------------------------------------------------- bit sets

/// 1024 flags, lock-free.
pub struct Bits([AtomicU64; 16]);

impl Default for Bits {
    fn default() -> Self {
        Self::new()
    }
}

impl Bits {
    pub const fn new() -> Self {
        Bits([const { AtomicU64::new(0) }; 16])
    }
    pub fn get(&self, i: u32) -> bool {
        let i = i as usize;
        i < 1024 && self.0[i / 64].load(Relaxed) & (1 << (i % 64)) != 0
    }
    pub fn set(&self, i: u32, on: bool) {
        let i = i as usize;
        if i >= 1024 {
            return;
        }
        if on {
            self.0[i / 64].fetch_or(1 << (i % 64), Relaxed);
        } else {
            self.0[i / 64].fetch_and(!(1 << (i % 64)), Relaxed);
        }
    }
    pub fn set_all(&self, on: bool) {
        for w in &self.0 {
            w.store(if on { u64::MAX } else { 0 }, Relaxed);
        }
    }
}

// ---------------------------------------------------------------- activity settings

static KIND_ENABLED: [AtomicBool; 64] = [const { AtomicBool::new(false) }; 64];
/// Per-cbid API record switches (`cuptiActivityEnableRuntimeApi`/`DriverApi`); enabling
/// the RUNTIME/DRIVER kind sets them all, disabling clears them all.
pub static RUNTIME_API_ON: Bits = Bits::new();
pub static DRIVER_API_ON: Bits = Bits::new();

pub fn kind_enabled(k: u32) -> bool {
    (k as usize) < 64 && KIND_ENABLED[k as usize].load(Relaxed)
}

pub fn set_kind(k: u32, on: bool) {
    if (k as usize) < 64 {
        KIND_ENABLED[k as usize].store(on, Relaxed);
    }
    match k {
        kind::RUNTIME => RUNTIME_API_ON.set_all(on),
        kind::DRIVER => DRIVER_API_ON.set_all(on),
        _ => {}
    }
}

pub static THREAD_ID_TYPE: AtomicU32 = AtomicU32::new(0);
pub static LATENCY_TIMESTAMPS: AtomicBool = AtomicBool::new(false);
pub static FLUSH_PERIOD_MS: AtomicU32 = AtomicU32::new(0);
pub static FINALIZE_CALLS: AtomicU64 = AtomicU64::new(0);
/// Kernel records that will still get start = end = 0 (device buffer overflow).
pub static ZERO_KERNEL_TIMESTAMPS: AtomicU64 = AtomicU64::new(0);

/// `CUpti_ActivityAttribute` values 0..=10, stored as u64.
pub static ATTRS: [AtomicU64; 11] = [
    AtomicU64::new(3_200_000),  // 0 DEVICE_BUFFER_SIZE
    AtomicU64::new(8_388_608),  // 1 DEVICE_BUFFER_SIZE_CDP
    AtomicU64::new(250),        // 2 DEVICE_BUFFER_POOL_LIMIT
    AtomicU64::new(25_000),     // 3 PROFILING_SEMAPHORE_POOL_SIZE
    AtomicU64::new(250),        // 4 PROFILING_SEMAPHORE_POOL_LIMIT
    AtomicU64::new(0),          // 5 ZEROED_OUT_ACTIVITY_BUFFER (u8)
    AtomicU64::new(3),          // 6 DEVICE_BUFFER_PRE_ALLOCATE_VALUE
    AtomicU64::new(3),          // 7 PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE
    AtomicU64::new(0),          // 8 MEM_ALLOCATION_TYPE_HOST_PINNED (u8)
    AtomicU64::new(u64::MAX),   // 9 PER_THREAD_ACTIVITY_BUFFER (u8); MAX = version default
    AtomicU64::new(16_777_216), // 10 DEVICE_BUFFER_SIZE_DEVICE_GRAPHS
];
pub const ATTR_ZEROED: usize = 5;
pub const ATTR_PER_THREAD: usize = 9;

/// Size in bytes of attribute `a`'s value (`uint8_t` or `size_t`), None if unknown.
pub fn attr_size(a: u32) -> Option<usize> {
    match a {
        5 | 8 | 9 => Some(1),
        0..=10 => Some(std::mem::size_of::<usize>()),
        _ => None,
    }
}

pub fn attr_value(a: usize) -> u64 {
    let v = ATTRS[a].load(Relaxed);
    if a == ATTR_PER_THREAD && v == u64::MAX {
        u64::from(layout::is_13(version()))
    } else {
        v
    }
}

/// 13.0 defaults to per-thread buffers, 12.x to one shared buffer; the attribute overrides.
fn per_thread_buffers() -> bool {
    attr_value(ATTR_PER_THREAD) != 0
}

// ---------------------------------------------------------------- counters

pub static NEXT_CORRELATION: AtomicU32 = AtomicU32::new(1);

pub fn next_correlation() -> u32 {
    NEXT_CORRELATION.fetch_add(1, Relaxed)
}

static PRODUCED: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];
static DELIVERED: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
pub static DROPPED_TOTAL: AtomicU64 = AtomicU64::new(0);
pub static INJECTED_DROPS: AtomicU64 = AtomicU64::new(0);
pub static BUFFERS_REQUESTED: AtomicU64 = AtomicU64::new(0);
pub static BUFFERS_COMPLETED: AtomicU64 = AtomicU64::new(0);
/// Buffers that were complete while no `completed` callback was registered (leaked).
pub static BUFFERS_LOST: AtomicU64 = AtomicU64::new(0);

fn sum_or(arr: &[AtomicU64; 64], k: u32) -> u64 {
    if k == 0 {
        arr.iter().map(|a| a.load(Relaxed)).sum()
    } else if (k as usize) < 64 {
        arr[k as usize].load(Relaxed)
    } else {
        0
    }
}

pub fn produced(k: u32) -> u64 {
    sum_or(&PRODUCED, k)
}
pub fn delivered(k: u32) -> u64 {
    sum_or(&DELIVERED, k)
}

pub fn count_produced(k: u32) {
    if (k as usize) < 64 {
        PRODUCED[k as usize].fetch_add(1, Relaxed);
    }
}

fn count_dropped() {
    DROPPED.fetch_add(1, Relaxed);
    DROPPED_TOTAL.fetch_add(1, Relaxed);
}

// ---------------------------------------------------------------- clocks and ids

/// CLOCK_REALTIME in ns, like `cuptiGetTimestamp` on Linux.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn process_id() -> u32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() as u32 }
}

/// Thread id as CUPTI writes it: `gettid()` with CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM,
/// `pthread_self()` cut to 32 bits with the default type.
pub fn thread_id() -> u32 {
    if THREAD_ID_TYPE.load(Relaxed) == 1 {
        // SAFETY: SYS_gettid takes no arguments.
        unsafe { libc::syscall(libc::SYS_gettid) as u32 }
    } else {
        // SAFETY: pthread_self has no preconditions.
        unsafe { libc::pthread_self() as u32 }
    }
}

// ---------------------------------------------------------------- interned strings

static INTERNED: OnceLock<Mutex<HashMap<Vec<u8>, usize>>> = OnceLock::new();

/// A NUL-terminated copy of `s` that lives for the rest of the process.
pub fn intern(s: &[u8]) -> *const c_char {
    let mut m = lock(INTERNED.get_or_init(Default::default));
    if let Some(&p) = m.get(s) {
        return p as *const c_char;
    }
    let bytes: Vec<u8> = s.iter().copied().filter(|&b| b != 0).collect();
    let c: &'static CStr = Box::leak(CString::new(bytes).expect("no NUL").into_boxed_c_str());
    m.insert(s.to_vec(), c.as_ptr() as usize);
    c.as_ptr()
}

// ---------------------------------------------------------------- subscriber

pub struct Subscriber {
    pub handle: usize,
    pub callback: Option<CallbackFn>,
    pub userdata: usize,
    /// "CUPTI for <name>" when it subscribed with `cuptiSubscribe_v2` and a name.
    pub name: Option<String>,
}

pub static SUBSCRIBER: Mutex<Option<Subscriber>> = Mutex::new(None);
/// Per-domain callback switches, domains 0..=6 (`CUpti_CallbackDomain`).
pub static CALLBACK_ON: [Bits; 7] = [const { Bits::new() }; 7];
pub static SUBSCRIBE_CALLS: AtomicU64 = AtomicU64::new(0);

pub fn current_callback() -> Option<(Option<CallbackFn>, usize)> {
    lock(&SUBSCRIBER).as_ref().map(|s| (s.callback, s.userdata))
}

// ---------------------------------------------------------------- buffer callbacks

static REQUESTED: AtomicUsize = AtomicUsize::new(0);
static COMPLETED: AtomicUsize = AtomicUsize::new(0);
pub static REGISTER_CALLS: AtomicU64 = AtomicU64::new(0);

pub fn set_buffer_callbacks(req: RequestFn, comp: CompleteFn) {
    REQUESTED.store(req as usize, Release);
    COMPLETED.store(comp as usize, Release);
    REGISTER_CALLS.fetch_add(1, Relaxed);
    ensure_worker();
}

pub fn callbacks_registered() -> bool {
    REQUESTED.load(Acquire) != 0
}

fn requested_fn() -> Option<RequestFn> {
    let p = REQUESTED.load(Acquire);
    // SAFETY: only ever stored from a valid RequestFn (set_buffer_callbacks).
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, RequestFn>(p) })
}

fn completed_fn() -> Option<CompleteFn> {
    let p = COMPLETED.load(Acquire);
    // SAFETY: only ever stored from a valid CompleteFn (set_buffer_callbacks).
    (p != 0).then(|| unsafe { std::mem::transmute::<usize, CompleteFn>(p) })
}

// ---------------------------------------------------------------- buffers

/// One client buffer while the double owns it.
pub struct Buf {
    ptr: *mut u8,
    size: usize,
    used: usize,
    max_records: usize,
    records: usize,
}

// SAFETY: the client hands the buffer over to the double until `completed`; the double
// touches it from one thread at a time (behind a slot mutex or by value in the queue).
unsafe impl Send for Buf {}

impl Buf {
    fn fits(&self, n: usize) -> bool {
        self.used + n <= self.size && (self.max_records == 0 || self.records < self.max_records)
    }

    fn write(&mut self, n: usize, fill: impl FnOnce(&mut [u8])) {
        debug_assert!(self.fits(n));
        // SAFETY: the client gave `size` writable bytes at `ptr`; used + n <= size; the
        // caller holds the only access to this Buf.
        let rec = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(self.used), n) };
        fill(rec);
        self.used += n;
        self.records += 1;
    }
}

struct Slot {
    buf: Mutex<Option<Buf>>,
}

/// 12.x mode: the one shared current buffer.
static SHARED_SLOT: Slot = Slot {
    buf: Mutex::new(None),
};
/// 13.0 mode: every thread's slot, so forced flushes reach them all.
static REGISTRY: Mutex<Vec<Arc<Slot>>> = Mutex::new(Vec::new());
/// Bumped by `reset` so threads register fresh slots.
static EPOCH: AtomicU64 = AtomicU64::new(0);
/// Buffers the client gave that could not be used yet (too small for the record at hand,
/// or a concurrent request in 12.x mode won the race). Used before asking for new ones;
/// a forced flush hands them back empty.
static SPARES: Mutex<Vec<Buf>> = Mutex::new(Vec::new());

thread_local! {
    static MY_SLOT: RefCell<Option<(u64, Arc<Slot>)>> = const { RefCell::new(None) };
    /// Nesting depth of `completed` calls on this thread (a flush from inside one must not
    /// wait for itself).
    static IN_DELIVERY: Cell<u32> = const { Cell::new(0) };
}

fn with_slot<R>(f: impl FnOnce(&Slot) -> R) -> R {
    if !per_thread_buffers() {
        return f(&SHARED_SLOT);
    }
    let epoch = EPOCH.load(Acquire);
    let mine = MY_SLOT.try_with(|cell| {
        let mut cur = cell.borrow_mut();
        match cur.as_ref() {
            Some((e, slot)) if *e == epoch => slot.clone(),
            _ => {
                let slot = Arc::new(Slot {
                    buf: Mutex::new(None),
                });
                lock(&REGISTRY).push(slot.clone());
                *cur = Some((epoch, slot.clone()));
                slot
            }
        }
    });
    match mine {
        Ok(slot) => f(&slot),
        // Thread-local storage already torn down (a thread's exit path): share.
        Err(_) => f(&SHARED_SLOT),
    }
}

/// Asks the client for a buffer, on the calling thread, with no lock held.
fn request_buffer() -> Option<Buf> {
    let req = requested_fn()?;
    let mut ptr: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    let mut max_records: usize = 0;
    BUFFERS_REQUESTED.fetch_add(1, Relaxed);
    // SAFETY: CUPTI's contract for CUpti_BuffersCallbackRequestFunc: three valid out
    // pointers.
    unsafe { req(&mut ptr, &mut size, &mut max_records) };
    if ptr.is_null() {
        return None;
    }
    if ATTRS[ATTR_ZEROED].load(Relaxed) != 0 {
        // SAFETY: the client gave `size` writable bytes at `ptr`.
        unsafe { std::ptr::write_bytes(ptr, 0, size) };
    }
    Some(Buf {
        ptr,
        size,
        used: 0,
        max_records,
        records: 0,
    })
}

fn take_spare(n: usize) -> Option<Buf> {
    let mut spares = lock(&SPARES);
    let i = spares.iter().position(|b| b.fits(n))?;
    Some(spares.swap_remove(i))
}

/// Appends one record of kind `k` (already known to be enabled) to the calling thread's
/// buffer (13.0) or the shared one (12.x), asking for buffers as needed. Returns false
/// when the record was dropped.
pub fn emit(k: u32, fill: impl FnOnce(&mut [u8])) -> bool {
    let size = layout::record_size(version(), k);
    count_produced(k);
    if size == 0 {
        return false;
    }
    with_slot(|slot| emit_into(slot, size, fill))
}

fn emit_into(slot: &Slot, size: usize, fill: impl FnOnce(&mut [u8])) -> bool {
    let mut fill = Some(fill);
    for _ in 0..32 {
        let full = {
            let mut cur = lock(&slot.buf);
            match cur.as_mut() {
                Some(b) if b.fits(size) => {
                    b.write(size, fill.take().expect("written once"));
                    return true;
                }
                Some(_) => cur.take(),
                None => None,
            }
        };
        if let Some(full) = full {
            enqueue(full);
        }
        let fresh = match take_spare(size) {
            Some(b) => b,
            None => match request_buffer() {
                Some(b) if b.fits(size) => b,
                Some(small) => {
                    // Too small for this record: CUPTI drops the record.
                    lock(&SPARES).push(small);
                    count_dropped();
                    return false;
                }
                None => {
                    count_dropped();
                    return false;
                }
            },
        };
        let mut cur = lock(&slot.buf);
        if cur.is_none() {
            let mut b = fresh;
            b.write(size, fill.take().expect("written once"));
            *cur = Some(b);
            return true;
        }
        // Another thread installed a buffer meanwhile (shared mode): keep ours for later.
        drop(cur);
        lock(&SPARES).push(fresh);
    }
    count_dropped();
    false
}

// ---------------------------------------------------------------- delivery

static QUEUE: Mutex<VecDeque<Buf>> = Mutex::new(VecDeque::new());
static QUEUE_CV: Condvar = Condvar::new();
static INFLIGHT: Mutex<usize> = Mutex::new(0);
static INFLIGHT_CV: Condvar = Condvar::new();
static WORKER_PID: AtomicI32 = AtomicI32::new(0);

fn enqueue(b: Buf) {
    lock(&QUEUE).push_back(b);
    QUEUE_CV.notify_all();
    ensure_worker();
}

/// Starts the double's delivery thread (again in a forked child, where it is gone).
pub fn ensure_worker() {
    let pid = process_id() as i32;
    let prev = WORKER_PID.load(Acquire);
    if prev == pid
        || WORKER_PID
            .compare_exchange(prev, pid, AcqRel, Acquire)
            .is_err()
    {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("cupti-double-worker".into())
        .spawn(worker_loop);
    if spawned.is_err() {
        WORKER_PID.store(0, Release);
    }
}

fn worker_loop() {
    let my_pid = process_id() as i32;
    loop {
        if WORKER_PID.load(Acquire) != my_pid {
            return;
        }
        let period = FLUSH_PERIOD_MS.load(Relaxed);
        let wait = Duration::from_millis(if period > 0 { u64::from(period) } else { 100 });
        let bufs: Vec<Buf> = {
            let mut q = lock(&QUEUE);
            if q.is_empty() {
                q = QUEUE_CV
                    .wait_timeout(q, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            let bufs: Vec<Buf> = q.drain(..).collect();
            // Counted as in flight before the queue lock is released, so a concurrent
            // cuptiActivityFlushAll waits for them.
            *lock(&INFLIGHT) += bufs.len();
            bufs
        };
        // Periodic flushes return only full buffers (cupti_activity.h,
        // cuptiActivityFlushPeriod), which are exactly the queued ones.
        for b in bufs {
            deliver_counted(b);
        }
    }
}

/// One delivery counted in INFLIGHT; uncounts itself when dropped.
struct InFlight;

impl InFlight {
    /// Takes over a delivery already counted in INFLIGHT.
    fn adopt() -> Self {
        let _ = IN_DELIVERY.try_with(|d| d.set(d.get() + 1));
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let _ = IN_DELIVERY.try_with(|d| d.set(d.get().saturating_sub(1)));
        let mut n = lock(&INFLIGHT);
        *n = n.saturating_sub(1);
        INFLIGHT_CV.notify_all();
    }
}

/// Hands one buffer to the `completed` callback registered now (as real CUPTI does, even
/// if another client registered its callbacks after this buffer was requested).
fn deliver(b: Buf) {
    *lock(&INFLIGHT) += 1;
    deliver_counted(b);
}

fn deliver_counted(b: Buf) {
    let _inflight = InFlight::adopt();
    let v = version();
    // SAFETY: the client's buffer has `used` initialised bytes; we still own it.
    let data = unsafe { std::slice::from_raw_parts(b.ptr, b.used) };
    for (_, k, _) in layout::walk(v, data) {
        if (k as usize) < 64 {
            DELIVERED[k as usize].fetch_add(1, Relaxed);
        }
    }
    let Some(comp) = completed_fn() else {
        BUFFERS_LOST.fetch_add(1, Relaxed);
        return;
    };
    BUFFERS_COMPLETED.fetch_add(1, Relaxed);
    // SAFETY: CUPTI's contract for CUpti_BuffersCallbackCompleteFunc; ownership of the
    // buffer passes back to the client here.
    unsafe { comp(std::ptr::null_mut(), 0, b.ptr, b.size, b.used) };
}

/// Delivers a buffer filled outside the slots (replay).
pub fn deliver_filled(ptr: *mut u8, size: usize, used: usize, records: usize) {
    deliver(Buf {
        ptr,
        size,
        used,
        max_records: 0,
        records,
    });
}

/// Asks for a buffer for replay; None if declined.
pub fn request_for_replay() -> Option<(*mut u8, usize)> {
    request_buffer().map(|b| (b.ptr, b.size))
}

/// `cuptiActivityFlushAll`. Default flush (`forced` false): "returns all the activity
/// buffers which have all the activity records completed, buffers need not to be full"
/// (cupti_activity.h); in the double every record is complete as soon as it is written, so
/// that is every queued buffer and every thread's (or the shared) non-empty current buffer,
/// including those of threads that have exited. Forced flush: the same, plus unused spares
/// (handed back empty). Slots of exited threads are forgotten once emptied. Delivers on
/// the calling thread and returns after in-flight deliveries on other threads have finished
/// too.
pub fn flush_all(forced: bool) {
    let mut out: Vec<Buf> = lock(&QUEUE).drain(..).collect();
    let slots: Vec<Arc<Slot>> = {
        let mut reg = lock(&REGISTRY);
        // Drop slots of exited threads once they hold nothing.
        reg.retain(|s| Arc::strong_count(s) > 1 || lock(&s.buf).is_some());
        reg.clone()
    };
    for s in slots
        .iter()
        .map(|a| &**a)
        .chain(std::iter::once(&SHARED_SLOT))
    {
        let mut cur = lock(&s.buf);
        if forced || cur.as_ref().is_some_and(|b| b.used > 0) {
            if let Some(b) = cur.take() {
                out.push(b);
            }
        }
    }
    if forced {
        out.extend(lock(&SPARES).drain(..));
    }
    for b in out {
        deliver(b);
    }
    wait_inflight();
}

fn wait_inflight() {
    if IN_DELIVERY.try_with(|d| d.get() > 0).unwrap_or(true) {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = lock(&INFLIGHT);
    while *n > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            eprintln!(
                "cupti-double: cuptiActivityFlushAll gave up after 10 s waiting for a \
                 `completed` callback on another thread (a lock held across a CUPTI call?)"
            );
            return;
        }
        n = INFLIGHT_CV
            .wait_timeout(n, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// `cuptiActivityGetNumDroppedRecords`: reads and resets.
pub fn take_dropped() -> u64 {
    DROPPED.swap(0, SeqCst) + INJECTED_DROPS.swap(0, SeqCst)
}

// ---------------------------------------------------------------- external correlation

thread_local! {
    static EXT_STACKS: RefCell<[Vec<u64>; 6]> = const { RefCell::new([const { Vec::new() }; 6]) };
}

/// `CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN` (1) ..= `CUSTOM2` (5).
pub fn valid_external_kind(k: u32) -> bool {
    (1..=5).contains(&k)
}

pub fn push_external(k: u32, id: u64) {
    let _ = EXT_STACKS.try_with(|s| s.borrow_mut()[k as usize].push(id));
}

pub fn pop_external(k: u32) -> Option<u64> {
    EXT_STACKS
        .try_with(|s| s.borrow_mut()[k as usize].pop())
        .ok()
        .flatten()
}

/// (kind, top of stack) for every non-empty external-id stack of this thread.
pub fn external_tops() -> Vec<(u32, u64)> {
    EXT_STACKS
        .try_with(|s| {
            s.borrow()
                .iter()
                .enumerate()
                .filter_map(|(k, v)| v.last().map(|&id| (k as u32, id)))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------- per-thread-mode helper

pub fn per_thread_mode() -> bool {
    per_thread_buffers()
}

pub fn set_attr(a: usize, v: u64) {
    ATTRS[a].store(v, Relaxed);
}

// ---------------------------------------------------------------- reset (tests)

/// Back to a fresh process state (in-crate tests share one process). Buffers still held
/// are forgotten (leaked), not delivered.
#[cfg(test)]
pub fn reset(v: u32) {
    REQUESTED.store(0, Release);
    COMPLETED.store(0, Release);
    lock(&QUEUE).clear();
    wait_inflight();
    lock(&SPARES).clear();
    *lock(&SHARED_SLOT.buf) = None;
    for s in lock(&REGISTRY).drain(..) {
        *lock(&s.buf) = None;
    }
    EPOCH.fetch_add(1, Release);
    set_version(v);
    for k in 0..64 {
        set_kind(k, false);
    }
    RUNTIME_API_ON.set_all(false);
    DRIVER_API_ON.set_all(false);
    for b in &CALLBACK_ON {
        b.set_all(false);
    }
    *lock(&SUBSCRIBER) = None;
    REQUESTED.store(0, Release);
    COMPLETED.store(0, Release);
    for a in [&PRODUCED, &DELIVERED] {
        for c in a.iter() {
            c.store(0, Relaxed);
        }
    }
    for c in [
        &DROPPED,
        &DROPPED_TOTAL,
        &INJECTED_DROPS,
        &BUFFERS_REQUESTED,
        &BUFFERS_COMPLETED,
        &BUFFERS_LOST,
        &FINALIZE_CALLS,
        &ZERO_KERNEL_TIMESTAMPS,
    ] {
        c.store(0, Relaxed);
    }
    ATTRS[ATTR_PER_THREAD].store(u64::MAX, Relaxed);
    ATTRS[ATTR_ZEROED].store(0, Relaxed);
    THREAD_ID_TYPE.store(0, Relaxed);
    LATENCY_TIMESTAMPS.store(false, Relaxed);
    FLUSH_PERIOD_MS.store(0, Relaxed);
    *fail() = Fail::default();
    let _ = EXT_STACKS.try_with(|s| s.borrow_mut().iter_mut().for_each(Vec::clear));
}

#[cfg(test)]
pub fn registered_slots() -> usize {
    lock(&REGISTRY).len()
}

#[cfg(test)]
pub fn set_fail(f: Fail) {
    *fail() = f;
}
