//! Device-memory timeline and torch-compatible snapshot pickles.
//!
//! [`MemoryTimeline`] is fed every CUPTI memory record of one process
//! ([`Memory`](crate::event::Memory), all devices) in arrival order. It keeps, per device:
//! - the live allocations and the bytes reserved per memory kind, from which
//!   [`MemoryTimeline::record`] returns a [`CounterSample`] after every change (the trace
//!   writer turns each one into a `"ph": "C"` event, see [`CounterSample`]);
//! - the peak of reserved device memory (bytes, time, and the frames of the allocation
//!   that reached it);
//! - a bounded list of torch-style trace entries (`segment_alloc`, `alloc`,
//!   `free_requested`, `free_completed`, `segment_free`), oldest dropped first, with the
//!   drops counted.
//!
//! [`MemoryTimeline::snapshot_pickle`] writes what `torch.cuda.memory._dump_snapshot`
//! writes (torch 2.11 layout; see [`snapshot`] for the exact keys and the rules that keep
//! PyTorch's MemoryViz from failing silently).
//!
//! # What is recorded, honestly
//! CUPTI's MEMORY2 records are what the driver sees: `cudaMalloc`/`cudaFree`,
//! `cuMemAlloc`, stream-ordered `cudaMallocAsync`/`cudaFreeAsync`. For a caching allocator
//! such as PyTorch's, those are its *segments*, not its tensors. So:
//! - Only memory kind 3 (`CUPTI_ACTIVITY_MEMORY_KIND_DEVICE`) goes into the snapshot, the
//!   trace entries, `reserved_bytes` and the peak. Other kinds (pinned host, managed,
//!   device-static, ...) only feed their own counter series (see [`kind_series`]).
//! - Every allocation is a segment holding one block of the same size: `segment_alloc`
//!   then `alloc` at its time, `free_requested`, `free_completed` then `segment_free` at
//!   its free's time; in `segments` it has one `active_allocated` block covering it.
//!   The block entries are needed by MemoryViz: its "Allocator State History" replays the
//!   trace backwards from `segments` and only an `alloc` removes a block, so a live
//!   segment's block without one would be left outside any segment (the view then fails
//!   on every earlier event), and its "Active Memory Timeline" plots only `alloc`s.
//!   `free_requested` goes right before `free_completed`, as torch writes an ordinary
//!   free, because MemoryViz merges the pair into one `free`; a lone `free_completed` is
//!   drawn as a block "freed but waiting due to record_stream". So one allocation's life
//!   is 5 trace entries.
//! - A stream-ordered (pool) allocation belongs inside its pool's reservation, but CUPTI's
//!   memory records do not carry the pool's reservation: when no live segment of the
//!   device contains the allocation, the allocation itself is represented as its segment,
//!   exactly like a non-async one (on its stream). Reserved bytes then count pool
//!   allocations rather than the pool's (larger, driver-managed) reservation. If a pool's
//!   reservation is ever fed in as a non-async device allocation covering the pool's
//!   range, the first pool allocation inside it ends its whole-segment block
//!   (`free_requested`/`free_completed`), and from then on pool allocations inside it are
//!   blocks of that segment (`alloc`, `free_requested`/`free_completed`, the gaps
//!   `inactive`) that reserve nothing themselves.
//!
//! # Repairs
//! - A free whose size is 0 (or differs) takes the live allocation's size.
//! - A free of an address that is not live (its allocation was never seen) changes nothing
//!   and is counted in [`MemoryTimeline::unmatched_frees`].
//! - An allocation at an address that is still live (its free was lost) first frees the
//!   stale allocation, with entries at the new allocation's time.
//! - Records with address 0 or size 0, or a device ordinal of [`MAX_DEVICES`] or more,
//!   are ignored and counted in [`MemoryTimeline::ignored_records`].
//! - Records should arrive roughly in time order; a trace entry older than the newest kept
//!   one is inserted at its place in time, so `device_traces` stays in time order.
mod allocator_settings;
mod pickle;
pub mod snapshot;
mod timeline;

pub use allocator_settings::AllocatorSettings;
pub use snapshot::SnapshotError;
pub use timeline::{
    kind_series, segment_type, CounterSample, Frame, Frames, LiveMemory, MemoryTimeline, Peak,
    StreamHandle, TraceAction, TraceEntry, DEFAULT_MAX_EVENTS, DEVICE_MEMORY_KIND, MAX_DEVICES,
    SMALL_SEGMENT_MAX,
};

#[cfg(test)]
mod tests;
