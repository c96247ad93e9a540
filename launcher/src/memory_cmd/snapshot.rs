//! The snapshot's model (segments, blocks, trace entries, frames) read from a decoded pickle,
//! and the per-device summary computed from it.
//!
//! Peak reserved rule (the same as `tests/apps/check_snapshot.py`): reserved memory is the
//! sum of live segments; `segment_alloc`/`segment_map` add their size and
//! `segment_free`/`segment_unmap` subtract it, while `alloc`/`free_*` are blocks inside
//! segments and add nothing. Segments can exist before the trace's first entry (torch
//! records history only from `_record_memory_history`, and a bounded trace drops its oldest
//! entries), so the level is anchored at the end: after the last entry it is the sum of the
//! device's live `segments`, and before the first entry that sum minus the net of all
//! entries. The peak is the highest level over the trace, that starting level included;
//! "when" and the stack are those of the first entry that reached it. Sums saturate: sizes a
//! crafted file sets near the 64-bit limit cannot wrap to a negative level.

use std::collections::BTreeMap;

use anyhow::{bail, Context};

use super::unpickle::{Node, NodeId, Pickle};

#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub name: String,
    pub filename: String,
    pub line: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub action: String,
    pub addr: i64,
    pub size: i64,
    pub time_us: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub device: i64,
    pub total_size: i64,
    /// (size, state) of each block.
    pub blocks: Vec<(i64, String)>,
}

#[derive(Debug, Default)]
pub struct Snapshot {
    pub segments: Vec<Segment>,
    pub device_traces: Vec<Vec<Entry>>,
}

/// Typed access to a decoded pickle, with errors that say where in the snapshot.
struct Reader<'p> {
    p: &'p Pickle,
}

impl Reader<'_> {
    fn field(&self, v: NodeId, key: &str, what: &str) -> anyhow::Result<NodeId> {
        self.p
            .get(v, key)
            .with_context(|| format!("{what} has no '{key}'"))
    }

    fn int(&self, v: NodeId, what: &str) -> anyhow::Result<i64> {
        match self.p.node(v) {
            Node::Int(i) => Ok(*i),
            _ => bail!("{what} is not an integer"),
        }
    }

    fn int_field(&self, v: NodeId, key: &str, what: &str) -> anyhow::Result<i64> {
        self.int(self.field(v, key, what)?, &format!("{what}['{key}']"))
    }

    fn str_field(&self, v: NodeId, key: &str, what: &str) -> anyhow::Result<String> {
        match self.p.node(self.field(v, key, what)?) {
            Node::Str(s) => Ok(s.to_string()),
            _ => bail!("{what}['{key}'] is not a string"),
        }
    }

    fn list(&self, v: NodeId, what: &str) -> anyhow::Result<&[NodeId]> {
        self.p
            .items(v)
            .with_context(|| format!("{what} is not a list"))
    }

    fn frames(&self, v: NodeId, what: &str) -> anyhow::Result<Vec<Frame>> {
        let Some(list_value) = self.p.get(v, "frames") else {
            return Ok(Vec::new());
        };
        self.list(list_value, &format!("{what}['frames']"))?
            .iter()
            .map(|&f| {
                Ok(Frame {
                    name: self.str_field(f, "name", "a frame")?,
                    filename: self.str_field(f, "filename", "a frame")?,
                    line: self.int_field(f, "line", "a frame")?,
                })
            })
            .collect()
    }
}

impl Snapshot {
    pub fn from_pickle(p: &Pickle) -> anyhow::Result<Snapshot> {
        let r = Reader { p };
        let v = p.root;
        if !matches!(p.node(v), Node::Dict(_)) {
            bail!("the pickle is not a dict");
        }
        let mut snap = Snapshot::default();
        for (i, &s) in r
            .list(r.field(v, "segments", "the snapshot")?, "segments")?
            .iter()
            .enumerate()
        {
            let what = format!("segments[{i}]");
            let blocks = r
                .list(r.field(s, "blocks", &what)?, &format!("{what}['blocks']"))?
                .iter()
                .map(|&b| {
                    Ok((
                        r.int_field(b, "size", "a block")?,
                        r.str_field(b, "state", "a block")?,
                    ))
                })
                .collect::<anyhow::Result<_>>()?;
            let device = r.int_field(s, "device", &what)?;
            if !(0..MAX_DEVICES as i64).contains(&device) {
                bail!(
                    "{what}['device'] = {device} is not a device index (0 to {})",
                    MAX_DEVICES - 1
                );
            }
            snap.segments.push(Segment {
                device,
                total_size: r.int_field(s, "total_size", &what)?,
                blocks,
            });
        }
        for (d, &trace) in r
            .list(
                r.field(v, "device_traces", "the snapshot")?,
                "device_traces",
            )?
            .iter()
            .enumerate()
        {
            let mut entries = Vec::new();
            for (i, &e) in r
                .list(trace, &format!("device_traces[{d}]"))?
                .iter()
                .enumerate()
            {
                let what = format!("device_traces[{d}][{i}]");
                entries.push(Entry {
                    action: r.str_field(e, "action", &what)?,
                    // `oom` entries have no address.
                    addr: p
                        .get(e, "addr")
                        .map(|a| r.int(a, &what))
                        .transpose()?
                        .unwrap_or(0),
                    size: r.int_field(e, "size", &what)?,
                    time_us: r.int_field(e, "time_us", &what)?,
                });
            }
            snap.device_traces.push(entries);
        }
        Ok(snap)
    }
}

#[derive(Debug, PartialEq)]
pub struct DeviceSummary {
    pub device: usize,
    /// Reserved bytes before the first trace entry.
    pub start: i64,
    pub peak: i64,
    /// The entry that first reached the peak, and its index in the device's trace; `None`
    /// when the peak is the starting level.
    pub peak_entry: Option<Entry>,
    pub peak_index: Option<usize>,
    /// The peak entry's stack (filled by [`summaries`]).
    pub peak_frames: Vec<Frame>,
    pub first_time_us: Option<i64>,
    pub live_segments: usize,
    pub live_bytes: i64,
    pub active_blocks: usize,
    pub active_bytes: i64,
    pub entries: usize,
    pub by_action: BTreeMap<String, usize>,
}

/// The per-device summaries of a decoded snapshot. Frames are read only for the entries that
/// reached a peak.
pub fn summaries(p: &Pickle) -> anyhow::Result<Vec<DeviceSummary>> {
    let mut devices = summarize(&Snapshot::from_pickle(p)?);
    for d in &mut devices {
        if let Some(i) = d.peak_index {
            d.peak_frames = entry_frames(p, d.device, i)?;
        }
    }
    Ok(devices)
}

/// The frames of entry `index` of device `device`'s trace (innermost first; empty when the
/// entry has none).
pub fn entry_frames(p: &Pickle, device: usize, index: usize) -> anyhow::Result<Vec<Frame>> {
    let r = Reader { p };
    let traces = r.list(
        r.field(p.root, "device_traces", "the snapshot")?,
        "device_traces",
    )?;
    let what = format!("device_traces[{device}][{index}]");
    let trace = traces
        .get(device)
        .with_context(|| format!("{what} is missing"))?;
    let entry = r
        .list(*trace, &what)?
        .get(index)
        .with_context(|| format!("{what} is missing"))?;
    r.frames(*entry, &what)
}

/// Device indexes above this are refused: a crafted segment's index of 2^62 must not make the
/// summary loop that many times.
const MAX_DEVICES: usize = 1 << 16;

pub fn summarize(snap: &Snapshot) -> Vec<DeviceSummary> {
    let ndev = snap.device_traces.len().max(
        snap.segments
            .iter()
            .filter_map(|s| usize::try_from(s.device).ok())
            .filter(|&d| d < MAX_DEVICES)
            .map(|d| d + 1)
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
            "segment_free" | "segment_unmap" => e.size.saturating_neg(),
            _ => 0,
        };
        let sum = |it: &mut dyn Iterator<Item = i64>| it.fold(0i64, i64::saturating_add);
        let live_bytes = sum(&mut segs.iter().map(|s| s.total_size));
        let start = live_bytes.saturating_sub(sum(&mut trace.iter().map(delta)));
        let (mut level, mut peak, mut peak_index) = (start, start, None);
        for (i, e) in trace.iter().enumerate() {
            level = level.saturating_add(delta(e));
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
            active_bytes: sum(&mut active().map(|(size, _)| *size)),
            entries: trace.len(),
            by_action,
        });
    }
    out
}
