//! The live figures of a recording process, for `cuprof top`: the writer thread hands every
//! input it takes to [`LiveStats`] before the session writes it, and the control thread asks
//! for a [`Snapshot`] about once a second. Nothing is read back from trace files.
//!
//! What is kept is bounded and cheap to update (one hash lookup per kernel or operator, one
//! push on a ring): a tally per name since the recording began, and the intervals of the GPU
//! work and operators that ended in the last two windows, from which a snapshot computes the
//! last window's busy share and top names.
//!
//! "The last window" is the [`WINDOW`] ending at the newest end seen (of GPU work, and of
//! operators, each its own): records reach the writer a flush interval late, so a window
//! ending at the clock's now would always look idle at its end. A snapshot says where its
//! windows end.

use crate::event::{Event, MemoryOp, Name, Range, RangeKind};
use crate::torch_op::TorchOp;
use std::collections::{HashMap, VecDeque};

/// The span of "the last second".
pub const WINDOW_NS: u64 = 1_000_000_000;
/// Names per list in a snapshot.
pub const TOP: usize = 5;
/// Intervals remembered per timeline (GPU work, operators): past it the oldest go.
const MAX_RECENT: usize = 1 << 18;
/// Distinct names tallied per table; later names are tallied under [`OTHER`].
const MAX_NAMES: usize = 1 << 15;
/// Name of the row that takes the names past [`MAX_NAMES`].
pub const OTHER: &str = "(other names)";
/// Step durations remembered for the median.
const STEP_RING: usize = 1024;
/// CUPTI_ACTIVITY_MEMORY_KIND_DEVICE.
const DEVICE_MEMORY: u32 = 3;
/// Marks an interval of GPU work that is not a kernel (a copy, a memset).
const NOT_A_KERNEL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    count: u64,
    ns: u64,
}

/// Hashes an address with one folded multiply (the default SipHash costs more than the rest
/// of a kernel's tally); the fold keeps the high bits, where aligned addresses differ.
#[derive(Default)]
struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_usize(self.0 as usize ^ usize::from(b));
        }
    }

    fn write_usize(&mut self, n: usize) {
        let p = u128::from(n as u64) * 0x9E37_79B9_7F4A_7C15;
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
}

/// Tallies by name. Kernel names are shared `Arc`s, so they are found by address first (no
/// hashing of long C++ names per kernel); the `Arc`s are kept so that an address is never
/// reused by another name.
#[derive(Default)]
struct Table {
    by_name: HashMap<Box<str>, u32>,
    by_address: HashMap<usize, u32, std::hash::BuildHasherDefault<AddressHasher>>,
    pinned: Vec<Name>,
    rows: Vec<(Box<str>, Tally)>,
}

impl Table {
    fn row_of(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        let name = if self.rows.len() >= MAX_NAMES {
            OTHER
        } else {
            name
        };
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        let i = self.rows.len() as u32;
        self.rows.push((name.into(), Tally::default()));
        self.by_name.insert(name.into(), i);
        i
    }

    fn row_of_shared(&mut self, name: &Name) -> u32 {
        let address = std::sync::Arc::as_ptr(name) as *const u8 as usize;
        if let Some(&i) = self.by_address.get(&address) {
            return i;
        }
        let i = self.row_of(name);
        if self.by_address.len() < MAX_NAMES {
            self.by_address.insert(address, i);
            self.pinned.push(name.clone());
        }
        i
    }

    fn add(&mut self, row: u32, ns: u64) {
        let t = &mut self.rows[row as usize].1;
        t.count += 1;
        t.ns += ns;
    }

    fn name(&self, row: u32) -> &str {
        &self.rows[row as usize].0
    }

    fn top(&self) -> Vec<Top> {
        top_of(self.rows.iter().map(|(n, t)| (&**n, *t)))
    }
}

/// The names with the most time, most first (ties: by name), at most [`TOP`].
fn top_of<'a>(rows: impl Iterator<Item = (&'a str, Tally)>) -> Vec<Top> {
    let mut v: Vec<(&str, Tally)> = rows.filter(|(_, t)| t.count > 0).collect();
    v.sort_by(|a, b| b.1.ns.cmp(&a.1.ns).then_with(|| a.0.cmp(b.0)));
    v.into_iter()
        .take(TOP)
        .map(|(n, t)| Top {
            name: n.to_owned(),
            count: t.count,
            ns: t.ns,
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
struct Interval {
    start: u64,
    end: u64,
    row: u32,
}

/// Intervals that ended lately, with the newest end seen.
#[derive(Default)]
struct Recent {
    intervals: VecDeque<Interval>,
    newest: u64,
}

impl Recent {
    fn push(&mut self, i: Interval) {
        self.newest = self.newest.max(i.end);
        if self.intervals.len() >= MAX_RECENT {
            self.intervals.pop_front();
        }
        self.intervals.push_back(i);
        // Two windows are kept: records of different streams arrive out of order.
        let keep_from = self.newest.saturating_sub(2 * WINDOW_NS);
        while self.intervals.front().is_some_and(|f| f.end < keep_from) {
            self.intervals.pop_front();
        }
    }

    /// The window ending at the newest end, and the intervals that overlap it, clipped to it.
    fn last_window(&self) -> (u64, Vec<Interval>) {
        let to = self.newest;
        let from = to.saturating_sub(WINDOW_NS);
        let v = self
            .intervals
            .iter()
            .filter(|i| i.end > from && i.start < to)
            .map(|i| Interval {
                start: i.start.max(from),
                end: i.end.min(to),
                row: i.row,
            })
            .collect();
        (to, v)
    }
}

/// One name of a snapshot's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Top {
    pub name: String,
    /// Kernels run (or operators called); in a last-window list, those that overlap it.
    pub count: u64,
    /// Time spent, ns (in a last-window list, inside the window).
    pub ns: u64,
}

/// What `cuprof top` shows of one process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// When the recording began (ns, the trace's clock); `None` while not recording.
    pub since: Option<u64>,
    /// The end of the last window of GPU work (0: no GPU work yet).
    pub gpu_to: u64,
    /// Time in that window when some GPU work of the process ran, ns (at most [`WINDOW_NS`]).
    pub busy_ns: u64,
    pub kernels_last: Vec<Top>,
    pub kernels_total: Vec<Top>,
    /// The end of the last window of operators (0: none yet).
    pub ops_to: u64,
    pub ops_last: Vec<Top>,
    pub ops_total: Vec<Top>,
    /// The last step's duration and the median of the last steps (up to 1024), ns.
    pub step_last_ns: Option<u64>,
    pub step_p50_ns: Option<u64>,
    /// Device memory allocated and not freed, bytes; `None` without memory records (the
    /// `MEM` activity off).
    pub memory_bytes: Option<u64>,
}

/// The writer thread's live figures (see the module's docs).
pub struct LiveStats {
    since: Option<u64>,
    kernels: Table,
    ops: Table,
    gpu: Recent,
    op_times: Recent,
    steps: VecDeque<u64>,
    /// `None` unless memory records are collected.
    memory: Option<u64>,
}

impl LiveStats {
    /// `memory`: device memory records are collected (from the start), so bytes in use can
    /// be counted.
    pub fn new(memory: bool) -> LiveStats {
        LiveStats {
            since: None,
            kernels: Table::default(),
            ops: Table::default(),
            gpu: Recent::default(),
            op_times: Recent::default(),
            steps: VecDeque::new(),
            memory: memory.then_some(0),
        }
    }

    /// A recording begins at `ts`: the names and windows start over.
    pub fn begin(&mut self, ts: u64) {
        self.since = Some(ts);
        self.kernels = Table::default();
        self.ops = Table::default();
        self.gpu = Recent::default();
        self.op_times = Recent::default();
    }

    /// The recording ended.
    pub fn end(&mut self) {
        self.since = None;
    }

    pub fn events(&mut self, events: &[Event]) {
        for e in events {
            match e {
                Event::Kernel(k) => {
                    let row = self.kernels.row_of_shared(&k.name);
                    let ns = k.end.saturating_sub(k.start);
                    self.kernels.add(row, ns);
                    self.gpu.push(Interval {
                        start: k.start,
                        end: k.end,
                        row,
                    });
                }
                Event::Memcpy(m) => self.other_work(m.start, m.end),
                Event::Memset(m) => self.other_work(m.start, m.end),
                Event::Memory(m) if m.memory_kind == DEVICE_MEMORY => {
                    if let Some(bytes) = &mut self.memory {
                        *bytes = match m.op {
                            MemoryOp::Alloc => bytes.saturating_add(m.bytes),
                            MemoryOp::Free => bytes.saturating_sub(m.bytes),
                        };
                    }
                }
                Event::Range(r) => self.range(r),
                _ => {}
            }
        }
    }

    fn other_work(&mut self, start: u64, end: u64) {
        self.gpu.push(Interval {
            start,
            end,
            row: NOT_A_KERNEL,
        });
    }

    /// A range: counted when it is a PyTorch operator.
    pub fn range(&mut self, r: &Range) {
        let name = match r.kind {
            RangeKind::NativeOp => TorchOp::parse_made(&r.name).map(|o| o.name),
            RangeKind::PushPop => TorchOp::parse(&r.name).map(|o| o.name),
            _ => None,
        };
        let Some(name) = name else { return };
        let row = self.ops.row_of(name);
        self.ops.add(row, r.end.saturating_sub(r.start));
        self.op_times.push(Interval {
            start: r.start,
            end: r.end,
            row,
        });
    }

    /// A step ended after `ns`.
    pub fn step(&mut self, ns: u64) {
        if self.steps.len() >= STEP_RING {
            self.steps.pop_front();
        }
        self.steps.push_back(ns);
    }

    pub fn snapshot(&self) -> Snapshot {
        let (gpu_to, gpu) = self.gpu.last_window();
        let busy_ns = union_ns(gpu.iter().map(|i| (i.start, i.end)).collect());
        let kernels_last = last_top(&self.kernels, gpu.iter().filter(|i| i.row != NOT_A_KERNEL));
        let (ops_to, ops) = self.op_times.last_window();
        let mut steps: Vec<u64> = self.steps.iter().copied().collect();
        steps.sort_unstable();
        Snapshot {
            since: self.since,
            gpu_to,
            busy_ns,
            kernels_last,
            kernels_total: self.kernels.top(),
            ops_to,
            ops_last: last_top(&self.ops, ops.iter()),
            ops_total: self.ops.top(),
            step_last_ns: self.steps.back().copied(),
            step_p50_ns: steps.get(steps.len().saturating_sub(1) / 2).copied(),
            memory_bytes: self.memory,
        }
    }
}

/// The top names of the intervals of one window.
fn last_top<'a>(table: &Table, intervals: impl Iterator<Item = &'a Interval>) -> Vec<Top> {
    let mut by_row: HashMap<u32, Tally> = HashMap::new();
    for i in intervals {
        let t = by_row.entry(i.row).or_default();
        t.count += 1;
        t.ns += i.end - i.start;
    }
    top_of(by_row.into_iter().map(|(row, t)| (table.name(row), t)))
}

/// The length of the union of the intervals.
fn union_ns(mut v: Vec<(u64, u64)>) -> u64 {
    v.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(u64, u64)> = None;
    for (s, e) in v {
        match &mut cur {
            Some((_, ce)) if s <= *ce => *ce = (*ce).max(e),
            _ => {
                if let Some((cs, ce)) = cur {
                    total += ce - cs;
                }
                cur = Some((s, e));
            }
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

#[cfg(test)]
mod tests;
