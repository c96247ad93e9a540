//! *Regions*: the parts of a run another run of the same program also has (its steps, its
//! `record_function` and NVTX labels, its root `nn.Module`), each with its calls, its time and
//! the GPU work launched inside it: what `compare` sets side by side, eager against compiled.

use std::collections::BTreeMap;

use rustc_hash::FxHashSet;
use serde::Serialize;

use crate::load::{module_class, FileData, Interner, ModuleRange, NO_NAME};
use crate::model::links::{Links, NONE};
use crate::model::Analysis;
use crate::saturating::AddSat;
use crate::sections::launches::for_each_launched;

/// What a region is, in the order `compare` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RegionKind {
    /// The program's steps (`ProfilerStep#N`), as one region named `steps`.
    Step,
    /// A root `nn.Module` call (one inside no other), by the module's class: a compiled
    /// module's (`torch.compile(model)`) is its original class where the trace wrote its path
    /// (cuprof's `--with-modules`); torch's own traces name it `OptimizedModule`.
    Module,
    /// A `record_function` label or NVTX range, by name; only its outermost calls on a thread.
    Label,
}

/// One region's figures over every call of it in a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RegionFigures {
    pub calls: u64,
    /// The calls' own spans (host time from their start to their end).
    pub wall_ns: i64,
    /// The kernels launched inside the calls: their count and GPU time.
    pub kernels: u64,
    pub gpu_ns: i64,
    /// The distinct operators those kernels were launched from (each call's own): the
    /// operators that did GPU work, which torch.compile fuses into fewer kernels.
    pub launching_operators: u64,
}

/// Where one kernel was launched: its launch call's thread and start, its operator (`NONE`:
/// none), its GPU time.
#[derive(Clone, Copy)]
struct Launch {
    thread: u32,
    at: i64,
    operator: u32,
    gpu_ns: i64,
}

/// Each kernel of `f` joined to its launch call (by correlation id, any call: `launches`'
/// join), sorted by thread, then launch time; kernels with no launch call in the trace are not
/// placed in any region.
fn launches(names: &Interner, f: &FileData, links: Option<&Links>) -> Vec<Launch> {
    let mut out: Vec<Launch> = Vec::new();
    for_each_launched(
        names,
        f,
        |_| true,
        |i, k, a| {
            if k.kind.is_kernel() {
                out.push(Launch {
                    thread: a.thread,
                    at: a.start,
                    operator: links.map_or(NONE, |l| l.gpu[i]),
                    gpu_ns: k.end - k.start,
                });
            }
        },
    );
    out.sort_by_key(|l| (l.thread, l.at));
    out
}

/// Adds one call spanning `[start, end)` to `r`, with the kernels launched inside it: on
/// `thread` from `l` (sorted by thread, then time), or, with `thread` `None` (steps), on any
/// thread from `l` sorted by time alone.
fn add_call(r: &mut RegionFigures, l: &[Launch], thread: Option<u32>, start: i64, end: i64) {
    r.calls += 1;
    r.wall_ns.add_sat(end - start);
    let mut operators: FxHashSet<u32> = FxHashSet::default();
    let mut add = |k: &Launch| {
        r.kernels += 1;
        r.gpu_ns.add_sat(k.gpu_ns);
        if k.operator != NONE {
            operators.insert(k.operator);
        }
    };
    match thread {
        Some(t) => {
            let from = l.partition_point(|k| (k.thread, k.at) < (t, start));
            for k in l[from..].iter().take_while(|k| k.thread == t && k.at < end) {
                add(k);
            }
        }
        None => {
            let from = l.partition_point(|k| k.at < start);
            l[from..]
                .iter()
                .take_while(|k| k.at < end)
                .for_each(&mut add);
        }
    }
    r.launching_operators += operators.len() as u64;
}

/// The name a root module call's region goes by: the first component of its written path
/// (its class, the original one for a compiled module), else its event name's class.
fn root_class(names: &Interner, c: &ModuleRange) -> String {
    if c.path != NO_NAME {
        let path = names.name(c.path);
        return path.split('.').next().unwrap_or(path).to_string();
    }
    module_class(names.name(c.name)).to_string()
}

/// Every region of `an`'s files (all ranks together), by kind and name.
pub fn regions(an: &Analysis) -> BTreeMap<(RegionKind, String), RegionFigures> {
    let mut out: BTreeMap<(RegionKind, String), RegionFigures> = BTreeMap::new();
    for (i, f) in an.files.iter().enumerate() {
        let mut l = launches(&an.names, f, an.links[i].as_ref());
        if !f.steps.is_empty() {
            // Steps take every thread's launches: by time alone, then back to thread order.
            l.sort_by_key(|k| k.at);
            let r = out
                .entry((RegionKind::Step, "steps".to_string()))
                .or_default();
            for s in &f.steps {
                add_call(r, &l, None, s.start, s.start + s.dur);
            }
            l.sort_by_key(|k| (k.thread, k.at));
        }
        if let Some(tree) = &an.modules[i] {
            for (call, c) in f.modules.iter().enumerate() {
                if tree.parent[call] == NONE {
                    let name = root_class(&an.names, c);
                    let r = out.entry((RegionKind::Module, name)).or_default();
                    add_call(r, &l, Some(c.thread), c.start, c.end);
                }
            }
        }
        // A label's outermost calls on each thread: one inside another of the same name
        // (recursion) would count its kernels twice.
        let mut ranges: Vec<usize> = (0..f.ranges.len()).collect();
        ranges.sort_by_key(|&r| {
            let g = &f.ranges[r];
            (g.thread, g.name, g.start, std::cmp::Reverse(g.end))
        });
        let mut open: Option<(u32, u32, i64)> = None;
        for r in ranges {
            let g = &f.ranges[r];
            if open.is_some_and(|(t, n, end)| t == g.thread && n == g.name && g.start < end) {
                continue;
            }
            open = Some((g.thread, g.name, g.end));
            let name = an.names.name(g.name).to_string();
            let fig = out.entry((RegionKind::Label, name)).or_default();
            add_call(fig, &l, Some(g.thread), g.start, g.end);
        }
    }
    out
}
