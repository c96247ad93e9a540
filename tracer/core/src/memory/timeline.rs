//! The device-memory timeline ([`MemoryTimeline`]) and what it records: see the `memory` docs.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use crate::event::{Memory, MemoryOp};

use super::allocator_settings::AllocatorSettings;

/// Trace entries kept per device by default (`--max-mem-events`).
pub const DEFAULT_MAX_EVENTS: usize = 100_000;

/// `CUPTI_ACTIVITY_MEMORY_KIND_DEVICE`.
pub const DEVICE_MEMORY_KIND: u32 = 3;

/// Records for device ordinals at or above this are ignored (a corrupt or unknown id
/// must not make `device_traces` a list of billions of empty lists).
pub const MAX_DEVICES: u32 = 1024;

/// The `cudaStream_t` (`CUstream`) value a program passed to a stream-ordered allocation,
/// as torch's snapshot writes a block's stream: the handle's bits as an integer, 0 for the
/// legacy default stream. Not CUPTI's stream id (`Memory::stream`), which torch never writes.
pub type StreamHandle = u64;

/// Segments of at most this size are torch's "small" pool's: see [`segment_type`].
pub const SMALL_SEGMENT_MAX: u64 = 2 << 20;

/// One stack frame, as torch's snapshot writes it: `{"name", "filename", "line"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    pub filename: String,
    pub line: i64,
    pub name: String,
}

/// A call stack, innermost frame first (torch's order). Shared: the same stack recorded
/// many times costs one allocation, and is written once into the pickle (memoized).
pub type Frames = Arc<[Frame]>;

/// The values of one device's memory counter at one time, for a Chrome-trace counter:
/// `{"ph": "C", "name": "GPU {device} Memory", "pid": device, "tid": 0, "ts": timestamp,
/// "args": {values...}}`. `values` always starts with `("reserved_bytes", B)` (device
/// memory, kind 3), followed by one entry per other memory kind seen on the device so far,
/// in kind order (see [`kind_series`]); a kind whose allocations were all freed stays in
/// the list with 0, so each Perfetto track keeps going.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterSample {
    pub device: u32,
    /// Nanoseconds, CUPTI's clock (CLOCK_REALTIME), like [`Memory::timestamp`].
    pub timestamp: u64,
    pub values: Vec<(&'static str, i64)>,
}

/// The counter series name for a CUPTI memory kind. Kind 3 (device) is `reserved_bytes`.
pub fn kind_series(memory_kind: u32) -> &'static str {
    SERIES[kind_slot(memory_kind)]
}

const SERIES: [&str; 8] = [
    "unknown_bytes",
    "pageable_bytes",
    "pinned_bytes",
    "reserved_bytes",
    "array_bytes",
    "managed_bytes",
    "device_static_bytes",
    "managed_static_bytes",
];

fn kind_slot(memory_kind: u32) -> usize {
    match memory_kind {
        1..=7 => memory_kind as usize,
        _ => 0,
    }
}

const DEVICE_SLOT: usize = DEVICE_MEMORY_KIND as usize;

/// torch's `segment_type` for a segment of `total_size` bytes: `"small"` for its small
/// pool, `"large"` otherwise. torch chooses the pool from the request (`size <= kSmallSize`,
/// 1 MiB, is small) and then allocates a segment of exactly `kSmallBuffer` (2 MiB) for the
/// small pool, while large-pool segments are at least 10 MiB (20 MiB `kLargeBuffer` for
/// requests under 10 MiB, else rounded up to 2 MiB). CUPTI sees only the segment size, so
/// the rule is "small iff `total_size <= 2 MiB`", which classifies every segment of torch's
/// native allocator as torch does, and any other `cudaMalloc` by torch's request rule
/// (up to 1 MiB small) or close to it (1 to 2 MiB also small). MemoryViz does not read it.
pub fn segment_type(total_size: u64) -> &'static str {
    if total_size <= SMALL_SEGMENT_MAX {
        "small"
    } else {
        "large"
    }
}

/// A torch trace-entry action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceAction {
    SegmentAlloc,
    SegmentFree,
    Alloc,
    FreeRequested,
    FreeCompleted,
}

impl TraceAction {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceAction::SegmentAlloc => "segment_alloc",
            TraceAction::SegmentFree => "segment_free",
            TraceAction::Alloc => "alloc",
            TraceAction::FreeRequested => "free_requested",
            TraceAction::FreeCompleted => "free_completed",
        }
    }
}

/// One entry of a device's trace (`device_traces[device][i]` in the snapshot).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEntry {
    pub action: TraceAction,
    pub address: u64,
    pub size: u64,
    /// The allocation's stream (for a free, the stream it was allocated on, as torch writes).
    pub stream: StreamHandle,
    /// Nanoseconds (CUPTI's clock); written as `time_us` = `timestamp / 1000`.
    pub timestamp: u64,
    /// The stack of the allocating (or freeing) call; `None` writes `frames: []`.
    pub frames: Option<Frames>,
}

impl TraceEntry {
    pub fn time_us(&self) -> u64 {
        self.timestamp / 1000
    }
}

/// The highest reserved device memory seen on a device.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    pub bytes: u64,
    /// Nanoseconds (CUPTI's clock) of the allocation that reached it first.
    pub timestamp: u64,
    /// That allocation's stack (`None` when stacks were not recorded).
    pub frames: Option<Frames>,
}

/// Live device memory of one device at one time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveMemory {
    /// Live segments (non-async allocations, and pool allocations represented as their
    /// own segment).
    pub segments: usize,
    /// Their bytes: the reserved bytes.
    pub bytes: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct Segment {
    pub(crate) size: u64,
    pub(crate) stream: StreamHandle,
    pub(crate) frames: Option<Frames>,
    /// A pool allocation represented as its own segment (see the `memory` module's docs).
    pub(crate) from_pool: bool,
    /// Whether pool allocations were ever placed inside this (non-pool) segment: then the
    /// segment is a pool's reservation, and its free space is an `inactive` block.
    pub(crate) hosts_pool: bool,
    /// The blocks inside the segment, by address: the allocation itself (one block
    /// covering the segment) or, once it hosts pool allocations, those.
    pub(crate) blocks: BTreeMap<u64, Block>,
}

#[derive(Debug, Clone)]
pub(crate) struct Block {
    pub(crate) size: u64,
    pub(crate) stream: StreamHandle,
    pub(crate) frames: Option<Frames>,
}

#[derive(Debug, Default)]
pub(crate) struct DeviceState {
    /// Live device-memory segments by address.
    pub(crate) segments: BTreeMap<u64, Segment>,
    /// Live pool allocations: block address -> address of the segment holding it.
    pool_blocks: HashMap<u64, u64>,
    /// Live allocations of other memory kinds: (kind slot, address) -> bytes.
    other: HashMap<(usize, u64), u64>,
    bytes_by_slot: [u64; 8],
    slots_seen: u8,
    peak: Option<Peak>,
    pub(crate) trace: VecDeque<TraceEntry>,
    dropped: u64,
    unmatched_frees: u64,
    last_change: u64,
}

/// The device-memory timeline of one process. See the `memory` module's documentation.
#[derive(Debug)]
pub struct MemoryTimeline {
    max_events: usize,
    pub(crate) devices: BTreeMap<u32, DeviceState>,
    pub(crate) settings: AllocatorSettings,
    ignored: u64,
}

impl Default for MemoryTimeline {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_EVENTS)
    }
}

impl MemoryTimeline {
    /// A timeline keeping at most `max_events` trace entries per device (0 keeps none;
    /// the counters, peak and live segments are kept regardless).
    pub fn new(max_events: usize) -> Self {
        MemoryTimeline {
            max_events,
            devices: BTreeMap::new(),
            settings: AllocatorSettings::default(),
            ignored: 0,
        }
    }

    pub fn max_events(&self) -> usize {
        self.max_events
    }

    /// The `allocator_settings` written into snapshots (defaults: see
    /// [`AllocatorSettings`]).
    pub fn allocator_settings_mut(&mut self) -> &mut AllocatorSettings {
        &mut self.settings
    }

    /// [`Self::record_on_stream`] for a record whose call's stream is not known (a
    /// non-stream-ordered allocation, or a free): stream 0.
    pub fn record(&mut self, m: &Memory, frames: Option<Frames>) -> Option<CounterSample> {
        self.record_on_stream(m, frames, 0)
    }

    /// Applies one memory record. `frames` is the stack of the allocating or freeing
    /// call, if recorded; `stream` the stream handle the allocating call passed (0 when it
    /// passed none; ignored for a free, whose entries carry the allocation's stream).
    /// Returns the device's counter values when they changed (an allocation or a matched
    /// free of any memory kind; a pool allocation inside a known pool segment changes no
    /// counter), `None` otherwise.
    pub fn record_on_stream(
        &mut self,
        m: &Memory,
        frames: Option<Frames>,
        stream: StreamHandle,
    ) -> Option<CounterSample> {
        if m.device >= MAX_DEVICES || m.address == 0 {
            self.ignored += 1;
            return None;
        }
        let slot = kind_slot(m.memory_kind);
        let max_events = self.max_events;
        let changed = match m.op {
            MemoryOp::Alloc => {
                if m.bytes == 0 {
                    self.ignored += 1;
                    return None;
                }
                let dev = self.devices.entry(m.device).or_default();
                if slot == DEVICE_SLOT {
                    if m.is_async {
                        dev.alloc_block(m, stream, frames, max_events)
                    } else {
                        dev.alloc_segment(m, stream, frames, max_events);
                        true
                    }
                } else {
                    if let Some(old) = dev.other.insert((slot, m.address), m.bytes) {
                        dev.bytes_by_slot[slot] -= old;
                    }
                    dev.bytes_by_slot[slot] += m.bytes;
                    dev.slots_seen |= 1 << slot;
                    true
                }
            }
            MemoryOp::Free => {
                // Addresses are unique across devices (unified addressing) and kinds: look
                // on the record's device and kind first, then on the others.
                let devices: Vec<u32> = std::iter::once(m.device)
                    .chain(self.devices.keys().copied().filter(|&d| d != m.device))
                    .collect();
                let slots = std::iter::once(slot).chain((0..SERIES.len()).filter(|&k| k != slot));
                let owner = slots
                    .flat_map(|k| devices.iter().map(move |&d| (d, k)))
                    .find(|(d, k)| self.devices.get(d).is_some_and(|s| s.owns(*k, m.address)));
                match owner {
                    Some((d, slot)) => {
                        let dev = self.devices.get_mut(&d).expect("owner exists");
                        let changed = dev.free(m, slot, frames, max_events);
                        if changed {
                            dev.last_change = m.timestamp;
                        }
                        return changed.then(|| dev.sample(d, m.timestamp));
                    }
                    None => {
                        self.devices.entry(m.device).or_default().unmatched_frees += 1;
                        false
                    }
                }
            }
        };
        let dev = self.devices.get_mut(&m.device)?;
        if changed {
            dev.last_change = m.timestamp;
            Some(dev.sample(m.device, m.timestamp))
        } else {
            None
        }
    }

    /// The device's current counter values, stamped with the time of the last change;
    /// `None` for a device never seen.
    pub fn counter(&self, device: u32) -> Option<CounterSample> {
        self.devices
            .get(&device)
            .map(|d| d.sample(device, d.last_change))
    }

    /// Devices that had at least one record, in ascending order.
    pub fn devices(&self) -> impl Iterator<Item = u32> + '_ {
        self.devices.keys().copied()
    }

    /// Reserved device memory (kind 3) now.
    pub fn reserved_bytes(&self, device: u32) -> u64 {
        self.bytes_of_kind(device, DEVICE_MEMORY_KIND)
    }

    /// Live bytes of one CUPTI memory kind now (kinds outside 1..=7 share one total).
    pub fn bytes_of_kind(&self, device: u32, memory_kind: u32) -> u64 {
        self.devices
            .get(&device)
            .map_or(0, |d| d.bytes_by_slot[kind_slot(memory_kind)])
    }

    /// The highest reserved device memory so far (over the whole run, including any time
    /// whose trace entries were dropped).
    pub fn peak(&self, device: u32) -> Option<&Peak> {
        self.devices.get(&device).and_then(|d| d.peak.as_ref())
    }

    /// Live device-memory segments now.
    pub fn live(&self, device: u32) -> LiveMemory {
        self.devices
            .get(&device)
            .map_or_else(LiveMemory::default, |d| LiveMemory {
                segments: d.segments.len(),
                bytes: d.bytes_by_slot[DEVICE_SLOT],
            })
    }

    /// The kept trace entries of a device, oldest first.
    pub fn trace(&self, device: u32) -> impl ExactSizeIterator<Item = &TraceEntry> + '_ {
        self.devices
            .get(&device)
            .map(|d| d.trace.iter())
            .unwrap_or_default()
    }

    /// Trace entries dropped (oldest first) to keep `max_events` on this device. The
    /// snapshot format has no place for it: put it in the trace's metadata.
    pub fn dropped_events(&self, device: u32) -> u64 {
        self.devices.get(&device).map_or(0, |d| d.dropped)
    }

    /// Frees of an address that was not live on any device (nothing was changed).
    pub fn unmatched_frees(&self, device: u32) -> u64 {
        self.devices.get(&device).map_or(0, |d| d.unmatched_frees)
    }

    /// Records ignored: address 0, allocation of 0 bytes, device ordinal >= [`MAX_DEVICES`].
    pub fn ignored_records(&self) -> u64 {
        self.ignored
    }
}

impl DeviceState {
    fn sample(&self, device: u32, timestamp: u64) -> CounterSample {
        let mut values = vec![(SERIES[DEVICE_SLOT], clamp(self.bytes_by_slot[DEVICE_SLOT]))];
        for (slot, name) in SERIES.iter().enumerate() {
            if slot != DEVICE_SLOT && self.slots_seen & (1 << slot) != 0 {
                values.push((*name, clamp(self.bytes_by_slot[slot])));
            }
        }
        CounterSample {
            device,
            timestamp,
            values,
        }
    }

    fn owns(&self, slot: usize, address: u64) -> bool {
        if slot == DEVICE_SLOT {
            self.segments.contains_key(&address) || self.pool_blocks.contains_key(&address)
        } else {
            self.other.contains_key(&(slot, address))
        }
    }

    fn push(&mut self, entry: TraceEntry, max_events: usize) {
        // Keep time order: usually appended; an older entry goes after the last entry
        // that is not newer than it.
        let at = self
            .trace
            .iter()
            .rposition(|e| e.timestamp <= entry.timestamp)
            .map_or(0, |i| i + 1);
        self.trace.insert(at, entry);
        while self.trace.len() > max_events {
            self.trace.pop_front();
            self.dropped += 1;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn entry(
        &mut self,
        action: TraceAction,
        address: u64,
        size: u64,
        stream: StreamHandle,
        timestamp: u64,
        frames: &Option<Frames>,
        max_events: usize,
    ) {
        let e = TraceEntry {
            action,
            address,
            size,
            stream,
            timestamp,
            frames: frames.clone(),
        };
        self.push(e, max_events);
    }

    fn reserve(&mut self, bytes: u64, timestamp: u64, frames: &Option<Frames>) {
        self.bytes_by_slot[DEVICE_SLOT] += bytes;
        self.slots_seen |= 1 << DEVICE_SLOT;
        let now = self.bytes_by_slot[DEVICE_SLOT];
        if self.peak.as_ref().is_none_or(|p| now > p.bytes) {
            self.peak = Some(Peak {
                bytes: now,
                timestamp,
                frames: frames.clone(),
            });
        }
    }

    /// A new segment with one block covering it: `segment_alloc` and `alloc` entries.
    fn new_segment(
        &mut self,
        m: &Memory,
        stream: StreamHandle,
        frames: Option<Frames>,
        from_pool: bool,
        max: usize,
    ) {
        let (addr, size, ts) = (m.address, m.bytes, m.timestamp);
        let mut blocks = BTreeMap::new();
        let block = Block {
            size,
            stream,
            frames: frames.clone(),
        };
        blocks.insert(addr, block);
        let seg = Segment {
            size,
            stream,
            frames: frames.clone(),
            from_pool,
            hosts_pool: false,
            blocks,
        };
        self.segments.insert(addr, seg);
        if from_pool {
            self.pool_blocks.insert(addr, addr);
        }
        self.entry(
            TraceAction::SegmentAlloc,
            addr,
            size,
            stream,
            ts,
            &frames,
            max,
        );
        self.entry(TraceAction::Alloc, addr, size, stream, ts, &frames, max);
        self.reserve(size, ts, &frames);
    }

    /// Frees every block at `addr` or covering it that a new allocation there replaces
    /// (its free was lost).
    fn free_stale(&mut self, addr: u64, ts: u64, max: usize) {
        if let Some(&seg) = self.pool_blocks.get(&addr) {
            self.free_block(addr, seg, ts, &None, max);
        }
        if self.segments.contains_key(&addr) {
            self.free_segment(addr, ts, &None, max);
        }
    }

    /// A non-async device allocation: a segment.
    fn alloc_segment(
        &mut self,
        m: &Memory,
        stream: StreamHandle,
        frames: Option<Frames>,
        max: usize,
    ) {
        self.free_stale(m.address, m.timestamp, max);
        self.new_segment(m, stream, frames, false, max);
    }

    /// A stream-ordered (pool) allocation: a block inside the plain segment containing it
    /// (the pool's reservation), or its own segment. Returns whether reserved bytes changed.
    fn alloc_block(
        &mut self,
        m: &Memory,
        stream: StreamHandle,
        frames: Option<Frames>,
        max: usize,
    ) -> bool {
        let (addr, size, ts) = (m.address, m.bytes, m.timestamp);
        if let Some(&seg) = self.pool_blocks.get(&addr) {
            self.free_block(addr, seg, ts, &None, max);
        }
        let end = addr.saturating_add(size);
        let host = self
            .segments
            .range(..=addr)
            .next_back()
            .and_then(|(&base, seg)| {
                let inside = !seg.from_pool && end <= base.saturating_add(seg.size);
                // A segment that is not a pool yet holds only its whole-segment block.
                let free = !seg.hosts_pool
                    || (seg
                        .blocks
                        .range(..addr)
                        .next_back()
                        .is_none_or(|(&b, k)| b + k.size <= addr)
                        && seg
                            .blocks
                            .range(addr..)
                            .next()
                            .is_none_or(|(&b, _)| b >= end));
                (inside && free).then_some(base)
            });
        let Some(base) = host else {
            self.free_stale(addr, ts, max);
            self.new_segment(m, stream, frames, true, max);
            return true;
        };
        let seg = self.segments.get_mut(&base).expect("host segment");
        // The first pool allocation inside a plain segment makes it a pool's reservation:
        // its whole-segment block ends here.
        let ended = if seg.hosts_pool {
            None
        } else {
            seg.blocks.remove(&base)
        };
        seg.hosts_pool = true;
        seg.blocks.insert(
            addr,
            Block {
                size,
                stream,
                frames: frames.clone(),
            },
        );
        self.pool_blocks.insert(addr, base);
        if let Some(b) = ended {
            self.block_freed(base, &b, ts, &None, max);
        }
        self.entry(TraceAction::Alloc, addr, size, stream, ts, &frames, max);
        false
    }

    /// A matched free (the caller checked [`Self::owns`]). Returns whether a counter changed.
    fn free(&mut self, m: &Memory, slot: usize, frames: Option<Frames>, max_events: usize) -> bool {
        if slot != DEVICE_SLOT {
            let bytes = self.other.remove(&(slot, m.address)).unwrap_or(0);
            self.bytes_by_slot[slot] -= bytes;
            return true;
        }
        let block = self.pool_blocks.get(&m.address).copied();
        let segment_is_plain = self.segments.get(&m.address).is_some_and(|s| !s.from_pool);
        match block {
            // At an address that is both a pool block and the base of a plain segment
            // hosting it, an async free is the block's and a plain free the segment's.
            Some(seg) if m.is_async || !segment_is_plain => {
                self.free_block(m.address, seg, m.timestamp, &frames, max_events)
            }
            _ => {
                self.free_segment(m.address, m.timestamp, &frames, max_events);
                true
            }
        }
    }

    /// Frees a pool block (and its segment if the block is its own segment).
    fn free_block(
        &mut self,
        addr: u64,
        seg_addr: u64,
        ts: u64,
        frames: &Option<Frames>,
        max: usize,
    ) -> bool {
        self.pool_blocks.remove(&addr);
        let Some(seg) = self.segments.get_mut(&seg_addr) else {
            return false;
        };
        let Some(block) = seg.blocks.remove(&addr) else {
            return false;
        };
        let from_pool = seg.from_pool;
        self.block_freed(addr, &block, ts, frames, max);
        if from_pool {
            self.free_segment(seg_addr, ts, frames, max);
        }
        from_pool
    }

    /// A block's free as the caching allocator reports it: requested, then completed.
    fn block_freed(
        &mut self,
        addr: u64,
        block: &Block,
        ts: u64,
        frames: &Option<Frames>,
        max: usize,
    ) {
        for action in [TraceAction::FreeRequested, TraceAction::FreeCompleted] {
            self.entry(action, addr, block.size, block.stream, ts, frames, max);
        }
    }

    /// Frees a segment, and first any pool blocks still inside it.
    fn free_segment(&mut self, addr: u64, ts: u64, frames: &Option<Frames>, max: usize) {
        let Some(seg) = self.segments.remove(&addr) else {
            return;
        };
        for (&b, block) in &seg.blocks {
            self.pool_blocks.remove(&b);
            self.block_freed(b, block, ts, frames, max);
        }
        self.entry(
            TraceAction::SegmentFree,
            addr,
            seg.size,
            seg.stream,
            ts,
            frames,
            max,
        );
        self.bytes_by_slot[DEVICE_SLOT] -= seg.size;
    }
}

fn clamp(v: u64) -> i64 {
    super::pickle::clamp_u64(v)
}
