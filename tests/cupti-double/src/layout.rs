//! Activity record layouts, written by explicit byte offsets.
//!
//! Deliberately NOT bindgen structs: the double is an independent check on the tracer's
//! decoder. Every offset and size below was read from the real headers (x86-64, LP64):
//! `nvidia-cuda-cupti==13.0.85` (`nvidia/cu13/include/cupti_activity.h`, CUPTI_API_VERSION
//! 130001) and `nvidia-cuda-cupti-cu12==12.9.79` (`nvidia/cuda_cupti/include`, version 28),
//! by compiling `offsetof`/`sizeof` against them, and they agree with
//! docs/design/cupti.md. All fields are little-endian.

/// `CUpti_ActivityKind` values (cupti_activity.h).
pub mod kind {
    pub const MEMCPY: u32 = 1;
    pub const MEMSET: u32 = 2;
    pub const KERNEL: u32 = 3;
    pub const DRIVER: u32 = 4;
    pub const RUNTIME: u32 = 5;
    pub const CONCURRENT_KERNEL: u32 = 10;
    pub const NAME: u32 = 11;
    pub const MARKER: u32 = 12;
    pub const MARKER_DATA: u32 = 13;
    pub const OVERHEAD: u32 = 17;
    pub const CUDA_EVENT: u32 = 36;
    pub const MEMCPY2: u32 = 22;
    pub const SYNCHRONIZATION: u32 = 38;
    pub const EXTERNAL_CORRELATION: u32 = 39;
    pub const INTERNAL_LAUNCH_API: u32 = 48;
    pub const MEMORY2: u32 = 49;
    pub const MEMORY_POOL: u32 = 50;
    /// `CUPTI_ACTIVITY_KIND_MEM_DECOMPRESS`, the last kind in 12.9 and 13.0.
    pub const MAX: u32 = 54;
}

/// `cuptiGetVersion` of CUDA 13.0 Update 1 (`CUPTI_API_VERSION` in 13.0.85's cupti_version.h).
pub const VERSION_13_0: u32 = 130001;
/// `cuptiGetVersion` of CUDA 12.9 Update 1 (cupti_version.h: "v28 : CUDA Toolkit 12.9 Update 1").
pub const VERSION_12_9: u32 = 28;

/// True for the CUPTI 13 numbering (130000 and up).
pub fn is_13(version: u32) -> bool {
    version >= 130000
}

/// Size of the struct each kind uses in CUPTI 13.0 (the structs its cupti_activity.h
/// documents per kind), indexed by kind. 0 = no record of that kind.
const SIZES_13_0: [u16; 55] = [
    0,   // 0 INVALID
    96,  // 1 MEMCPY: Memcpy6
    88,  // 2 MEMSET: Memset4
    216, // 3 KERNEL: Kernel10
    40,  // 4 DRIVER: API
    40,  // 5 RUNTIME: API
    24,  // 6 EVENT: Event
    24,  // 7 METRIC: Metric
    184, // 8 DEVICE: Device5
    32,  // 9 CONTEXT: Context3
    216, // 10 CONCURRENT_KERNEL: Kernel10
    32,  // 11 NAME: Name
    56,  // 12 MARKER: Marker2
    40,  // 13 MARKER_DATA: MarkerData2
    24,  // 14 SOURCE_LOCATOR: SourceLocator
    56,  // 15 GLOBAL_ACCESS: GlobalAccess3
    40,  // 16 BRANCH: Branch2
    56,  // 17 OVERHEAD: Overhead3
    144, // 18 CDP_KERNEL: CdpKernel
    40,  // 19 PREEMPTION: Preemption
    40,  // 20 ENVIRONMENT: Environment
    32,  // 21 EVENT_INSTANCE: EventInstance
    96,  // 22 MEMCPY2: MemcpyPtoP4
    32,  // 23 METRIC_INSTANCE: MetricInstance
    48,  // 24 INSTRUCTION_EXECUTION: InstructionExecution
    104, // 25 UNIFIED_MEMORY_COUNTER: UnifiedMemoryCounter3
    32,  // 26 FUNCTION: Function
    24,  // 27 MODULE: Module
    24,  // 28 DEVICE_ATTRIBUTE: DeviceAttribute
    56,  // 29 SHARED_ACCESS: SharedAccess
    40,  // 30 PC_SAMPLING: PCSampling3
    32,  // 31 PC_SAMPLING_RECORD_INFO: PCSamplingRecordInfo
    24,  // 32 INSTRUCTION_CORRELATION: InstructionCorrelation
    152, // 33 OPENACC_DATA: OpenAccData
    152, // 34 OPENACC_LAUNCH: OpenAccLaunch
    120, // 35 OPENACC_OTHER: OpenAccOther
    56,  // 36 CUDA_EVENT: CudaEvent2
    24,  // 37 STREAM: Stream
    56,  // 38 SYNCHRONIZATION: Synchronization2
    24,  // 39 EXTERNAL_CORRELATION: ExternalCorrelation
    136, // 40 NVLINK: NvLink4
    32,  // 41 INSTANTANEOUS_EVENT
    32,  // 42 INSTANTANEOUS_EVENT_INSTANCE
    32,  // 43 INSTANTANEOUS_METRIC
    32,  // 44 INSTANTANEOUS_METRIC_INSTANCE
    80,  // 45 MEMORY: Memory
    168, // 46 PCIE: Pcie
    40,  // 47 OPENMP: OpenMp
    40,  // 48 INTERNAL_LAUNCH_API: API
    128, // 49 MEMORY2: Memory4
    80,  // 50 MEMORY_POOL: MemoryPool3
    56,  // 51 GRAPH_TRACE: GraphTrace2
    72,  // 52 JIT: Jit2
    56,  // 53 DEVICE_GRAPH_TRACE: DeviceGraphTrace
    64,  // 54 MEM_DECOMPRESS: MemDecompress
];

/// Sizes in CUPTI 12.9 (version 27/28): as 13.0 except Kernel9 (208), MarkerData (32),
/// MemoryPool2 (72) and Jit (64). Read from 12.9.79's headers.
fn size_12_9(k: u32) -> u16 {
    match k {
        kind::KERNEL | kind::CONCURRENT_KERNEL => 208,
        kind::MARKER_DATA => 32,
        kind::MEMORY_POOL => 72,
        52 => 64,
        _ => SIZES_13_0[k as usize],
    }
}

/// Size in bytes of one record of `kind` as the CUPTI of `version` writes it, 0 if the kind
/// has no record. Versions below 26 (before 12.8) follow docs/design/cupti.md: Memcpy5
/// (88; MemcpyPtoP3 assumed alike) before 12.8 (v26), Synchronization (40) before 12.8,
/// Memory3 (120) before 12.6 (v24), Overhead2 (48) before 12.4 (v22).
pub fn record_size(version: u32, k: u32) -> usize {
    if k == 0 || k > kind::MAX {
        return 0;
    }
    if is_13(version) {
        return SIZES_13_0[k as usize] as usize;
    }
    let s = size_12_9(k) as usize;
    match k {
        kind::MEMCPY | kind::MEMCPY2 if version < 26 => 88,
        kind::SYNCHRONIZATION if version < 26 => 40,
        kind::CUDA_EVENT if version < 26 => 24,
        kind::MEMORY2 if version < 24 => 120,
        kind::OVERHEAD if version < 22 => 48,
        _ => s,
    }
}

/// Field offsets. Names follow the header's field names.
pub mod off {
    /// CUpti_ActivityAPI (DRIVER/RUNTIME), 40 bytes in every version.
    pub mod api {
        pub const KIND: usize = 0;
        pub const CBID: usize = 4;
        pub const START: usize = 8;
        pub const END: usize = 16;
        pub const PROCESS_ID: usize = 24;
        pub const THREAD_ID: usize = 28;
        pub const CORRELATION_ID: usize = 32;
        pub const RETURN_VALUE: usize = 36;
    }
    /// CUpti_ActivityKernel9 (208 bytes); Kernel10 = Kernel9 + isDeviceLaunched u8 @208 (216).
    pub mod kernel {
        pub const KIND: usize = 0;
        pub const CACHE_CONFIG: usize = 4;
        pub const SHARED_MEMORY_CONFIG: usize = 5;
        pub const REGISTERS_PER_THREAD: usize = 6; // u16
        pub const START: usize = 16;
        pub const END: usize = 24;
        pub const COMPLETED: usize = 32;
        pub const DEVICE_ID: usize = 40;
        pub const CONTEXT_ID: usize = 44;
        pub const STREAM_ID: usize = 48;
        pub const GRID_X: usize = 52; // i32 x/y/z
        pub const BLOCK_X: usize = 64; // i32 x/y/z
        pub const STATIC_SHARED_MEMORY: usize = 76;
        pub const DYNAMIC_SHARED_MEMORY: usize = 80;
        pub const LOCAL_MEMORY_PER_THREAD: usize = 84;
        pub const LOCAL_MEMORY_TOTAL: usize = 88;
        pub const CORRELATION_ID: usize = 92;
        pub const GRID_ID: usize = 96; // i64
        pub const NAME: usize = 104; // const char*
        pub const QUEUED: usize = 120;
        pub const SUBMITTED: usize = 128;
        pub const LAUNCH_TYPE: usize = 136; // u8
        pub const SHARED_MEMORY_EXECUTED: usize = 140;
        pub const GRAPH_NODE_ID: usize = 144; // u64
        pub const GRAPH_ID: usize = 156; // u32
        pub const CHANNEL_ID: usize = 168;
        pub const CHANNEL_TYPE: usize = 172;
        pub const CLUSTER_X: usize = 176; // u32 x/y/z
        pub const LOCAL_MEMORY_TOTAL_V2: usize = 192; // u64
        pub const IS_DEVICE_LAUNCHED: usize = 208; // u8, Kernel10 (13.0) only
    }
    /// CUpti_ActivityMemcpy5 (88) / Memcpy6 (96: copyCount u64 @88; isDeviceLaunched u8 @84
    /// in 13.0, padding in 12.x).
    pub mod memcpy {
        pub const KIND: usize = 0;
        pub const COPY_KIND: usize = 4; // u8
        pub const SRC_KIND: usize = 5; // u8
        pub const DST_KIND: usize = 6; // u8
        pub const FLAGS: usize = 7; // u8
        pub const BYTES: usize = 8;
        pub const START: usize = 16;
        pub const END: usize = 24;
        pub const DEVICE_ID: usize = 32;
        pub const CONTEXT_ID: usize = 36;
        pub const STREAM_ID: usize = 40;
        pub const CORRELATION_ID: usize = 44;
        pub const RUNTIME_CORRELATION_ID: usize = 48;
        pub const GRAPH_NODE_ID: usize = 64;
        pub const GRAPH_ID: usize = 72;
        pub const CHANNEL_ID: usize = 76;
        pub const CHANNEL_TYPE: usize = 80;
        pub const IS_DEVICE_LAUNCHED: usize = 84; // 13.0 only
        pub const COPY_COUNT: usize = 88; // Memcpy6 only
    }
    /// CUpti_ActivityMemset4 (88; isDeviceLaunched u8 @84 in 13.0, padding in 12.x).
    pub mod memset {
        pub const KIND: usize = 0;
        pub const VALUE: usize = 4;
        pub const BYTES: usize = 8;
        pub const START: usize = 16;
        pub const END: usize = 24;
        pub const DEVICE_ID: usize = 32;
        pub const CONTEXT_ID: usize = 36;
        pub const STREAM_ID: usize = 40;
        pub const CORRELATION_ID: usize = 44;
        pub const FLAGS: usize = 48; // u16
        pub const MEMORY_KIND: usize = 50; // u16
        pub const GRAPH_NODE_ID: usize = 64;
        pub const GRAPH_ID: usize = 72;
        pub const IS_DEVICE_LAUNCHED: usize = 84; // 13.0 only
    }
    /// CUpti_ActivityMemory3 (120) / Memory4 (128: `source` const char* @120).
    pub mod memory {
        pub const KIND: usize = 0;
        pub const OPERATION_TYPE: usize = 4;
        pub const MEMORY_KIND: usize = 8;
        pub const CORRELATION_ID: usize = 12;
        pub const ADDRESS: usize = 16;
        pub const BYTES: usize = 24;
        pub const TIMESTAMP: usize = 32;
        pub const PC: usize = 40;
        pub const PROCESS_ID: usize = 48;
        pub const DEVICE_ID: usize = 52;
        pub const CONTEXT_ID: usize = 56;
        pub const STREAM_ID: usize = 60;
        pub const NAME: usize = 64; // const char*
        pub const IS_ASYNC: usize = 72; // u32
        pub const POOL_TYPE: usize = 80;
        pub const POOL_ADDRESS: usize = 88;
        pub const POOL_RELEASE_THRESHOLD: usize = 96;
        pub const POOL_SIZE: usize = 104;
        pub const POOL_UTILIZED_SIZE: usize = 112;
        pub const SOURCE: usize = 120; // Memory4 only
    }
    /// CUpti_ActivitySynchronization (40) / Synchronization2 (56: cudaEventSyncId u64 @40,
    /// returnValue u32 @48).
    pub mod sync {
        pub const KIND: usize = 0;
        pub const TYPE: usize = 4;
        pub const START: usize = 8;
        pub const END: usize = 16;
        pub const CORRELATION_ID: usize = 24;
        pub const CONTEXT_ID: usize = 28;
        pub const STREAM_ID: usize = 32;
        pub const CUDA_EVENT_ID: usize = 36;
        pub const CUDA_EVENT_SYNC_ID: usize = 40; // v2 only
        pub const RETURN_VALUE: usize = 48; // v2 only
    }
    /// CUpti_ActivityCudaEvent (24 bytes, before 12.8) and CudaEvent2 (56): deviceId and
    /// cudaEventSyncId in CudaEvent2 only.
    pub mod cuda_event {
        pub const KIND: usize = 0;
        pub const CORRELATION_ID: usize = 4;
        pub const CONTEXT_ID: usize = 8;
        pub const STREAM_ID: usize = 12;
        pub const EVENT_ID: usize = 16;
        pub const DEVICE_ID: usize = 24; // v2 only
        pub const CUDA_EVENT_SYNC_ID: usize = 48; // v2 only
    }
    /// CUpti_ActivityMarker2 (56; same offsets in 12.x): objectId @24, name @40, domain @48.
    pub mod marker {
        pub const KIND: usize = 0;
        pub const FLAGS: usize = 4;
        pub const TIMESTAMP: usize = 8;
        pub const ID: usize = 16;
        pub const OBJECT_KIND: usize = 20;
        pub const OBJECT_ID: usize = 24; // 12-byte union
        pub const NAME: usize = 40; // const char*
        pub const DOMAIN: usize = 48; // const char*
    }
    /// CUpti_ActivityOverhead (40) / Overhead2 (48) / Overhead3 (56): start and end at the
    /// same offsets in all three.
    pub mod overhead {
        pub const KIND: usize = 0;
        pub const OVERHEAD_KIND: usize = 4;
        pub const OBJECT_KIND: usize = 8;
        pub const OBJECT_ID: usize = 12; // 12-byte union
        pub const START: usize = 24;
        pub const END: usize = 32;
        pub const CORRELATION_ID: usize = 40; // Overhead2/3
    }
    /// CUpti_ActivityMemoryPool2 (72) / MemoryPool3 (80): same offsets for these fields.
    pub mod memory_pool {
        pub const KIND: usize = 0;
        pub const OPERATION_TYPE: usize = 4;
        pub const POOL_TYPE: usize = 8;
        pub const CORRELATION_ID: usize = 12;
        pub const PROCESS_ID: usize = 16;
        pub const DEVICE_ID: usize = 20;
        pub const TIMESTAMP: usize = 56;
    }
    /// CUpti_ActivityExternalCorrelation (24).
    pub mod ext {
        pub const KIND: usize = 0;
        pub const EXTERNAL_KIND: usize = 4;
        pub const EXTERNAL_ID: usize = 8;
        pub const CORRELATION_ID: usize = 16;
    }
}

/// `CUPTI_SYNCHRONIZATION_INVALID_VALUE`.
pub const SYNC_INVALID: u32 = 0xFFFF_FFFF;

/// Little-endian field writer over one record's bytes.
pub struct W<'a>(pub &'a mut [u8]);

impl W<'_> {
    pub fn u8(&mut self, at: usize, v: u8) {
        self.0[at] = v;
    }
    pub fn u16(&mut self, at: usize, v: u16) {
        self.0[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, at: usize, v: u32) {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    pub fn i32(&mut self, at: usize, v: i32) {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, at: usize, v: u64) {
        self.0[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    pub fn i64(&mut self, at: usize, v: i64) {
        self.0[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    pub fn ptr(&mut self, at: usize, p: *const libc::c_char) {
        self.u64(at, p as usize as u64);
    }
}

/// Little-endian field reader (tests, replay, counting).
pub fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
pub fn rd_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

pub struct ApiRec {
    pub kind: u32,
    pub cbid: u32,
    pub start: u64,
    pub end: u64,
    pub process_id: u32,
    pub thread_id: u32,
    pub correlation_id: u32,
    pub return_value: u32,
}

pub fn write_api(b: &mut [u8], r: &ApiRec) {
    use off::api::*;
    b.fill(0);
    let mut w = W(b);
    w.u32(KIND, r.kind);
    w.u32(CBID, r.cbid);
    w.u64(START, r.start);
    w.u64(END, r.end);
    w.u32(PROCESS_ID, r.process_id);
    w.u32(THREAD_ID, r.thread_id);
    w.u32(CORRELATION_ID, r.correlation_id);
    w.u32(RETURN_VALUE, r.return_value);
}

pub struct KernelRec {
    pub kind: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub registers_per_thread: u16,
    pub static_shared: i32,
    pub dynamic_shared: i32,
    pub correlation_id: u32,
    pub grid_id: i64,
    pub name: *const libc::c_char,
    pub start: u64,
    pub end: u64,
    pub queued: u64,
    pub submitted: u64,
    pub graph_node_id: u64,
    pub graph_id: u32,
}

pub fn write_kernel(b: &mut [u8], version: u32, r: &KernelRec) {
    use off::kernel::*;
    b.fill(0);
    let mut w = W(b);
    w.u32(KIND, r.kind);
    w.u8(CACHE_CONFIG, 0);
    w.u8(SHARED_MEMORY_CONFIG, 0);
    w.u16(REGISTERS_PER_THREAD, r.registers_per_thread);
    w.u64(START, r.start);
    w.u64(END, r.end);
    w.u64(COMPLETED, r.end);
    w.u32(DEVICE_ID, r.device);
    w.u32(CONTEXT_ID, r.context);
    w.u32(STREAM_ID, r.stream);
    for i in 0..3 {
        w.i32(GRID_X + 4 * i, r.grid[i]);
        w.i32(BLOCK_X + 4 * i, r.block[i]);
    }
    w.i32(STATIC_SHARED_MEMORY, r.static_shared);
    w.i32(DYNAMIC_SHARED_MEMORY, r.dynamic_shared);
    w.u32(LOCAL_MEMORY_PER_THREAD, 0);
    w.u32(LOCAL_MEMORY_TOTAL, 0);
    w.u32(CORRELATION_ID, r.correlation_id);
    w.i64(GRID_ID, r.grid_id);
    w.ptr(NAME, r.name);
    w.u64(QUEUED, r.queued);
    w.u64(SUBMITTED, r.submitted);
    w.u8(LAUNCH_TYPE, 0); // CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR
    w.u32(SHARED_MEMORY_EXECUTED, 0);
    w.u64(GRAPH_NODE_ID, r.graph_node_id);
    w.u32(GRAPH_ID, r.graph_id);
    w.u32(CHANNEL_ID, 0);
    w.u32(CHANNEL_TYPE, 0);
    for i in 0..3 {
        w.u32(CLUSTER_X + 4 * i, 0);
    }
    w.u64(LOCAL_MEMORY_TOTAL_V2, 0);
    if is_13(version) {
        w.u8(IS_DEVICE_LAUNCHED, 0);
    }
}

pub struct MemcpyRec {
    pub copy_kind: u8,
    pub src_kind: u8,
    pub dst_kind: u8,
    pub flags: u8,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation_id: u32,
    pub runtime_correlation_id: u32,
}

pub fn write_memcpy(b: &mut [u8], version: u32, r: &MemcpyRec) {
    use off::memcpy::*;
    b.fill(0);
    let memcpy6 = b.len() >= 96;
    let mut w = W(b);
    w.u32(KIND, kind::MEMCPY);
    w.u8(COPY_KIND, r.copy_kind);
    w.u8(SRC_KIND, r.src_kind);
    w.u8(DST_KIND, r.dst_kind);
    w.u8(FLAGS, r.flags);
    w.u64(BYTES, r.bytes);
    w.u64(START, r.start);
    w.u64(END, r.end);
    w.u32(DEVICE_ID, r.device);
    w.u32(CONTEXT_ID, r.context);
    w.u32(STREAM_ID, r.stream);
    w.u32(CORRELATION_ID, r.correlation_id);
    w.u32(RUNTIME_CORRELATION_ID, r.runtime_correlation_id);
    w.u64(GRAPH_NODE_ID, 0);
    w.u32(GRAPH_ID, 0);
    w.u32(CHANNEL_ID, 0);
    w.u32(CHANNEL_TYPE, 0);
    if is_13(version) {
        w.u8(IS_DEVICE_LAUNCHED, 0);
    }
    if memcpy6 {
        w.u64(COPY_COUNT, 1); // "For other memcpy operations, this field will be 1."
    }
}

pub struct MemsetRec {
    pub value: u32,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation_id: u32,
    pub flags: u16,
    pub memory_kind: u16,
}

pub fn write_memset(b: &mut [u8], version: u32, r: &MemsetRec) {
    use off::memset::*;
    b.fill(0);
    let mut w = W(b);
    w.u32(KIND, kind::MEMSET);
    w.u32(VALUE, r.value);
    w.u64(BYTES, r.bytes);
    w.u64(START, r.start);
    w.u64(END, r.end);
    w.u32(DEVICE_ID, r.device);
    w.u32(CONTEXT_ID, r.context);
    w.u32(STREAM_ID, r.stream);
    w.u32(CORRELATION_ID, r.correlation_id);
    w.u16(FLAGS, r.flags);
    w.u16(MEMORY_KIND, r.memory_kind);
    w.u64(GRAPH_NODE_ID, 0);
    w.u32(GRAPH_ID, 0);
    if is_13(version) {
        w.u8(IS_DEVICE_LAUNCHED, 0);
    }
}

pub struct MemoryRec {
    pub operation_type: u32,
    pub memory_kind: u32,
    pub correlation_id: u32,
    pub address: u64,
    pub bytes: u64,
    pub timestamp: u64,
    pub process_id: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub is_async: u32,
    pub pool_type: u32,
    pub pool_address: u64,
    pub pool_release_threshold: u64,
    pub pool_size: u64,
    pub pool_utilized: u64,
}

pub fn write_memory(b: &mut [u8], r: &MemoryRec) {
    use off::memory::*;
    b.fill(0);
    let memory4 = b.len() >= 128;
    let mut w = W(b);
    w.u32(KIND, kind::MEMORY2);
    w.u32(OPERATION_TYPE, r.operation_type);
    w.u32(MEMORY_KIND, r.memory_kind);
    w.u32(CORRELATION_ID, r.correlation_id);
    w.u64(ADDRESS, r.address);
    w.u64(BYTES, r.bytes);
    w.u64(TIMESTAMP, r.timestamp);
    w.u64(PC, 0);
    w.u32(PROCESS_ID, r.process_id);
    w.u32(DEVICE_ID, r.device);
    w.u32(CONTEXT_ID, r.context);
    w.u32(STREAM_ID, r.stream);
    w.ptr(NAME, std::ptr::null());
    w.u32(IS_ASYNC, r.is_async);
    w.u32(POOL_TYPE, r.pool_type);
    w.u64(POOL_ADDRESS, r.pool_address);
    w.u64(POOL_RELEASE_THRESHOLD, r.pool_release_threshold);
    w.u64(POOL_SIZE, r.pool_size);
    w.u64(POOL_UTILIZED_SIZE, r.pool_utilized);
    if memory4 {
        w.ptr(SOURCE, std::ptr::null());
    }
}

pub struct SyncRec {
    pub sync_type: u32,
    pub start: u64,
    pub end: u64,
    pub correlation_id: u32,
    pub context: u32,
    pub stream: u32,
    pub cuda_event_id: u32,
    pub cuda_event_sync_id: u64,
}

pub fn write_sync(b: &mut [u8], r: &SyncRec) {
    use off::sync::*;
    b.fill(0);
    let v2 = b.len() >= 56;
    let mut w = W(b);
    w.u32(KIND, kind::SYNCHRONIZATION);
    w.u32(TYPE, r.sync_type);
    w.u64(START, r.start);
    w.u64(END, r.end);
    w.u32(CORRELATION_ID, r.correlation_id);
    w.u32(CONTEXT_ID, r.context);
    w.u32(STREAM_ID, r.stream);
    w.u32(CUDA_EVENT_ID, r.cuda_event_id);
    if v2 {
        w.u64(CUDA_EVENT_SYNC_ID, r.cuda_event_sync_id);
        w.u32(RETURN_VALUE, 0);
    }
}

pub struct CudaEventRec {
    pub correlation_id: u32,
    pub context: u32,
    pub stream: u32,
    pub event_id: u32,
    pub device: u32,
}

pub fn write_cuda_event(b: &mut [u8], r: &CudaEventRec) {
    use off::cuda_event::*;
    b.fill(0);
    let v2 = b.len() >= 56;
    let mut w = W(b);
    w.u32(KIND, kind::CUDA_EVENT);
    w.u32(CORRELATION_ID, r.correlation_id);
    w.u32(CONTEXT_ID, r.context);
    w.u32(STREAM_ID, r.stream);
    w.u32(EVENT_ID, r.event_id);
    if v2 {
        w.u32(DEVICE_ID, r.device);
        w.u64(CUDA_EVENT_SYNC_ID, u64::from(r.event_id));
    }
}

pub fn write_ext(b: &mut [u8], external_kind: u32, external_id: u64, correlation_id: u32) {
    use off::ext::*;
    b.fill(0);
    let mut w = W(b);
    w.u32(KIND, kind::EXTERNAL_CORRELATION);
    w.u32(EXTERNAL_KIND, external_kind);
    w.u64(EXTERNAL_ID, external_id);
    w.u32(CORRELATION_ID, correlation_id);
}

/// Steps over the records in `data` the way `cuptiActivityGetNextRecord` does: yields
/// `(offset, kind, size)`; stops at the end, at an unknown kind or at a truncated record.
pub fn walk(version: u32, data: &[u8]) -> impl Iterator<Item = (usize, u32, usize)> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        if at + 4 > data.len() {
            return None;
        }
        let k = rd_u32(data, at);
        let size = record_size(version, k);
        if size == 0 || at + size > data.len() {
            return None;
        }
        let item = (at, k, size);
        at += size;
        Some(item)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_per_version() {
        assert_eq!(record_size(VERSION_13_0, kind::CONCURRENT_KERNEL), 216);
        assert_eq!(record_size(VERSION_12_9, kind::CONCURRENT_KERNEL), 208);
        assert_eq!(record_size(VERSION_13_0, kind::MEMCPY), 96);
        assert_eq!(record_size(VERSION_12_9, kind::MEMCPY), 96);
        assert_eq!(record_size(19, kind::MEMCPY), 88);
        assert_eq!(record_size(VERSION_13_0, kind::MEMORY2), 128);
        assert_eq!(record_size(VERSION_12_9, kind::MEMORY2), 128);
        assert_eq!(record_size(23, kind::MEMORY2), 120);
        assert_eq!(record_size(VERSION_13_0, kind::SYNCHRONIZATION), 56);
        assert_eq!(record_size(25, kind::SYNCHRONIZATION), 40);
        assert_eq!(record_size(VERSION_13_0, kind::MEMSET), 88);
        assert_eq!(record_size(VERSION_13_0, kind::RUNTIME), 40);
        assert_eq!(record_size(VERSION_13_0, kind::EXTERNAL_CORRELATION), 24);
        assert_eq!(record_size(VERSION_13_0, kind::MARKER_DATA), 40);
        assert_eq!(record_size(VERSION_12_9, kind::MARKER_DATA), 32);
        assert_eq!(record_size(VERSION_13_0, 0), 0);
        assert_eq!(record_size(VERSION_13_0, 55), 0);
        for v in [19, 22, 24, 26, VERSION_12_9, VERSION_13_0] {
            for k in 1..=kind::MAX {
                assert_eq!(record_size(v, k) % 8, 0, "kind {k} v{v} is 8-aligned");
            }
        }
    }

    #[test]
    fn kernel_fields_by_offset() {
        let name = c"k".as_ptr();
        let r = KernelRec {
            kind: kind::CONCURRENT_KERNEL,
            device: 1,
            context: 2,
            stream: 7,
            grid: [3, 4, 5],
            block: [128, 1, 1],
            registers_per_thread: 32,
            static_shared: 0,
            dynamic_shared: 1024,
            correlation_id: 99,
            grid_id: 12,
            name,
            start: 1000,
            end: 2000,
            queued: 0,
            submitted: 0,
            graph_node_id: 3,
            graph_id: 4,
        };
        let mut b = vec![0xAAu8; 216];
        write_kernel(&mut b, VERSION_13_0, &r);
        assert_eq!(rd_u32(&b, 0), 10);
        assert_eq!(u16::from_le_bytes([b[6], b[7]]), 32);
        assert_eq!(rd_u64(&b, 16), 1000);
        assert_eq!(rd_u64(&b, 24), 2000);
        assert_eq!(rd_u64(&b, 32), 2000);
        assert_eq!(rd_u32(&b, 48), 7);
        assert_eq!(rd_u32(&b, 56), 4);
        assert_eq!(rd_u32(&b, 64), 128);
        assert_eq!(rd_u32(&b, 80), 1024);
        assert_eq!(rd_u32(&b, 92), 99);
        assert_eq!(rd_u64(&b, 96), 12);
        assert_eq!(rd_u64(&b, 104), name as usize as u64);
        assert_eq!(rd_u64(&b, 144), 3);
        assert_eq!(rd_u32(&b, 156), 4);
        assert_eq!(b[208], 0);
        assert!(b[209..].iter().all(|&x| x == 0));
    }
}
