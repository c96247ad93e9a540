//! PyTorch's allocations over each trace's window (`[memory]` events, an allocation paired with
//! its free by device and address): what was still alive at the window's end (leaks), live
//! bytes rising step over step (growth), and the peak of live bytes with what was alive then;
//! each grouped by the operator that allocated, its Python line, its call stack and, where the
//! trace has `nn.Module` calls, the module path the operator ran in.
//!
//! The rules (`docs/analysis.md` says the same for users):
//! * An **allocation** is a `[memory]` event with `Bytes` > 0 and an `Addr`; it is freed by the
//!   first later event with `Bytes` < 0 on the same device (`Device Type`, `Device Id`) at the
//!   same `Addr` (events at one time in file order). An allocation at an address still held
//!   frees the one before it (its free was not recorded).
//! * **Live bytes** at an instant: the sizes of the window's allocations made by then and not
//!   yet freed. Memory allocated before the window began is not known, and not counted.
//! * **Leaks**: allocations made in the window and not freed before it ended.
//! * **Growth**: with at least [`MIN_STEPS`] steps (`ProfilerStep#N`), the live bytes at each
//!   step's end; they grow when each of the last `K = min(steps, `[`GROWTH_STEPS`]`)` step ends
//!   is higher than the one before. The groups are the allocations made after the first of
//!   those step ends and alive at the last.
//! * **Peak**: the highest live bytes, at the first event that reached it; the step is the
//!   `ProfilerStep#N` around that instant.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::load::{FileData, Interner, TensorMemoryOn, NO_NAME};
use crate::model::links::{call_site, Links, NONE, NO_OPERATOR};
use crate::model::modules::ModuleTree;
use crate::saturating::AddSat;

/// Steps needed before growth is looked for.
pub const MIN_STEPS: usize = 3;
/// Step ends that must each rise for live bytes to be growing.
pub const GROWTH_STEPS: usize = 4;
/// Groups kept per list, largest first.
pub const MAX_GROUPS: usize = 20;

/// Allocations made by one operator with one call stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationGroup {
    /// The innermost operator open on the allocating thread (`(no operator)`: none).
    pub operator: String,
    /// The operator's Python line ([`call_site`] of its stack); absent without stacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_site: Option<String>,
    /// The operator's `Call stack` (innermost frame first, `;` between frames).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    /// The module path of the innermost `nn.Module` call holding the operator; absent without
    /// one (or in a trace without module calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    pub bytes: i64,
    pub count: u64,
}

/// The live bytes at one step's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepLive {
    pub step: i64,
    pub end_ns: i64,
    pub bytes: i64,
}

/// Live bytes rising at each of the last step ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Growth {
    /// The steps whose ends rose (the first is the base).
    pub steps: Vec<i64>,
    /// Live bytes at the last of them minus at the first.
    pub bytes: i64,
    /// The allocations made after the first of those step ends and alive at the last.
    pub groups: Vec<AllocationGroup>,
}

/// One device's allocations in one trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceAllocations {
    pub rank: i64,
    pub file: String,
    /// `GPU N` or `CPU`.
    pub device: String,
    pub window_start_ns: i64,
    pub window_end_ns: i64,
    /// Allocations made in the window (with an `Addr`).
    pub allocations: u64,
    pub leaked_bytes: i64,
    pub leaked_count: u64,
    /// Allocations alive at the window's end, by operator and stack, largest first (at most
    /// [`MAX_GROUPS`]).
    pub leaks: Vec<AllocationGroup>,
    pub peak_bytes: i64,
    pub peak_ns: i64,
    /// `ProfilerStep#N` around the peak; absent outside every step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_step: Option<i64>,
    /// What was alive at the peak, largest first (at most [`MAX_GROUPS`]).
    pub at_peak: Vec<AllocationGroup>,
    /// Live bytes at each step's end, in step order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_ends: Vec<StepLive>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth: Option<Growth>,
}

/// One allocation: its event, where it sits in time order, and when it was freed.
struct Alloc {
    event: u32,
    pos: usize,
    freed_pos: usize,
    freed_ns: i64,
}

/// The allocations of every file (`ranks`: each file's rank; `trees`: each file's module
/// calls), per file and device (GPUs by index, then the CPU).
pub fn find(
    names: &Interner,
    files: &[FileData],
    links: &[Option<Links>],
    trees: &[Option<ModuleTree>],
    ranks: &[i64],
) -> Vec<DeviceAllocations> {
    let mut out = Vec::new();
    for (((f, l), t), &rank) in files.iter().zip(links).zip(trees).zip(ranks) {
        out.extend(of_file(names, f, l.as_ref(), t.as_ref(), rank));
    }
    out
}

fn of_file(
    names: &Interner,
    f: &FileData,
    l: Option<&Links>,
    t: Option<&ModuleTree>,
    rank: i64,
) -> Vec<DeviceAllocations> {
    let tm = &f.tensor_memory;
    if tm.iter().all(|m| m.addr.is_none() || m.bytes <= 0) {
        return Vec::new();
    }
    let mut order: Vec<u32> = (0..tm.len() as u32).collect();
    order.sort_by_key(|&i| tm[i as usize].ts);
    let key = |i: u32| {
        let m = &tm[i as usize];
        (m.on, m.device)
    };
    // Pair each allocation with its free.
    let mut allocs: Vec<Alloc> = Vec::new();
    let mut open: FxHashMap<((TensorMemoryOn, i64), u64), usize> = FxHashMap::default();
    for (pos, &i) in order.iter().enumerate() {
        let m = &tm[i as usize];
        let Some(addr) = m.addr else { continue };
        let k = (key(i), addr);
        if m.bytes > 0 {
            if let Some(prev) = open.insert(k, allocs.len()) {
                (allocs[prev].freed_pos, allocs[prev].freed_ns) = (pos, m.ts);
            }
            allocs.push(Alloc {
                event: i,
                pos,
                freed_pos: usize::MAX,
                freed_ns: i64::MAX,
            });
        } else if m.bytes < 0 {
            if let Some(a) = open.remove(&k) {
                (allocs[a].freed_pos, allocs[a].freed_ns) = (pos, m.ts);
            }
        }
    }
    let window = window(f);
    let mut devices: Vec<(TensorMemoryOn, i64)> = allocs.iter().map(|a| key(a.event)).collect();
    devices.sort_by_key(|&(on, d)| (on != TensorMemoryOn::Device, d));
    devices.dedup();
    let mut steps: Vec<(i64, i64, i64)> = f
        .steps
        .iter()
        .map(|s| (s.start.saturating_add(s.dur), s.number, s.start))
        .collect();
    steps.sort_unstable();
    let group = |of: &mut dyn Iterator<Item = &Alloc>| groups(names, f, l, t, of);

    let mut out = Vec::new();
    for dev in devices {
        let mine: Vec<&Alloc> = allocs.iter().filter(|a| key(a.event) == dev).collect();
        let size = |a: &Alloc| tm[a.event as usize].bytes;
        // Live bytes over time order: +size at `pos`, -size at `freed_pos`.
        let mut changes: Vec<(usize, i64)> = Vec::with_capacity(mine.len() * 2);
        for a in &mine {
            changes.push((a.pos, size(a)));
            if a.freed_pos != usize::MAX {
                changes.push((a.freed_pos, -size(a)));
            }
        }
        changes.sort_unstable_by_key(|c| c.0);
        let (mut level, mut peak, mut peak_pos) = (0i64, 0i64, 0usize);
        let mut k = 0;
        while k < changes.len() {
            let pos = changes[k].0;
            while k < changes.len() && changes[k].0 == pos {
                level.add_sat(changes[k].1);
                k += 1;
            }
            if level > peak {
                (peak, peak_pos) = (level, pos);
            }
        }
        let peak_ns = tm[order[peak_pos] as usize].ts;
        let alive_at = |p: usize| move |a: &&&Alloc| a.pos <= p && a.freed_pos > p;
        let alive_at_ns =
            |t: i64| move |a: &&&Alloc| tm[a.event as usize].ts <= t && a.freed_ns > t;
        let leaked: Vec<&&Alloc> = mine.iter().filter(|a| a.freed_pos == usize::MAX).collect();
        // Live bytes at each step end: a sweep over the changes in time.
        let mut timed: Vec<(i64, i64)> = Vec::with_capacity(changes.len());
        for a in &mine {
            timed.push((tm[a.event as usize].ts, size(a)));
            if a.freed_pos != usize::MAX {
                timed.push((a.freed_ns, -size(a)));
            }
        }
        timed.sort_unstable_by_key(|c| c.0);
        let (mut at, mut live) = (0, 0i64);
        let step_ends: Vec<StepLive> = steps
            .iter()
            .map(|&(end, step, _)| {
                while at < timed.len() && timed[at].0 <= end {
                    live.add_sat(timed[at].1);
                    at += 1;
                }
                StepLive {
                    step,
                    end_ns: end,
                    bytes: live,
                }
            })
            .collect();
        let growth = growth(&step_ends).map(|(first, last)| {
            let (from, to) = (step_ends[first].end_ns, step_ends[last].end_ns);
            Growth {
                steps: step_ends[first..=last].iter().map(|s| s.step).collect(),
                bytes: step_ends[last].bytes - step_ends[first].bytes,
                groups: group(
                    &mut mine
                        .iter()
                        .filter(|a| tm[a.event as usize].ts > from)
                        .filter(alive_at_ns(to))
                        .copied(),
                ),
            }
        });
        out.push(DeviceAllocations {
            rank,
            file: f.path.to_string_lossy().into_owned(),
            device: match dev.0 {
                TensorMemoryOn::Device => format!("GPU {}", dev.1),
                TensorMemoryOn::Cpu => "CPU".to_string(),
            },
            window_start_ns: window.0,
            window_end_ns: window.1,
            allocations: mine.len() as u64,
            leaked_bytes: leaked.iter().fold(0i64, |s, a| s.saturating_add(size(a))),
            leaked_count: leaked.len() as u64,
            leaks: group(&mut leaked.iter().map(|a| **a)),
            peak_bytes: peak,
            peak_ns,
            peak_step: steps
                .iter()
                .find(|&&(end, _, start)| start <= peak_ns && peak_ns <= end)
                .map(|s| s.1),
            at_peak: group(&mut mine.iter().filter(alive_at(peak_pos)).copied()),
            step_ends,
            growth,
        });
    }
    out
}

/// The first and last index of the rising step ends, if the live bytes grow.
fn growth(ends: &[StepLive]) -> Option<(usize, usize)> {
    if ends.len() < MIN_STEPS {
        return None;
    }
    let first = ends.len() - ends.len().min(GROWTH_STEPS);
    ends[first..]
        .windows(2)
        .all(|w| w[1].bytes > w[0].bytes)
        .then_some((first, ends.len() - 1))
}

/// The trace's span: from its first event to its last (operators, GPU work, steps,
/// allocations).
fn window(f: &FileData) -> (i64, i64) {
    let spans = f
        .cpu_ops
        .iter()
        .map(|o| (o.start, o.end))
        .chain(f.ops.iter().map(|o| (o.start, o.end)))
        .chain(
            f.steps
                .iter()
                .map(|s| (s.start, s.start.saturating_add(s.dur))),
        )
        .chain(f.tensor_memory.iter().map(|m| (m.ts, m.ts)));
    spans.fold((i64::MAX, i64::MIN), |(a, b), (s, e)| (a.min(s), b.max(e)))
}

/// `allocs` by operator, call stack and module path, largest first, at most [`MAX_GROUPS`].
fn groups(
    names: &Interner,
    f: &FileData,
    l: Option<&Links>,
    t: Option<&ModuleTree>,
    allocs: &mut dyn Iterator<Item = &Alloc>,
) -> Vec<AllocationGroup> {
    let mut by: FxHashMap<(u32, u32, u32), (i64, u64)> = FxHashMap::default();
    for a in allocs {
        let op = l.map_or(NONE, |l| l.tensor_memory[a.event as usize]);
        let (name, stack) = if op == NONE {
            (NO_NAME, NO_NAME)
        } else {
            let l = l.expect("an operator comes from links");
            (f.cpu_ops[op as usize].name, l.stack_of(&f.cpu_ops, op))
        };
        // The module path's index in the tree (`NONE`: no module call holds the operator).
        let module = match (t, op) {
            (Some(t), op) if op != NONE => match t.op[op as usize] {
                NONE => NONE,
                m => t.path[m as usize],
            },
            _ => NONE,
        };
        let e = by.entry((name, stack, module)).or_default();
        e.0.add_sat(f.tensor_memory[a.event as usize].bytes);
        e.1 += 1;
    }
    let mut rows: Vec<AllocationGroup> = by
        .into_iter()
        .map(|((name, stack, module), (bytes, count))| {
            let stack = (stack != NO_NAME).then(|| names.name(stack));
            AllocationGroup {
                operator: if name == NO_NAME {
                    NO_OPERATOR.to_string()
                } else {
                    names.name(name).to_string()
                },
                call_site: stack.and_then(call_site).map(str::to_string),
                stack: stack.map(str::to_string),
                module: t
                    .filter(|_| module != NONE)
                    .map(|t| t.paths[module as usize].clone()),
                bytes,
                count,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.count.cmp(&a.count))
            .then_with(|| a.operator.cmp(&b.operator))
            .then_with(|| a.stack.cmp(&b.stack))
            .then_with(|| a.module.cmp(&b.module))
    });
    rows.truncate(MAX_GROUPS);
    rows
}
