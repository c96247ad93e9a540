//! The writer thread's logic, free of FFI: routes decoded events into profiling cycles and
//! streams each cycle to its trace file.
//!
//! Inputs arrive in channel order: batches of CUPTI records (GPU work, API calls), NVTX ranges
//! and step annotations from application threads, and window transitions. CPU-side events are
//! kept when they start inside the recorded span; GPU work is kept when it starts at or after the
//! span's beginning, also while the cycle drains after its end (the GPU may still be running
//! what the last step launched; CUPTI kinds are off by then, so nothing new arrives).

use crate::event::*;
use crate::memory::MemoryTimeline;
use crate::trace_writer::{TraceMeta, TraceStats, TraceWriter};
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a cycle stays open after its last step ends, for GPU work still in flight.
pub const DRAIN: Duration = Duration::from_millis(300);

/// Process-wide loss counters, shared with the callback threads.
#[derive(Debug, Default)]
pub struct Counters {
    pub dropped_channel: AtomicU64,
    pub dropped_cupti: AtomicU64,
    pub dropped_buffers: AtomicU64,
    pub kernels_without_timestamps: AtomicU64,
    pub records: AtomicU64,
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
            complete: true,
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
    Step { number: u64, pid: u32, tid: u32, start: u64, end: u64, work: Option<f64> },
    /// Recording of `cycle` begins at `ts` (the first active step starts).
    BeginRecording { ts: u64, cycle: u32 },
    /// Recording of the open cycle ends at `ts` (its last active step ended).
    EndRecording { ts: u64 },
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
    /// Ask CUPTI for every buffer it holds (cuptiActivityFlushAll(FORCED)).
    FlushCupti,
}

struct OpenCycle {
    cycle: u32,
    path: PathBuf,
    writer: TraceWriter<Box<dyn Write + Send>>,
    record_from: u64,
    record_to: Option<u64>,
    drain_deadline: Option<Instant>,
    drain_flushed: bool,
    last_sync_flush: Instant,
    last_ts: u64,
    /// Correlation ids whose flow end (`f`) was written: one arrow per launch.
    flow_ends: HashSet<u32>,
    /// CUPTI correlation id -> innermost NVTX range id open when the call was made.
    external: HashMap<u32, u64>,
    /// NVTX range id -> (name, parent id), for ranges that ended in this cycle.
    ranges: HashMap<u64, (Name, u64)>,
    /// NVTX range id -> (device, stream) -> first start and last end of its GPU work.
    extents: HashMap<u64, HashMap<(u32, u32), (u64, u64)>>,
    /// GPU work whose external correlation had not arrived yet.
    unlinked: Vec<(u32, u32, u32, u64, u64)>,
}

pub struct Session {
    meta: TraceMeta,
    gzip_level: u32,
    flush_every: Duration,
    sink: Box<dyn Sink + Send>,
    counters: Arc<Counters>,
    /// Open cycles, oldest first: at most one is recording; the others drain (their GPU work
    /// may still arrive while the next cycle records).
    cycles: Vec<OpenCycle>,
    written: Vec<Written>,
    errors: Vec<String>,
    /// Device memory, tracked over the whole run (a snapshot needs every live allocation).
    memory: Option<MemoryTimeline>,
    /// Memory changed since the last snapshot was written.
    memory_dirty: bool,
    /// Correlation ids of API calls made outside recording (bounded by [`MAX_OUTSIDE`]).
    outside: HashSet<u32>,
}

/// Bound on remembered outside-recording calls; past it the set starts over.
const MAX_OUTSIDE: usize = 1 << 20;

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
            outside: HashSet::new(),
        }
    }

    /// Tracks device memory (MEM activity): counters in the trace, snapshots at each cycle's
    /// end and at exit.
    pub fn with_memory(mut self, timeline: MemoryTimeline) -> Self {
        self.memory = Some(timeline);
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

    pub fn is_recording(&self) -> bool {
        self.cycles.last().is_some_and(|c| c.record_to.is_none())
    }

    /// The cycle an event starting at `start` belongs to: the newest one that began before it.
    /// CPU-side events must also start before the cycle ended; GPU work may run after it.
    fn cycle_for(&mut self, start: u64, cpu: bool) -> Option<&mut OpenCycle> {
        let c = self.cycles.iter_mut().rev().find(|c| c.record_from <= start)?;
        if cpu && c.record_to.is_some_and(|to| start >= to) {
            return None;
        }
        Some(c)
    }

    pub fn handle(&mut self, input: Input) {
        let result = match input {
            Input::Events(events) => {
                for e in &events {
                    match e {
                        Event::Memory(m) => self.memory_event(m),
                        _ => self.event(e),
                    }
                }
                Ok(())
            }
            Input::Range(r) => {
                self.range(&r);
                Ok(())
            }
            Input::Step { number, pid, tid, start, end, work } => {
                if let Some(c) = self.cycle_for(start, true) {
                    let r = Range {
                        name: Name::from(format!("ProfilerStep#{number}")),
                        domain: None,
                        start,
                        end,
                        pid,
                        tid,
                        id: 0,
                        parent: 0,
                        payload: None,
                        kind: RangeKind::Step,
                    };
                    c.writer.range(&r, work);
                    c.last_ts = c.last_ts.max(end);
                }
                Ok(())
            }
            Input::BeginRecording { ts, cycle } => self.begin(ts, cycle),
            Input::EndRecording { ts } => {
                if let Some(c) = self.cycles.iter_mut().rev().find(|c| c.record_to.is_none()) {
                    c.record_to = Some(ts);
                    c.last_ts = c.last_ts.max(ts);
                    c.drain_deadline = Some(Instant::now() + DRAIN);
                }
                Ok(())
            }
        };
        if let Err(e) = result {
            self.fail(e);
        }
        let mut failed = None;
        for (i, c) in self.cycles.iter_mut().enumerate() {
            if let Err(e) = c.writer.pump() {
                failed = Some((i, e));
            }
        }
        if let Some((i, e)) = failed {
            self.fail_cycle(i, e);
        }
    }

    fn fail(&mut self, e: io::Error) {
        self.errors.push(format!(
            "cuprof: {e}; tracing of this cycle stopped (free space or choose another CUPROF_DIR)"
        ));
    }

    fn fail_cycle(&mut self, i: usize, e: io::Error) {
        let c = self.cycles.remove(i);
        self.errors.push(format!(
            "cuprof: writing {} failed: {e}; tracing of this cycle stopped (free space or choose another CUPROF_DIR)",
            c.path.display()
        ));
    }

    fn begin(&mut self, ts: u64, cycle: u32) -> io::Result<()> {
        // A cycle still recording ends where the new one begins.
        if let Some(c) = self.cycles.iter_mut().rev().find(|c| c.record_to.is_none()) {
            c.record_to = Some(ts);
            c.drain_deadline.get_or_insert(Instant::now() + DRAIN);
        }
        let (file, path) = self.sink.open(cycle)?;
        let mut meta = self.meta.clone();
        meta.cycle = cycle;
        meta.trace_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let writer = TraceWriter::new(file, meta, self.gzip_level)?;
        self.cycles.push(OpenCycle {
            cycle,
            path,
            writer,
            record_from: ts,
            record_to: None,
            drain_deadline: None,
            drain_flushed: false,
            last_sync_flush: Instant::now(),
            last_ts: ts,
            flow_ends: HashSet::new(),
            external: HashMap::new(),
            ranges: HashMap::new(),
            extents: HashMap::new(),
            unlinked: Vec::new(),
        });
        Ok(())
    }

    fn memory_event(&mut self, m: &Memory) {
        let Some(timeline) = self.memory.as_mut() else { return };
        self.memory_dirty = true;
        let Some(sample) = timeline.record(m, None) else { return };
        if let Some(c) = self.cycle_for(sample.timestamp, true) {
            let name = format!("GPU {} Memory", sample.device);
            c.writer.counter(&name, sample.device, sample.timestamp, &sample.values);
        }
    }

    /// Writes a snapshot pickle of device memory as it is now.
    fn snapshot(&mut self) -> io::Result<()> {
        let Some(timeline) = self.memory.as_ref() else { return Ok(()) };
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
        let events = timeline.devices().map(|d| timeline.trace(d).len() as u64).sum();
        self.written.push(Written { path, events, cycle: 0 });
        Ok(())
    }

    fn range(&mut self, r: &Range) {
        let Some(c) = self.cycle_for(r.start, true) else { return };
        c.writer.range(r, None);
        c.last_ts = c.last_ts.max(r.end);
        if r.id != 0 {
            c.ranges.insert(r.id, (r.name.clone(), r.parent));
        }
    }

    fn event(&mut self, e: &Event) {
        match e {
            Event::Api(a) => {
                let launch = is_launch(&a.name);
                match self.cycle_for(a.start, true) {
                    Some(c) => {
                        c.writer.api(a, launch);
                        c.last_ts = c.last_ts.max(a.end);
                    }
                    None => {
                        // A call made outside recording (warm-up, or after its cycle ended):
                        // its GPU work is not recorded either, even when it runs later.
                        if self.outside.len() >= MAX_OUTSIDE {
                            self.outside.clear();
                        }
                        self.outside.insert(a.correlation);
                    }
                }
            }
            Event::Range(r) => self.range(r),
            Event::ExternalCorrelation(x) => {
                if x.external_kind == crate::EXTERNAL_KIND_CUPROF {
                    for c in &mut self.cycles {
                        c.external.insert(x.correlation, x.external_id);
                    }
                }
            }
            Event::Kernel(k) => {
                if let Some(c) = self.gpu_cycle(k.start, k.correlation) {
                    c.writer.kernel(k);
                    c.gpu(k.correlation, k.device, k.stream, k.start, k.end);
                }
            }
            Event::Memcpy(m) => {
                let corr = if m.runtime_correlation != 0 {
                    m.runtime_correlation
                } else {
                    m.correlation
                };
                if let Some(c) = self.gpu_cycle(m.start, corr) {
                    c.writer.memcpy(m, corr);
                    c.gpu(corr, m.device, m.stream, m.start, m.end);
                }
            }
            Event::Memset(m) => {
                if let Some(c) = self.gpu_cycle(m.start, m.correlation) {
                    c.writer.memset(m);
                    c.gpu(m.correlation, m.device, m.stream, m.start, m.end);
                }
            }
            Event::Sync(s) => {
                if let Some(c) = self.gpu_cycle(s.start, s.correlation) {
                    c.writer.sync(s);
                    c.last_ts = c.last_ts.max(s.end);
                }
            }
            Event::Memory(_) | Event::Overhead(_) => {}
        }
    }

    /// The cycle of GPU work starting at `start`, unless the call that launched it came after
    /// that cycle ended.
    fn gpu_cycle(&mut self, start: u64, correlation: u32) -> Option<&mut OpenCycle> {
        if self.outside.contains(&correlation) {
            return None;
        }
        self.cycle_for(start, false)
    }

    /// Periodic work: sync-flush the open file, and finish a drained cycle.
    pub fn tick(&mut self, now: Instant) -> Action {
        let mut action = Action::None;
        let mut due = Vec::new();
        let mut failed = None;
        for (i, c) in self.cycles.iter_mut().enumerate() {
            if c.drain_deadline.is_some_and(|d| now >= d) {
                if c.drain_flushed {
                    due.push(i);
                } else {
                    // Ask CUPTI for what it still holds, then give it a moment to arrive.
                    c.drain_flushed = true;
                    c.drain_deadline = Some(now + Duration::from_millis(50));
                    action = Action::FlushCupti;
                }
                continue;
            }
            if now.duration_since(c.last_sync_flush) >= self.flush_every {
                c.last_sync_flush = now;
                if let Err(e) = c.writer.sync_flush() {
                    failed = Some((i, e));
                }
            }
        }
        if let Some((i, e)) = failed {
            self.fail_cycle(i, e);
            return action;
        }
        for i in due.into_iter().rev() {
            if let Err(e) = self.close_cycle(i) {
                self.fail(e);
            }
        }
        action
    }

    /// The next instant a draining cycle must be looked at.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.cycles.iter().filter_map(|c| c.drain_deadline).min()
    }

    /// Ends every open cycle now (their GPU work must already have been flushed).
    pub fn close(&mut self) -> io::Result<()> {
        let mut result = Ok(());
        while !self.cycles.is_empty() {
            if let Err(e) = self.close_cycle(0) {
                result = Err(e);
            }
        }
        result
    }

    fn close_cycle(&mut self, i: usize) -> io::Result<()> {
        let mut c = self.cycles.remove(i);
        c.project_ranges();
        let mut stats = self.counters.snapshot();
        stats.complete = true;
        let end = c.record_to.unwrap_or(c.last_ts).max(c.last_ts);
        if let Some(m) = self.memory.as_ref() {
            stats.memory_events_dropped = m.devices().map(|d| m.dropped_events(d)).sum();
        }
        let (mut out, events) = c.writer.finish_counted(end, &stats)?;
        out.flush()?;
        self.written.push(Written {
            path: c.path,
            events,
            cycle: c.cycle,
        });
        self.snapshot()
    }

    /// Ends the session (program exit): closes the open cycle, a partial one included.
    pub fn finish(mut self) -> (Vec<Written>, Vec<String>) {
        if let Err(e) = self.close() {
            self.fail(e);
        }
        if let Err(e) = self.snapshot() {
            self.errors.push(format!("cuprof: writing the memory snapshot failed: {e}"));
        }
        (self.written, self.errors)
    }
}

impl OpenCycle {
    fn gpu(&mut self, corr: u32, device: u32, stream: u32, start: u64, end: u64) {
        if self.flow_ends.insert(corr) {
            self.writer.flow("f", corr, device, stream, start);
        }
        self.last_ts = self.last_ts.max(end);
        match self.external.get(&corr) {
            Some(&range) => extend(&mut self.extents, range, device, stream, start, end),
            None => self.unlinked.push((corr, device, stream, start, end)),
        }
    }

    /// Writes `gpu_user_annotation`s: each NVTX range spans, on each stream, the GPU work that
    /// calls made inside it (or inside ranges nested in it) launched.
    fn project_ranges(&mut self) {
        for (corr, device, stream, start, end) in std::mem::take(&mut self.unlinked) {
            if let Some(&range) = self.external.get(&corr) {
                extend(&mut self.extents, range, device, stream, start, end);
            }
        }
        // Propagate each innermost range's extents to its ancestors.
        let innermost: Vec<(u64, Vec<((u32, u32), (u64, u64))>)> = self
            .extents
            .iter()
            .map(|(id, m)| (*id, m.iter().map(|(k, v)| (*k, *v)).collect()))
            .collect();
        for (id, spans) in innermost {
            let mut parent = self.ranges.get(&id).map(|r| r.1).unwrap_or(0);
            let mut guard = 0;
            while parent != 0 && guard < 256 {
                for ((d, s), (a, b)) in &spans {
                    extend(&mut self.extents, parent, *d, *s, *a, *b);
                }
                parent = self.ranges.get(&parent).map(|r| r.1).unwrap_or(0);
                guard += 1;
            }
        }
        let mut out: Vec<(u64, u32, u32, u64, u64, Name)> = Vec::new();
        for (id, spans) in &self.extents {
            let Some((name, _)) = self.ranges.get(id) else { continue };
            for ((d, s), (a, b)) in spans {
                out.push((*a, *d, *s, *b, *id, name.clone()));
            }
        }
        out.sort_by_key(|o| (o.0, o.4));
        for (start, device, stream, end, _, name) in out {
            self.writer.gpu_annotation(&name, device, stream, start, end);
        }
    }
}

fn extend(
    extents: &mut HashMap<u64, HashMap<(u32, u32), (u64, u64)>>,
    range: u64,
    device: u32,
    stream: u32,
    start: u64,
    end: u64,
) {
    let e = extents
        .entry(range)
        .or_default()
        .entry((device, stream))
        .or_insert((start, end));
    e.0 = e.0.min(start);
    e.1 = e.1.max(end);
}
