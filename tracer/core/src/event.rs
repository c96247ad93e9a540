//! The typed event model that every record is decoded into before it crosses a thread.
//!
//! Times are nanoseconds on CUPTI's clock (CLOCK_REALTIME on Linux). Names are
//! `Arc<str>` so that a kernel launched a million times shares one allocation.

use std::sync::Arc;

/// One shared, immutable name (kernel, API call, NVTX range, domain).
pub type Name = Arc<str>;

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Kernel(Kernel),
    Memcpy(Memcpy),
    Memset(Memset),
    Api(ApiCall),
    Sync(Synchronization),
    /// A complete NVTX range or instant mark, seen on the CPU thread that made it.
    Range(Range),
    /// CUPTI's link between an API call's correlation id and an id the tracer pushed.
    ExternalCorrelation(ExternalCorrelation),
    Memory(Memory),
    Overhead(Overhead),
    /// A cudaEventRecord: where the event was recorded, for the syncs that wait on it.
    CudaEvent(CudaEvent),
}

/// CUPTI's CUDA_EVENT record (CudaEvent / CudaEvent2: the same leading fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaEvent {
    /// The cudaEventRecord call's correlation id.
    pub correlation: u32,
    pub context: u32,
    pub stream: u32,
    pub event_id: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub name: Name,
    pub start: u64,
    pub end: u64,
    /// When the launch was queued, if CUPTI measured it (0 = unknown).
    pub queued: u64,
    pub submitted: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u32,
    pub registers_per_thread: u16,
    pub static_shared_memory: i32,
    pub dynamic_shared_memory: i32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub cluster: [u32; 3],
    pub graph_id: u32,
    pub graph_node_id: u64,
    pub launch_type: u8,
    pub channel_id: u32,
    pub channel_type: u32,
    /// Only known from CUPTI 13.0 (Kernel10).
    pub is_device_launched: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Memcpy {
    /// CUPTI_ACTIVITY_MEMCPY_KIND_* (1 HtoD, 2 DtoH, ... 8 DtoD, 10 PtoP).
    pub copy_kind: u8,
    /// CUPTI_ACTIVITY_MEMORY_KIND_* of source and destination (1 pageable, 2 pinned, 3 device, ...).
    pub src_kind: u8,
    pub dst_kind: u8,
    pub flags: u8,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    /// The driver call's correlation id.
    pub correlation: u32,
    /// The runtime call's correlation id (0 when the copy came from the driver API).
    pub runtime_correlation: u32,
    pub graph_id: u32,
    pub graph_node_id: u64,
    /// Peer copies only.
    pub src_device: Option<u32>,
    pub dst_device: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Memset {
    pub value: u32,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u32,
    pub memory_kind: u16,
    pub graph_id: u32,
    pub graph_node_id: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiDomain {
    Runtime,
    Driver,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    pub domain: ApiDomain,
    pub cbid: u32,
    /// The call's name (e.g. `cudaLaunchKernel`), looked up from its callback id.
    pub name: Name,
    pub start: u64,
    pub end: u64,
    pub pid: u32,
    pub tid: u32,
    pub correlation: u32,
    pub return_value: u32,
}

/// A CPU wait on GPU work (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION): stream, event or context sync.
#[derive(Debug, Clone, PartialEq)]
pub struct Synchronization {
    /// CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_*: 1 event sync, 2 stream wait event, 3 stream sync, 4 context sync.
    pub sync_type: u32,
    pub start: u64,
    pub end: u64,
    pub correlation: u32,
    pub context: u32,
    /// u32::MAX when the sync is not about one stream.
    pub stream: u32,
    pub cuda_event: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    pub name: Name,
    pub domain: Option<Name>,
    pub start: u64,
    /// Equal to `start` for an instant mark.
    pub end: u64,
    pub pid: u32,
    pub tid: u32,
    /// Unique per process; the id pushed as the external correlation id while the range was open.
    pub id: u64,
    /// The enclosing range on the same thread (push/pop nesting), 0 if none.
    pub parent: u64,
    /// A numeric NVTX payload, if the user attached one (used as work per step).
    pub payload: Option<f64>,
    pub kind: RangeKind,
    /// The Python call stack the range was opened under (`--with-stack`, outermost PyTorch
    /// operators only: the ops nested in one share its stack).
    pub stack: Option<PyStack>,
}

/// One Python frame: where a function was executing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyFrame {
    pub file: Name,
    pub line: u32,
    pub function: Name,
}

/// A Python call stack, innermost frame first (torch's order), shared by every range opened
/// under the same stack.
pub type PyStack = Arc<[PyFrame]>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeKind {
    /// nvtxRangePush/Pop: nested on one thread.
    PushPop,
    /// A PyTorch operator from cuprof's native observer: the name is its record
    /// ([`crate::torch_op::TorchOp::parse_native`]).
    NativeOp,
    /// A `record_function` label from cuprof's native observer: the name is its record, as an
    /// operator's ([`crate::torch_op::TorchOp::parse_made`]); Kineto's `user_annotation`.
    NativeLabel,
    /// nvtxRangeStart/End: may cross threads.
    StartEnd,
    /// nvtxMark.
    Mark,
    /// A `ProfilerStep#N` annotation made by the tracer's window.
    Step,
    /// A PyTorch allocation or free (torch.profiler's `[memory]` instant, with `MEM`): no
    /// length, the name is its `args` object, made by
    /// [`crate::native_record::memory_args`].
    TorchMemory,
    /// One `nn.Module` forward call (`--with-modules`), as torch.profiler's `with_stack` writes
    /// it: the name is torch's (`nn.Module: Linear_0`, the class and its instance number), the
    /// domain the module's path (`GPT2LMHeadModel.transformer.h.3.attn`), the id and parent
    /// the call's `Python id` and its enclosing call's `Python parent id` (0 for none).
    Module,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExternalCorrelation {
    pub external_kind: u32,
    pub external_id: u64,
    pub correlation: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryOp {
    Alloc,
    Free,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Memory {
    pub op: MemoryOp,
    /// CUPTI_ACTIVITY_MEMORY_KIND_*: 1 pageable, 2 pinned, 3 device, 4 array, 5 managed, 6 device static, 7 managed static.
    pub memory_kind: u32,
    pub correlation: u32,
    pub address: u64,
    pub bytes: u64,
    pub timestamp: u64,
    pub pid: u32,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    /// True for stream-ordered (memory pool) allocations: cudaMallocAsync/cudaFreeAsync.
    pub is_async: bool,
    /// The pool the allocation came from (0 when not from a pool).
    pub pool_address: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Overhead {
    pub overhead_kind: u32,
    pub start: u64,
    pub end: u64,
}

impl Event {
    /// The time the event begins, for ordering and window decisions.
    pub fn start(&self) -> u64 {
        match self {
            Event::Kernel(k) => k.start,
            Event::Memcpy(m) => m.start,
            Event::Memset(m) => m.start,
            Event::Api(a) => a.start,
            Event::Sync(s) => s.start,
            Event::Range(r) => r.start,
            Event::ExternalCorrelation(_) => 0,
            Event::Memory(m) => m.timestamp,
            Event::Overhead(o) => o.start,
            Event::CudaEvent(_) => 0,
        }
    }
}

impl Kernel {
    /// A plain kernel on device 0, stream 7, for tests and benches.
    #[doc(hidden)]
    pub fn sample(name: &str, correlation: u32, start: u64, end: u64) -> Kernel {
        Kernel {
            name: Name::from(name),
            start,
            end,
            queued: 0,
            submitted: 0,
            device: 0,
            context: 1,
            stream: 7,
            correlation,
            registers_per_thread: 32,
            static_shared_memory: 0,
            dynamic_shared_memory: 0,
            grid: [1, 1, 1],
            block: [32, 1, 1],
            cluster: [0, 0, 0],
            graph_id: 0,
            graph_node_id: 0,
            launch_type: 0,
            channel_id: 0,
            channel_type: 0,
            is_device_launched: None,
        }
    }
}

#[cfg(test)]
impl Memory {
    /// A memory record of process 1 on device 0, for tests.
    pub(crate) fn sample(
        op: MemoryOp,
        kind: u32,
        address: u64,
        bytes: u64,
        timestamp: u64,
    ) -> Memory {
        Memory {
            op,
            memory_kind: kind,
            correlation: 0,
            address,
            bytes,
            timestamp,
            pid: 1,
            device: 0,
            context: 1,
            stream: 0,
            is_async: false,
            pool_address: 0,
        }
    }
}
