//! `cuprof memory FILE.pickle`: a short summary of a memory snapshot pickle (cuprof's, or
//! one written by `torch.cuda.memory._dump_snapshot`), readable without a browser.
//!
//! Per device: peak reserved bytes, when (`time_us` and the offset from the device's first
//! trace entry), by which stack, what is live at the end, and the number of trace entries.
//!
//! Peak reserved rule (the same as `tests/apps/check_snapshot.py`): reserved memory is the
//! sum of live segments; `segment_alloc`/`segment_map` add their size and
//! `segment_free`/`segment_unmap` subtract it, while `alloc`/`free_*` are blocks inside
//! segments and add nothing. Segments can exist before the trace's first entry (torch
//! records history only from `_record_memory_history`, and a bounded trace drops its oldest
//! entries), so the level is anchored at the end: after the last entry it is the sum of the
//! device's live `segments`, and before the first entry that sum minus the net of all
//! entries. The peak is the highest level over the trace, that starting level included;
//! "when" and the stack are those of the first entry that reached it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context};
use serde_pickle::{DeOptions, HashableValue, Value};

#[derive(clap::Args)]
pub struct MemoryArgs {
    /// A memory snapshot pickle (`NAME-rankR-memory-UNIXTIME.pickle`, or torch's own).
    pub file: PathBuf,
    /// At most this many frames of the peak's stack are printed.
    #[arg(long, default_value_t = 12)]
    pub frames: usize,
}

pub fn run(args: MemoryArgs) -> anyhow::Result<()> {
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let devices = load(&bytes)
        .with_context(|| format!("{} is not a memory snapshot", args.file.display()))?;
    crate::console::print(&render(
        &args.file.display().to_string(),
        &devices,
        args.frames,
    ))
}

#[derive(Debug, Clone, PartialEq)]
struct Frame {
    name: String,
    filename: String,
    line: i64,
}

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    action: String,
    addr: i64,
    size: i64,
    time_us: i64,
}

#[derive(Debug, Clone, PartialEq)]
struct Segment {
    device: i64,
    total_size: i64,
    /// (size, state) of each block.
    blocks: Vec<(i64, String)>,
}

#[derive(Debug, Default)]
struct Snapshot {
    segments: Vec<Segment>,
    device_traces: Vec<Vec<Entry>>,
}

/// Unpickles into serde-pickle's generic [`Value`]. serde-pickle 1.2 fails with "recursive
/// structure found" on torch's own snapshots: torch shares one frames list between a block
/// and its trace entries, and serde-pickle's memo reference counting drops the memoized
/// strings inside a list that is referenced more than once (birkenfeld/serde-pickle#24,
/// unfixed). For that error only, the pickle is decoded again by [`unpickle`], which builds
/// the same `Value` (shared objects copied).
fn read_value(bytes: &[u8]) -> anyhow::Result<Value> {
    match serde_pickle::value_from_slice(bytes, DeOptions::new()) {
        Err(serde_pickle::Error::Syntax(serde_pickle::ErrorCode::Recursive)) => {
            unpickle::value(bytes)
        }
        other => other.context("cannot unpickle it"),
    }
}

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Dict(d) => d.get(&HashableValue::String(key.to_owned())),
        _ => None,
    }
}

fn field<'a>(v: &'a Value, key: &str, what: &str) -> anyhow::Result<&'a Value> {
    get(v, key).with_context(|| format!("{what} has no '{key}'"))
}

fn as_int(v: &Value, what: &str) -> anyhow::Result<i64> {
    match v {
        Value::I64(i) => Ok(*i),
        Value::Int(big) => big
            .to_string()
            .parse()
            .with_context(|| format!("{what} = {big} is out of 64-bit range")),
        _ => bail!("{what} is not an integer"),
    }
}

fn int_field(v: &Value, key: &str, what: &str) -> anyhow::Result<i64> {
    as_int(field(v, key, what)?, &format!("{what}['{key}']"))
}

fn str_field(v: &Value, key: &str, what: &str) -> anyhow::Result<String> {
    match field(v, key, what)? {
        Value::String(s) => Ok(s.clone()),
        _ => bail!("{what}['{key}'] is not a string"),
    }
}

fn list<'a>(v: &'a Value, what: &str) -> anyhow::Result<&'a [Value]> {
    match v {
        Value::List(l) | Value::Tuple(l) => Ok(l),
        _ => bail!("{what} is not a list"),
    }
}

fn frames(v: &Value, what: &str) -> anyhow::Result<Vec<Frame>> {
    let Some(list_value) = get(v, "frames") else {
        return Ok(Vec::new());
    };
    list(list_value, &format!("{what}['frames']"))?
        .iter()
        .map(|f| {
            Ok(Frame {
                name: str_field(f, "name", "a frame")?,
                filename: str_field(f, "filename", "a frame")?,
                line: int_field(f, "line", "a frame")?,
            })
        })
        .collect()
}

/// The per-device summaries of a snapshot pickle. Frames are read only for the entries
/// that reached a peak: a bounded trace of 100,000 entries with deep stacks would
/// otherwise copy millions of strings.
fn load(bytes: &[u8]) -> anyhow::Result<Vec<DeviceSummary>> {
    let value = read_value(bytes)?;
    let mut devices = summarize(&Snapshot::from_value(&value)?);
    let traces = list(
        field(&value, "device_traces", "the snapshot")?,
        "device_traces",
    )?;
    for d in &mut devices {
        if let Some(i) = d.peak_index {
            let what = format!("device_traces[{}][{i}]", d.device);
            d.peak_frames = frames(&list(&traces[d.device], &what)?[i], &what)?;
        }
    }
    Ok(devices)
}

impl Snapshot {
    fn from_value(v: &Value) -> anyhow::Result<Snapshot> {
        if !matches!(v, Value::Dict(_)) {
            bail!("the pickle is not a dict");
        }
        let mut snap = Snapshot::default();
        for (i, s) in list(field(v, "segments", "the snapshot")?, "segments")?
            .iter()
            .enumerate()
        {
            let what = format!("segments[{i}]");
            let blocks = list(field(s, "blocks", &what)?, &format!("{what}['blocks']"))?
                .iter()
                .map(|b| {
                    Ok((
                        int_field(b, "size", "a block")?,
                        str_field(b, "state", "a block")?,
                    ))
                })
                .collect::<anyhow::Result<_>>()?;
            snap.segments.push(Segment {
                device: int_field(s, "device", &what)?,
                total_size: int_field(s, "total_size", &what)?,
                blocks,
            });
        }
        for (d, trace) in list(field(v, "device_traces", "the snapshot")?, "device_traces")?
            .iter()
            .enumerate()
        {
            let mut entries = Vec::new();
            for (i, e) in list(trace, &format!("device_traces[{d}]"))?
                .iter()
                .enumerate()
            {
                let what = format!("device_traces[{d}][{i}]");
                entries.push(Entry {
                    action: str_field(e, "action", &what)?,
                    // `oom` entries have no address.
                    addr: get(e, "addr")
                        .map(|a| as_int(a, &what))
                        .transpose()?
                        .unwrap_or(0),
                    size: int_field(e, "size", &what)?,
                    time_us: int_field(e, "time_us", &what)?,
                });
            }
            snap.device_traces.push(entries);
        }
        Ok(snap)
    }
}

#[derive(Debug, PartialEq)]
struct DeviceSummary {
    device: usize,
    /// Reserved bytes before the first trace entry.
    start: i64,
    peak: i64,
    /// The entry that first reached the peak, and its index in the device's trace; `None`
    /// when the peak is the starting level.
    peak_entry: Option<Entry>,
    peak_index: Option<usize>,
    /// The peak entry's stack (filled by [`load`]).
    peak_frames: Vec<Frame>,
    first_time_us: Option<i64>,
    live_segments: usize,
    live_bytes: i64,
    active_blocks: usize,
    active_bytes: i64,
    entries: usize,
    by_action: BTreeMap<String, usize>,
}

fn summarize(snap: &Snapshot) -> Vec<DeviceSummary> {
    let ndev = snap.device_traces.len().max(
        snap.segments
            .iter()
            .map(|s| usize::try_from(s.device).map_or(0, |d| d + 1))
            .max()
            .unwrap_or(0),
    );
    let empty = Vec::new();
    let mut out = Vec::new();
    for device in 0..ndev {
        let trace = snap.device_traces.get(device).unwrap_or(&empty);
        let segs: Vec<&Segment> = snap
            .segments
            .iter()
            .filter(|s| s.device == device as i64)
            .collect();
        if trace.is_empty() && segs.is_empty() {
            continue;
        }
        let delta = |e: &Entry| match e.action.as_str() {
            "segment_alloc" | "segment_map" => e.size,
            "segment_free" | "segment_unmap" => -e.size,
            _ => 0,
        };
        let live_bytes: i64 = segs.iter().map(|s| s.total_size).sum();
        let start = live_bytes - trace.iter().map(delta).sum::<i64>();
        let (mut level, mut peak, mut peak_index) = (start, start, None);
        for (i, e) in trace.iter().enumerate() {
            level += delta(e);
            if level > peak {
                peak = level;
                peak_index = Some(i);
            }
        }
        let active = || {
            segs.iter()
                .flat_map(|s| &s.blocks)
                .filter(|(_, st)| st.starts_with("active"))
        };
        let mut by_action = BTreeMap::new();
        for e in trace {
            *by_action.entry(e.action.clone()).or_insert(0) += 1;
        }
        out.push(DeviceSummary {
            device,
            start,
            peak,
            peak_entry: peak_index.map(|i| trace[i].clone()),
            peak_index,
            peak_frames: Vec::new(),
            first_time_us: trace.first().map(|e| e.time_us),
            live_segments: segs.len(),
            live_bytes,
            active_blocks: active().count(),
            active_bytes: active().map(|(size, _)| size).sum(),
            entries: trace.len(),
            by_action,
        });
    }
    out
}

/// `20.0 MiB (20971520 bytes)`.
fn human(bytes: i64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v.abs() >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {} ({bytes} bytes)", UNITS[unit])
    }
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// Frames that say nothing about the program (the capture machinery, the interpreter
/// loop), as torch's `_memory_viz` and MemoryViz leave them out.
fn interesting(f: &Frame) -> bool {
    const OMIT_NAMES: [&str; 8] = [
        "unwind::unwind",
        "CapturedTraceback::gather",
        "gather_with_cpp",
        "_start",
        "__libc_start_main",
        "PyEval_",
        "PyObject_",
        "PyFunction_",
    ];
    const OMIT_FILES: [&str; 10] = [
        "core/boxing",
        "/Register",
        "/Redispatch",
        "pythonrun.c",
        "Modules/main.c",
        "Objects/call.c",
        "Objects/methodobject.c",
        "pycore_ceval.h",
        "ceval.c",
        "cpython/abstract.h",
    ];
    !OMIT_NAMES.iter().any(|o| f.name.contains(o))
        && !OMIT_FILES.iter().any(|o| f.filename.contains(o))
}

fn render(file: &str, devices: &[DeviceSummary], max_frames: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "memory snapshot {file}");
    if devices.is_empty() {
        let _ = writeln!(
            s,
            "no device memory recorded (no segments, no trace entries)"
        );
        return s;
    }
    for d in devices {
        let _ = writeln!(s, "device {}", d.device);
        let _ = writeln!(s, "  peak reserved:  {}", human(d.peak));
        match (&d.peak_entry, d.first_time_us) {
            (Some(e), Some(first)) => {
                let offset = (e.time_us - first) as f64 / 1000.0;
                let _ = writeln!(
                    s,
                    "  when:           time_us {} (+{offset:.3} ms after the first trace entry)",
                    e.time_us
                );
                let _ = writeln!(
                    s,
                    "  by:             {} of {} at {:#x}",
                    e.action,
                    human(e.size),
                    e.addr
                );
                let frames = &d.peak_frames;
                let shown: Vec<&Frame> = frames.iter().filter(|f| interesting(f)).collect();
                if frames.is_empty() {
                    let _ = writeln!(
                        s,
                        "  stack:          no stacks recorded (run with --with-stack)"
                    );
                } else {
                    let _ = writeln!(s, "  stack:");
                    for f in shown.iter().take(max_frames) {
                        let _ = writeln!(s, "    {} ({}:{})", f.name, f.filename, f.line);
                    }
                    let hidden = frames.len() - shown.len().min(max_frames);
                    if hidden > 0 {
                        let _ = writeln!(s, "    ... {} not shown", plural(hidden, "more frame"));
                    }
                }
            }
            _ => {
                let _ = writeln!(
                    s,
                    "  when:           before the first trace entry (segments allocated before recording started)"
                );
            }
        }
        if d.start > 0 {
            let _ = writeln!(s, "  reserved before the first entry: {}", human(d.start));
        }
        let _ = writeln!(
            s,
            "  live at end:    {}, {}; {}, {}",
            plural(d.live_segments, "segment"),
            human(d.live_bytes),
            plural(d.active_blocks, "active block"),
            human(d.active_bytes)
        );
        let actions: Vec<String> = d
            .by_action
            .iter()
            .map(|(a, n)| format!("{a} {n}"))
            .collect();
        if actions.is_empty() {
            let _ = writeln!(s, "  trace entries:  0");
        } else {
            let _ = writeln!(
                s,
                "  trace entries:  {} ({})",
                d.entries,
                actions.join(", ")
            );
        }
    }
    s
}

/// A plain-data unpickler (protocols 2 to 5 as CPython writes dicts, lists, tuples,
/// strings, bytes, numbers, booleans and None) into serde-pickle's [`Value`]. Objects live
/// in an arena while decoding, so a memoized list filled after `MEMOIZE` and referenced
/// again later is the same object, as in CPython; references are copied when the final
/// `Value` is built.
mod unpickle {
    use anyhow::{bail, Context};
    use serde_pickle::Value;
    use std::collections::HashMap;

    enum Node {
        Atom(Value),
        List(Vec<usize>),
        Tuple(Vec<usize>),
        Dict(Vec<(usize, usize)>),
    }

    struct Decoder<'a> {
        data: &'a [u8],
        pos: usize,
        nodes: Vec<Node>,
        stack: Vec<usize>,
        marks: Vec<usize>,
        memo: HashMap<u32, usize>,
    }

    /// Containers nested deeper than this are refused (no snapshot comes close).
    const MAX_DEPTH: usize = 200;

    pub(super) fn value(data: &[u8]) -> anyhow::Result<Value> {
        let mut d = Decoder {
            data,
            pos: 0,
            nodes: Vec::new(),
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
        };
        let root = d
            .run()
            .with_context(|| format!("cannot unpickle it (at byte {})", d.pos))?;
        d.build(root, 0)
    }

    impl Decoder<'_> {
        fn take(&mut self, n: usize) -> anyhow::Result<&[u8]> {
            let end = self
                .pos
                .checked_add(n)
                .filter(|&e| e <= self.data.len())
                .context("truncated pickle")?;
            let s = &self.data[self.pos..end];
            self.pos = end;
            Ok(s)
        }

        fn u8(&mut self) -> anyhow::Result<u8> {
            Ok(self.take(1)?[0])
        }

        fn u32(&mut self) -> anyhow::Result<u32> {
            Ok(u32::from_le_bytes(
                self.take(4)?.try_into().expect("4 bytes"),
            ))
        }

        fn u64(&mut self) -> anyhow::Result<u64> {
            Ok(u64::from_le_bytes(
                self.take(8)?.try_into().expect("8 bytes"),
            ))
        }

        fn push(&mut self, node: Node) {
            self.nodes.push(node);
            self.stack.push(self.nodes.len() - 1);
        }

        fn atom(&mut self, v: Value) {
            self.push(Node::Atom(v));
        }

        fn string(&mut self, n: usize) -> anyhow::Result<()> {
            let s = std::str::from_utf8(self.take(n)?)
                .context("string is not UTF-8")?
                .to_owned();
            self.atom(Value::String(s));
            Ok(())
        }

        fn bytes(&mut self, n: usize) -> anyhow::Result<()> {
            let b = self.take(n)?.to_vec();
            self.atom(Value::Bytes(b));
            Ok(())
        }

        fn pop(&mut self) -> anyhow::Result<usize> {
            self.stack.pop().context("stack underflow")
        }

        fn top(&self) -> anyhow::Result<usize> {
            self.stack.last().copied().context("stack underflow")
        }

        /// The items above the last MARK, removed from the stack.
        fn pop_mark(&mut self) -> anyhow::Result<Vec<usize>> {
            let mark = self.marks.pop().context("no MARK")?;
            if mark > self.stack.len() {
                bail!("MARK above the stack");
            }
            Ok(self.stack.split_off(mark))
        }

        fn extend_list(&mut self, list: usize, items: Vec<usize>) -> anyhow::Result<()> {
            match &mut self.nodes[list] {
                Node::List(l) => l.extend(items),
                _ => bail!("APPEND to a non-list"),
            }
            Ok(())
        }

        fn extend_dict(&mut self, dict: usize, items: Vec<usize>) -> anyhow::Result<()> {
            if !items.len().is_multiple_of(2) {
                bail!("odd number of items for a dict");
            }
            let pairs = items.chunks(2).map(|p| (p[0], p[1]));
            match &mut self.nodes[dict] {
                Node::Dict(d) => d.extend(pairs),
                _ => bail!("SETITEM on a non-dict"),
            }
            Ok(())
        }

        fn memoize(&mut self, idx: u32) -> anyhow::Result<()> {
            let top = self.top()?;
            self.memo.insert(idx, top);
            Ok(())
        }

        fn get(&mut self, idx: u32) -> anyhow::Result<()> {
            let node = *self
                .memo
                .get(&idx)
                .with_context(|| format!("memo {idx} missing"))?;
            self.stack.push(node);
            Ok(())
        }

        fn run(&mut self) -> anyhow::Result<usize> {
            loop {
                let op = self.u8()?;
                match op {
                    0x80 => {
                        let proto = self.u8()?;
                        if proto > 5 {
                            bail!("pickle protocol {proto}");
                        }
                    }
                    0x95 => {
                        self.u64()?; // FRAME: length of the frame that follows
                    }
                    b'.' => return self.pop(),
                    b'(' => self.marks.push(self.stack.len()),
                    b'0' => {
                        self.pop()?;
                    }
                    b'1' => {
                        self.pop_mark()?;
                    }
                    b'}' => self.push(Node::Dict(Vec::new())),
                    b']' => self.push(Node::List(Vec::new())),
                    b')' => self.push(Node::Tuple(Vec::new())),
                    b'd' => {
                        let items = self.pop_mark()?;
                        self.push(Node::Dict(Vec::new()));
                        let d = self.top()?;
                        self.extend_dict(d, items)?;
                    }
                    b'l' => {
                        let items = self.pop_mark()?;
                        self.push(Node::List(items));
                    }
                    b't' => {
                        let items = self.pop_mark()?;
                        self.push(Node::Tuple(items));
                    }
                    0x85..=0x87 => {
                        let n = usize::from(op - 0x84);
                        if self.stack.len() < n {
                            bail!("stack underflow");
                        }
                        let items = self.stack.split_off(self.stack.len() - n);
                        self.push(Node::Tuple(items));
                    }
                    b'a' => {
                        let v = self.pop()?;
                        let l = self.top()?;
                        self.extend_list(l, vec![v])?;
                    }
                    b'e' => {
                        let items = self.pop_mark()?;
                        let l = self.top()?;
                        self.extend_list(l, items)?;
                    }
                    b's' => {
                        let v = self.pop()?;
                        let k = self.pop()?;
                        let d = self.top()?;
                        self.extend_dict(d, vec![k, v])?;
                    }
                    b'u' => {
                        let items = self.pop_mark()?;
                        let d = self.top()?;
                        self.extend_dict(d, items)?;
                    }
                    b'N' => self.atom(Value::None),
                    0x88 => self.atom(Value::Bool(true)),
                    0x89 => self.atom(Value::Bool(false)),
                    b'K' => {
                        let v = self.u8()?;
                        self.atom(Value::I64(i64::from(v)));
                    }
                    b'M' => {
                        let b = self.take(2)?;
                        let v = u16::from_le_bytes([b[0], b[1]]);
                        self.atom(Value::I64(i64::from(v)));
                    }
                    b'J' => {
                        let v = self.u32()? as i32;
                        self.atom(Value::I64(i64::from(v)));
                    }
                    0x8a => {
                        let n = usize::from(self.u8()?);
                        if n > 8 {
                            bail!("integer of {n} bytes: wider than 64 bits");
                        }
                        let b = self.take(n)?;
                        let fill = if b.last().is_some_and(|&x| x & 0x80 != 0) {
                            0xff
                        } else {
                            0
                        };
                        let mut le = [fill; 8];
                        le[..n].copy_from_slice(b);
                        self.atom(Value::I64(i64::from_le_bytes(le)));
                    }
                    b'G' => {
                        let v = f64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes"));
                        self.atom(Value::F64(v));
                    }
                    0x8c => {
                        let n = usize::from(self.u8()?);
                        self.string(n)?;
                    }
                    b'X' => {
                        let n = self.u32()? as usize;
                        self.string(n)?;
                    }
                    0x8d => {
                        let n = usize::try_from(self.u64()?).context("string too long")?;
                        self.string(n)?;
                    }
                    b'C' => {
                        let n = usize::from(self.u8()?);
                        self.bytes(n)?;
                    }
                    b'B' => {
                        let n = self.u32()? as usize;
                        self.bytes(n)?;
                    }
                    0x8e => {
                        let n = usize::try_from(self.u64()?).context("bytes too long")?;
                        self.bytes(n)?;
                    }
                    0x94 => {
                        let idx = u32::try_from(self.memo.len()).context("memo too large")?;
                        self.memoize(idx)?;
                    }
                    b'q' => {
                        let idx = u32::from(self.u8()?);
                        self.memoize(idx)?;
                    }
                    b'r' => {
                        let idx = self.u32()?;
                        self.memoize(idx)?;
                    }
                    b'h' => {
                        let idx = u32::from(self.u8()?);
                        self.get(idx)?;
                    }
                    b'j' => {
                        let idx = self.u32()?;
                        self.get(idx)?;
                    }
                    _ => bail!("unsupported pickle opcode {op:#04x} (not plain data)"),
                }
            }
        }

        fn build(&self, idx: usize, depth: usize) -> anyhow::Result<Value> {
            if depth > MAX_DEPTH {
                bail!("containers nested more than {MAX_DEPTH} deep (or a recursive structure)");
            }
            let items = |ids: &[usize]| {
                ids.iter()
                    .map(|&i| self.build(i, depth + 1))
                    .collect::<anyhow::Result<Vec<_>>>()
            };
            Ok(match &self.nodes[idx] {
                Node::Atom(v) => v.clone(),
                Node::List(l) => Value::List(items(l)?),
                Node::Tuple(t) => Value::Tuple(items(t)?),
                Node::Dict(pairs) => {
                    let mut map = std::collections::BTreeMap::new();
                    for &(k, v) in pairs {
                        let key = self
                            .build(k, depth + 1)?
                            .into_hashable()
                            .context("unhashable dict key")?;
                        map.insert(key, self.build(v, depth + 1)?);
                    }
                    Value::Dict(map)
                }
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuprof_core::event::{Memory, MemoryOp};
    use cuprof_core::memory::{Frame as CoreFrame, MemoryTimeline, DEVICE_MEMORY_KIND};
    use std::sync::Arc;

    const MIB: u64 = 1 << 20;

    fn rec(op: MemoryOp, address: u64, bytes: u64, timestamp: u64, device: u32) -> Memory {
        Memory {
            op,
            memory_kind: DEVICE_MEMORY_KIND,
            correlation: 0,
            address,
            bytes,
            timestamp,
            pid: 1,
            device,
            context: 1,
            stream: 0,
            is_async: false,
            pool_address: 0,
        }
    }

    #[test]
    fn summary_of_a_cuprof_snapshot() {
        let mut t = MemoryTimeline::default();
        let stack: Arc<[CoreFrame]> = Arc::from(vec![
            CoreFrame {
                filename: "??".into(),
                line: 0,
                name: "torch::unwind::unwind()".into(),
            },
            CoreFrame {
                filename: "train.py".into(),
                line: 42,
                name: "forward".into(),
            },
        ]);
        t.record(
            &rec(MemoryOp::Alloc, 0x1000_0000, 2 * MIB, 5_000_000, 1),
            None,
        );
        t.record(
            &rec(MemoryOp::Alloc, 0x2000_0000, 20 * MIB, 7_500_000, 1),
            Some(stack),
        );
        t.record(&rec(MemoryOp::Free, 0x2000_0000, 0, 9_000_000, 1), None);
        let sum = load(&t.snapshot_pickle()).unwrap();
        assert_eq!(sum.len(), 1);
        let d = &sum[0];
        assert_eq!((d.device, d.start, d.peak), (1, 0, 22 * MIB as i64));
        let e = d.peak_entry.as_ref().unwrap();
        assert_eq!(
            (e.action.as_str(), e.addr, e.time_us),
            ("segment_alloc", 0x2000_0000, 7_500)
        );
        assert_eq!(
            (
                d.live_segments,
                d.live_bytes,
                d.active_blocks,
                d.active_bytes
            ),
            (1, 2 * MIB as i64, 1, 2 * MIB as i64)
        );
        assert_eq!(d.entries, 7);
        let text = render("x.pickle", &sum, 12);
        assert_eq!(
            text,
            "memory snapshot x.pickle\n\
             device 1\n  \
             peak reserved:  22.0 MiB (23068672 bytes)\n  \
             when:           time_us 7500 (+2.500 ms after the first trace entry)\n  \
             by:             segment_alloc of 20.0 MiB (20971520 bytes) at 0x20000000\n  \
             stack:\n    \
             forward (train.py:42)\n    \
             ... 1 more frame not shown\n  \
             live at end:    1 segment, 2.0 MiB (2097152 bytes); 1 active block, 2.0 MiB (2097152 bytes)\n  \
             trace entries:  7 (alloc 2, free_completed 1, free_requested 1, segment_alloc 2, segment_free 1)\n"
        );
    }

    #[test]
    fn no_stacks_and_segments_from_before_the_trace() {
        // A torch-like file: a 20 MiB segment allocated before recording, freed in the
        // trace, and a 2 MiB one allocated in it without stacks.
        let mut t = MemoryTimeline::default();
        t.record(&rec(MemoryOp::Alloc, 0x1000_0000, 20 * MIB, 1_000, 0), None);
        t.record(&rec(MemoryOp::Alloc, 0x3000_0000, 2 * MIB, 2_000, 0), None);
        t.record(&rec(MemoryOp::Free, 0x1000_0000, 0, 3_000, 0), None);
        let mut snap = Snapshot::from_value(&read_value(&t.snapshot_pickle()).unwrap()).unwrap();
        snap.device_traces[0].drain(0..2); // the 20 MiB segment was allocated before recording
        let sum = summarize(&snap);
        let d = &sum[0];
        assert_eq!((d.start, d.peak), (20 * MIB as i64, 22 * MIB as i64));
        let text = render("y", &sum, 12);
        assert!(
            text.contains("stack:          no stacks recorded (run with --with-stack)"),
            "{text}"
        );
        assert!(
            text.contains("reserved before the first entry: 20.0 MiB (20971520 bytes)"),
            "{text}"
        );

        // Only frees: the peak is the starting level.
        snap.device_traces[0].drain(0..2);
        let sum = summarize(&snap);
        assert_eq!(
            (sum[0].start, sum[0].peak, sum[0].peak_entry.is_none()),
            (22 * MIB as i64, 22 * MIB as i64, true)
        );
        assert!(render("y", &sum, 12).contains("before the first trace entry"));
    }

    #[test]
    fn empty_and_malformed() {
        let empty = MemoryTimeline::default().snapshot_pickle();
        assert_eq!(load(&empty).unwrap(), vec![]);
        assert!(render("z", &[], 12).contains("no device memory recorded"));
        let not_a_snapshot = serde_pickle::to_vec(&vec![1, 2], Default::default()).unwrap();
        let err = load(&not_a_snapshot).unwrap_err();
        assert!(format!("{err:#}").contains("not a dict"), "{err:#}");
    }

    /// The fallback decoder gives exactly what serde-pickle gives, on cuprof's pickles and
    /// on pickles written by CPython (memoized dicts and lists, shared objects).
    #[test]
    fn fallback_decoder_matches_serde_pickle() {
        let mut t = MemoryTimeline::new(3);
        let stack: Arc<[CoreFrame]> = Arc::from(vec![CoreFrame {
            filename: "a.py".into(),
            line: 1,
            name: "f".into(),
        }]);
        for i in 0..5u64 {
            t.record(
                &rec(
                    MemoryOp::Alloc,
                    0x1000_0000 + i * 0x100_0000,
                    (i + 1) * MIB,
                    i,
                    (i % 2) as u32,
                ),
                Some(stack.clone()),
            );
        }
        t.allocator_settings_mut().garbage_collection_threshold = 0.5;
        let bytes = t.snapshot_pickle();
        let via_serde = serde_pickle::value_from_slice(&bytes, DeOptions::new()).unwrap();
        assert_eq!(unpickle::value(&bytes).unwrap(), via_serde);

        let value = serde_pickle::value_from_slice(&bytes, DeOptions::new()).unwrap();
        for (proto, opts) in [
            (3, serde_pickle::SerOptions::new()),
            (2, serde_pickle::SerOptions::new().proto_v2()),
        ] {
            let bytes = serde_pickle::value_to_vec(&value, opts).unwrap();
            assert_eq!(unpickle::value(&bytes).unwrap(), value, "proto {proto}");
        }
    }

    /// A CPython protocol-4 pickle of `{"a": [x, x], "b": (1, -2, 2**40, 1.5, None, True, b"z")}`
    /// with `x = {"name": "n", "line": 3}` shared: serde-pickle fails on it, the fallback does not.
    #[test]
    fn shared_containers_written_by_cpython() {
        let bytes: &[u8] = b"\x80\x04\x95L\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(}\x94(\x8c\x04name\x94\x8c\x01n\x94\x8c\x04line\x94K\x03uh\x03e\x8c\x01b\x94(K\x01J\xfe\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01G?\xf8\x00\x00\x00\x00\x00\x00N\x88C\x01z\x94t\x94u.";
        assert!(matches!(
            serde_pickle::value_from_slice(bytes, DeOptions::new()),
            Err(serde_pickle::Error::Syntax(
                serde_pickle::ErrorCode::Recursive
            ))
        ));
        let v = read_value(bytes).unwrap();
        let x = get(&v, "a")
            .map(|a| list(a, "a").unwrap().to_vec())
            .unwrap();
        assert_eq!(x.len(), 2);
        assert_eq!(x[0], x[1]);
        assert_eq!(get(&x[1], "name"), Some(&Value::String("n".into())));
        assert_eq!(get(&x[1], "line"), Some(&Value::I64(3)));
        assert_eq!(
            get(&v, "b"),
            Some(&Value::Tuple(vec![
                Value::I64(1),
                Value::I64(-2),
                Value::I64(1 << 40),
                Value::F64(1.5),
                Value::None,
                Value::Bool(true),
                Value::Bytes(b"z".to_vec()),
            ]))
        );
        assert!(unpickle::value(b"\x80\x04\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.").is_err());
        assert!(unpickle::value(b"\x80\x04c__builtin__\nset\n.").is_err());
        assert!(unpickle::value(b"\x80\x04]\x94(").is_err());
    }

    #[test]
    fn human_units() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB (1536 bytes)");
        assert_eq!(human(20 << 20), "20.0 MiB (20971520 bytes)");
        assert_eq!(human(80 << 30), "80.0 GiB (85899345920 bytes)");
    }
}
