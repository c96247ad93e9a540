//! Streaming reader of cuprof / Kineto Chrome traces (`*.trace.json[.gz]`).
//!
//! The file is never held whole, nor turned into a DOM: the decompressed bytes flow through a
//! buffer of a few MiB; a byte scanner finds where each element of `traceEvents` ends, and that
//! slice alone is parsed by serde_json into an [`Event`] whose strings borrow from the buffer.
//! In [`Detail::Lean`] mode a plain event (ASCII, no escapes, no exponents) is decoded by a
//! hand-written pass instead (`lean_fast`), which hands every other event to serde_json.
//! The other top-level members (the header before `traceEvents`, `cuprofStats` and `traceName`
//! after it) are small: they are kept as raw JSON in [`TraceMeta`] and the known ones decoded.
//!
//! A file cut short (a gzip stream that ends at a sync-flush point, or plain JSON that stops in
//! the middle of the array) is not an error: every complete event before the cut is delivered
//! and [`ReadSummary::truncated`] says where the data stopped.
//!
//! ```no_run
//! use std::ops::ControlFlow;
//! let mut r = cuprof_core::reader::TraceReader::open("run-rank0.trace.json.gz".as_ref())?;
//! let mut kernels = 0;
//! let summary = r.read_events(|e| {
//!     if e.cat == "kernel" {
//!         kernels += 1;
//!     }
//!     ControlFlow::Continue(())
//! })?;
//! println!("{kernels} kernels, rank {:?}, truncated: {:?}", r.meta().rank, summary.truncated);
//! # Ok::<(), cuprof_core::reader::ReadError>(())
//! ```

pub mod chunks;
mod event;
mod input;
mod lean_fast;
mod scan;

pub use event::{event_members, Args, Event, Id, MemberSpans, RawMembers};
pub use input::{file_kind, open_regular, InputError};
pub use scan::{for_each_member, micros_to_ns};

use std::io::{self, BufRead, BufReader, Read};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::value::RawValue;

use scan::{skip_ws, string_end, value_end, Scan};

use crate::text::{path_line, printable_line};
use crate::trace_format::{member, CuprofMember, DistributedInfo};
pub use crate::trace_format::{ClockAnchor, DeviceProperties, TraceStats};

/// Bytes asked of the decompressor at a time.
const CHUNK: usize = 1 << 20;
/// Compressed bytes read from the file at a time.
const FILE_BUF: usize = 256 << 10;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{}: cannot read the trace: {source}; check the path and its permissions", path_line(.path))]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: {kind}, not a regular file; pass the trace file itself", path_line(.path))]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(
        "{}: not a Chrome trace: {what} at uncompressed byte {offset}; pass a cuprof \
         `*.trace.json.gz` or another Kineto/Chrome JSON trace (gzip or plain)",
        path_line(.path)
    )]
    Format {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error(
        "{}: the event at uncompressed byte {offset} is not valid JSON ({source}); the file \
         is corrupt: regenerate it, or if it was cut short check that it ends at a flush point",
        path_line(.path)
    )]
    Event {
        path: PathBuf,
        offset: u64,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{}: top-level member `{}` at uncompressed byte {offset} is not valid JSON \
         ({source}); the file is corrupt: regenerate it",
        path_line(.path),
        printable_line(.key)
    )]
    Header {
        path: PathBuf,
        key: String,
        offset: u64,
        #[source]
        source: serde_json::Error,
    },
}

/// The top-level members other than `traceEvents`, as far as they have been read.
#[derive(Debug, Clone, Default)]
pub struct TraceMeta {
    pub schema_version: Option<i64>,
    pub base_time_ns: Option<i64>,
    pub display_time_unit: Option<String>,
    pub devices: Vec<DeviceProperties>,
    /// `distributedInfo.rank` / `world_size`.
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
    /// `cuprof.*`: absent in traces other tools wrote.
    pub hostname: Option<String>,
    pub pid: Option<i64>,
    pub cuprof_version: Option<String>,
    /// `cuprof.name` and `cuprof.run_id`: the run the file belongs to.
    pub run_name: Option<String>,
    pub run_id: Option<String>,
    pub cycle: Option<i64>,
    pub window: Option<String>,
    pub clock: Option<ClockAnchor>,
    pub stats: Option<TraceStats>,
    pub trace_name: Option<String>,
    /// Every top-level member except `traceEvents`, in file order, as written.
    pub members: Vec<(String, Box<RawValue>)>,
}

impl TraceMeta {
    /// Adds the members a later part of the same file read (the footer's, after the events):
    /// the result is what one read of the whole file finds.
    pub fn extend(&mut self, later: TraceMeta) {
        for (key, raw) in later.members {
            self.absorb(&key, raw);
        }
    }

    fn absorb(&mut self, key: &str, raw: Box<RawValue>) {
        let text = raw.get();
        // Known members of an unexpected shape are kept raw but not decoded: a foreign trace
        // is still readable.
        match key {
            member::SCHEMA_VERSION => self.schema_version = serde_json::from_str(text).ok(),
            member::BASE_TIME_NS => {
                self.base_time_ns = serde_json::from_str::<i64>(text)
                    .ok()
                    .or_else(|| serde_json::from_str::<f64>(text).ok().map(|f| f as i64))
            }
            member::DISPLAY_TIME_UNIT => self.display_time_unit = serde_json::from_str(text).ok(),
            member::DEVICE_PROPERTIES => {
                self.devices = serde_json::from_str(text).unwrap_or_default();
            }
            member::DISTRIBUTED_INFO => {
                if let Ok(d) = serde_json::from_str::<DistributedInfo>(text) {
                    self.rank = d.rank;
                    self.world_size = d.world_size;
                }
            }
            member::CUPROF => {
                if let Ok(c) = serde_json::from_str::<CuprofMember>(text) {
                    self.cuprof_version = c.version;
                    self.run_name = c.name;
                    self.run_id = c.run_id;
                    self.pid = c.pid;
                    self.hostname = c.hostname;
                    self.cycle = c.cycle;
                    self.clock = c.clock;
                    self.window = c.window;
                }
            }
            member::STATS => self.stats = serde_json::from_str(text).ok(),
            member::TRACE_NAME => self.trace_name = serde_json::from_str(text).ok(),
            _ => {}
        }
        self.members.push((key.to_owned(), raw));
    }
}

/// Where and why the data stopped before the trace's closing brace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// Uncompressed bytes read (everything after is missing).
    pub offset: u64,
    /// Complete events delivered before the cut.
    pub events: u64,
    /// `"traceEvents"` when the cut is inside the event array, else `"header"` or `"footer"`.
    pub inside: &'static str,
    /// The decompressor's complaint, if it had one (a gzip stream without its trailer).
    pub stream_error: Option<String>,
    /// Bytes of the unfinished value the data stops in (part of an event or member); 0 when
    /// it stops between values.
    pub partial: u64,
}

impl std::fmt::Display for Truncation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the file ends at uncompressed byte {} inside the {}, after {} complete events",
            self.offset, self.inside, self.events
        )?;
        if let Some(e) = &self.stream_error {
            write!(f, " ({e})")?;
        }
        Ok(())
    }
}

/// What a full read found.
#[derive(Debug, Clone, Default)]
pub struct ReadSummary {
    /// Events delivered to the callback.
    pub events: u64,
    pub uncompressed_bytes: u64,
    pub compressed_bytes: u64,
    pub gzip: bool,
    /// `Some` when the file stops before the trace's closing brace (a cut-short file).
    pub truncated: Option<Truncation>,
    /// The callback asked to stop early.
    pub stopped: bool,
}

/// What follows the trace's closing bracket (see [`TraceReader::read_rest`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rest {
    /// Bytes other than JSON whitespace after the end of the trace (NUL padding, a second
    /// document, garbage).
    pub bytes: u64,
    /// The decompressor's complaint, if it had one (a gzip stream cut before its trailer, a
    /// bad checksum, padding that is not another gzip member).
    pub stream_error: Option<String>,
}

impl Rest {
    /// Nothing but whitespace after the trace, and a clean end of the compressed stream.
    pub fn is_clean(&self) -> bool {
        self.bytes == 0 && self.stream_error.is_none()
    }
}

/// Progress of a read: compressed bytes taken from the source and uncompressed bytes produced.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub compressed: u64,
    pub uncompressed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing read yet.
    Start,
    /// Inside the top-level object, expecting a member or `}`.
    Member,
    /// After a top-level member's value: `,` or `}`.
    AfterMember,
    /// Inside `traceEvents`: an event or `]`.
    Event,
    /// After an event: `,` or `]`.
    AfterEvent,
    /// `traceEvents` closed in a bare-array file.
    Done,
}

/// The file's bytes, counted as they are read.
type Input<'a> = BufReader<Counting<Box<dyn Read + 'a>>>;

enum Source<'a> {
    Plain(Input<'a>),
    Gzip(Box<flate2::bufread::MultiGzDecoder<Input<'a>>>),
}

struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// `source` counted and buffered.
fn counted<'a>(source: impl Read + 'a) -> (Input<'a>, Arc<AtomicU64>) {
    let compressed = Arc::new(AtomicU64::new(0));
    let counting = Counting {
        inner: Box::new(source) as Box<dyn Read + 'a>,
        count: compressed.clone(),
    };
    (BufReader::with_capacity(FILE_BUF, counting), compressed)
}

/// A trace being read, front to back, once.
pub struct TraceReader<'a> {
    path: PathBuf,
    src: Source<'a>,
    buf: Vec<u8>,
    /// Unconsumed data is `buf[pos..end]`.
    pos: usize,
    end: usize,
    /// Uncompressed bytes dropped from the front of `buf` so far.
    discarded: u64,
    eof: bool,
    stream_error: Option<String>,
    compressed: Arc<AtomicU64>,
    state: State,
    meta: TraceMeta,
    events: u64,
    truncated: Option<Truncation>,
    /// Set once the top-level value is fully read (or found truncated).
    finished: bool,
    stopped: bool,
    /// The file is a bare array of events (no top-level object).
    bare: bool,
    /// `traceEvents` has been entered.
    seen_events: bool,
    progress: Option<Box<dyn FnMut(Progress) + 'a>>,
    detail: Detail,
    /// A chunk's reader ([`TraceReader::chunk`]): the boundary it starts at.
    chunk_start: Option<Boundary>,
}

/// Where a chunk starts or ends inside `traceEvents`: right after an event (before its `,`),
/// or right before one (after `[` or a `,`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    AfterEvent,
    BeforeEvent,
}

/// How much of each event the reader decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    /// Every member [`Event`] has.
    #[default]
    Full,
    /// Only `ph`, `name`, `pid`, `ts`, `id` and a metadata event's `args.name` /
    /// `args.sort_index`: the rest of the event is validated, left at its default in
    /// [`Event`] and still in [`Event::raw`]. For a tool that places events and copies them
    /// (`cuprof merge`). A member either decode reads refuses to appear twice in both.
    Lean,
}

impl<'a> TraceReader<'a> {
    /// Opens a trace file, gzip or plain JSON (told apart by the gzip magic bytes). Anything
    /// but a regular file (a FIFO, a device, a directory) is refused without blocking.
    pub fn open(path: &Path) -> Result<TraceReader<'static>, ReadError> {
        let (f, _) = open_regular(path).map_err(|e| match e {
            InputError::Open { source, .. } => ReadError::Io {
                path: path.to_owned(),
                source,
            },
            InputError::NotRegular { kind, .. } => ReadError::NotRegular {
                path: path.to_owned(),
                kind,
            },
        })?;
        TraceReader::new(f, path)
    }

    /// Reads a trace from any byte source; `path` only names it in messages.
    pub fn new(source: impl Read + 'a, path: &Path) -> Result<Self, ReadError> {
        let (mut br, compressed) = counted(source);
        let head = loop {
            match br.fill_buf() {
                Ok(b) => break b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(ReadError::Io {
                        path: path.to_owned(),
                        source,
                    })
                }
            }
        };
        let src = if head.starts_with(&[0x1f, 0x8b]) {
            Source::Gzip(Box::new(flate2::bufread::MultiGzDecoder::new(br)))
        } else {
            Source::Plain(br)
        };
        let mut r = TraceReader::from_source(src, path);
        r.compressed = compressed;
        Ok(r)
    }

    fn from_source(src: Source<'a>, path: &Path) -> Self {
        TraceReader {
            path: path.to_owned(),
            src,
            buf: vec![0; CHUNK * 2],
            pos: 0,
            end: 0,
            discarded: 0,
            eof: false,
            stream_error: None,
            compressed: Arc::new(AtomicU64::new(0)),
            state: State::Start,
            meta: TraceMeta::default(),
            events: 0,
            truncated: None,
            finished: false,
            stopped: false,
            bare: false,
            seen_events: false,
            progress: None,
            detail: Detail::Full,
            chunk_start: None,
        }
    }

    /// Called after every chunk read (about every MiB of uncompressed JSON).
    /// Decodes only what `detail` says from here on.
    pub fn set_detail(&mut self, detail: Detail) {
        self.detail = detail;
    }

    pub fn on_progress(&mut self, f: impl FnMut(Progress) + 'a) {
        self.progress = Some(Box::new(f));
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_gzip(&self) -> bool {
        matches!(self.src, Source::Gzip(_))
    }

    /// The top-level members read so far: all of the header once [`Self::read_header`] returned,
    /// and also `cuprofStats` / `traceName` once [`Self::read_events`] returned.
    pub fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    /// The file is a bare JSON array of events (no top-level object).
    pub fn is_bare_array(&self) -> bool {
        self.bare
    }

    /// `traceEvents` (or the bare array) has been entered.
    pub fn has_events_array(&self) -> bool {
        self.seen_events
    }

    /// After a read that found the whole trace ([`ReadSummary::truncated`] is `None`), reads the
    /// rest of the file a chunk at a time, keeping none of it, and says what was there.
    pub fn read_rest(&mut self) -> Result<Rest, ReadError> {
        let mut bytes = 0u64;
        loop {
            let tail = &self.buf[self.pos..self.end];
            bytes += tail
                .iter()
                .filter(|c| !matches!(c, b' ' | b'\n' | b'\r' | b'\t'))
                .count() as u64;
            self.pos = self.end;
            if !self.fill()? {
                break;
            }
        }
        Ok(Rest {
            bytes,
            stream_error: self.stream_error.clone(),
        })
    }

    /// Reads the members before `traceEvents` (the whole file if it has none).
    pub fn read_header(&mut self) -> Result<&TraceMeta, ReadError> {
        self.run(None::<fn(&Event<'_>) -> ControlFlow<()>>)?;
        Ok(&self.meta)
    }

    /// Hands every event to `f`, in file order, then reads the members after `traceEvents`.
    /// `f` returning `Break` stops the read there.
    pub fn read_events<F>(&mut self, f: F) -> Result<ReadSummary, ReadError>
    where
        F: FnMut(&Event<'_>) -> ControlFlow<()>,
    {
        self.run(Some(f))?;
        Ok(self.summary())
    }

    pub fn summary(&self) -> ReadSummary {
        ReadSummary {
            events: self.events,
            uncompressed_bytes: self.discarded + self.end as u64,
            compressed_bytes: self.compressed.load(Ordering::Relaxed),
            gzip: self.is_gzip(),
            truncated: self.truncated.clone(),
            stopped: self.stopped,
        }
    }

    fn offset(&self) -> u64 {
        self.discarded + self.pos as u64
    }

    fn format_err(&self, what: impl Into<String>) -> ReadError {
        ReadError::Format {
            path: self.path.clone(),
            offset: self.offset(),
            what: what.into(),
        }
    }

    /// Reads more decompressed bytes into the buffer; `false` at the end of the data.
    ///
    /// It reads at least as many bytes as are already pending: a value that does not fit
    /// (a 100 MB event) is scanned again after each fill, so the pending data must double
    /// each time for the scans to add up to linear time, not quadratic.
    fn fill(&mut self) -> Result<bool, ReadError> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.discarded += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        let target = self.end + CHUNK.max(self.end);
        if self.buf.len() < target {
            self.buf.resize(target.max(self.buf.len() * 2), 0);
        }
        let start = self.end;
        while self.end < target {
            let dst = &mut self.buf[self.end..target];
            let r = match &mut self.src {
                Source::Plain(r) => r.read(dst),
                Source::Gzip(r) => r.read(dst),
            };
            match r {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A gzip stream cut short: what came before the cut has been delivered.
                Err(e) if self.is_gzip() && e.kind() != io::ErrorKind::PermissionDenied => {
                    self.eof = true;
                    self.stream_error = Some(e.to_string());
                    break;
                }
                Err(source) => {
                    return Err(ReadError::Io {
                        path: self.path.clone(),
                        source,
                    })
                }
            }
        }
        if self.end == start {
            return Ok(false);
        }
        if let Some(p) = self.progress.as_mut() {
            p(Progress {
                compressed: self.compressed.load(Ordering::Relaxed),
                uncompressed: self.discarded + self.end as u64,
            });
        }
        Ok(true)
    }

    /// The next non-whitespace byte (not consumed), or `None` at the end of the data.
    fn peek(&mut self) -> Result<Option<u8>, ReadError> {
        loop {
            if let Some(k) = skip_ws(&self.buf[self.pos..self.end]) {
                self.pos += k;
                return Ok(Some(self.buf[self.pos]));
            }
            self.pos = self.end;
            if !self.fill()? {
                return Ok(None);
            }
        }
    }

    /// Length of the value at `pos` as found by `scan`, reading more as needed; `None` when the
    /// data ends first.
    fn extent(&mut self, scan: fn(&[u8], bool) -> Scan) -> Result<Option<usize>, ReadError> {
        loop {
            match scan(&self.buf[self.pos..self.end], self.eof) {
                Scan::Complete(n) if n > 0 => return Ok(Some(n)),
                Scan::Complete(_) => return Err(self.format_err("a value is missing")),
                Scan::NeedMore => {
                    if !self.fill()? {
                        // A scalar may end exactly at the end of the data.
                        if let Scan::Complete(n) = scan(&self.buf[self.pos..self.end], true) {
                            if n > 0 {
                                return Ok(Some(n));
                            }
                        }
                        return Ok(None);
                    }
                }
            }
        }
    }

    fn cut(&mut self, inside: &'static str) {
        let partial = (self.end - self.pos) as u64;
        self.pos = self.end;
        self.truncated = Some(Truncation {
            offset: self.discarded + self.end as u64,
            events: self.events,
            inside,
            stream_error: self.stream_error.clone(),
            partial,
        });
        self.finished = true;
    }

    fn inside(&self) -> &'static str {
        if matches!(self.state, State::Event | State::AfterEvent) {
            member::TRACE_EVENTS
        } else if self.seen_events {
            "footer"
        } else {
            "header"
        }
    }

    /// The state machine over the top-level value. With `on_event` `None` it stops at the first
    /// event; otherwise it runs to the end.
    fn run<F>(&mut self, mut on_event: Option<F>) -> Result<(), ReadError>
    where
        F: FnMut(&Event<'_>) -> ControlFlow<()>,
    {
        while !self.finished {
            let Some(c) = self.peek()? else {
                if self.state == State::Start {
                    return Err(self.format_err("the file is empty"));
                }
                let inside = self.inside();
                self.cut(inside);
                break;
            };
            match self.state {
                State::Start => match c {
                    b'{' => {
                        self.pos += 1;
                        self.state = State::Member;
                    }
                    // The JSON Array Format: a bare list of events.
                    b'[' => {
                        self.pos += 1;
                        self.bare = true;
                        self.seen_events = true;
                        self.state = State::Event;
                    }
                    _ => return Err(self.format_err("expected `{` or `[` first")),
                },
                State::Member => match c {
                    b'}' => {
                        self.pos += 1;
                        self.finished = true;
                    }
                    b'"' => {
                        if !self.member()? {
                            let inside = self.inside();
                            self.cut(inside);
                        }
                    }
                    _ => return Err(self.format_err("expected a member name")),
                },
                State::AfterMember => match c {
                    b',' => {
                        self.pos += 1;
                        self.state = State::Member;
                    }
                    b'}' => {
                        self.pos += 1;
                        self.finished = true;
                    }
                    _ => return Err(self.format_err("expected `,` or `}` after a member")),
                },
                State::Event => {
                    let Some(f) = on_event.as_mut() else {
                        return Ok(());
                    };
                    match c {
                        b']' => self.end_events(),
                        b'{' => {
                            // serde_json parses the event straight from the buffer; an event
                            // that runs past the buffered bytes is parsed again after a refill.
                            let offset = self.offset();
                            let bytes = &self.buf[self.pos..self.end];
                            let outcome = match parse_event(self.detail, bytes, offset) {
                                Ok(Some((ev, n))) => Some((n, f(&ev))),
                                Ok(None) => None,
                                Err(source) => {
                                    // torch.profiler writes some strings unescaped (a keyword
                                    // input holding a tab): such an event is read as its
                                    // program meant it, its control characters escaped.
                                    let fixed = match scan::container_end(bytes) {
                                        Scan::Complete(n) => scan::escape_raw_controls(&bytes[..n])
                                            .map(|fixed| (n, fixed)),
                                        Scan::NeedMore => None,
                                    };
                                    let read = fixed.and_then(|(n, fixed)| {
                                        match parse_event(self.detail, &fixed, offset) {
                                            Ok(Some((ev, _))) => Some((n, f(&ev))),
                                            _ => None,
                                        }
                                    });
                                    if read.is_none() {
                                        return Err(ReadError::Event {
                                            path: self.path.clone(),
                                            offset,
                                            source,
                                        });
                                    }
                                    read
                                }
                            };
                            let Some((n, flow)) = outcome else {
                                if !self.fill()? {
                                    self.cut(member::TRACE_EVENTS);
                                    break;
                                }
                                continue;
                            };
                            self.events += 1;
                            self.pos += n;
                            self.state = State::AfterEvent;
                            if flow.is_break() {
                                self.stopped = true;
                                return Ok(());
                            }
                        }
                        _ => return Err(self.format_err("expected an event object")),
                    }
                }
                State::AfterEvent => match c {
                    b',' => {
                        self.pos += 1;
                        self.state = State::Event;
                    }
                    b']' => self.end_events(),
                    _ => return Err(self.format_err("expected `,` or `]` after an event")),
                },
                State::Done => {
                    self.finished = true;
                }
            }
        }
        Ok(())
    }

    fn end_events(&mut self) {
        self.pos += 1;
        // A bare array has no members around it.
        if self.bare {
            self.state = State::Done;
            self.finished = true;
        } else {
            self.state = State::AfterMember;
        }
    }

    /// Reads one top-level member (`pos` at its name); `false` when the data ends inside it.
    fn member(&mut self) -> Result<bool, ReadError> {
        let Some(kn) = self.extent(|s, _| string_end(s))? else {
            return Ok(false);
        };
        let key: String =
            serde_json::from_slice(&self.buf[self.pos..self.pos + kn]).map_err(|e| {
                self.format_err(format!("a member name that is not a JSON string ({e})"))
            })?;
        self.pos += kn;
        match self.peek()? {
            None => return Ok(false),
            Some(b':') => self.pos += 1,
            Some(_) => return Err(self.format_err(format!("expected `:` after `{key}`"))),
        }
        if key == member::TRACE_EVENTS {
            return match self.peek()? {
                None => Ok(false),
                Some(b'[') => {
                    self.pos += 1;
                    self.seen_events = true;
                    self.state = State::Event;
                    Ok(true)
                }
                Some(_) => Err(self.format_err("`traceEvents` is not an array")),
            };
        }
        if self.peek()?.is_none() {
            return Ok(false);
        }
        let offset = self.offset();
        let Some(vn) = self.extent(value_end)? else {
            return Ok(false);
        };
        let raw: Box<RawValue> = serde_json::from_slice(&self.buf[self.pos..self.pos + vn])
            .map_err(|source| ReadError::Header {
                path: self.path.clone(),
                key: key.clone(),
                offset,
                source,
            })?;
        self.pos += vn;
        self.meta.absorb(&key, raw);
        self.state = State::AfterMember;
        Ok(true)
    }
}

/// The event at the start of `bytes` (`offset` in the file), parsed as `detail` asks; `None`
/// when it runs past `bytes`.
fn parse_event(
    detail: Detail,
    bytes: &[u8],
    offset: u64,
) -> Result<Option<(Event<'_>, usize)>, serde_json::Error> {
    match detail {
        Detail::Full => Event::parse_prefix(bytes, offset),
        // Plain events by hand, the others by serde_json.
        Detail::Lean => match lean_fast::parse_prefix(bytes, offset) {
            Some(parsed) => Ok(Some(parsed)),
            None => Event::parse_prefix_lean(bytes, offset),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::{Compression, FlushCompress};
    use std::io::{Cursor, Write};

    const HEADER: &str = r#"{"schemaVersion": 1,
 "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "totalGlobalMem": 85029158912, "numSms": 132}],
 "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4, "local_rank": 3},
 "cuprof": {"version": "0.1.0", "pid": 1234, "hostname": "h", "cupti_version": 130001, "cycle": 1, "clock": {"realtime_ns": 1700000000123456789, "monotonic_ns": 5000}, "window": "w"},
 "displayTimeUnit": "ms",
 "baseTimeNanoseconds": 1700000000000000000,
 "traceEvents": [
"#;

    fn event(i: usize) -> String {
        format!(
            r#"{{"ph": "X", "cat": "kernel", "name": "k{i} \"q\"", "pid": 0, "tid": 7, "ts": {i}.250, "dur": 1.000, "args": {{"correlation": {i}, "stream": 7}}}}"#
        )
    }

    fn full(n: usize) -> String {
        let mut s = HEADER.to_string();
        for i in 0..n {
            if i > 0 {
                s.push_str(",\n");
            }
            s.push_str(&event(i));
        }
        s.push_str("\n],\n \"cuprofStats\": {\"events\": 5, \"dropped_channel\": 1, \"dropped_cupti\": 2, \"dropped_buffers\": 0, \"kernels_without_timestamps\": 0, \"memory_events_dropped\": 0, \"complete\": true},\n \"traceName\": \"x-rank3.trace.json.gz\"}\n");
        s
    }

    fn read_all(bytes: Vec<u8>) -> (Vec<(String, i64, i64)>, ReadSummary, TraceMeta) {
        let mut r = TraceReader::new(Cursor::new(bytes), Path::new("t.json")).unwrap();
        let mut got = Vec::new();
        let s = r
            .read_events(|e| {
                got.push((
                    e.name.to_string(),
                    e.ts.unwrap(),
                    e.args.correlation.unwrap(),
                ));
                ControlFlow::Continue(())
            })
            .unwrap();
        (got, s, r.meta().clone())
    }

    #[test]
    fn plain_json_with_header_and_footer() {
        let (got, s, m) = read_all(full(5).into_bytes());
        assert_eq!(got.len(), 5);
        assert_eq!(got[2], ("k2 \"q\"".to_string(), 2250, 2));
        assert!(s.truncated.is_none());
        assert!(!s.gzip);
        assert_eq!(s.events, 5);
        assert_eq!(m.rank, Some(3));
        assert_eq!(m.world_size, Some(4));
        assert_eq!(m.base_time_ns, Some(1_700_000_000_000_000_000));
        assert_eq!(
            m.clock,
            Some(ClockAnchor {
                realtime_ns: 1_700_000_000_123_456_789,
                monotonic_ns: 5000
            })
        );
        assert_eq!(m.hostname.as_deref(), Some("h"));
        assert_eq!(m.devices[0].num_sms, Some(132));
        let st = m.stats.unwrap();
        assert_eq!(st.dropped(), 3);
        assert_eq!(st.complete, Some(true));
        assert_eq!(m.trace_name.as_deref(), Some("x-rank3.trace.json.gz"));
        let keys: Vec<&str> = m.members.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "schemaVersion",
                "deviceProperties",
                "distributedInfo",
                "cuprof",
                "displayTimeUnit",
                "baseTimeNanoseconds",
                "cuprofStats",
                "traceName"
            ]
        );
    }

    #[test]
    fn gzip_and_big_files_cross_chunk_boundaries() {
        let n = 30_000; // about 4 MiB: several buffer refills and a compaction per event size
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(full(n).as_bytes()).unwrap();
        let gz = enc.finish().unwrap();
        let (got, s, m) = read_all(gz);
        assert_eq!(got.len(), n);
        assert!(got.iter().enumerate().all(|(i, g)| g.2 == i as i64));
        assert!(s.gzip);
        assert!(s.truncated.is_none());
        assert_eq!(s.uncompressed_bytes, full(n).len() as u64);
        assert!(m.stats.is_some());
    }

    #[test]
    fn header_only_stops_at_first_event() {
        let mut r = TraceReader::new(Cursor::new(full(3).into_bytes()), Path::new("t")).unwrap();
        assert_eq!(r.read_header().unwrap().rank, Some(3));
        let mut n = 0;
        r.read_events(|_| {
            n += 1;
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(n, 3);
    }

    /// What the tracer leaves after SIGKILL: a gzip stream that ends at a sync-flush point
    /// in the middle of `traceEvents` (no closing bracket, no gzip trailer).
    #[test]
    fn gzip_cut_at_sync_flush() {
        let mut z = flate2::Compress::new(Compression::fast(), false);
        let mut deflate = Vec::with_capacity(1 << 20);
        let mut body = HEADER.to_string();
        for i in 0..100 {
            if i > 0 {
                body.push_str(",\n");
            }
            body.push_str(&event(i));
        }
        // Partial event after the flush point: must not be delivered.
        let tail = ",\n{\"ph\": \"X\", \"cat\": \"kernel\", \"na";
        z.compress_vec(body.as_bytes(), &mut deflate, FlushCompress::Sync)
            .unwrap();
        z.compress_vec(tail.as_bytes(), &mut deflate, FlushCompress::Sync)
            .unwrap();
        let mut file = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        file.extend_from_slice(&deflate);
        let (got, s, m) = read_all(file);
        assert_eq!(got.len(), 100);
        let t = s.truncated.expect("truncation reported");
        assert_eq!(t.inside, "traceEvents");
        assert_eq!(t.events, 100);
        assert_eq!(t.offset, (body.len() + tail.len()) as u64);
        assert_eq!(
            t.partial,
            (tail.len() - 2) as u64,
            "the partial event, not the comma before it"
        );
        assert_eq!(m.rank, Some(3));
        assert!(m.stats.is_none());
        // And cut again in the middle of the compressed bytes of the last block.
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(full(2000).as_bytes()).unwrap();
        let mut gz = enc.finish().unwrap();
        gz.truncate(gz.len() / 2);
        let (got, s, _) = read_all(gz);
        assert!(!got.is_empty() && got.len() < 2000);
        assert!(got.iter().enumerate().all(|(i, g)| g.2 == i as i64));
        assert_eq!(s.truncated.unwrap().events, got.len() as u64);
    }

    #[test]
    fn plain_json_cut_mid_event_and_mid_header() {
        let s = full(10);
        let cut = s.find("k7").unwrap();
        let (got, sum, _) = read_all(s.as_bytes()[..cut].to_vec());
        assert_eq!(got.len(), 7);
        assert_eq!(sum.truncated.unwrap().inside, "traceEvents");
        let cut = s.find("\"displayTimeUnit\"").unwrap() + 5;
        let (got, sum, m) = read_all(s.as_bytes()[..cut].to_vec());
        assert!(got.is_empty());
        assert_eq!(sum.truncated.unwrap().inside, "header");
        assert_eq!(m.rank, Some(3));
    }

    #[test]
    fn bare_array_and_errors() {
        let s = format!("[{}, {}]", event(1), event(2));
        let (got, sum, _) = read_all(s.into_bytes());
        assert_eq!(got.len(), 2);
        assert!(sum.truncated.is_none());

        let mut r =
            TraceReader::new(Cursor::new(b"hello".to_vec()), Path::new("bad.json")).unwrap();
        let e = r.read_events(|_| ControlFlow::Continue(())).unwrap_err();
        assert!(
            e.to_string().starts_with("bad.json: not a Chrome trace"),
            "{e}"
        );

        let s = format!(
            "{{\"traceEvents\": [{}, {{\"ph\": \"X\", \"ts\": 1..2}}]}}",
            event(1)
        );
        let mut r = TraceReader::new(Cursor::new(s.into_bytes()), Path::new("c.json")).unwrap();
        let e = r.read_events(|_| ControlFlow::Continue(())).unwrap_err();
        assert!(matches!(e, ReadError::Event { .. }), "{e}");
        assert!(e.to_string().contains("c.json"));

        let e = TraceReader::open(Path::new("/nonexistent/x.json.gz"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("/nonexistent/x.json.gz"));
    }

    #[test]
    fn what_follows_the_trace() {
        let rest = |bytes: Vec<u8>| {
            let mut r = TraceReader::new(Cursor::new(bytes), Path::new("t")).unwrap();
            let s = r.read_events(|_| ControlFlow::Continue(())).unwrap();
            assert_eq!(s.events, 3);
            assert!(s.truncated.is_none());
            r.read_rest().unwrap()
        };
        assert_eq!(rest(full(3).into_bytes()), Rest::default());
        let mut padded = full(3).into_bytes();
        padded.extend_from_slice(&[0; 5000]);
        assert_eq!(rest(padded).bytes, 5000);

        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(full(3).as_bytes()).unwrap();
        let gz = enc.finish().unwrap();
        assert!(rest(gz.clone()).is_clean());
        let mut padded = gz;
        padded.extend_from_slice(&[0; 4096]);
        let r = rest(padded);
        assert_eq!(r.bytes, 0);
        assert!(r.stream_error.is_some(), "{r:?}");
    }

    #[test]
    fn callback_can_stop() {
        let mut r = TraceReader::new(Cursor::new(full(10).into_bytes()), Path::new("t")).unwrap();
        let mut n = 0;
        let s = r
            .read_events(|_| {
                n += 1;
                if n == 4 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })
            .unwrap();
        assert!(s.stopped);
        assert_eq!(s.events, 4);
    }

    /// A member read twice is refused by the lean decode exactly where the full decode refuses
    /// it (so `cuprof merge` never copies an event `cuprof report` refuses), and a member
    /// neither reads may repeat in both.
    #[test]
    fn lean_refuses_the_duplicates_full_refuses() {
        let outcome = |detail: Detail, ev: &str| -> Result<u64, String> {
            let mut r = TraceReader::new(Cursor::new(format!("[{ev}]")), Path::new("t")).unwrap();
            r.set_detail(detail);
            r.read_events(|_| ControlFlow::Continue(()))
                .map(|s| s.events)
                .map_err(|e| e.to_string())
        };
        let refused = [
            r#"{"ph": "X", "cat": "a", "cat": "b", "ts": 1}"#,
            r#"{"ph": "X", "tid": 1, "tid": 2, "ts": 1}"#,
            r#"{"ph": "X", "ts": 1, "dur": 1, "dur": 2}"#,
            r#"{"ph": "X", "ts": 1, "ts": 2}"#,
            r#"{"ph": "X", "ts": 1, "args": {"correlation": 3, "correlation": 4}}"#,
            r#"{"ph": "X", "ts": 1, "args": {"External id": 3, "device": 0, "External id": 4}}"#,
            r#"{"ph": "X", "ts": 1, "args": {"grid": [1, 1, 1], "grid": [2, 1, 1]}}"#,
            r#"{"ph": "X", "ts": 1, "args": {"memory bandwidth (GB/s)": 1, "memory bandwidth (GB/s)": 2}}"#,
            r#"{"ph": "X", "ts": 1, "args": {"Call stack": "a", "Call stack": "b"}}"#,
        ];
        for ev in refused {
            let full = outcome(Detail::Full, ev).unwrap_err();
            let lean = outcome(Detail::Lean, ev).unwrap_err();
            assert!(full.contains("duplicate field"), "{full}");
            assert_eq!(lean, full, "{ev}");
        }
        let kept = r#"{"ph": "X", "ts": 1, "note": 1, "note": 2, "args": {"x": 1, "x": 2}}"#;
        assert_eq!(outcome(Detail::Full, kept), Ok(1));
        assert_eq!(outcome(Detail::Lean, kept), Ok(1));
    }

    /// An event torch.profiler wrote with a raw tab in a string is read in both decodes as if
    /// escaped, its text (`raw`, what merge and repair copy) valid JSON; a raw control character
    /// outside every string, or an unescaped quote, is still refused.
    #[test]
    fn raw_control_characters_in_strings_are_read_escaped() {
        let ev = "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"a\tb\", \"ts\": 1, \"dur\": 2, \"args\": {\"kernel_kwargs\": \"X=1\tY=2\"}}";
        for detail in [Detail::Full, Detail::Lean] {
            let mut r = TraceReader::new(
                Cursor::new(format!("[{ev}, {{\"ph\": \"X\"}}]")),
                Path::new("t"),
            )
            .unwrap();
            r.set_detail(detail);
            let mut seen = Vec::new();
            let s = r
                .read_events(|e| {
                    seen.push((e.name.to_string(), e.raw_str().unwrap().to_string()));
                    ControlFlow::Continue(())
                })
                .unwrap();
            assert_eq!(s.events, 2);
            assert_eq!(seen[0].0, "a\tb");
            assert_eq!(seen[0].1, ev.replace('\t', "\\u0009"), "{detail:?}");
            assert!(serde_json::from_str::<serde_json::Value>(&seen[0].1).is_ok());
        }
        for bad in ["{\"ph\":\u{1}\"X\"}", "{\"name\": \"a\"b\"c\t\"}"] {
            let mut r = TraceReader::new(Cursor::new(format!("[{bad}]")), Path::new("t")).unwrap();
            assert!(
                r.read_events(|_| ControlFlow::Continue(())).is_err(),
                "{bad:?}"
            );
        }
    }

    /// Every event of real torch.profiler traces (HolisticTraceAnalysis's test data, three
    /// Kineto generations): the fast path agrees with serde_json on each.
    #[test]
    fn real_kineto_traces_agree() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/hta");
        // Every one of their events is plain: all take the fast path.
        for (name, events) in [
            ("alexnet-old-kineto.trace.json.gz", 1408),
            ("simple-add-old-kineto.trace.json.gz", 1348),
            ("sampled-rank0.trace.json.gz", 4855),
        ] {
            let mut r = TraceReader::open(&dir.join(name)).unwrap();
            r.set_detail(Detail::Lean);
            let (mut taken, mut total) = (0u64, 0u64);
            r.read_events(|e| {
                total += 1;
                taken += u64::from(super::lean_fast::agrees(e.raw));
                ControlFlow::Continue(())
            })
            .unwrap();
            assert_eq!((taken, total), (events, events), "{name}");
        }
    }
}
