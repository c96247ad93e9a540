//! The writer thread's logic, free of FFI: routes decoded events into profiling cycles and
//! streams each cycle to its trace file.
//!
//! Inputs arrive in channel order: batches of CUPTI records (GPU work, API calls), NVTX ranges
//! and step annotations from application threads, and window transitions. Routing:
//! - CPU-side events (API calls, ranges, steps) belong to the cycle whose recorded span holds
//!   their start.
//! - GPU work belongs to the cycle that recorded the call that launched it (its correlation
//!   id), wherever it ran: the GPU may run the last step's work after the step ended, or even
//!   after the next cycle began, and a warm-up step's work after recording began. Work whose call
//!   was made outside recording (warm-up, or after the cycle ended) is not recorded.
//! - GPU work whose call was not recorded (API activity off, or its record not come yet) falls
//!   back to time: the newest cycle that began before it started. If it started after that
//!   cycle's end it is held back until the cycle closes, then routed by its call if that came
//!   meanwhile, else kept only if its correlation id is not newer than the cycle's last recorded
//!   call (correlation ids grow monotonically in a process).
//!
//! A cycle stays open for [`DRAIN`] after its end, then CUPTI is flushed and the file closed.
//! Files are created at the first event, so a process that initialises CUDA but does nothing
//! with it (a torchrun parent asking for the device count) writes no file.

use crate::event::*;
use crate::figures::StepFigures;
use crate::memory::MemoryTimeline;
use crate::trace_writer::{TraceMeta, TraceStats, TraceWriter};
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod cuda_events;
mod forward;
mod links;
use crate::torch_op::TorchOp;
use cuda_events::CudaEvents;
use forward::ForwardThreads;
use links::Links;

/// How long a cycle stays open after its last step ends, for GPU work still in flight.
pub const DRAIN: Duration = Duration::from_millis(300);
/// Bound on remembered calls (which cycle recorded each, if any); past it the older half goes.
const MAX_CALLS: usize = 1 << 20;
/// Bound on allocation call stacks waiting for their memory records; past it they start over.
const MAX_STACKS: usize = 1 << 20;
/// Bound on allocation streams waiting for their memory records; past it the older half (by
/// correlation id) goes. A stream-ordered runtime call and the driver call inside it both
/// send one and only one is matched, so the other waits until it is old enough to go.
const MAX_STREAMS: usize = 1 << 20;
/// The cycle key of a call made outside recording.
const OUTSIDE: u32 = 0;
/// Bound on GPU events held back per cycle: after its end, or waiting for their NVTX link.
const MAX_DEFERRED: usize = if cfg!(test) { 1 << 12 } else { 1 << 18 };
/// Bound on remembered call -> NVTX range links per cycle (one per call made inside a range);
/// past it the older half goes: their GPU work arrived long before. (Smaller in unit tests,
/// which cross it through the whole gzip writer in a debug build.)
/// CUDA events whose latest recording is remembered (in each of two generations).
const MAX_CUDA_EVENTS: usize = 1 << 14;
/// Points where two ops on one stream touch, remembered per cycle (see `OpenCycle::touching`).
const MAX_TOUCHING: usize = 1 << 16;
/// Bytes of GPU events held back per cycle until its ranges are written (see
/// `OpenCycle::held`); past it, events are written as they come.
const MAX_HELD: usize = 4 << 20;
const MAX_LINKS: usize = if cfg!(test) { 1 << 14 } else { 1 << 18 };
/// Bound on NVTX ranges per cycle projected onto the GPU timeline (their names, parents and
/// spans wait for the cycle's end); later ranges stay on the CPU timeline only, said once.
const MAX_PROJECTED: usize = if cfg!(test) { 1 << 12 } else { 1 << 18 };

/// Process-wide loss counters, shared with the callback threads.
#[derive(Debug, Default)]
pub struct Counters {
    pub dropped_channel: AtomicU64,
    pub dropped_cupti: AtomicU64,
    pub dropped_buffers: AtomicU64,
    pub kernels_without_timestamps: AtomicU64,
    pub records: AtomicU64,
    /// Which recorder records PyTorch operators ([`crate::torch_op::OperatorPath`] as u8),
    /// written in each file's `cuprof` header.
    pub operator_path: AtomicU8,
    /// torch.distributed was initialised when the operator recorder last ran (each file's
    /// header has `distributedInfo` then: [`crate::trace_format::Header::distributed`]).
    pub distributed: AtomicBool,
    /// Cycles that recorded something but whose file could not be created or finished.
    pub failed_files: AtomicU64,
}

impl Counters {
    pub fn snapshot(&self) -> TraceStats {
        TraceStats {
            events: 0,
            dropped_channel: self.dropped_channel.load(Relaxed),
            dropped_cupti: self.dropped_cupti.load(Relaxed),
            dropped_buffers: self.dropped_buffers.load(Relaxed),
            kernels_without_timestamps: self.kernels_without_timestamps.load(Relaxed),
            memory_events_dropped: 0,
            complete: Some(true),
        }
    }
}

/// One message on the channel from the traced program to the writer thread.
#[derive(Debug)]
pub enum Input {
    /// Records of one CUPTI buffer, decoded.
    Events(Vec<Event>),
    /// A finished NVTX range (or mark) from an application thread.
    Range(Range),
    /// A recorded step, annotated `ProfilerStep#N` on the thread that marked it.
    Step {
        number: u64,
        pid: u32,
        tid: u32,
        start: u64,
        end: u64,
        /// Its work (`args.work`) and named figures (`args.figures`).
        figures: StepFigures,
    },
    /// Recording of `cycle` begins at `ts` (the first active step starts).
    BeginRecording { ts: u64, cycle: u32 },
    /// Recording of the open cycle ends at `ts` (its last active step ended).
    EndRecording {
        ts: u64,
        /// The correlation id of the call that ended recording (`cudaProfilerStop`), when one
        /// did: GPU work of calls before it belongs to the cycle even when those calls were
        /// not recorded (an API filter) and the work ran after the end.
        last_call: Option<u32>,
    },
    /// The call stack of an allocation call (`--with-stack`), captured unresolved on the
    /// allocating thread and symbolised here, off the program's path; with the PyTorch
    /// operators open on that thread (NVTX observer range names, innermost first) and the
    /// Python stack they were called from.
    AllocationStack {
        correlation: u32,
        /// The native frames, innermost first, symbolised.
        native: Vec<crate::memory::Frame>,
        operators: Vec<Name>,
        python: Option<PyStack>,
    },
    /// The stream handle (`cudaStream_t`/`CUstream`) a stream-ordered allocation call was
    /// given, read at its entry: what the memory snapshot writes as the allocation's stream.
    AllocationStream {
        correlation: u32,
        stream: crate::memory::StreamHandle,
    },
}

/// Where cycle files go: the preload library opens real files, tests use memory.
pub trait Sink {
    /// The trace file of `cycle`.
    fn open(&mut self, cycle: u32) -> io::Result<(Box<dyn Write + Send>, PathBuf)>;
    /// A memory snapshot pickle, named for `unix_time`.
    fn open_snapshot(&mut self, unix_time: u64) -> io::Result<(Box<dyn Write + Send>, PathBuf)>;
}

/// A file the session finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub path: PathBuf,
    pub events: u64,
    pub cycle: u32,
}

/// What the writer thread must do for the session (the session itself never calls CUPTI).
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    None,
    /// Ask CUPTI for the buffers it holds: `forced` (cuptiActivityFlushAll(FORCED)) before a
    /// cycle closes, or the completed ones, periodically, so records reach the crash-safe file.
    FlushCupti {
        forced: bool,
    },
}

type Writer = TraceWriter<Box<dyn Write + Send>>;
/// Where on the GPU a range's work ran: (device, stream) -> (first start, last end).
type Spans = HashMap<(u32, u32), (u64, u64)>;

enum File {
    /// Not created yet: created at the first event.
    Pending,
    Open {
        writer: Box<Writer>,
        path: PathBuf,
    },
    /// Creating or writing failed (reported once); the cycle's events are dropped.
    Failed,
}

struct OpenCycle {
    cycle: u32,
    /// Unique among the session's cycles (never [`OUTSIDE`]): what remembered calls point to.
    key: u32,
    file: File,
    record_from: u64,
    record_to: Option<u64>,
    drain_deadline: Option<Instant>,
    drain_flushed: bool,
    last_ts: u64,
    /// The newest correlation id of an API call recorded in the cycle.
    max_call: u32,
    /// GPU work that started after the cycle's end, decided at close (see module docs).
    deferred: Vec<Event>,
    /// Correlation ids whose flow end (`f`) was written: one arrow per launch.
    flow_ends: HashSet<u32>,
    /// Arrow ends waiting for their other end, by correlation id: launch calls written
    /// (pid, tid, start) and GPU work written (device, stream, start). An arrow is written
    /// whole or not at all: viewers drop a lone end as a broken flow (a driver call not kept,
    /// work whose call another cycle recorded).
    flow_calls: Links<(u32, u32, u64)>,
    flow_work: Links<(u32, u32, u64)>,
    /// The end of the last op seen on each (device, stream).
    stream_ends: HashMap<(u32, u32), u64>,
    /// (device, stream, ns) where one op ended and the next began at that very ns (rare on a
    /// GPU, bounded by [`MAX_TOUCHING`]): a range projected there is not widened past it.
    touching: HashSet<(u32, u32, u64)>,
    /// GPU ops that start where the previous op on their stream ended and are the first of
    /// their NVTX range there, and their flow arrows, formatted but held back
    /// ([`TraceWriter::hold`]) until the cycle's projected ranges are written: the range is
    /// projected from that very ns, and viewers (Perfetto) nest slices that start together in
    /// file order, so the range must come first. At most one op per range and stream (an op
    /// whose range link comes after it is written as it comes); bounded by [`MAX_HELD`] bytes.
    held: Vec<u8>,
    /// Correlation ids of the ops in `held`: their arrows are held with them.
    held_corrs: HashSet<u32>,
    /// CUPTI correlation id -> innermost NVTX range id open when the call was made (bounded by
    /// [`MAX_LINKS`]).
    external: Links,
    /// CUPTI correlation id -> innermost PyTorch operator (its `External id`) open when the
    /// call was made (bounded by [`MAX_LINKS`]).
    op_links: Links,
    /// More ranges than [`MAX_PROJECTED`] came (and that was said).
    too_many_ranges: bool,
    /// NVTX range id -> (name, parent id, a `record_function` label's), for ranges that ended
    /// in this cycle.
    ranges: HashMap<u64, (Name, u64, bool)>,
    /// NVTX range id -> (device, stream) -> first start and last end of its GPU work.
    extents: HashMap<u64, Spans>,
    /// GPU work whose call -> range link had not arrived yet, by correlation id: (device,
    /// stream, start, end). Linked as soon as the link comes; bounded by [`MAX_DEFERRED`] (the
    /// oldest go first: work launched outside any range never gets a link).
    unlinked: HashMap<u32, Vec<(u32, u32, u64, u64)>>,
    /// GPU operations in `unlinked`.
    unlinked_ops: usize,
    /// First start and last end of the cycle's timed kernels, copies and sets.
    gpu_work: Option<(u64, u64)>,
    /// A `ProfilerStep#N` was written: the cycle has steps of its own.
    has_steps: bool,
}

/// How a cycle's file gets created when its first event comes.
struct Opener<'a> {
    sink: &'a mut (dyn Sink + Send),
    meta: &'a TraceMeta,
    gzip_level: u32,
    errors: &'a mut Vec<String>,
    /// Launch-to-GPU flow arrows are written (API calls are recorded).
    flows: bool,
    /// Where CUDA events were recorded, for the syncs that wait on them.
    cuda_events: &'a CudaEvents,
    counters: &'a Counters,
}

impl OpenCycle {
    fn new(cycle: u32, key: u32, ts: u64) -> Self {
        OpenCycle {
            cycle,
            key,
            file: File::Pending,
            record_from: ts,
            record_to: None,
            drain_deadline: None,
            drain_flushed: false,
            last_ts: ts,
            max_call: 0,
            deferred: Vec::new(),
            flow_ends: HashSet::new(),
            flow_calls: Links::new(MAX_LINKS),
            flow_work: Links::new(MAX_LINKS),
            stream_ends: HashMap::new(),
            touching: HashSet::new(),
            held: Vec::new(),
            held_corrs: HashSet::new(),
            external: Links::new(MAX_LINKS),
            op_links: Links::new(MAX_LINKS),
            too_many_ranges: false,
            ranges: HashMap::new(),
            extents: HashMap::new(),
            unlinked: HashMap::new(),
            unlinked_ops: 0,
            gpu_work: None,
            has_steps: false,
        }
    }

    /// The cycle's writer, creating its file on first use.
    fn writer(&mut self, o: &mut Opener) -> Option<&mut Writer> {
        if let File::Pending = self.file {
            self.file = match open_trace(o, self.cycle) {
                Ok((writer, path)) => File::Open {
                    writer: Box::new(writer),
                    path,
                },
                Err(e) => {
                    o.errors.push(format!(
                        "cuprof: cannot write the trace of cycle {}: {e}; this cycle is not traced (make CUPROF_DIR writable or choose another)",
                        self.cycle
                    ));
                    File::Failed
                }
            };
        }
        match &mut self.file {
            File::Open { writer, .. } => Some(writer),
            _ => None,
        }
    }

    fn write_gpu(&mut self, o: &mut Opener, e: &Event) {
        let external = gpu_correlation(e).and_then(|(_, corr)| self.op_links.get(&corr).copied());
        let (corr, device, stream, start, end) = match e {
            Event::Kernel(k) => (k.correlation, k.device, k.stream, k.start, k.end),
            Event::Memcpy(m) => (memcpy_correlation(m), m.device, m.stream, m.start, m.end),
            Event::Memset(m) => (m.correlation, m.device, m.stream, m.start, m.end),
            Event::Sync(s) => {
                let Some(w) = self.writer(o) else { return };
                w.sync(s, o.cuda_events.get(s.context, s.cuda_event));
                self.last_ts = self.last_ts.max(s.end);
                return;
            }
            _ => return,
        };
        // The first op of its NVTX range on this stream, touching the previous op: the range
        // (or one enclosing it) will be projected from its very start, so it is held back until
        // the ranges are written (`held`). Only such ops: what is held is lost if the process
        // is killed before the cycle ends.
        let first_of_range = self.external.get(&corr).is_some_and(|range| {
            !self
                .extents
                .get(range)
                .is_some_and(|spans| spans.contains_key(&(device, stream)))
        });
        let hold = first_of_range
            && start != 0
            && self.stream_ends.get(&(device, stream)) == Some(&start)
            && self.touching.len() < MAX_TOUCHING
            && self.held.len() < MAX_HELD;
        let mut held = std::mem::take(&mut self.held);
        let Some(w) = self.writer(o) else { return };
        let put = |w: &mut Writer| match e {
            Event::Kernel(k) => w.kernel(k, external),
            Event::Memcpy(m) => w.memcpy(m, corr, external),
            Event::Memset(m) => w.memset(m, external),
            _ => {}
        };
        if hold {
            w.hold(&mut held, put);
            self.held_corrs.insert(corr);
        } else {
            put(w);
        }
        self.held = held;
        // One arrow per launch: only a graph launch has several GPU ops with one id, so only
        // those need remembering (bounded memory however long the window).
        let first = !in_graph(e) || self.flow_ends.insert(corr);
        if first && o.flows {
            match self.flow_calls.remove(&corr) {
                Some(call) => self.write_flow(o, corr, call, (device, stream, start)),
                None => self.flow_work.insert(corr, (device, stream, start)),
            }
        }
        self.last_ts = self.last_ts.max(end);
        // CUPTI's zero timestamps (its device buffers overflowed) say nothing about when.
        if start != 0 {
            let previous_end = self.stream_ends.insert((device, stream), end);
            if previous_end == Some(start) && self.touching.len() < MAX_TOUCHING {
                self.touching.insert((device, stream, start));
            }
            self.gpu_work = Some(match self.gpu_work {
                Some((first, last)) => (first.min(start), last.max(end)),
                None => (start, end),
            });
        }
        match self.external.get(&corr) {
            Some(&range) => extend(&mut self.extents, range, device, stream, start, end),
            // Its range link may still come, but only if NVTX ranges are in play at all.
            None if self.nvtx_seen() => self.wait_for_link(corr, (device, stream, start, end)),
            None => {}
        }
    }

    /// A launch call was written: its arrow, if its GPU work was written already.
    fn flow_from_call(&mut self, o: &mut Opener, corr: u32, call: (u32, u32, u64)) {
        match self.flow_work.remove(&corr) {
            Some(work) => self.write_flow(o, corr, call, work),
            None => self.flow_calls.insert(corr, call),
        }
    }

    fn write_flow(
        &mut self,
        o: &mut Opener,
        corr: u32,
        call: (u32, u32, u64),
        work: (u32, u32, u64),
    ) {
        // An arrow to a held op is held with it: written before it, its end would bind to
        // whatever else is open on the stream at that ns.
        let mut held = std::mem::take(&mut self.held);
        let hold = self.held_corrs.contains(&corr);
        if let Some(w) = self.writer(o) {
            let arrow = |w: &mut Writer| {
                w.flow("s", corr, call.0, call.1, call.2);
                w.flow("f", corr, work.0, work.1, work.2);
            };
            if hold {
                w.hold(&mut held, arrow);
            } else {
                arrow(w);
            }
        }
        self.held = held;
    }

    /// Writes the ops (and arrows) held back for the projected ranges, once those are written.
    fn put_held(&mut self) {
        let held = std::mem::take(&mut self.held);
        self.held_corrs = HashSet::new();
        if let File::Open { writer, .. } = &mut self.file {
            writer.put_held(&held);
        }
    }

    /// Holds GPU work until the link of the call that launched it comes.
    fn wait_for_link(&mut self, corr: u32, op: (u32, u32, u64, u64)) {
        if self.unlinked_ops >= MAX_DEFERRED {
            // Keep the newer half: work this old has either been linked or never will be.
            let newest = self.unlinked.keys().copied().fold(corr, u32::max);
            let keep = (MAX_DEFERRED / 2) as u32;
            self.unlinked.retain(|&c, _| newest.wrapping_sub(c) < keep);
            self.unlinked_ops = self.unlinked.values().map(Vec::len).sum();
        }
        self.unlinked.entry(corr).or_default().push(op);
        self.unlinked_ops += 1;
    }

    /// Remembers that call `corr` was made inside NVTX range `range`, and links the GPU work
    /// of that call that came first.
    fn link(&mut self, corr: u32, range: u64) {
        if let Some(ops) = self.unlinked.remove(&corr) {
            self.unlinked_ops -= ops.len();
            for (device, stream, start, end) in ops {
                extend(&mut self.extents, range, device, stream, start, end);
            }
        }
        self.external.insert(corr, range);
    }

    /// Remembers an ended NVTX range for the projection at the cycle's end, within bounds.
    /// A range whose GPU work is projected at the cycle's end: `label`, a `record_function`
    /// label, whose projection carries its `External id` as Kineto's does.
    fn remember_range(
        &mut self,
        id: u64,
        name: Name,
        parent: u64,
        label: bool,
        errors: &mut Vec<String>,
    ) {
        if self.ranges.len() < MAX_PROJECTED {
            self.ranges.insert(id, (name, parent, label));
        } else if !self.too_many_ranges {
            self.too_many_ranges = true;
            errors.push(format!(
                "cuprof: cycle {} has more than {MAX_PROJECTED} NVTX ranges: the later ones are on the CPU timeline but not projected onto the GPU streams (narrow the window)",
                self.cycle
            ));
        }
    }

    fn nvtx_seen(&self) -> bool {
        !self.external.is_empty() || !self.ranges.is_empty()
    }

    /// Writes `gpu_user_annotation`s: each NVTX range spans, on each stream, the GPU work that
    /// calls made inside it (or inside ranges nested in it) launched.
    fn project_ranges(&mut self, o: &mut Opener) {
        // What is still unlinked was launched outside every range.
        self.unlinked = HashMap::new();
        self.unlinked_ops = 0;
        let innermost: Vec<(u64, Spans)> = self
            .extents
            .iter()
            .map(|(id, m)| (*id, m.clone()))
            .collect();
        for (id, spans) in innermost {
            let mut parent = self.ranges.get(&id).map_or(0, |r| r.1);
            // Nesting deeper than this is a cycle in corrupt input, not real NVTX use.
            for _ in 0..256 {
                if parent == 0 {
                    break;
                }
                for ((d, s), (a, b)) in &spans {
                    extend(&mut self.extents, parent, *d, *s, *a, *b);
                }
                parent = self.ranges.get(&parent).map_or(0, |r| r.1);
            }
        }
        let mut out: Vec<Projected> = Vec::new();
        for (id, spans) in &self.extents {
            let Some((name, parent, label)) = self.ranges.get(id) else {
                continue;
            };
            let depth = self.depth(*parent);
            for ((d, s), (a, b)) in spans {
                out.push(Projected {
                    start: *a,
                    end: *b,
                    depth,
                    id: *id,
                    device: *d,
                    stream: *s,
                    name: name.clone(),
                    label: *label,
                });
            }
        }
        // Where ranges start together, the enclosing one first: longer, then outer (a viewer
        // nests slices that tie in the order it reads them).
        out.sort_by_key(|p| (p.start, std::cmp::Reverse(p.end), p.depth, p.id));
        if out.is_empty() {
            return;
        }
        let touching = std::mem::take(&mut self.touching);
        let Some(w) = self.writer(o) else { return };
        for p in out {
            // 1 ns earlier and 1 ns later than its work, as Kineto writes it: it would
            // otherwise tie with its first op, which comes first in the file, and a viewer
            // would nest the range inside that op. Not where another op ends or starts at that
            // very ns: the range would partly overlap it, and Perfetto drops one of the two.
            let key = |t: u64| (p.device, p.stream, t);
            let start = match touching.contains(&key(p.start)) {
                true => p.start,
                false => p.start.saturating_sub(1),
            };
            let end = match touching.contains(&key(p.end)) {
                true => p.end,
                false => p.end.saturating_add(1),
            };
            let external = p.label.then_some(p.id);
            w.gpu_annotation(&p.name, external, p.device, p.stream, start, end);
        }
    }

    /// How many ranges enclose a range whose parent is `parent`.
    fn depth(&self, mut parent: u64) -> u32 {
        let mut depth = 0;
        // Nesting deeper than this is a cycle in corrupt input, not real NVTX use.
        while parent != 0 && depth < 256 {
            depth += 1;
            parent = self.ranges.get(&parent).map_or(0, |r| r.1);
        }
        depth
    }
}

/// One `gpu_user_annotation` to write: a range's span on one stream.
struct Projected {
    start: u64,
    end: u64,
    depth: u32,
    id: u64,
    device: u32,
    stream: u32,
    name: Name,
    /// A `record_function` label's: written with its `External id`.
    label: bool,
}

fn open_trace(o: &mut Opener, cycle: u32) -> io::Result<(Writer, PathBuf)> {
    let (file, path) = o.sink.open(cycle)?;
    let mut meta = o.meta.clone();
    meta.cycle = cycle;
    meta.operators = crate::torch_op::OperatorPath::from_u8(o.counters.operator_path.load(Relaxed))
        .map(crate::torch_op::OperatorPath::name);
    meta.distributed = o.counters.distributed.load(Relaxed);
    meta.trace_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((TraceWriter::new(file, meta, o.gzip_level)?, path))
}

/// The id of the API call recorded for a copy: the runtime call's when there is one (the
/// memcpy record carries the driver call's id first).
fn memcpy_correlation(m: &Memcpy) -> u32 {
    if m.runtime_correlation != 0 {
        m.runtime_correlation
    } else {
        m.correlation
    }
}

/// A GPU op launched as part of a CUDA graph (it shares its launch's correlation id).
fn in_graph(e: &Event) -> bool {
    match e {
        Event::Kernel(k) => k.graph_id != 0,
        Event::Memcpy(m) => m.graph_id != 0,
        Event::Memset(m) => m.graph_id != 0,
        _ => false,
    }
}

fn gpu_correlation(e: &Event) -> Option<(u64, u32)> {
    match e {
        Event::Kernel(k) => Some((k.start, k.correlation)),
        Event::Memcpy(m) => Some((m.start, memcpy_correlation(m))),
        Event::Memset(m) => Some((m.start, m.correlation)),
        Event::Sync(s) => Some((s.start, s.correlation)),
        _ => None,
    }
}

/// Frames of a rendered `std::backtrace::Backtrace`, innermost first (torch's order), without
/// the frames of cuprof itself and of the Rust runtime that captured it.
pub fn frames_of(text: &str) -> Vec<crate::memory::Frame> {
    let mut frames: Vec<crate::memory::Frame> = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(at) = t.strip_prefix("at ") {
            // `at FILE:LINE:COL`
            let mut parts = at.rsplitn(3, ':');
            let (col, line_no, file) = (parts.next(), parts.next(), parts.next());
            if let (Some(_), Some(l), Some(f), Some(last)) = (col, line_no, file, frames.last_mut())
            {
                last.filename = f.to_string();
                last.line = l.parse().unwrap_or(0);
            }
        } else if let Some((n, name)) = t.split_once(": ") {
            if n.chars().all(|c| c.is_ascii_digit()) {
                frames.push(crate::memory::Frame {
                    filename: String::new(),
                    line: 0,
                    name: name.to_string(),
                });
            }
        }
    }
    program_frames(frames)
}

/// The frames of an allocation's native stack (innermost first) that belong to the program:
/// without cuprof's own and the Rust runtime's that captured it, and, when the allocation call
/// itself is among them, without CUPTI's and the driver's frames above it.
pub fn program_frames(mut frames: Vec<crate::memory::Frame>) -> Vec<crate::memory::Frame> {
    let ours = |f: &crate::memory::Frame| {
        let n = f.name.as_str();
        n.starts_with("std::")
            || n.starts_with("core::")
            || n.starts_with("cuprof::")
            || n.starts_with("<")
            || n.starts_with("__rust")
            || n.starts_with("backtrace::")
    };
    let skip = frames.iter().take_while(|f| ours(f)).count();
    frames.drain(..skip);
    if let Some(api) = frames.iter().position(|f| is_allocation_call(&f.name)) {
        frames.drain(..api);
    }
    frames
}

/// The CUDA runtime and driver entry points that allocate or free device memory.
fn is_allocation_call(name: &str) -> bool {
    const PREFIXES: [&str; 4] = ["cudaMalloc", "cudaFree", "cuMemAlloc", "cuMemFree"];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The frames outside the native stack of an allocation: the PyTorch operators it was made in
/// (innermost first, a frame each, named as the operator) and the Python frames that called
/// them, so the memory viewer shows which operator, called from which line, allocated.
pub fn caller_frames<'a>(
    operators: &'a [Name],
    python: Option<&'a [PyFrame]>,
) -> impl Iterator<Item = crate::memory::Frame> + 'a {
    let ops = operators.iter().map(|range| crate::memory::Frame {
        filename: String::new(),
        line: 0,
        name: TorchOp::parse(range)
            .map_or(&**range, |op| op.name)
            .to_string(),
    });
    let py = python
        .unwrap_or_default()
        .iter()
        .map(|f| crate::memory::Frame {
            filename: f.file.to_string(),
            line: f.line as i64,
            name: f.function.to_string(),
        });
    ops.chain(py)
}

fn is_launch(name: &str) -> bool {
    const PREFIXES: [&str; 8] = [
        "cudaLaunch",
        "cudaGraphLaunch",
        "cudaMemcpy",
        "cudaMemset",
        "cuLaunch",
        "cuGraphLaunch",
        "cuMemcpy",
        "cuMemset",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

fn extend(
    extents: &mut HashMap<u64, Spans>,
    range: u64,
    device: u32,
    stream: u32,
    start: u64,
    end: u64,
) {
    if extents.len() >= MAX_PROJECTED && !extents.contains_key(&range) {
        return;
    }
    let e = extents
        .entry(range)
        .or_default()
        .entry((device, stream))
        .or_insert((start, end));
    e.0 = e.0.min(start);
    e.1 = e.1.max(end);
}

/// The cycle an event starting at `start` belongs to: the newest one that began before it.
/// CPU-side events must also start before the cycle ended.
fn cycle_for(cycles: &mut [OpenCycle], start: u64, cpu: bool) -> Option<&mut OpenCycle> {
    let c = cycles.iter_mut().rev().find(|c| c.record_from <= start)?;
    if cpu && c.record_to.is_some_and(|to| start >= to) {
        return None;
    }
    Some(c)
}

pub struct Session {
    meta: TraceMeta,
    gzip_level: u32,
    flush_every: Duration,
    sink: Box<dyn Sink + Send>,
    counters: Arc<Counters>,
    /// Open cycles, oldest first: at most one is recording; the others drain.
    cycles: Vec<OpenCycle>,
    written: Vec<Written>,
    errors: Vec<String>,
    /// Device memory, tracked over the whole run (a snapshot needs every live allocation).
    memory: Option<MemoryTimeline>,
    /// Memory changed since the last snapshot was written.
    memory_dirty: bool,
    /// Correlation id of each recorded API call -> key of the cycle that recorded it, or
    /// [`OUTSIDE`] (bounded by [`MAX_CALLS`]).
    calls: Links<u32>,
    /// The key of the next cycle.
    next_key: u32,
    /// Allocation call stacks by correlation id, waiting for their memory records.
    stacks: HashMap<u32, crate::memory::Frames>,
    /// Stream handles of stream-ordered allocation calls by correlation id, waiting for
    /// their memory records.
    streams: Links<crate::memory::StreamHandle>,
    last_periodic_flush: Instant,
    /// Write `ac2g` flow arrows: off when no API call is recorded (GPU activity only), where
    /// every arrow would have no start.
    flows: bool,
    /// When open files are next sync-flushed: shortly after a periodic CUPTI flush, so the
    /// records it brought reach the disk.
    sync_due: Option<Instant>,
    /// Kineto's `Fwd thread id` of operators with a sequence number.
    forward_threads: ForwardThreads,
    /// Where each CUDA event was last recorded (bounded by [`MAX_CUDA_EVENTS`]).
    cuda_events: CudaEvents,
}

/// Time for a periodic CUPTI flush's records to reach the writer before files are synced.
const SYNC_AFTER_FLUSH: Duration = Duration::from_millis(100);

impl Session {
    pub fn new(
        meta: TraceMeta,
        gzip_level: u32,
        flush_every: Duration,
        sink: Box<dyn Sink + Send>,
        counters: Arc<Counters>,
    ) -> Self {
        Session {
            meta,
            gzip_level,
            flush_every,
            sink,
            counters,
            cycles: Vec::new(),
            written: Vec::new(),
            errors: Vec::new(),
            memory: None,
            memory_dirty: false,
            calls: Links::new(MAX_CALLS),
            next_key: OUTSIDE + 1,
            stacks: HashMap::new(),
            streams: Links::new(MAX_STREAMS),
            last_periodic_flush: Instant::now(),
            flows: true,
            sync_due: None,
            forward_threads: ForwardThreads::default(),
            cuda_events: CudaEvents::new(MAX_CUDA_EVENTS),
        }
    }

    /// Tracks device memory (MEM activity): counters in the trace, snapshots at each cycle's
    /// end and at exit.
    pub fn with_memory(mut self, timeline: MemoryTimeline) -> Self {
        self.memory = Some(timeline);
        self
    }

    /// No flow arrows (the API calls that would start them are not recorded).
    pub fn without_flows(mut self) -> Self {
        self.flows = false;
        self
    }

    /// The devices for `deviceProperties` (read by the writer thread, off CUDA's init path).
    pub fn set_devices(&mut self, devices: Vec<crate::trace_writer::DeviceProps>) {
        self.meta.devices = devices;
    }

    /// Files finished so far.
    pub fn written(&self) -> &[Written] {
        &self.written
    }

    /// Errors met while writing (each one line, for stderr), taken once.
    pub fn take_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.errors)
    }

    /// Cycle `number` is still open (recording, or draining its last records).
    pub fn has_cycle(&self, number: u32) -> bool {
        self.cycles.iter().any(|c| c.cycle == number)
    }

    pub fn is_recording(&self) -> bool {
        self.cycles.last().is_some_and(|c| c.record_to.is_none())
    }

    /// Splits the session into its cycles and what creating a file needs.
    fn parts(&mut self) -> (&mut Vec<OpenCycle>, Opener<'_>, &mut Links<u32>) {
        (
            &mut self.cycles,
            Opener {
                sink: &mut *self.sink,
                meta: &self.meta,
                gzip_level: self.gzip_level,
                errors: &mut self.errors,
                flows: self.flows,
                cuda_events: &self.cuda_events,
                counters: &self.counters,
            },
            &mut self.calls,
        )
    }

    pub fn handle(&mut self, input: Input) {
        match input {
            Input::Events(events) => {
                for e in &events {
                    self.event(e);
                }
            }
            Input::Range(r) => self.range(&r, None),
            Input::Step {
                number,
                pid,
                tid,
                start,
                end,
                figures,
            } => {
                let step = Range {
                    name: Name::from(format!("ProfilerStep#{number}")),
                    domain: None,
                    start,
                    // A step ends where the next begins; written touching, the two overlap once
                    // a reader adds `ts + dur` in floating point (TensorBoard's plugin then drops
                    // the later step from its operator tree). PyTorch's own steps never touch:
                    // end 1 ns early, as the next RecordFunction would start after it.
                    end: end.saturating_sub(1).max(start),
                    pid,
                    tid,
                    id: 0,
                    parent: 0,
                    payload: None,
                    kind: RangeKind::Step,
                    stack: None,
                };
                self.range(&step, Some(&figures));
            }
            Input::BeginRecording { ts, cycle } => {
                // A cycle still recording ends where the new one begins.
                self.end_recording(ts);
                let key = self.next_key;
                self.next_key = self.next_key.checked_add(1).unwrap_or(OUTSIDE + 1);
                self.cycles.push(OpenCycle::new(cycle, key, ts));
                self.memory_levels(ts);
            }
            Input::EndRecording { ts, last_call } => {
                self.end_recording(ts);
                if let (Some(corr), Some(c)) = (last_call, self.cycles.last_mut()) {
                    c.max_call = c.max_call.max(corr);
                }
            }
            Input::AllocationStack {
                correlation,
                native,
                operators,
                python,
            } => {
                if self.stacks.len() >= MAX_STACKS {
                    self.stacks.clear();
                }
                let mut frames = program_frames(native);
                frames.extend(caller_frames(&operators, python.as_deref()));
                self.stacks.insert(correlation, frames.into());
            }
            Input::AllocationStream {
                correlation,
                stream,
            } => self.streams.insert(correlation, stream),
        }
        self.pump();
    }

    fn end_recording(&mut self, ts: u64) {
        if let Some(c) = self.cycles.iter_mut().rev().find(|c| c.record_to.is_none()) {
            c.record_to = Some(ts);
            c.last_ts = c.last_ts.max(ts);
            c.drain_deadline = Some(Instant::now() + DRAIN);
        }
    }

    fn pump(&mut self) {
        let mut failures = Vec::new();
        for c in &mut self.cycles {
            if let File::Open { writer, path } = &mut c.file {
                if let Err(e) = writer.pump() {
                    failures.push(format!(
                        "cuprof: writing {} failed: {e}; tracing of this cycle stopped (free space or choose another CUPROF_DIR)",
                        crate::text::path_line(path)
                    ));
                    c.file = File::Failed;
                }
            }
        }
        self.errors.extend(failures);
    }

    /// An NVTX range or a step annotation (with the figures it reported) on its CPU thread.
    fn range(&mut self, r: &Range, figures: Option<&StepFigures>) {
        match r.kind {
            RangeKind::PushPop => {
                if let Some(op) = TorchOp::parse(&r.name) {
                    return self.torch_op(r, &op);
                }
            }
            RangeKind::NativeOp | RangeKind::NativeLabel => {
                // Made by cuprof's own observer: a record it cannot read is a bug, not input.
                if let Some(op) = TorchOp::parse_made(&r.name) {
                    self.torch_op(r, &op);
                }
                return;
            }
            RangeKind::TorchMemory => return self.torch_memory(r),
            RangeKind::Module => return self.module(r),
            _ => {}
        }
        let (cycles, mut o, _) = self.parts();
        let Some(c) = cycle_for(cycles, r.start, true) else {
            return;
        };
        if let Some(w) = c.writer(&mut o) {
            w.range(r, figures);
        }
        c.has_steps |= r.kind == RangeKind::Step;
        c.last_ts = c.last_ts.max(r.end);
        if r.id != 0 {
            c.remember_range(r.id, r.name.clone(), r.parent, false, o.errors);
        }
    }

    /// A PyTorch operator (an NVTX observer range): Kineto's `cpu_op`, never projected onto the
    /// GPU (the NVTX ranges around it are, through their own correlation stack). Or a
    /// `record_function` label from the native observer, with the same fields: Kineto's
    /// `user_annotation`, projected onto the GPU as the NVTX ranges are.
    fn torch_op(&mut self, r: &Range, op: &TorchOp) {
        let label = r.kind == RangeKind::NativeLabel;
        // The native observer has both from PyTorch; the NVTX observer's names lack them.
        let (seq, fwd_thread) = match op.fwd_thread {
            Some(_) => self.forward_threads.native(op, r.tid),
            None => {
                let seq = self.forward_threads.sequence(op, r.tid);
                (seq, seq.map(|seq| self.forward_threads.of(op, seq, r.tid)))
            }
        };
        let op = &TorchOp { seq, ..*op };
        let (cycles, mut o, _) = self.parts();
        let Some(c) = cycle_for(cycles, r.start, true) else {
            return;
        };
        if let Some(w) = c.writer(&mut o) {
            w.torch_op(r, op, fwd_thread);
        }
        c.last_ts = c.last_ts.max(r.end);
        if label && r.id != 0 {
            c.remember_range(r.id, Name::from(op.name), r.parent, true, o.errors);
        }
    }

    /// A PyTorch allocation or free (`[memory]`); its args were made by the batch, and one
    /// that did not parse (no name) is left out.
    fn torch_memory(&mut self, r: &Range) {
        if r.name.is_empty() {
            return;
        }
        let (cycles, mut o, _) = self.parts();
        let Some(c) = cycle_for(cycles, r.start, true) else {
            return;
        };
        if let Some(w) = c.writer(&mut o) {
            w.torch_memory(r);
        }
        c.last_ts = c.last_ts.max(r.end);
    }

    /// An `nn.Module` forward call (`--with-modules`): torch's `python_function` event, never
    /// projected onto the GPU (its operators carry the correlation).
    fn module(&mut self, r: &Range) {
        let (cycles, mut o, _) = self.parts();
        let Some(c) = cycle_for(cycles, r.start, true) else {
            return;
        };
        if let Some(w) = c.writer(&mut o) {
            w.module(r);
        }
        c.last_ts = c.last_ts.max(r.end);
    }

    /// Starts each device's memory counter track at its level when a cycle begins.
    fn memory_levels(&mut self, ts: u64) {
        let Some(timeline) = self.memory.as_ref() else {
            return;
        };
        let samples: Vec<_> = timeline
            .devices()
            .filter_map(|d| timeline.counter(d))
            .collect();
        if samples.is_empty() {
            return;
        }
        let (cycles, mut o, _) = self.parts();
        let Some(c) = cycles.last_mut() else { return };
        let Some(w) = c.writer(&mut o) else { return };
        for sample in samples {
            let name = format!("GPU {} Memory", sample.device);
            w.counter(&name, sample.device, ts, &sample.values);
        }
    }

    fn memory_event(&mut self, m: &Memory) {
        let Some(timeline) = self.memory.as_mut() else {
            return;
        };
        self.memory_dirty = true;
        let frames = self.stacks.remove(&m.correlation);
        // Only a stream-ordered allocation's call has a stream; a free's entries take the
        // allocation's.
        let stream = match (m.op, m.is_async) {
            (MemoryOp::Alloc, true) => self.streams.remove(&m.correlation).unwrap_or(0),
            _ => 0,
        };
        let Some(sample) = timeline.record_on_stream(m, frames, stream) else {
            return;
        };
        let (cycles, mut o, _) = self.parts();
        if let Some(c) = cycle_for(cycles, sample.timestamp, true) {
            if let Some(w) = c.writer(&mut o) {
                let name = format!("GPU {} Memory", sample.device);
                w.counter(&name, sample.device, sample.timestamp, &sample.values);
            }
        }
    }

    fn event(&mut self, e: &Event) {
        match e {
            Event::Api(a) => self.api(a),
            Event::Range(r) => self.range(r, None),
            Event::Memory(m) => self.memory_event(m),
            Event::ExternalCorrelation(x) => {
                if x.external_kind == crate::EXTERNAL_KIND_CUPROF {
                    for c in &mut self.cycles {
                        c.link(x.correlation, x.external_id);
                    }
                } else if x.external_kind == crate::EXTERNAL_KIND_TORCH_OP {
                    for c in &mut self.cycles {
                        c.op_links.insert(x.correlation, x.external_id);
                    }
                }
            }
            Event::Overhead(_) => {}
            Event::CudaEvent(c) => self.cuda_events.recorded(c),
            Event::Kernel(_) | Event::Memcpy(_) | Event::Memset(_) | Event::Sync(_) => self.gpu(e),
        }
    }

    fn api(&mut self, a: &ApiCall) {
        let (cycles, mut o, calls) = self.parts();
        match cycle_for(cycles, a.start, true) {
            Some(c) => {
                let external = c.op_links.get(&a.correlation).copied();
                if let Some(w) = c.writer(&mut o) {
                    w.api(a, external);
                }
                if o.flows && is_launch(&a.name) {
                    c.flow_from_call(&mut o, a.correlation, (a.pid, a.tid, a.start));
                }
                c.last_ts = c.last_ts.max(a.end);
                c.max_call = c.max_call.max(a.correlation);
                calls.insert(a.correlation, c.key);
            }
            // A call made outside recording: its GPU work is not recorded either, even when it
            // runs while a cycle records.
            None => calls.insert(a.correlation, OUTSIDE),
        }
    }

    fn gpu(&mut self, e: &Event) {
        let Some((start, corr)) = gpu_correlation(e) else {
            return;
        };
        let (cycles, mut o, calls) = self.parts();
        if let Some(&key) = calls.get(&corr) {
            // Its call was seen: the work belongs to that call's cycle, wherever it ran (none
            // for a call made outside recording; gone if that cycle's file is already closed).
            if let Some(c) = cycles.iter_mut().find(|c| c.key == key) {
                c.write_gpu(&mut o, e);
            }
            return;
        }
        let Some(c) = cycle_for(cycles, start, false) else {
            return;
        };
        if c.record_to.is_some_and(|to| start >= to) {
            if c.deferred.len() < MAX_DEFERRED {
                c.deferred.push(e.clone());
            }
            return;
        }
        c.write_gpu(&mut o, e);
    }

    /// Periodic work: CUPTI flushes and sync-flushes of open files, and closing drained cycles.
    pub fn tick(&mut self, now: Instant) -> Action {
        let mut action = Action::None;
        let mut due = Vec::new();
        let mut failures = Vec::new();
        for (i, c) in self.cycles.iter_mut().enumerate() {
            if c.drain_deadline.is_some_and(|d| now >= d) {
                if c.drain_flushed {
                    due.push(i);
                } else {
                    // Ask CUPTI for what it still holds, then give it a moment to arrive.
                    c.drain_flushed = true;
                    c.drain_deadline = Some(now + Duration::from_millis(50));
                    action = Action::FlushCupti { forced: true };
                }
                continue;
            }
        }
        if self.sync_due.is_some_and(|d| now >= d) {
            self.sync_due = None;
            for c in &mut self.cycles {
                if let File::Open { writer, path } = &mut c.file {
                    if let Err(e) = writer.sync_flush() {
                        failures.push(format!(
                            "cuprof: writing {} failed: {e}",
                            crate::text::path_line(path)
                        ));
                        c.file = File::Failed;
                    }
                }
            }
        }
        self.errors.extend(failures);
        for i in due.into_iter().rev() {
            self.close_cycle(i);
        }
        if action == Action::None
            && !self.cycles.is_empty()
            && now.duration_since(self.last_periodic_flush) >= self.flush_every
        {
            self.last_periodic_flush = now;
            self.sync_due = Some(now + SYNC_AFTER_FLUSH);
            action = Action::FlushCupti { forced: false };
        }
        action
    }

    /// Makes everything written so far survive a crash (a fatal signal the program handles).
    pub fn sync_flush(&mut self) {
        for c in &mut self.cycles {
            if let File::Open { writer, .. } = &mut c.file {
                let _ = writer.sync_flush();
            }
        }
    }

    /// The next instant the session must be looked at (a draining cycle, a pending sync).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.cycles
            .iter()
            .filter_map(|c| c.drain_deadline)
            .chain(self.sync_due)
            .min()
    }

    /// Closes now every cycle whose recording has ended, without waiting out [`DRAIN`]: the
    /// caller flushed CUPTI and handed its records in first (a Python `profile()` block that
    /// ends, whose file must be complete when the block returns).
    pub fn close_ended(&mut self) {
        for i in (0..self.cycles.len()).rev() {
            if self.cycles[i].record_to.is_some() {
                self.close_cycle(i);
            }
        }
    }

    fn close_cycle(&mut self, i: usize) {
        let mut c = self.cycles.remove(i);
        let (others, mut o, calls) = self.parts();
        // Work that ran after the end goes where its call was recorded, if that came meanwhile.
        // Otherwise it counts if its id is not newer than the cycle's last recorded call; with
        // no calls recorded (CPU activity off) there is nothing to tell by: keep it.
        for e in std::mem::take(&mut c.deferred) {
            let Some((_, corr)) = gpu_correlation(&e) else {
                continue;
            };
            match calls.get(&corr) {
                Some(&key) if key == c.key => c.write_gpu(&mut o, &e),
                Some(&key) => {
                    if let Some(other) = others.iter_mut().find(|x| x.key == key) {
                        other.write_gpu(&mut o, &e);
                    }
                }
                None if c.max_call == 0 || corr <= c.max_call => c.write_gpu(&mut o, &e),
                None => {}
            }
        }
        c.project_ranges(&mut o);
        c.put_held();
        if let (false, Some((first, last)), File::Open { writer, .. }) =
            (c.has_steps, c.gpu_work, &mut c.file)
        {
            writer.gpu_work_span(first, last);
        }
        let (writer, path) = match std::mem::replace(&mut c.file, File::Failed) {
            File::Open { writer, path } => (writer, path),
            File::Pending => return, // nothing was recorded: no file
            File::Failed => {
                // Something was recorded, and its file failed (said when it did).
                self.counters.failed_files.fetch_add(1, Relaxed);
                return;
            }
        };
        let mut stats = self.counters.snapshot();
        if let Some(m) = self.memory.as_ref() {
            stats.memory_events_dropped = m.devices().map(|d| m.dropped_events(d)).sum();
        }
        let end = c.record_to.unwrap_or(c.last_ts).max(c.last_ts);
        let finished = (*writer)
            .finish_counted(end, &stats)
            .and_then(|(mut out, events)| out.flush().map(|_| events));
        match finished {
            Ok(events) => self.written.push(Written {
                path,
                events,
                cycle: c.cycle,
            }),
            Err(e) => {
                self.counters.failed_files.fetch_add(1, Relaxed);
                self.errors.push(format!(
                    "cuprof: finishing {} failed: {e} (cuprof repair may recover it)",
                    crate::text::path_line(&path)
                ))
            }
        }
        if let Err(e) = self.snapshot() {
            self.errors
                .push(format!("cuprof: writing the memory snapshot failed: {e}"));
        }
    }

    /// Ends every open cycle now (their GPU work must already have been flushed).
    pub fn close(&mut self) {
        while !self.cycles.is_empty() {
            self.close_cycle(0);
        }
    }

    /// Writes a snapshot pickle of device memory as it is now.
    fn snapshot(&mut self) -> io::Result<()> {
        let Some(timeline) = self.memory.as_ref() else {
            return Ok(());
        };
        if !self.memory_dirty {
            return Ok(());
        }
        self.memory_dirty = false;
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let (mut out, path) = self.sink.open_snapshot(unix)?;
        out.write_all(&timeline.snapshot_pickle())?;
        out.flush()?;
        let events = timeline
            .devices()
            .map(|d| timeline.trace(d).len() as u64)
            .sum();
        self.written.push(Written {
            path,
            events,
            cycle: 0,
        });
        Ok(())
    }

    /// Ends the session (program exit): closes the open cycles, a partial one included, and
    /// writes the last memory snapshot.
    pub fn finish(mut self) -> (Vec<Written>, Vec<String>) {
        self.close();
        if let Err(e) = self.snapshot() {
            self.errors
                .push(format!("cuprof: writing the memory snapshot failed: {e}"));
        }
        (self.written, self.errors)
    }
}

#[cfg(test)]
mod tests;
