//! Raw CUPTI activity records (bytes, as CUPTI wrote them) to [`Event`]s.
//!
//! CUPTI fills the newest struct version it knows, whatever header a client was built with, so
//! one binary must pick the layout from `cuptiGetVersion` at run time. Every version only appends
//! fields, so the decoder reads a fixed prefix (the offsets below, checked against the bindgen
//! structs in tests) and reads appended fields only when the version has them. Fields are read
//! with bounds-checked little-endian loads from a byte slice: no struct casts, so an unexpected
//! record can never cause undefined behaviour here.
//!
//! Pointers inside records (kernel names, marker names) are resolved by the caller's [`Resolve`],
//! which is the only place that dereferences foreign memory.

use crate::event::*;
use std::collections::HashMap;

/// Activity kinds (CUpti_ActivityKind) the decoder understands.
pub mod kind {
    pub const MEMCPY: u32 = 1;
    pub const MEMSET: u32 = 2;
    pub const DRIVER: u32 = 4;
    pub const RUNTIME: u32 = 5;
    pub const CONCURRENT_KERNEL: u32 = 10;
    pub const MARKER: u32 = 12;
    pub const MARKER_DATA: u32 = 13;
    pub const OVERHEAD: u32 = 17;
    pub const CUDA_EVENT: u32 = 36;
    pub const SYNCHRONIZATION: u32 = 38;
    pub const EXTERNAL_CORRELATION: u32 = 39;
    pub const MEMORY2: u32 = 49;
    pub const MEMORY_POOL: u32 = 50;
}

/// Byte offsets of the fields cuprof reads, shared by every supported version (x86-64).
pub mod off {
    pub mod kernel {
        pub const REGISTERS_PER_THREAD: usize = 6;
        pub const START: usize = 16;
        pub const END: usize = 24;
        pub const DEVICE_ID: usize = 40;
        pub const CONTEXT_ID: usize = 44;
        pub const STREAM_ID: usize = 48;
        pub const GRID_X: usize = 52;
        pub const BLOCK_X: usize = 64;
        pub const STATIC_SHARED_MEMORY: usize = 76;
        pub const DYNAMIC_SHARED_MEMORY: usize = 80;
        pub const CORRELATION_ID: usize = 92;
        pub const NAME: usize = 104;
        pub const QUEUED: usize = 120;
        pub const SUBMITTED: usize = 128;
        pub const LAUNCH_TYPE: usize = 136;
        pub const GRAPH_NODE_ID: usize = 144;
        pub const GRAPH_ID: usize = 156;
        pub const CHANNEL_ID: usize = 168;
        pub const CHANNEL_TYPE: usize = 172;
        pub const CLUSTER_X: usize = 176;
        /// Kernel10 (CUPTI 13.0) and later only.
        pub const IS_DEVICE_LAUNCHED: usize = 208;
    }
    pub mod memcpy {
        pub const COPY_KIND: usize = 4;
        pub const SRC_KIND: usize = 5;
        pub const DST_KIND: usize = 6;
        pub const FLAGS: usize = 7;
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
    }
    pub mod memset {
        pub const VALUE: usize = 4;
        pub const BYTES: usize = 8;
        pub const START: usize = 16;
        pub const END: usize = 24;
        pub const DEVICE_ID: usize = 32;
        pub const CONTEXT_ID: usize = 36;
        pub const STREAM_ID: usize = 40;
        pub const CORRELATION_ID: usize = 44;
        pub const MEMORY_KIND: usize = 50;
        pub const GRAPH_NODE_ID: usize = 64;
        pub const GRAPH_ID: usize = 72;
    }
    pub mod memory {
        pub const OPERATION_TYPE: usize = 4;
        pub const MEMORY_KIND: usize = 8;
        pub const CORRELATION_ID: usize = 12;
        pub const ADDRESS: usize = 16;
        pub const BYTES: usize = 24;
        pub const TIMESTAMP: usize = 32;
        pub const PROCESS_ID: usize = 48;
        pub const DEVICE_ID: usize = 52;
        pub const CONTEXT_ID: usize = 56;
        pub const STREAM_ID: usize = 60;
        pub const IS_ASYNC: usize = 72;
        pub const POOL_ADDRESS: usize = 88;
    }
    pub mod api {
        pub const CBID: usize = 4;
        pub const START: usize = 8;
        pub const END: usize = 16;
        pub const PROCESS_ID: usize = 24;
        pub const THREAD_ID: usize = 28;
        pub const CORRELATION_ID: usize = 32;
        pub const RETURN_VALUE: usize = 36;
    }
    pub mod marker {
        pub const FLAGS: usize = 4;
        pub const TIMESTAMP: usize = 8;
        pub const ID: usize = 16;
        pub const PROCESS_ID: usize = 24;
        pub const THREAD_ID: usize = 28;
        pub const NAME: usize = 40;
        pub const DOMAIN: usize = 48;
    }
    pub mod sync {
        pub const TYPE: usize = 4;
        pub const START: usize = 8;
        pub const END: usize = 16;
        pub const CORRELATION_ID: usize = 24;
        pub const CONTEXT_ID: usize = 28;
        pub const STREAM_ID: usize = 32;
        pub const CUDA_EVENT_ID: usize = 36;
    }
    /// CudaEvent (24 bytes, before CUDA 12.8) and CudaEvent2 (56): the same leading fields.
    pub mod cuda_event {
        pub const CORRELATION_ID: usize = 4;
        pub const CONTEXT_ID: usize = 8;
        pub const STREAM_ID: usize = 12;
        pub const EVENT_ID: usize = 16;
    }
    pub mod external {
        pub const EXTERNAL_KIND: usize = 4;
        pub const EXTERNAL_ID: usize = 8;
        pub const CORRELATION_ID: usize = 16;
    }
    pub mod overhead {
        pub const OVERHEAD_KIND: usize = 4;
        pub const START: usize = 24;
        pub const END: usize = 32;
    }
}

/// The smallest record sizes the decoder reads to (its last field's end), per kind.
fn min_len(kind: u32) -> usize {
    match kind {
        kind::CONCURRENT_KERNEL => 188,
        kind::MEMCPY | kind::MEMSET => 80,
        kind::MEMORY2 => 96,
        kind::RUNTIME | kind::DRIVER => 40,
        kind::MARKER => 56,
        kind::SYNCHRONIZATION => 40,
        kind::CUDA_EVENT => 20,
        kind::EXTERNAL_CORRELATION => 20,
        kind::OVERHEAD => 40,
        _ => 4,
    }
}

/// Marker flags (CUpti_ActivityFlag).
const MARKER_INSTANTANEOUS: u32 = 1;
const MARKER_START: u32 = 2;
const MARKER_END: u32 = 4;

/// Turns foreign pointers and callback ids into names. Implemented over real memory by the
/// preload library and over plain maps by tests.
pub trait Resolve {
    /// A kernel's (mangled) name at `ptr`, demangled and interned; `ptr` is never 0 here.
    fn kernel_name(&mut self, ptr: u64) -> Name;
    /// A NUL-terminated string at `ptr` (never 0 here), interned.
    fn string(&mut self, ptr: u64) -> Name;
    /// The name of an API call from its callback id.
    fn api_name(&mut self, domain: ApiDomain, cbid: u32) -> Name;
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("libcupti reports version {0}; cuprof decodes CUPTI 12.x (API version 18 or later) and 13.x records: install a CUDA 12 or 13 libcupti or set CUPROF_CUPTI_PATH")]
    UnsupportedVersion(u32),
}

/// Which record layout family a CUPTI library writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutFamily {
    /// CUDA 12.x: Kernel9, Memcpy5/6, Memset4, Memory3/4.
    Cupti12,
    /// CUDA 13.x: Kernel10+, Memcpy6, Memory4 (Kernel10 adds isDeviceLaunched at 208).
    Cupti13,
}

impl LayoutFamily {
    /// Maps `cuptiGetVersion` to a layout: 12.x reports small API numbers (18..=99), 13.x
    /// reports 130000 and up.
    pub fn from_version(version: u32) -> Result<Self, DecodeError> {
        match version {
            18..=99 => Ok(LayoutFamily::Cupti12),
            130000..=139999 => Ok(LayoutFamily::Cupti13),
            other => Err(DecodeError::UnsupportedVersion(other)),
        }
    }
}

/// Counts of records the decoder saw but did not turn into events.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DecodeStats {
    /// Kernels with start = end = 0: CUPTI's device buffers overflowed.
    pub kernels_without_timestamps: u64,
    /// Records of kinds cuprof does not use, or too short to read.
    pub skipped: u64,
}

/// Decodes records of one CUPTI library. Holds the open CUPTI marker ranges (start and end of a
/// CUPTI marker range come as two records).
pub struct Decoder {
    family: LayoutFamily,
    open_markers: HashMap<u32, Range>,
    pub stats: DecodeStats,
}

#[inline]
fn u8_at(b: &[u8], o: usize) -> u8 {
    b[o]
}
#[inline]
fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
#[inline]
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().expect("4-byte slice"))
}
#[inline]
fn i32_at(b: &[u8], o: usize) -> i32 {
    u32_at(b, o) as i32
}
#[inline]
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().expect("8-byte slice"))
}

impl Decoder {
    pub fn new(family: LayoutFamily) -> Self {
        Decoder {
            family,
            open_markers: HashMap::new(),
            stats: DecodeStats::default(),
        }
    }

    pub fn family(&self) -> LayoutFamily {
        self.family
    }

    /// The kind of the record starting at `rec[0]`.
    pub fn kind_of(rec: &[u8]) -> Option<u32> {
        (rec.len() >= 4).then(|| u32_at(rec, 0))
    }

    /// Decodes one record. `rec` starts at the record and may run past its end (to the end of
    /// the buffer's valid bytes); it must hold at least the record itself.
    pub fn decode(&mut self, rec: &[u8], names: &mut impl Resolve) -> Option<Event> {
        let kind = Self::kind_of(rec)?;
        if rec.len() < min_len(kind) {
            self.stats.skipped += 1;
            return None;
        }
        match kind {
            kind::CONCURRENT_KERNEL => self.kernel(rec, names),
            kind::MEMCPY => Some(Event::Memcpy(memcpy(rec))),
            kind::MEMSET => Some(Event::Memset(memset(rec))),
            kind::RUNTIME => Some(Event::Api(api(rec, ApiDomain::Runtime, names))),
            kind::DRIVER => Some(Event::Api(api(rec, ApiDomain::Driver, names))),
            kind::SYNCHRONIZATION => Some(Event::Sync(sync(rec))),
            kind::CUDA_EVENT => Some(Event::CudaEvent(cuda_event(rec))),
            kind::EXTERNAL_CORRELATION => Some(Event::ExternalCorrelation(external(rec))),
            kind::MEMORY2 => Some(Event::Memory(memory(rec))),
            kind::OVERHEAD => Some(Event::Overhead(Overhead {
                overhead_kind: u32_at(rec, off::overhead::OVERHEAD_KIND),
                start: u64_at(rec, off::overhead::START),
                end: u64_at(rec, off::overhead::END),
            })),
            kind::MARKER => self.marker(rec, names),
            _ => {
                self.stats.skipped += 1;
                None
            }
        }
    }

    fn kernel(&mut self, b: &[u8], names: &mut impl Resolve) -> Option<Event> {
        use off::kernel as k;
        let (start, end) = (u64_at(b, k::START), u64_at(b, k::END));
        if start == 0 && end == 0 {
            self.stats.kernels_without_timestamps += 1;
            return None;
        }
        let name_ptr = u64_at(b, k::NAME);
        let name = if name_ptr == 0 {
            Name::from("<unnamed kernel>")
        } else {
            names.kernel_name(name_ptr)
        };
        let is_device_launched = match self.family {
            LayoutFamily::Cupti13 if b.len() > k::IS_DEVICE_LAUNCHED => {
                Some(u8_at(b, k::IS_DEVICE_LAUNCHED) != 0)
            }
            _ => None,
        };
        Some(Event::Kernel(Kernel {
            name,
            start,
            end,
            queued: u64_at(b, k::QUEUED),
            submitted: u64_at(b, k::SUBMITTED),
            device: u32_at(b, k::DEVICE_ID),
            context: u32_at(b, k::CONTEXT_ID),
            stream: u32_at(b, k::STREAM_ID),
            correlation: u32_at(b, k::CORRELATION_ID),
            registers_per_thread: u16_at(b, k::REGISTERS_PER_THREAD),
            static_shared_memory: i32_at(b, k::STATIC_SHARED_MEMORY),
            dynamic_shared_memory: i32_at(b, k::DYNAMIC_SHARED_MEMORY),
            grid: [
                i32_at(b, k::GRID_X),
                i32_at(b, k::GRID_X + 4),
                i32_at(b, k::GRID_X + 8),
            ],
            block: [
                i32_at(b, k::BLOCK_X),
                i32_at(b, k::BLOCK_X + 4),
                i32_at(b, k::BLOCK_X + 8),
            ],
            cluster: [
                u32_at(b, k::CLUSTER_X),
                u32_at(b, k::CLUSTER_X + 4),
                u32_at(b, k::CLUSTER_X + 8),
            ],
            graph_id: u32_at(b, k::GRAPH_ID),
            graph_node_id: u64_at(b, k::GRAPH_NODE_ID),
            launch_type: u8_at(b, k::LAUNCH_TYPE),
            channel_id: u32_at(b, k::CHANNEL_ID),
            channel_type: u32_at(b, k::CHANNEL_TYPE),
            is_device_launched,
        }))
    }

    fn marker(&mut self, b: &[u8], names: &mut impl Resolve) -> Option<Event> {
        use off::marker as m;
        let flags = u32_at(b, m::FLAGS);
        let id = u32_at(b, m::ID);
        let ts = u64_at(b, m::TIMESTAMP);
        let (name_ptr, domain_ptr) = (u64_at(b, m::NAME), u64_at(b, m::DOMAIN));
        let name = (name_ptr != 0).then(|| names.string(name_ptr));
        let domain = (domain_ptr != 0).then(|| names.string(domain_ptr));
        let range = |name: Option<Name>, kind| Range {
            name: name.unwrap_or_else(|| Name::from("")),
            domain: domain.clone(),
            start: ts,
            end: ts,
            pid: u32_at(b, m::PROCESS_ID),
            tid: u32_at(b, m::THREAD_ID),
            id: u64::from(id),
            parent: 0,
            payload: None,
            kind,
            stack: None,
        };
        if flags & MARKER_INSTANTANEOUS != 0 {
            Some(Event::Range(range(name, RangeKind::Mark)))
        } else if flags & MARKER_START != 0 {
            self.open_markers
                .insert(id, range(name, RangeKind::StartEnd));
            None
        } else if flags & MARKER_END != 0 {
            let mut open = self.open_markers.remove(&id)?;
            open.end = ts.max(open.start);
            Some(Event::Range(open))
        } else {
            self.stats.skipped += 1;
            None
        }
    }
}

fn memcpy(b: &[u8]) -> Memcpy {
    use off::memcpy as m;
    Memcpy {
        copy_kind: u8_at(b, m::COPY_KIND),
        src_kind: u8_at(b, m::SRC_KIND),
        dst_kind: u8_at(b, m::DST_KIND),
        flags: u8_at(b, m::FLAGS),
        bytes: u64_at(b, m::BYTES),
        start: u64_at(b, m::START),
        end: u64_at(b, m::END),
        device: u32_at(b, m::DEVICE_ID),
        context: u32_at(b, m::CONTEXT_ID),
        stream: u32_at(b, m::STREAM_ID),
        correlation: u32_at(b, m::CORRELATION_ID),
        runtime_correlation: u32_at(b, m::RUNTIME_CORRELATION_ID),
        graph_id: u32_at(b, m::GRAPH_ID),
        graph_node_id: u64_at(b, m::GRAPH_NODE_ID),
        src_device: None,
        dst_device: None,
    }
}

fn memset(b: &[u8]) -> Memset {
    use off::memset as m;
    Memset {
        value: u32_at(b, m::VALUE),
        bytes: u64_at(b, m::BYTES),
        start: u64_at(b, m::START),
        end: u64_at(b, m::END),
        device: u32_at(b, m::DEVICE_ID),
        context: u32_at(b, m::CONTEXT_ID),
        stream: u32_at(b, m::STREAM_ID),
        correlation: u32_at(b, m::CORRELATION_ID),
        memory_kind: u16_at(b, m::MEMORY_KIND),
        graph_id: u32_at(b, m::GRAPH_ID),
        graph_node_id: u64_at(b, m::GRAPH_NODE_ID),
    }
}

fn api(b: &[u8], domain: ApiDomain, names: &mut impl Resolve) -> ApiCall {
    use off::api as a;
    let cbid = u32_at(b, a::CBID);
    ApiCall {
        domain,
        cbid,
        name: names.api_name(domain, cbid),
        start: u64_at(b, a::START),
        end: u64_at(b, a::END),
        pid: u32_at(b, a::PROCESS_ID),
        tid: u32_at(b, a::THREAD_ID),
        correlation: u32_at(b, a::CORRELATION_ID),
        return_value: u32_at(b, a::RETURN_VALUE),
    }
}

fn sync(b: &[u8]) -> Synchronization {
    use off::sync as s;
    Synchronization {
        sync_type: u32_at(b, s::TYPE),
        start: u64_at(b, s::START),
        end: u64_at(b, s::END),
        correlation: u32_at(b, s::CORRELATION_ID),
        context: u32_at(b, s::CONTEXT_ID),
        stream: u32_at(b, s::STREAM_ID),
        cuda_event: u32_at(b, s::CUDA_EVENT_ID),
    }
}

fn cuda_event(b: &[u8]) -> CudaEvent {
    use off::cuda_event as c;
    CudaEvent {
        correlation: u32_at(b, c::CORRELATION_ID),
        context: u32_at(b, c::CONTEXT_ID),
        stream: u32_at(b, c::STREAM_ID),
        event_id: u32_at(b, c::EVENT_ID),
    }
}

fn external(b: &[u8]) -> ExternalCorrelation {
    use off::external as e;
    ExternalCorrelation {
        external_kind: u32_at(b, e::EXTERNAL_KIND),
        external_id: u64_at(b, e::EXTERNAL_ID),
        correlation: u32_at(b, e::CORRELATION_ID),
    }
}

fn memory(b: &[u8]) -> Memory {
    use off::memory as m;
    Memory {
        op: if u32_at(b, m::OPERATION_TYPE) == 2 {
            MemoryOp::Free
        } else {
            MemoryOp::Alloc
        },
        memory_kind: u32_at(b, m::MEMORY_KIND),
        correlation: u32_at(b, m::CORRELATION_ID),
        address: u64_at(b, m::ADDRESS),
        bytes: u64_at(b, m::BYTES),
        timestamp: u64_at(b, m::TIMESTAMP),
        pid: u32_at(b, m::PROCESS_ID),
        device: u32_at(b, m::DEVICE_ID),
        context: u32_at(b, m::CONTEXT_ID),
        stream: u32_at(b, m::STREAM_ID),
        is_async: u32_at(b, m::IS_ASYNC) != 0,
        pool_address: u64_at(b, m::POOL_ADDRESS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoNames;
    impl Resolve for NoNames {
        fn kernel_name(&mut self, _: u64) -> Name {
            Name::from("k")
        }
        fn string(&mut self, _: u64) -> Name {
            Name::from("s")
        }
        fn api_name(&mut self, _: ApiDomain, _: u32) -> Name {
            Name::from("api")
        }
    }

    /// A CUDA_EVENT record of `len` bytes: correlation 41, context 2, stream 7, event 3.
    fn cuda_event_record(len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        for (o, v) in [(0, kind::CUDA_EVENT), (4, 41), (8, 2), (12, 7), (16, 3)] {
            if o + 4 <= len {
                b[o..o + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
        b
    }

    #[test]
    fn cuda_event_records_of_both_layouts_decode_and_a_short_one_is_skipped() {
        let mut d = Decoder::new(LayoutFamily::Cupti13);
        let want = Some(Event::CudaEvent(CudaEvent {
            correlation: 41,
            context: 2,
            stream: 7,
            event_id: 3,
        }));
        // CudaEvent (before CUDA 12.8) and CudaEvent2.
        assert_eq!(d.decode(&cuda_event_record(24), &mut NoNames), want);
        assert_eq!(d.decode(&cuda_event_record(56), &mut NoNames), want);
        assert_eq!(d.stats.skipped, 0);
        assert_eq!(d.decode(&cuda_event_record(16), &mut NoNames), None);
        assert_eq!(d.stats.skipped, 1);
    }
}
