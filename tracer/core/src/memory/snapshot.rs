//! The snapshot pickle: what `torch.cuda.memory._dump_snapshot` writes (torch 2.11), so
//! that pytorch.org/memory_viz and `python -m torch.cuda._memory_viz` open it.
//!
//! Keys and value types mirror the reference snapshot written by torch 2.11
//! (`tests/data/torch-2.11-memory-snapshot.pickle`), in its key order:
//! - top level: `segments` (list), `device_traces` (list of lists, one per device ordinal
//!   from 0 to the highest seen, empty for devices without records), `allocator_settings`
//!   (dict), `external_annotations` (list; always empty: cuprof has none to give).
//! - segment: `device, address, total_size, allocated_size, active_size, requested_size,
//!   stream` (int), `segment_type` (str, [`super::segment_type`]), `segment_pool_id`
//!   (tuple `(0, 0)`), `is_expandable` (`False`), `frames` (list), `blocks` (list). Segments
//!   are ordered by device, then address. `stream` is the allocation's
//!   [`super::StreamHandle`]: the `cudaStream_t` a stream-ordered allocation was made on,
//!   0 for any other (`cudaMalloc` takes no stream; 0 is torch's default stream, and what
//!   torch's `SegmentInfo::stream` holds for it).
//! - block: `address, size, requested_size` (int), `state` (str), `frames` (list). A
//!   segment has one `active_allocated` block covering it (the allocation itself); a
//!   segment hosting pool allocations has them (`active_allocated`) and `inactive` blocks
//!   for the gaps (requested size 0), so that block sizes always sum to `total_size`
//!   (`_memory_viz stats` asserts it). `allocated_size`, `active_size` and
//!   `requested_size` are the sum of active blocks. No `stream`: torch's `BlockInfo` has
//!   none (a block's stream shows on its trace entries).
//! - trace entry: `action, addr, size, stream, time_us` (int; `stream` as on segments,
//!   the allocation's even on a free's entries, as torch writes `block->stream`; `time_us`
//!   is the record's CLOCK_REALTIME nanoseconds / 1000), `compile_context` (`"N/A"`, as
//!   torch writes without torch.compile), `user_metadata` (`""`), `frames` (list). No
//!   `category`: MemoryViz.js throws unless one category is `'unknown'`.
//! - frame: `name, filename` (str), `line` (int).
//!
//! The stack of a segment (its allocation's) is written on the segment and on its block;
//! torch leaves the segment's own `frames` empty.
//!
//! The pickle is protocol 4 with only the opcodes MemoryViz.js implements; every integer is
//! a signed 64-bit value (see the `pickle` module).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::pickle::PickleWriter;
use super::timeline::{
    segment_type, Frame, Frames, MemoryTimeline, Segment, StreamHandle, TraceEntry,
};

pub use super::allocator_settings::AllocatorSettings;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot write memory snapshot {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl MemoryTimeline {
    /// The snapshot pickle now (see [`crate::memory::snapshot`]).
    pub fn snapshot_pickle(&self) -> Vec<u8> {
        write(self)
    }

    /// Writes [`Self::snapshot_pickle`] to `path` through a temporary file in the same
    /// directory and a rename, so a reader never sees half a file.
    pub fn write_snapshot(&self, path: &Path) -> Result<(), SnapshotError> {
        let bytes = self.snapshot_pickle();
        let err = |source| SnapshotError::Write {
            path: path.to_owned(),
            source,
        };
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, &bytes).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(e)
        })
    }
}

/// Memo indices of the frame lists already written: each distinct stack (by content) is
/// written once, later uses are a `BINGET` of the same list. Looked up by the shared
/// slice's address first (cheap, and the usual case: the tracer interns its stacks), then
/// by content.
#[derive(Default)]
struct FrameMemo<'a> {
    by_address: HashMap<usize, u32>,
    by_content: HashMap<&'a [Frame], u32>,
}

static NO_FRAMES: Option<Frames> = None;

pub(crate) fn write(t: &MemoryTimeline) -> Vec<u8> {
    let entries: usize = t.devices.values().map(|d| d.trace.len()).sum();
    let segments: usize = t.devices.values().map(|d| d.segments.len()).sum();
    let mut w = PickleWriter::with_capacity(1024 + 64 * entries + 256 * segments);
    let mut memo = FrameMemo::default();

    w.begin_dict();
    w.key("segments");
    w.begin_list();
    for (&device, dev) in &t.devices {
        for (&address, seg) in &dev.segments {
            write_segment(&mut w, &mut memo, device, address, seg);
        }
    }
    w.end_list();

    w.key("device_traces");
    w.begin_list();
    let ndev = t.devices.keys().next_back().map_or(0, |&d| d + 1);
    for device in 0..ndev {
        w.begin_list();
        if let Some(dev) = t.devices.get(&device) {
            for e in &dev.trace {
                write_entry(&mut w, &mut memo, e);
            }
        }
        w.end_list();
    }
    w.end_list();

    w.key("allocator_settings");
    write_settings(&mut w, &t.settings);

    w.key("external_annotations");
    w.begin_list();
    w.end_list();
    w.end_dict();
    w.finish()
}

fn write_frames<'a>(w: &mut PickleWriter, memo: &mut FrameMemo<'a>, frames: &'a Option<Frames>) {
    let Some(frames) = frames.as_deref().filter(|f| !f.is_empty()) else {
        w.begin_list();
        w.end_list();
        return;
    };
    let address = frames.as_ptr() as usize;
    if let Some(&idx) = memo.by_address.get(&address) {
        w.memo_ref(idx);
        return;
    }
    if let Some(&idx) = memo.by_content.get(frames) {
        memo.by_address.insert(address, idx);
        w.memo_ref(idx);
        return;
    }
    // Written once, then referenced: the strings inside are not memoized (see
    // `PickleWriter::str_raw`).
    let idx = w.begin_list_memoized();
    for f in frames {
        w.begin_dict();
        w.str_raw("name");
        w.str_raw(&f.name);
        w.str_raw("filename");
        w.str_raw(&f.filename);
        w.str_raw("line");
        w.int(f.line);
        w.end_dict();
    }
    w.end_list();
    memo.by_address.insert(address, idx);
    memo.by_content.insert(frames, idx);
}

fn write_block<'a>(
    w: &mut PickleWriter,
    memo: &mut FrameMemo<'a>,
    address: u64,
    size: u64,
    active: bool,
    frames: &'a Option<Frames>,
) {
    w.begin_dict();
    w.key("address");
    w.uint(address);
    w.key("size");
    w.uint(size);
    w.key("requested_size");
    w.uint(if active { size } else { 0 });
    w.key("state");
    w.str(if active {
        "active_allocated"
    } else {
        "inactive"
    });
    w.key("frames");
    write_frames(w, memo, if active { frames } else { &NO_FRAMES });
    w.end_dict();
}

fn write_segment<'a>(
    w: &mut PickleWriter,
    memo: &mut FrameMemo<'a>,
    device: u32,
    address: u64,
    seg: &'a Segment,
) {
    let allocated: u64 = seg.blocks.values().map(|b| b.size).sum();
    w.begin_dict();
    w.key("device");
    w.int(i64::from(device));
    w.key("address");
    w.uint(address);
    w.key("total_size");
    w.uint(seg.size);
    w.key("allocated_size");
    w.uint(allocated);
    w.key("active_size");
    w.uint(allocated);
    w.key("requested_size");
    w.uint(allocated);
    w.key("stream");
    w.int(stream_value(seg.stream));
    w.key("segment_type");
    w.str(segment_type(seg.size));
    w.key("segment_pool_id");
    w.tuple2_int(0, 0);
    w.key("is_expandable");
    w.bool(false);
    w.key("frames");
    write_frames(w, memo, &seg.frames);
    w.key("blocks");
    w.begin_list();
    // Blocks in address order, with the gaps between them as inactive blocks.
    let end = address.saturating_add(seg.size);
    let mut at = address;
    for (&b, block) in &seg.blocks {
        if b > at {
            write_block(w, memo, at, b - at, false, &NO_FRAMES);
        }
        write_block(w, memo, b, block.size, true, &block.frames);
        at = b + block.size;
    }
    if at < end {
        write_block(w, memo, at, end - at, false, &NO_FRAMES);
    }
    w.end_list();
    w.end_dict();
}

fn write_entry<'a>(w: &mut PickleWriter, memo: &mut FrameMemo<'a>, e: &'a TraceEntry) {
    w.begin_dict();
    w.key("action");
    w.str(e.action.as_str());
    w.key("addr");
    w.uint(e.address);
    w.key("size");
    w.uint(e.size);
    w.key("stream");
    w.int(stream_value(e.stream));
    w.key("time_us");
    w.uint(e.time_us());
    w.key("compile_context");
    w.str("N/A");
    w.key("user_metadata");
    w.str("");
    w.key("frames");
    write_frames(w, memo, &e.frames);
    w.end_dict();
}

/// torch writes `int64_t(stream)`: the handle's bits, never clamped.
fn stream_value(stream: StreamHandle) -> i64 {
    stream as i64
}

fn write_settings(w: &mut PickleWriter, s: &AllocatorSettings) {
    w.begin_dict();
    w.key("PYTORCH_CUDA_ALLOC_CONF");
    w.str(&s.pytorch_cuda_alloc_conf);
    w.key("max_split_size");
    w.int(s.max_split_size);
    w.key("garbage_collection_threshold");
    w.float(s.garbage_collection_threshold);
    w.key("expandable_segments");
    w.bool(s.expandable_segments);
    w.key("pinned_num_register_threads");
    w.int(s.pinned_num_register_threads);
    w.key("release_lock_on_cudamalloc");
    w.bool(s.release_lock_on_cudamalloc);
    w.key("pinned_use_cuda_host_register");
    w.bool(s.pinned_use_cuda_host_register);
    w.key("graph_capture_record_stream_reuse");
    w.bool(s.graph_capture_record_stream_reuse);
    w.key("roundup_power2_divisions");
    w.begin_dict();
    for &(size, divisions) in &s.roundup_power2_divisions {
        w.key(&size.to_string());
        w.int(divisions);
    }
    w.end_dict();
    w.end_dict();
}
