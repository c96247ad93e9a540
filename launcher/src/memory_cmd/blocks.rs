//! Leaks and the peak of allocated blocks in a snapshot's trace, grouped by the allocating
//! stack: its PyTorch operator, Python line and frames.
//!
//! The rules match `cuprof report`'s for a trace's `[memory]` events (docs/analysis.md): a
//! block is allocated by an `alloc` entry and freed by the first later `free_requested` or
//! `free_completed` entry at its address (an `alloc` at an address still held frees the block
//! before it). Live bytes are those of the trace's blocks allocated and not yet freed (blocks
//! allocated before the trace's first entry are not known, and not counted). Leaks: blocks
//! allocated in the trace and not freed by its last entry. The peak: the highest live bytes, at
//! the first entry that reached it.

use std::collections::HashMap;

use super::snapshot::{entry_frames, Frame, Snapshot};
use super::unpickle::Pickle;

/// Groups kept per list, largest first.
pub const MAX_GROUPS: usize = 20;

/// Blocks allocated with one stack.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// The outermost PyTorch operator in the stack (`aten::NAME` of an `at::_ops::NAME::`
    /// frame), or `(no operator)`.
    pub operator: String,
    /// The innermost Python frame outside PyTorch and the standard library, `file:line`.
    pub line: Option<String>,
    pub frames: Vec<Frame>,
    pub bytes: i64,
    pub count: u64,
}

/// One device's blocks over the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Blocks {
    /// `alloc` entries in the trace.
    pub allocations: u64,
    pub leaked_bytes: i64,
    pub leaked_count: u64,
    pub leaks: Vec<Group>,
    pub peak_bytes: i64,
    /// `time_us` of the entry that reached the peak; `None` without allocations.
    pub peak_time_us: Option<i64>,
    pub at_peak: Vec<Group>,
}

struct Block {
    entry: usize,
    size: i64,
    freed: usize,
}

/// Device `device`'s blocks in `snap` (read from `p`, where their frames are).
pub fn blocks(p: &Pickle, snap: &Snapshot, device: usize) -> anyhow::Result<Blocks> {
    let empty = Vec::new();
    let trace = snap.device_traces.get(device).unwrap_or(&empty);
    let mut all: Vec<Block> = Vec::new();
    let mut open: HashMap<i64, usize> = HashMap::new();
    for (i, e) in trace.iter().enumerate() {
        match e.action.as_str() {
            "alloc" => {
                if let Some(prev) = open.insert(e.addr, all.len()) {
                    all[prev].freed = i;
                }
                all.push(Block {
                    entry: i,
                    size: e.size,
                    freed: usize::MAX,
                });
            }
            "free_requested" | "free_completed" => {
                if let Some(b) = open.remove(&e.addr) {
                    all[b].freed = i;
                }
            }
            _ => {}
        }
    }
    let mut changes: Vec<(usize, i64)> = Vec::with_capacity(all.len() * 2);
    for b in &all {
        changes.push((b.entry, b.size));
        if b.freed != usize::MAX {
            changes.push((b.freed, b.size.saturating_neg()));
        }
    }
    changes.sort_unstable_by_key(|c| c.0);
    let (mut level, mut peak, mut peak_at) = (0i64, 0i64, None);
    let mut k = 0;
    while k < changes.len() {
        let at = changes[k].0;
        while k < changes.len() && changes[k].0 == at {
            level = level.saturating_add(changes[k].1);
            k += 1;
        }
        if level > peak {
            (peak, peak_at) = (level, Some(at));
        }
    }
    let leaked: Vec<&Block> = all.iter().filter(|b| b.freed == usize::MAX).collect();
    let at_peak: Vec<&Block> = match peak_at {
        Some(p) => all.iter().filter(|b| b.entry <= p && b.freed > p).collect(),
        None => Vec::new(),
    };
    Ok(Blocks {
        allocations: all.len() as u64,
        leaked_bytes: leaked.iter().fold(0i64, |s, b| s.saturating_add(b.size)),
        leaked_count: leaked.len() as u64,
        leaks: groups(p, device, &leaked)?,
        peak_bytes: peak,
        peak_time_us: peak_at.map(|i| trace[i].time_us),
        at_peak: groups(p, device, &at_peak)?,
    })
}

/// `blocks` by operator and frames, largest first, at most [`MAX_GROUPS`].
fn groups(p: &Pickle, device: usize, blocks: &[&Block]) -> anyhow::Result<Vec<Group>> {
    // (operator, frames as name, file, line) -> index in `out`.
    type Key = (String, Vec<(String, String, i64)>);
    let mut by: HashMap<Key, usize> = HashMap::new();
    let mut out: Vec<Group> = Vec::new();
    for b in blocks {
        let frames = entry_frames(p, device, b.entry)?;
        let key: Vec<(String, String, i64)> = frames
            .iter()
            .map(|f| (f.name.clone(), f.filename.clone(), f.line))
            .collect();
        let operator = operator(&frames);
        let g = *by.entry((operator.clone(), key)).or_insert_with(|| {
            out.push(Group {
                operator,
                line: python_line(&frames),
                frames,
                bytes: 0,
                count: 0,
            });
            out.len() - 1
        });
        out[g].bytes = out[g].bytes.saturating_add(b.size);
        out[g].count += 1;
    }
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.count.cmp(&a.count))
            .then_with(|| a.operator.cmp(&b.operator))
            .then_with(|| a.line.cmp(&b.line))
    });
    out.truncate(MAX_GROUPS);
    Ok(out)
}

/// `aten::NAME` of the outermost `at::_ops::NAME::...` frame (frames are innermost first).
fn operator(frames: &[Frame]) -> String {
    frames
        .iter()
        .rev()
        .find_map(|f| {
            let rest = f.name.split_once("at::_ops::")?.1;
            let name = rest.split("::").next().filter(|n| !n.is_empty())?;
            Some(format!("aten::{name}"))
        })
        .unwrap_or_else(|| "(no operator)".to_string())
}

/// The innermost Python frame (a `.py` file, or `<string>`, `<stdin>`: what native frames
/// never name) outside PyTorch and the standard library, else the innermost Python frame, as
/// `file:line`.
fn python_line(frames: &[Frame]) -> Option<String> {
    let python: Vec<&Frame> = frames
        .iter()
        .filter(|f| f.filename.ends_with(".py") || f.filename.starts_with('<'))
        .collect();
    let stack: Vec<String> = python
        .iter()
        .map(|f| format!("{}({}): {}", f.filename, f.line, f.name))
        .collect();
    let joined = stack.join(";");
    let site = cuprof_analysis::model::links::call_site(&joined)?;
    let i = stack.iter().position(|s| s == site)?;
    Some(format!("{}:{}", python[i].filename, python[i].line))
}
