//! Streams one Kineto-schema Chrome trace as gzip JSON (see docs/trace-format.md).
//!
//! The header is written at creation, events as they come (Chrome traces need no ordering), the
//! footer at [`TraceWriter::finish`]. [`TraceWriter::sync_flush`] ends a complete deflate block so
//! that a file cut short by SIGKILL still decompresses up to that point (`cuprof repair` closes it).
//! Every piece handed to the compressor starts at an event boundary (`,\n` before each event), so
//! the stream's chunks do too ([`crate::chunked_gzip`]).

use crate::chunked_gzip::ChunkedGz;
use crate::event::*;
use crate::figures::StepFigures;
use crate::json::{push_f64, push_i64, push_str, push_u64, push_us};
use crate::torch_op::TorchOp;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

// The header, stats and device types are the trace format's; these paths are the ones the
// preload and the benches use.
pub use crate::trace_format::{
    base_time_ns, DeviceProps, Header as TraceMeta, TraceStats, BASE_TIME_BOUNDARY_NS,
};

const GPU_SORT_BASE: u64 = 5_000_000;
/// Synchronization records carry no stream when they wait on a context or an event.
const NO_STREAM: u32 = u32::MAX;
/// Kineto's `kSyncStreamTidOffset`: a stream's `Stream Sync`s go on their own row, `tid` =
/// stream + this, so that they never partly overlap the stream's copies and kernels (a Stream
/// Sync spans the CPU's wait, which begins while the stream's last work still runs).
pub const SYNC_ROW_OFFSET: u64 = 1_000_000;
/// Where a CUDA event was recorded: its stream and the cudaEventRecord's correlation id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordedEvent {
    pub stream: u32,
    pub correlation: u32,
}

/// Name (of the event and of its row) of [`TraceWriter::gpu_work_span`].
pub const GPU_WORK: &str = "GPU work (no steps recorded)";
/// The row of [`TraceWriter::gpu_work_span`]: no OS thread has id 0.
pub const GPU_WORK_TID: u32 = 0;

pub struct TraceWriter<W: Write> {
    out: ChunkedGz<W>,
    buf: Vec<u8>,
    base: i64,
    meta: TraceMeta,
    events: u64,
    gpu_threads: BTreeSet<(u32, u32)>,
    /// (device, stream) whose `Stream Sync` row has been named.
    sync_rows: BTreeSet<(u32, u32)>,
    cpu_threads: BTreeSet<(u32, u32)>,
    /// Devices whose GPU process is named already.
    gpu_devices: BTreeSet<u32>,
    context_device: BTreeMap<u32, u32>,
    /// The last (device, context, stream) noted: consecutive GPU work is mostly on one stream,
    /// so the sets above are only searched when it changes.
    last_gpu: Option<(u32, u32, u32)>,
    /// Reused for names built per event (memcpy, memset), so none allocates.
    scratch: String,
    /// A write error met while spilling between events, reported by the next `pump`.
    failed: Option<io::Error>,
    /// Events go to a held buffer ([`TraceWriter::hold`]): `buf` is that buffer, not spilled.
    holding: bool,
    /// The next host event's `Ev Idx` ([`TraceWriter::next_ev_idx`]).
    ev_idx: u64,
}

/// Formatted events are handed to the compressor in chunks of about this size, also in the
/// middle of a batch: the buffer stays cache-sized instead of growing to a whole CUPTI buffer's
/// JSON (tens of MB) between two `pump`s.
const CHUNK: usize = 1 << 16;

fn memory_kind_name(kind: u8) -> &'static str {
    match kind {
        1 => "Pageable",
        2 => "Pinned",
        3 => "Device",
        4 => "Array",
        5 => "Managed",
        6 => "Device Static",
        7 => "Managed Static",
        _ => "Unknown",
    }
}

fn copy_kind_name(kind: u8) -> &'static str {
    match kind {
        1 => "HtoD",
        2 => "DtoH",
        3 => "HtoA",
        4 => "AtoH",
        5 => "AtoA",
        6 => "AtoD",
        7 => "DtoA",
        8 => "DtoD",
        9 => "HtoH",
        10 => "PtoP",
        _ => "Unknown",
    }
}

/// `Memcpy DtoH (Device -> Pinned)`, Kineto's name for a copy.
pub fn memcpy_name(m: &Memcpy) -> String {
    let mut s = String::new();
    write_memcpy_name(&mut s, m);
    s
}

/// [`memcpy_name`] into a reused buffer (the writer formats one per copy).
fn write_memcpy_name(s: &mut String, m: &Memcpy) {
    s.clear();
    s.push_str("Memcpy ");
    s.push_str(copy_kind_name(m.copy_kind));
    s.push_str(" (");
    s.push_str(memory_kind_name(m.src_kind));
    s.push_str(" -> ");
    s.push_str(memory_kind_name(m.dst_kind));
    s.push(')');
}

/// `Memset (Device)`, Kineto's name for a memset, into a reused buffer.
fn write_memset_name(s: &mut String, m: &Memset) {
    s.clear();
    s.push_str("Memset (");
    s.push_str(memory_kind_name(m.memory_kind as u8));
    s.push(')');
}

pub fn sync_name(sync_type: u32) -> &'static str {
    match sync_type {
        1 => "Event Sync",
        2 => "Stream Wait Event",
        3 => "Stream Sync",
        4 => "Context Sync",
        _ => "Unknown Sync",
    }
}

/// Occupancy figures Kineto puts on kernels: blocks and warps per SM, and an estimate of
/// achieved occupancy from the device's limits (threads, registers, shared memory, blocks).
pub fn occupancy(k: &Kernel, d: &DeviceProps) -> Option<(f64, f64, i64)> {
    if d.num_sms <= 0 || d.warp_size <= 0 {
        return None;
    }
    let threads =
        (k.block[0].max(1) as i64) * (k.block[1].max(1) as i64) * (k.block[2].max(1) as i64);
    let blocks = (k.grid[0].max(1) as i64) * (k.grid[1].max(1) as i64) * (k.grid[2].max(1) as i64);
    let warps_per_block = (threads + d.warp_size as i64 - 1) / d.warp_size as i64;
    let blocks_per_sm = blocks as f64 / d.num_sms as f64;
    let warps_per_sm = blocks_per_sm * warps_per_block as f64;
    let max_warps = (d.max_threads_per_multiprocessor / d.warp_size) as i64;
    if max_warps <= 0 || warps_per_block <= 0 {
        return Some((blocks_per_sm, warps_per_sm, 0));
    }
    let mut limit = max_warps / warps_per_block;
    if d.max_blocks_per_multiprocessor > 0 {
        limit = limit.min(d.max_blocks_per_multiprocessor as i64);
    }
    let regs = k.registers_per_thread as i64 * threads;
    if regs > 0 && d.regs_per_multiprocessor > 0 {
        limit = limit.min(d.regs_per_multiprocessor as i64 / regs);
    }
    let smem = k.static_shared_memory.max(0) as i64 + k.dynamic_shared_memory.max(0) as i64;
    if smem > 0 && d.shared_mem_per_multiprocessor > 0 {
        limit = limit.min(d.shared_mem_per_multiprocessor as i64 / smem);
    }
    let resident = (limit as f64).min(blocks_per_sm.ceil());
    let occupancy = (resident * warps_per_block as f64 / max_warps as f64 * 100.0).round() as i64;
    Some((blocks_per_sm, warps_per_sm, occupancy.clamp(0, 100)))
}

impl<W: Write> TraceWriter<W> {
    /// Writes the header and opens `traceEvents`.
    pub fn new(out: W, meta: TraceMeta, gzip_level: u32) -> io::Result<Self> {
        let mut w = TraceWriter {
            out: ChunkedGz::new(out, gzip_level)?,
            buf: Vec::with_capacity(1 << 16),
            base: meta.base_time_ns as i64,
            meta,
            events: 0,
            gpu_threads: BTreeSet::new(),
            sync_rows: BTreeSet::new(),
            cpu_threads: BTreeSet::new(),
            gpu_devices: BTreeSet::new(),
            context_device: BTreeMap::new(),
            last_gpu: None,
            scratch: String::new(),
            failed: None,
            holding: false,
            ev_idx: 0,
        };
        w.header()?;
        // Names go in as tracks appear, not at the end: a file cut short (SIGKILL) and
        // repaired reads with every track named.
        let (pid, pname) = (w.meta.pid, w.meta.process_name.clone());
        w.metadata("process_name", pid, 0, "name", MetaValue::Str(pname));
        w.metadata(
            "process_sort_index",
            pid,
            0,
            "sort_index",
            MetaValue::Int(pid as u64),
        );
        Ok(w)
    }

    fn header(&mut self) -> io::Result<()> {
        let header = self.meta.prefix()?;
        self.out.write_at_boundary(header.as_bytes())
    }

    pub fn events(&self) -> u64 {
        self.events
    }

    /// Compressed bytes handed to the underlying writer so far.
    pub fn output_len(&self) -> usize
    where
        W: AsRef<[u8]>,
    {
        self.out.get_ref().as_ref().len()
    }

    /// Hands what is formatted to the compressor; an error is kept for the next `pump`.
    fn spill(&mut self) {
        if self.failed.is_none() {
            if let Err(e) = self.out.write_at_boundary(&self.buf) {
                self.failed = Some(e);
            }
        }
        self.buf.clear();
    }

    /// Events that `f` writes go into `held` instead of the file, in the same form; they are
    /// put in later by [`Self::put_held`], after what is written meanwhile. For an op that a
    /// range written later must precede at the same start (see `session::OpenCycle::held`).
    pub fn hold(&mut self, held: &mut Vec<u8>, f: impl FnOnce(&mut Self)) {
        std::mem::swap(&mut self.buf, held);
        self.holding = true;
        f(self);
        self.holding = false;
        std::mem::swap(&mut self.buf, held);
    }

    /// Writes events [`Self::hold`] kept aside (each already counted and separated).
    pub fn put_held(&mut self, held: &[u8]) {
        if self.buf.len() >= CHUNK {
            self.spill();
        }
        self.buf.extend_from_slice(held);
    }

    /// The `Ev Idx` of the next host event written: Kineto numbers every CPU-side event torch
    /// hands it (operators, labels, steps, Python functions, allocations), from 0 in each file;
    /// every writer of such an event takes its number here, so that the numbers of one file
    /// are distinct and run on whatever kinds are written.
    pub fn next_ev_idx(&mut self) -> u64 {
        let i = self.ev_idx;
        self.ev_idx += 1;
        i
    }

    /// `"Ev Idx": N` as an argument after others.
    fn arg_ev_idx(&mut self) {
        let i = self.next_ev_idx();
        self.arg_u64("Ev Idx", i);
    }

    fn begin(&mut self, ph: &str) {
        if self.buf.len() >= CHUNK && !self.holding {
            self.spill();
        }
        if self.events > 0 {
            self.buf.extend_from_slice(b",\n");
        }
        self.events += 1;
        self.buf.extend_from_slice(b"{\"ph\": \"");
        self.buf.extend_from_slice(ph.as_bytes());
        self.buf.push(b'"');
    }

    fn key(&mut self, k: &str) {
        self.buf.extend_from_slice(b", \"");
        self.buf.extend_from_slice(k.as_bytes());
        self.buf.extend_from_slice(b"\": ");
    }

    fn arg_u64(&mut self, k: &str, v: u64) {
        self.key(k);
        push_u64(&mut self.buf, v);
    }

    fn arg_i64(&mut self, k: &str, v: i64) {
        self.key(k);
        push_i64(&mut self.buf, v);
    }

    fn arg_str(&mut self, k: &str, v: &str) {
        self.key(k);
        push_str(&mut self.buf, v);
    }

    fn ts(&mut self, k: &str, ns: u64) {
        self.key(k);
        push_us(&mut self.buf, ns as i64 - self.base);
    }

    /// `"ph": "X"` prologue shared by every complete event.
    fn complete(&mut self, cat: &str, name: &str, pid: u32, tid: u32, start: u64, end: u64) {
        self.begin("X");
        self.arg_str("cat", cat);
        self.arg_str("name", name);
        self.arg_u64("pid", pid as u64);
        self.arg_u64("tid", tid as u64);
        self.ts("ts", start);
        self.key("dur");
        push_us(&mut self.buf, end.saturating_sub(start) as i64);
    }

    fn args_open(&mut self) {
        self.buf.extend_from_slice(b", \"args\": {");
    }

    /// First argument inside `args` (no leading comma).
    fn first_arg(&mut self, k: &str) {
        self.buf.push(b'"');
        self.buf.extend_from_slice(k.as_bytes());
        self.buf.extend_from_slice(b"\": ");
    }

    fn close(&mut self, with_args: bool) {
        if with_args {
            self.buf.push(b'}');
        }
        self.buf.push(b'}');
    }

    /// Opens `args` of GPU work: the `External id` of the PyTorch operator that launched it
    /// first (where Kineto writes it), then where it ran.
    fn gpu_common_args(
        &mut self,
        device: u32,
        context: u32,
        stream: u32,
        correlation: u32,
        external: Option<u64>,
    ) {
        self.args_open();
        if let Some(id) = external {
            self.first_arg("External id");
            push_u64(&mut self.buf, id);
            self.key("device");
        } else {
            self.first_arg("device");
        }
        push_u64(&mut self.buf, device as u64);
        self.arg_u64("context", context as u64);
        self.arg_u64("stream", stream as u64);
        self.arg_u64("correlation", correlation as u64);
    }

    fn note_gpu(&mut self, device: u32, context: u32, stream: u32) {
        if self.last_gpu == Some((device, context, stream)) {
            return;
        }
        self.last_gpu = Some((device, context, stream));
        self.gpu_track(device, stream);
        self.context_device.insert(context, device);
    }

    /// Notes a CPU thread's track, naming it the first time.
    fn cpu_track(&mut self, pid: u32, tid: u32) {
        if self.cpu_threads.insert((pid, tid)) {
            let label = format!("thread {tid} ({})", thread_name(pid, tid));
            self.metadata("thread_name", pid, tid, "name", MetaValue::Str(label));
            let sort = MetaValue::Int(tid as u64);
            self.metadata("thread_sort_index", pid, tid, "sort_index", sort);
        }
    }

    /// Notes a GPU stream's track, naming it (and its device) the first time.
    fn gpu_track(&mut self, device: u32, stream: u32) {
        if self.gpu_threads.insert((device, stream)) {
            self.gpu_process(device);
            let name = MetaValue::Str(format!("stream {stream} "));
            self.metadata("thread_name", device, stream, "name", name);
            let sort = MetaValue::Int(stream as u64);
            self.metadata("thread_sort_index", device, stream, "sort_index", sort);
        }
    }

    /// Names a device's GPU process the first time one of its tracks appears.
    fn gpu_process(&mut self, device: u32) {
        if self.gpu_devices.insert(device) {
            let name = format!("GPU {device}");
            self.metadata(
                "process_name",
                device,
                0,
                "name",
                MetaValue::Str(name.clone()),
            );
            self.metadata("process_labels", device, 0, "labels", MetaValue::Str(name));
            let sort = MetaValue::Int(GPU_SORT_BASE + device as u64);
            self.metadata("process_sort_index", device, 0, "sort_index", sort);
        }
    }

    /// A kernel; `external`: the `External id` of the PyTorch operator that launched it.
    pub fn kernel(&mut self, k: &Kernel, external: Option<u64>) {
        self.note_gpu(k.device, k.context, k.stream);
        self.complete("kernel", &k.name, k.device, k.stream, k.start, k.end);
        self.args_open();
        // Kineto's first field: CUPTI's raw timestamp in ns (0 = not collected; CUPTI collects
        // it only with cuptiActivityEnableLatencyTimestamps).
        if let Some(id) = external {
            self.first_arg("External id");
            push_u64(&mut self.buf, id);
            self.key("queued");
        } else {
            self.first_arg("queued");
        }
        push_u64(&mut self.buf, k.queued);
        self.key("device");
        push_u64(&mut self.buf, k.device as u64);
        self.arg_u64("context", k.context as u64);
        self.arg_u64("stream", k.stream as u64);
        self.arg_u64("correlation", k.correlation as u64);
        self.arg_u64("registers per thread", k.registers_per_thread as u64);
        self.arg_i64(
            "shared memory",
            k.static_shared_memory as i64 + k.dynamic_shared_memory as i64,
        );
        let occ = self
            .meta
            .devices
            .get(k.device as usize)
            .and_then(|d| occupancy(k, d));
        if let Some((blocks, warps, _)) = occ {
            self.key("blocks per SM");
            push_f64(&mut self.buf, blocks, 6);
            self.key("warps per SM");
            push_f64(&mut self.buf, warps, 6);
        }
        for (key, v) in [("grid", k.grid), ("block", k.block)] {
            self.key(key);
            self.buf.push(b'[');
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    self.buf.extend_from_slice(b", ");
                }
                push_i64(&mut self.buf, *x as i64);
            }
            self.buf.push(b']');
        }
        if let Some((_, _, est)) = occ {
            self.arg_i64("est. achieved occupancy %", est);
        }
        if k.graph_id != 0 || k.graph_node_id != 0 {
            self.arg_u64("graph id", k.graph_id as u64);
            self.arg_u64("graph node id", k.graph_node_id);
        }
        if k.cluster.iter().any(|&c| c > 1) {
            self.key("cluster");
            self.buf.push(b'[');
            for (i, x) in k.cluster.iter().enumerate() {
                if i > 0 {
                    self.buf.extend_from_slice(b", ");
                }
                push_u64(&mut self.buf, *x as u64);
            }
            self.buf.push(b']');
        }
        self.close(true);
    }

    /// A memcpy; `correlation` is the id of the API call recorded in the trace (the runtime
    /// call's when there is one), so that HTA and the flows find its CPU partner.
    pub fn memcpy(&mut self, m: &Memcpy, correlation: u32, external: Option<u64>) {
        self.note_gpu(m.device, m.context, m.stream);
        let mut name = std::mem::take(&mut self.scratch);
        write_memcpy_name(&mut name, m);
        self.complete("gpu_memcpy", &name, m.device, m.stream, m.start, m.end);
        self.scratch = name;
        self.gpu_common_args(m.device, m.context, m.stream, correlation, external);
        self.arg_u64("bytes", m.bytes);
        self.bandwidth(m.bytes, m.start, m.end);
        if let (Some(from), Some(to)) = (m.src_device, m.dst_device) {
            self.arg_u64("fromDevice", from as u64);
            self.arg_u64("toDevice", to as u64);
        }
        self.close(true);
    }

    fn bandwidth(&mut self, bytes: u64, start: u64, end: u64) {
        // bytes per nanosecond is GB/s.
        let dur = end.saturating_sub(start);
        self.key("memory bandwidth (GB/s)");
        let gbps = if dur == 0 {
            0.0
        } else {
            bytes as f64 / dur as f64
        };
        push_f64(&mut self.buf, gbps, 6);
    }

    pub fn memset(&mut self, m: &Memset, external: Option<u64>) {
        self.note_gpu(m.device, m.context, m.stream);
        let mut name = std::mem::take(&mut self.scratch);
        write_memset_name(&mut name, m);
        self.complete("gpu_memset", &name, m.device, m.stream, m.start, m.end);
        self.scratch = name;
        self.gpu_common_args(m.device, m.context, m.stream, m.correlation, external);
        self.arg_u64("bytes", m.bytes);
        self.bandwidth(m.bytes, m.start, m.end);
        self.close(true);
    }

    /// The device of a context, learned from the GPU work seen on it so far (sync records carry
    /// only the context).
    pub fn device_of_context(&self, context: u32) -> u32 {
        self.context_device.get(&context).copied().unwrap_or(0)
    }

    /// A synchronization record. Kineto's fields: `wait_on_*` only for event syncs (Event
    /// Sync, Stream Wait Event), where `wait_on_stream` and `wait_on_cuda_event_record_corr_id`
    /// name the stream and the call that recorded the awaited event (`recorded`, from its
    /// CUDA_EVENT record; -1 when that was not seen), and `wait_on_cuda_event_id` is the
    /// event's id.
    pub fn sync(&mut self, s: &Synchronization, recorded: Option<RecordedEvent>) {
        const STREAM_SYNC: u32 = 3;
        let device = self.device_of_context(s.context);
        let tid = if s.stream == NO_STREAM { 0 } else { s.stream };
        let row = if s.sync_type == STREAM_SYNC && s.stream != NO_STREAM {
            self.sync_row(device, s.stream)
        } else {
            self.gpu_track(device, tid);
            tid as u64
        };
        self.begin("X");
        self.arg_str("cat", "cuda_sync");
        self.arg_str("name", sync_name(s.sync_type));
        self.arg_u64("pid", device as u64);
        self.arg_u64("tid", row);
        self.ts("ts", s.start);
        self.key("dur");
        push_us(&mut self.buf, s.end.saturating_sub(s.start) as i64);
        self.args_open();
        self.first_arg("cuda_sync_kind");
        push_str(&mut self.buf, sync_name(s.sync_type));
        let stream = if s.stream == NO_STREAM {
            -1
        } else {
            s.stream as i64
        };
        if matches!(s.sync_type, 1 | 2) {
            // -1 when unknown, as Kineto writes it (and HTA's critical path skips).
            let (on_stream, record_corr) =
                recorded.map_or((-1, -1), |r| (r.stream as i64, r.correlation as i64));
            self.arg_i64("wait_on_stream", on_stream);
            self.arg_i64("wait_on_cuda_event_record_corr_id", record_corr);
            self.arg_u64("wait_on_cuda_event_id", s.cuda_event as u64);
        }
        self.arg_i64("stream", stream);
        self.arg_u64("correlation", s.correlation as u64);
        self.arg_u64("device", device as u64);
        self.arg_u64("context", s.context as u64);
        self.close(true);
    }

    /// The row of `stream`'s Stream Syncs, named (as Kineto names it) when first used.
    fn sync_row(&mut self, device: u32, stream: u32) -> u64 {
        let row = stream as u64 + SYNC_ROW_OFFSET;
        if self.sync_rows.insert((device, stream)) {
            self.gpu_process(device);
            let name = MetaValue::Str(format!("stream {stream} (sync)"));
            self.metadata_row("thread_name", device, row, "name", name);
            let sort = MetaValue::Int(stream as u64);
            self.metadata_row("thread_sort_index", device, row, "sort_index", sort);
        }
        row
    }

    /// A runtime or driver call on its OS thread (its `ac2g` arrow is the session's: [`TraceWriter::flow`]).
    /// `external`: the `External id` of the PyTorch operator it was made in.
    pub fn api(&mut self, a: &ApiCall, external: Option<u64>) {
        self.cpu_track(a.pid, a.tid);
        let cat = match a.domain {
            ApiDomain::Runtime => "cuda_runtime",
            ApiDomain::Driver => "cuda_driver",
        };
        self.complete(cat, &a.name, a.pid, a.tid, a.start, a.end);
        self.args_open();
        if let Some(id) = external {
            self.first_arg("External id");
            push_u64(&mut self.buf, id);
            self.key("cbid");
        } else {
            self.first_arg("cbid");
        }
        push_u64(&mut self.buf, a.cbid as u64);
        self.arg_u64("correlation", a.correlation as u64);
        self.close(true);
    }

    /// One end of an `ac2g` flow arrow. Ids must be unique per file: the caller emits one `s`
    /// and one `f` per correlation id.
    pub fn flow(&mut self, ph: &str, id: u32, pid: u32, tid: u32, ts: u64) {
        self.begin(ph);
        self.arg_u64("id", id as u64);
        self.arg_u64("pid", pid as u64);
        self.arg_u64("tid", tid as u64);
        self.ts("ts", ts);
        self.arg_str("cat", "ac2g");
        self.arg_str("name", "ac2g");
        if ph == "f" {
            self.arg_str("bp", "e");
        }
        self.close(false);
    }

    /// An NVTX range or a `ProfilerStep#N` on its CPU thread, with the step's figures:
    /// `args.work` (tokens) and `args.figures` (`{"name": value, ...}`, names escaped, values
    /// exact), then its `Ev Idx`.
    pub fn range(&mut self, r: &Range, figures: Option<&StepFigures>) {
        self.cpu_track(r.pid, r.tid);
        let name: &str = &r.name;
        if r.kind == RangeKind::Mark {
            self.begin("i");
            self.arg_str("cat", "user_annotation");
            self.arg_str("name", name);
            self.arg_u64("pid", r.pid as u64);
            self.arg_u64("tid", r.tid as u64);
            self.ts("ts", r.start);
            self.arg_str("s", "t");
        } else {
            self.complete("user_annotation", name, r.pid, r.tid, r.start, r.end);
        }
        let mut args = false;
        let mut open = |w: &mut Self, k: &str| {
            if args {
                w.key(k);
            } else {
                w.args_open();
                w.first_arg(k);
                args = true;
            }
        };
        if let Some(d) = &r.domain {
            open(self, "domain");
            push_str(&mut self.buf, d);
        }
        if let Some(p) = r.payload {
            open(self, "payload");
            push_f64(&mut self.buf, p, 6);
        }
        if let Some(wk) = figures.and_then(|f| f.work) {
            open(self, "work");
            push_f64(&mut self.buf, wk, 6);
        }
        if let Some(named) = figures.map(|f| &f.named).filter(|n| !n.is_empty()) {
            open(self, "figures");
            self.buf.push(b'{');
            for (i, (name, value)) in named.iter().enumerate() {
                if i > 0 {
                    self.buf.extend_from_slice(b", ");
                }
                push_str(&mut self.buf, name);
                self.buf.extend_from_slice(b": ");
                // Finite (checked when attached); Rust's shortest form reads back exactly.
                let v = if value.is_finite() { *value } else { 0.0 };
                self.buf.extend_from_slice(format!("{v}").as_bytes());
            }
            self.buf.push(b'}');
        }
        open(self, "Ev Idx");
        let i = self.next_ev_idx();
        push_u64(&mut self.buf, i);
        self.close(true);
    }

    /// A PyTorch operator as Kineto writes it: its `External id` (the id the calls made inside
    /// it carry), autograd's sequence number and forward thread, the RecordFunction handle,
    /// input shapes when recorded, more args (a collective's metadata, keyword inputs), and the
    /// Python call stack with `--with-stack`, then its `Ev Idx`. A `record_function` label from the native
    /// observer ([`RangeKind::NativeLabel`]) has the same fields, as a `user_annotation`; its
    /// `External id` is also its projection's onto the GPU.
    pub fn torch_op(&mut self, r: &Range, op: &TorchOp, fwd_thread: Option<u32>) {
        self.cpu_track(r.pid, r.tid);
        let cat = match r.kind {
            RangeKind::NativeLabel => "user_annotation",
            _ => "cpu_op",
        };
        self.complete(cat, op.name, r.pid, r.tid, r.start, r.end);
        self.args_open();
        self.first_arg("External id");
        push_u64(&mut self.buf, r.id);
        if let (Some(seq), Some(fwd)) = (op.seq, fwd_thread) {
            self.arg_i64("Sequence number", seq);
            self.arg_u64("Fwd thread id", fwd as u64);
        }
        self.arg_u64("Record function id", op.op_id);
        // Each checked JSON by the parser (`TorchOp`): written as it stands, in Kineto's order.
        let arrays = [
            ("Concrete Inputs", op.concrete),
            ("Input type", op.types),
            ("Input Strides", op.strides),
            ("Input Dims", op.sizes),
        ];
        for (key, json) in arrays {
            if let Some(json) = json {
                self.key(key);
                self.buf.extend_from_slice(json.as_bytes());
            }
        }
        if let Some(flops) = op.flops {
            self.arg_u64("flops", flops);
        }
        if let Some(members) = op.members {
            // JSON object members, checked by the record's reader (`native_record`).
            self.buf.extend_from_slice(b", ");
            self.buf.extend_from_slice(members.as_bytes());
        }
        if let Some(stack) = &r.stack {
            let mut text = std::mem::take(&mut self.scratch);
            text.clear();
            call_stack(&mut text, stack);
            self.arg_str("Call stack", &text);
            self.scratch = text;
        }
        self.arg_ev_idx();
        self.close(true);
    }

    /// A PyTorch allocation or free as Kineto writes it with `profile_memory` (TensorBoard's
    /// memory view and its operator memory read these): an instant on the thread that made it,
    /// its `args` the object [`crate::native_record::memory_args`] made, with its `Ev Idx`.
    pub fn torch_memory(&mut self, r: &Range) {
        self.cpu_track(r.pid, r.tid);
        self.begin("i");
        self.arg_str("cat", "cpu_instant_event");
        self.arg_str("s", "t");
        self.arg_str("name", "[memory]");
        self.arg_u64("pid", r.pid as u64);
        self.arg_u64("tid", r.tid as u64);
        self.ts("ts", r.start);
        self.key("args");
        // The object's members, then its `Ev Idx` (an object that is not one is kept whole).
        match r
            .name
            .strip_suffix('}')
            .filter(|m| m.starts_with('{') && m.len() > 1)
        {
            Some(members) => {
                self.buf.extend_from_slice(members.as_bytes());
                self.arg_ev_idx();
                self.buf.push(b'}');
            }
            None => self.buf.extend_from_slice(r.name.as_bytes()),
        }
        self.close(false);
    }

    /// An `nn.Module` forward call as torch.profiler's `with_stack` writes it (TensorBoard's
    /// Module View builds its tree from these): a `python_function` event named
    /// `nn.Module: Class_N`, with its `Python id`, its enclosing call's `Python parent id` and
    /// the instance number as `Python module id`; cuprof's `Module path`; then its `Ev Idx`.
    pub fn module(&mut self, r: &Range) {
        self.cpu_track(r.pid, r.tid);
        self.complete("python_function", &r.name, r.pid, r.tid, r.start, r.end);
        self.args_open();
        self.first_arg("Python parent id");
        push_u64(&mut self.buf, r.parent);
        self.arg_u64("Python id", r.id);
        self.arg_u64("Python module id", module_instance(&r.name));
        if let Some(path) = &r.domain {
            self.arg_str("Module path", path);
        }
        self.arg_ev_idx();
        self.close(true);
    }

    /// An NVTX range projected onto the GPU stream that ran its work, over `start..end` (the
    /// session widens its work's span by 1 ns each side, as Kineto does). `external`: a
    /// `record_function` label's `External id`, which Kineto writes on its projection too.
    pub fn gpu_annotation(
        &mut self,
        name: &str,
        external: Option<u64>,
        device: u32,
        stream: u32,
        start: u64,
        end: u64,
    ) {
        self.gpu_track(device, stream);
        self.complete("gpu_user_annotation", name, device, stream, start, end);
        if let Some(id) = external {
            self.args_open();
            self.first_arg("External id");
            push_u64(&mut self.buf, id);
        }
        self.close(external.is_some());
    }

    /// The span of a cycle's GPU work (its first kernel, copy or set's start to the last one's
    /// end), written for a cycle that recorded no steps. TensorBoard's profiler plugin takes a
    /// trace without `ProfilerStep#N` as one step spanning its host events of the categories
    /// `cpu_op`, `python` and steps, and with none of them it shows a step of -2^64 µs; this
    /// event (category `python`, which no other consumer counts as an operator or a step) makes
    /// that step the GPU window `cuprof report` measures the busy share over. On a row of its
    /// own (tid 0) so it never partly overlaps a thread's calls.
    pub fn gpu_work_span(&mut self, start: u64, end: u64) {
        let pid = self.meta.pid;
        if self.cpu_threads.insert((pid, GPU_WORK_TID)) {
            let label = MetaValue::Str(GPU_WORK.to_string());
            self.metadata("thread_name", pid, GPU_WORK_TID, "name", label);
            let sort = MetaValue::Int(GPU_WORK_TID as u64);
            self.metadata("thread_sort_index", pid, GPU_WORK_TID, "sort_index", sort);
        }
        self.complete("python", GPU_WORK, pid, GPU_WORK_TID, start, end);
        self.close(false);
    }

    /// A device's memory counter sample (`"ph": "C"`, on the device's GPU process, which it names
    /// the first time: a trace recording memory but no GPU work has no other track there):
    /// each key becomes a track in Perfetto.
    pub fn counter(&mut self, name: &str, device: u32, ts: u64, values: &[(&str, i64)]) {
        self.gpu_process(device);
        self.begin("C");
        self.arg_str("cat", "cuda_memory");
        self.arg_str("name", name);
        self.arg_u64("pid", device as u64);
        self.arg_u64("tid", 0);
        self.ts("ts", ts);
        self.args_open();
        for (i, (k, v)) in values.iter().enumerate() {
            if i == 0 {
                self.first_arg(k);
            } else {
                self.key(k);
            }
            push_i64(&mut self.buf, *v);
        }
        self.close(true);
    }

    pub fn instant(&mut self, name: &str, pid: u32, tid: u32, ts: u64) {
        self.begin("i");
        self.arg_str("name", name);
        self.arg_u64("pid", pid as u64);
        self.arg_u64("tid", tid as u64);
        self.ts("ts", ts);
        self.arg_str("s", "t");
        self.close(false);
    }

    /// Moves formatted events into the compressor once enough have gathered.
    pub fn pump(&mut self) -> io::Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if self.buf.len() >= CHUNK {
            self.out.write_at_boundary(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Ends a complete deflate block: everything written so far survives a SIGKILL.
    pub fn sync_flush(&mut self) -> io::Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.out.write_at_boundary(&self.buf)?;
        self.buf.clear();
        self.out.sync_flush()
    }

    fn metadata(&mut self, name: &str, pid: u32, tid: u32, key: &str, value: MetaValue) {
        self.metadata_row(name, pid, tid as u64, key, value);
    }

    fn metadata_row(&mut self, name: &str, pid: u32, tid: u64, key: &str, value: MetaValue) {
        self.begin("M");
        self.arg_str("name", name);
        self.arg_u64("pid", pid as u64);
        self.arg_u64("tid", tid);
        self.key("ts");
        self.buf.extend_from_slice(b"0.000");
        self.args_open();
        self.first_arg(key);
        match value {
            MetaValue::Str(s) => push_str(&mut self.buf, &s),
            MetaValue::Int(i) => push_u64(&mut self.buf, i),
        }
        self.close(true);
    }

    /// Writes the `Record Window End` instant and the footer (the tracks were named as they
    /// appeared), and returns the underlying writer and the number of events in the file.
    pub fn finish(self, end_ns: u64, stats: &TraceStats) -> io::Result<W> {
        self.finish_counted(end_ns, stats).map(|(w, _)| w)
    }

    /// [`TraceWriter::finish`], also returning how many events the file holds.
    pub fn finish_counted(mut self, end_ns: u64, stats: &TraceStats) -> io::Result<(W, u64)> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.begin("i");
        self.arg_str("s", "g");
        self.arg_str("name", "Record Window End");
        self.arg_str("pid", "");
        self.arg_str("tid", "");
        self.ts("ts", end_ns);
        self.close(false);
        let mut stats = stats.clone();
        stats.events = self.events;
        let footer = crate::trace_format::footer(&stats, &self.meta.trace_name)?;
        self.buf.extend_from_slice(footer.as_bytes());
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.out.write_at_boundary(&self.buf)?;
        self.buf.clear();
        let events = self.events;
        Ok((self.out.finish()?, events))
    }
}

enum MetaValue {
    Str(String),
    Int(u64),
}

/// The OS name of a thread of this process (`/proc/self/task/TID/comm`), or "" when gone.
/// A Python stack as torch's `Call stack` argument: `file(line): function` for each frame,
/// innermost first, separated by `;` (what TensorBoard's profiler plugin shows per operator).
pub fn call_stack(out: &mut String, stack: &[PyFrame]) {
    use std::fmt::Write as _;
    for (i, f) in stack.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        let _ = write!(out, "{}({}): {}", f.file, f.line, f.function);
    }
}

/// The instance number of a module call's name (`nn.Module: Linear_3` -> 3; 0 if it has none).
fn module_instance(name: &str) -> u64 {
    name.rsplit_once('_')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

fn thread_name(pid: u32, tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}
