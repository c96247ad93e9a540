//! PyTorch operators (`cpu_op` events): how they nest on each thread, their self time, which
//! operator launched each GPU operation and made each PyTorch allocation (`[memory]`: the
//! innermost one open on the allocating thread), then the per-operator figures of `cuprof
//! report`, by name, by input shapes and by the Python line that called them.
//!
//! Attribution follows the rule the trace's producer followed, decided per trace from its data
//! ([`AttributionRule`]): in current Kineto traces (and cuprof's) a GPU operation belongs to the
//! operator whose `External id` it carries, and when it carries none, to the one its launching
//! CUDA call carries (found by correlation id): the innermost operator open at the launch. In
//! older torch.profiler traces a launch's and its GPU work's `External id` is the launch's own
//! correlation id, so it names no operator (it equals unrelated operators' ids by chance): there
//! the launch belongs to the innermost operator that contains it on its thread (what
//! torch.profiler's own tables and HTA's call stacks use), and its GPU work to that launch.

use crate::saturating::AddSat;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::load::{CpuOp, FileData, Interner, TensorMemoryOn, NO_NAME};
use crate::model::links::{call_site, Links, NONE, NO_OPERATOR};
use crate::model::ratio;

/// One operator name (and, in `by_input_dims`, one list of input shapes).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OperatorRow {
    pub name: String,
    /// `Input Dims` without whitespace (`""` for calls recorded without shapes); only in
    /// `by_input_dims`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_dims: Option<String>,
    pub count: u64,
    /// Sum of the calls' durations (nested operators included).
    pub cpu_ns: i64,
    /// `cpu_ns` minus the operators nested directly in each call on its thread.
    pub self_cpu_ns: i64,
    /// GPU time (kernels, memcpy, memset; plain sum) this operator launched as the innermost
    /// operator.
    pub gpu_ns: i64,
    /// GPU operations counted in `gpu_ns`.
    pub gpu_ops: u64,
    /// `gpu_ns` plus the GPU time launched by operators nested in its calls.
    pub gpu_total_ns: i64,
    /// `gpu_ns / all GPU time`.
    pub gpu_share: f64,
    /// torch's FLOP count over the calls (`flops`: `--with-flops`, or torch.profiler's
    /// `with_flops`); absent when none was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flops: Option<u64>,
    /// `flops` over `gpu_total_ns`, in TFLOP/s: what the GPU work the calls launched achieved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_tflops: Option<f64>,
    /// PyTorch's allocations minus its frees in the calls, nested operators included, and in
    /// the calls alone (torch's `key_averages` "CPU Mem", "Self CPU Mem", "CUDA Mem", "Self CUDA
    /// Mem"); absent when the trace recorded no allocations (`MEM`, `profile_memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<OperatorMemory>,
}

/// An operator's net allocations, in bytes (see [`OperatorRow::memory`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorMemory {
    pub cpu_bytes: i64,
    pub self_cpu_bytes: i64,
    /// On the GPU (CUDA, HIP, XPU, PrivateUse1).
    pub device_bytes: i64,
    pub self_device_bytes: i64,
}

impl OperatorMemory {
    fn add(&mut self, on: TensorMemoryOn, bytes: i64, own: bool) {
        let (total, this) = match on {
            TensorMemoryOn::Cpu => (&mut self.cpu_bytes, &mut self.self_cpu_bytes),
            TensorMemoryOn::Device => (&mut self.device_bytes, &mut self.self_device_bytes),
        };
        total.add_sat(bytes);
        if own {
            this.add_sat(bytes);
        }
    }
}

/// One Python line that called into PyTorch (see [`call_site`]): what the operators it ran did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallSiteRow {
    /// The frame, as the trace writes it: `file(line): function`.
    pub call_site: String,
    /// Operators entered from this line: those whose enclosing operator is at another line, or
    /// which have none.
    pub calls: u64,
    /// GPU time launched by the operators at this line (as the innermost operator).
    pub gpu_ns: i64,
    /// `gpu_ns / all GPU time`.
    pub gpu_share: f64,
    /// Self CPU time of the operators at this line (every operator's time counts once).
    pub self_cpu_ns: i64,
    /// The net allocations made with an operator at this line the innermost one open (the
    /// self figures of [`OperatorMemory`]); absent when the trace recorded none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<CallSiteMemory>,
}

/// A call site's net allocations, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSiteMemory {
    pub cpu_bytes: i64,
    pub device_bytes: i64,
}

/// `summary.json`'s `operators.tensor_memory`: PyTorch's allocations and frees in the trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorMemoryTotals {
    /// `[memory]` events counted (on the CPU or a GPU).
    pub events: u64,
    /// Net bytes allocated outside every operator, on the CPU (torch's tables count them in the
    /// `record_function` labels and steps around them, else in a `[memory]` row).
    pub outside_operators_cpu_bytes: i64,
    /// The same on the GPU.
    pub outside_operators_device_bytes: i64,
}

/// `summary.json`'s `operators`, present when a trace has `cpu_op` events.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Operators {
    /// Operator calls in all files.
    pub calls: u64,
    /// GPU time of all GPU operations (the denominator of `gpu_share`).
    pub gpu_ns: i64,
    /// GPU time no operator launched (in `(no operator)` in `top_kernels[].operator`).
    pub gpu_without_operator_ns: i64,
    /// The host's time inside operators: every call's self time summed (the outermost
    /// operators' time on every thread).
    #[serde(default)]
    pub self_cpu_ns: i64,
    /// How `top`, `by_input_dims` and `by_call_site` are ordered ([`RankedBy::of`]).
    #[serde(default)]
    pub ranked_by: RankedBy,
    /// Per operator name, by `ranked_by`: `gpu_ns` then `cpu_ns`, or `self_cpu_ns` then
    /// `gpu_ns` (descending).
    pub top: Vec<OperatorRow>,
    /// Per operator name and input shapes, same order; empty when no shapes were recorded.
    pub by_input_dims: Vec<OperatorRow>,
    /// Present when the trace recorded PyTorch's allocations (then every row has `memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_memory: Option<TensorMemoryTotals>,
    /// Per Python line that called into PyTorch ([`call_site`] of the operators' `Call stack`:
    /// `--with-stack`, or torch.profiler's `with_stack`), by `gpu_ns` then `self_cpu_ns`, or
    /// the other way round when `ranked_by` is `self_cpu_time`; empty when no operator has a
    /// stack.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_call_site: Vec<CallSiteRow>,
    /// What the rows of `by_call_site` name; present with them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_sites: Option<CallSiteKind>,
}

/// What the operator tables are ordered by: the GPU time the operators launched, or, when the
/// run is CPU-bound, their self CPU time (a wrapper's time is mostly its children's: by
/// inclusive time the wrappers would come first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankedBy {
    #[default]
    GpuTime,
    SelfCpuTime,
}

impl RankedBy {
    /// The run is CPU-bound when its GPU time (every GPU operation, plain sum) is less than
    /// half the host's time inside operators (`self_cpu_ns` summed over every call): then the
    /// operators rank by self CPU time, else by GPU time.
    pub fn of(gpu_ns: i64, self_cpu_ns: i64) -> RankedBy {
        if gpu_ns.saturating_mul(2) < self_cpu_ns {
            RankedBy::SelfCpuTime
        } else {
            RankedBy::GpuTime
        }
    }
}

/// What a call site names. A `Call stack` (cuprof's, and torch.profiler's before 2.0) names
/// each frame by the line running in it; torch 2.x's `python_function` events name a function
/// by the line it is defined on (`python_frames`), so there a call site is the function that
/// called into PyTorch. Traces of both kinds read together give both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallSiteKind {
    Lines,
    Functions,
    LinesAndFunctions,
}

impl CallSiteKind {
    /// Over the files whose operators have stacks, each saying whether its stacks were made
    /// from functions; `None` for no file.
    pub fn of(from_functions: impl IntoIterator<Item = bool>) -> Option<CallSiteKind> {
        let (mut lines, mut functions) = (false, false);
        for f in from_functions {
            functions |= f;
            lines |= !f;
        }
        match (lines, functions) {
            (false, false) => None,
            (true, false) => Some(CallSiteKind::Lines),
            (false, true) => Some(CallSiteKind::Functions),
            (true, true) => Some(CallSiteKind::LinesAndFunctions),
        }
    }

    /// What one call site is, for a column's heading.
    pub fn noun(self) -> &'static str {
        match self {
            CallSiteKind::Lines => "Python line",
            CallSiteKind::Functions => "Python function",
            CallSiteKind::LinesAndFunctions => "Python line or function",
        }
    }

    /// Call sites, for a title.
    pub fn plural(self) -> &'static str {
        match self {
            CallSiteKind::Lines => "Python lines",
            CallSiteKind::Functions => "Python functions",
            CallSiteKind::LinesAndFunctions => "Python lines and functions",
        }
    }
}

/// Per kernel name id: the operator name that launched most of its time, and that time.
pub type KernelOperators = FxHashMap<u32, (String, i64)>;

#[derive(Default, Clone, Copy)]
struct Acc {
    count: u64,
    cpu: i64,
    self_cpu: i64,
    gpu: i64,
    gpu_ops: u64,
    gpu_total: i64,
    flops: u64,
    memory: OperatorMemory,
}

/// The per-call-site figures ([`CallSiteRow`]), gathered file by file.
#[derive(Default)]
struct CallSites<'n> {
    index: FxHashMap<&'n str, u32>,
    /// Per `Call stack` name id: its call site's id, or `NONE`.
    of_stack: FxHashMap<u32, u32>,
    rows: Vec<(&'n str, Acc)>,
}

impl<'n> CallSites<'n> {
    fn id(&mut self, site: &'n str) -> u32 {
        let next = self.rows.len() as u32;
        *self.index.entry(site).or_insert_with(|| {
            self.rows.push((site, Acc::default()));
            next
        })
    }

    /// Adds `f`'s operators, their GPU work and allocations to their lines.
    fn add_file(&mut self, names: &'n Interner, f: &FileData, l: &Links) {
        let ops = &f.cpu_ops;
        if ops.iter().all(|o| o.stack == NO_NAME) {
            return;
        }
        // Each counted operator's line: its own stack's, else the nearest enclosing
        // operator's that has one.
        let mut site = vec![NONE; ops.len()];
        let mut any = false;
        for (i, line) in site.iter_mut().enumerate() {
            if l.rep[i] != i as u32 {
                continue;
            }
            let stack = l.stack_of(ops, i as u32);
            if stack != NO_NAME {
                // Operators share few stacks: each is read once.
                let id = match self.of_stack.get(&stack) {
                    Some(&id) => id,
                    None => {
                        let id = call_site(names.name(stack)).map_or(NONE, |s| self.id(s));
                        self.of_stack.insert(stack, id);
                        id
                    }
                };
                *line = id;
                any |= id != NONE;
            }
        }
        if !any {
            return;
        }
        for i in 0..ops.len() {
            let s = site[i];
            if s == NONE {
                continue;
            }
            let p = l.parent[i];
            let a = &mut self.rows[s as usize].1;
            a.count += (p == NONE || site[p as usize] != s) as u64;
            a.self_cpu.add_sat(l.self_ns[i]);
        }
        for (g, &op) in f.ops.iter().zip(&l.gpu) {
            if op != NONE && site[op as usize] != NONE {
                self.rows[site[op as usize] as usize]
                    .1
                    .gpu
                    .add_sat(g.end - g.start);
            }
        }
        for (m, &op) in f.tensor_memory.iter().zip(&l.tensor_memory) {
            if op != NONE && site[op as usize] != NONE {
                self.rows[site[op as usize] as usize]
                    .1
                    .memory
                    .add(m.on, m.bytes, true);
            }
        }
    }

    fn rows(self, gpu_all: i64, memory: bool, ranked_by: RankedBy) -> Vec<CallSiteRow> {
        let mut rows: Vec<CallSiteRow> = self
            .rows
            .into_iter()
            .map(|(site, a)| CallSiteRow {
                call_site: site.to_string(),
                calls: a.count,
                gpu_ns: a.gpu,
                gpu_share: ratio(a.gpu as f64, gpu_all as f64),
                self_cpu_ns: a.self_cpu,
                memory: memory.then_some(CallSiteMemory {
                    cpu_bytes: a.memory.self_cpu_bytes,
                    device_bytes: a.memory.self_device_bytes,
                }),
            })
            .collect();
        rows.sort_by(|a, b| {
            let (gpu, cpu) = (b.gpu_ns.cmp(&a.gpu_ns), b.self_cpu_ns.cmp(&a.self_cpu_ns));
            match ranked_by {
                RankedBy::GpuTime => gpu.then(cpu),
                RankedBy::SelfCpuTime => cpu.then(gpu),
            }
            .then_with(|| a.call_site.cmp(&b.call_site))
        });
        rows
    }
}

/// Operator `o`'s figures by name and by name and input shapes (`summarize`'s two tables).
fn accs<'a>(
    by_name: &'a mut FxHashMap<u32, Acc>,
    by_dims: &'a mut FxHashMap<(u32, u32), Acc>,
    o: &CpuOp,
) -> [&'a mut Acc; 2] {
    [
        by_name.entry(o.name).or_default(),
        by_dims.entry((o.name, o.dims)).or_default(),
    ]
}

/// The operators' figures over `files` (with their `links`), and for each kernel name id the
/// operator name (`NO_OPERATOR` included) that launched most of its time, with that time.
/// `None` when no file has operators.
pub fn summarize(
    names: &Interner,
    files: &[FileData],
    links: &[Option<Links>],
) -> Option<(Operators, KernelOperators)> {
    if links.iter().all(Option::is_none) {
        return None;
    }
    // Keyed by (name id, dims id); dims is NO_NAME in `by_name`.
    let mut by_name: FxHashMap<u32, Acc> = FxHashMap::default();
    let mut by_dims: FxHashMap<(u32, u32), Acc> = FxHashMap::default();
    let mut shapes = false;
    // (kernel name id, operator name id or NO_NAME) -> time.
    let mut kernel_ops: FxHashMap<(u32, u32), i64> = FxHashMap::default();
    let (mut calls, mut gpu_all, mut gpu_none, mut self_all) = (0u64, 0i64, 0i64, 0i64);
    let mut memory = TensorMemoryTotals::default();
    let mut outside = OperatorMemory::default();
    let mut sites = CallSites::default();
    let mut chain = Vec::new();
    for (f, l) in files.iter().zip(links) {
        memory.events += f.tensor_memory.len() as u64;
        let Some(l) = l else {
            for m in &f.tensor_memory {
                outside.add(m.on, m.bytes, true);
            }
            for o in &f.ops {
                gpu_all.add_sat(o.end - o.start);
                gpu_none.add_sat(o.end - o.start);
                if o.kind.is_kernel() {
                    kernel_ops
                        .entry((o.name, NO_NAME))
                        .or_default()
                        .add_sat(o.end - o.start);
                }
            }
            continue;
        };
        for (i, o) in f.cpu_ops.iter().enumerate() {
            if l.rep[i] != i as u32 {
                continue;
            }
            calls += 1;
            self_all.add_sat(l.self_ns[i]);
            shapes |= o.dims != NO_NAME;
            for a in accs(&mut by_name, &mut by_dims, o) {
                a.count += 1;
                a.cpu.add_sat(o.end - o.start);
                a.self_cpu.add_sat(l.self_ns[i]);
                a.flops = a.flops.saturating_add(o.flops);
            }
        }
        for (g, &op) in f.ops.iter().zip(&l.gpu) {
            let d = g.end - g.start;
            gpu_all.add_sat(d);
            if op == NONE {
                gpu_none.add_sat(d);
                if g.kind.is_kernel() {
                    kernel_ops.entry((g.name, NO_NAME)).or_default().add_sat(d);
                }
                continue;
            }
            let o = &f.cpu_ops[op as usize];
            if g.kind.is_kernel() {
                kernel_ops.entry((g.name, o.name)).or_default().add_sat(d);
            }
            for a in accs(&mut by_name, &mut by_dims, o) {
                a.gpu.add_sat(d);
                a.gpu_ops += 1;
            }
            l.chain(op, &mut chain);
            for &c in &chain {
                for a in accs(&mut by_name, &mut by_dims, &f.cpu_ops[c as usize]) {
                    a.gpu_total.add_sat(d);
                }
            }
        }
        sites.add_file(names, f, l);
        // An allocation counts as its innermost operator's own, and in the total of every
        // operator that encloses it, as torch's tables count it.
        for (m, &op) in f.tensor_memory.iter().zip(&l.tensor_memory) {
            if op == NONE {
                outside.add(m.on, m.bytes, true);
                continue;
            }
            l.chain(op, &mut chain);
            for &c in &chain {
                for a in accs(&mut by_name, &mut by_dims, &f.cpu_ops[c as usize]) {
                    a.memory.add(m.on, m.bytes, c == op);
                }
            }
        }
    }
    let has_memory = memory.events > 0;
    memory.outside_operators_cpu_bytes = outside.self_cpu_bytes;
    memory.outside_operators_device_bytes = outside.self_device_bytes;
    let row = |name: u32, dims: Option<u32>, a: Acc| OperatorRow {
        name: names.name(name).to_string(),
        input_dims: dims.map(|d| names.name(d).to_string()),
        count: a.count,
        cpu_ns: a.cpu,
        self_cpu_ns: a.self_cpu,
        gpu_ns: a.gpu,
        gpu_ops: a.gpu_ops,
        gpu_total_ns: a.gpu_total,
        gpu_share: ratio(a.gpu as f64, gpu_all as f64),
        flops: (a.flops > 0).then_some(a.flops),
        // FLOPs per ns are GFLOP/s.
        achieved_tflops: (a.flops > 0 && a.gpu_total > 0)
            .then(|| a.flops as f64 / a.gpu_total as f64 / 1e3),
        memory: has_memory.then_some(a.memory),
    };
    let ranked_by = RankedBy::of(gpu_all, self_all);
    let order = |a: &OperatorRow, b: &OperatorRow| {
        let gpu = b.gpu_ns.cmp(&a.gpu_ns);
        match ranked_by {
            RankedBy::GpuTime => gpu.then(b.cpu_ns.cmp(&a.cpu_ns)),
            RankedBy::SelfCpuTime => b.self_cpu_ns.cmp(&a.self_cpu_ns).then(gpu),
        }
        .then_with(|| a.name.cmp(&b.name))
        .then_with(|| a.input_dims.cmp(&b.input_dims))
    };
    let mut top: Vec<OperatorRow> = by_name.into_iter().map(|(n, a)| row(n, None, a)).collect();
    top.sort_by(order);
    let mut by_input_dims: Vec<OperatorRow> = if shapes {
        by_dims
            .into_iter()
            .map(|((n, d), a)| row(n, Some(d), a))
            .collect()
    } else {
        Vec::new()
    };
    by_input_dims.sort_by(order);

    // The launching operator of most of each kernel's time (ties: the first name).
    let mut best = KernelOperators::default();
    for ((kernel, op), t) in kernel_ops {
        let name = if op == NO_NAME {
            NO_OPERATOR
        } else {
            names.name(op)
        };
        let e = best.entry(kernel).or_insert_with(|| (name.to_string(), t));
        if t > e.1 || (t == e.1 && name < e.0.as_str()) {
            *e = (name.to_string(), t);
        }
    }
    let by_call_site = sites.rows(gpu_all, has_memory, ranked_by);
    let call_sites = if by_call_site.is_empty() {
        None
    } else {
        CallSiteKind::of(
            files
                .iter()
                .filter(|f| f.cpu_ops.iter().any(|o| o.stack != NO_NAME))
                .map(|f| f.stacks_from_functions),
        )
    };
    Some((
        Operators {
            calls,
            gpu_ns: gpu_all,
            gpu_without_operator_ns: gpu_none,
            self_cpu_ns: self_all,
            ranked_by,
            top,
            by_input_dims,
            tensor_memory: has_memory.then_some(memory),
            by_call_site,
            call_sites,
        },
        best,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{ApiCall, CpuOp, GpuOp, OpKind};
    use crate::model::links::*;
    use cuprof_core::reader::Id;

    fn op(thread: u32, start: i64, end: i64, ext: i64) -> CpuOp {
        CpuOp {
            thread,
            start,
            end,
            name: ext as u32,
            ext,
            dims: NO_NAME,
            stack: NO_NAME,
            flops: 0,
        }
    }

    fn file(cpu_ops: Vec<CpuOp>) -> FileData {
        FileData {
            rank: Some(0),
            threads: vec![(Id::Int(1), Id::Int(1)), (Id::Int(1), Id::Int(2))],
            cpu_ops,
            ..FileData::default()
        }
    }

    #[test]
    fn nesting_and_self_time() {
        // Thread 0: A [0,100] holds B [10,40] (which holds C [10,40], same times, later id)
        // and D [40,60] touching B; E [100,120] touches A's end. Thread 1: F [20,30] is in
        // nothing although A spans it on thread 0.
        let f = file(vec![
            op(0, 10, 40, 3),
            op(0, 0, 100, 1),
            op(0, 10, 40, 2),
            op(0, 40, 60, 4),
            op(0, 100, 120, 5),
            op(1, 20, 30, 6),
        ]);
        let l = links(&f).unwrap();
        assert_eq!(l.parent, [2, NONE, 1, 1, NONE, NONE]);
        assert_eq!(l.self_ns, [30, 50, 0, 20, 20, 10]);
        let mut c = Vec::new();
        l.chain(0, &mut c);
        assert_eq!(c, [1, 2, 0]);
        assert!(links(&file(vec![])).is_none());
    }

    #[test]
    fn same_name_only_child_is_folded() {
        let named = |o: CpuOp, name| CpuOp { name, ..o };
        // S1 [0,100] holds only S2 [10,50] (same name), which holds M [20,30]: S2 is S1's
        // call; a kernel S2 launched is S1's. S3 [200,300] holds S4 (same name) and X: S4
        // stays.
        let mut f = file(vec![
            named(op(0, 0, 100, 1), 9),
            named(op(0, 10, 50, 2), 9),
            named(op(0, 20, 30, 3), 4),
            named(op(0, 200, 300, 4), 9),
            named(op(0, 210, 220, 5), 9),
            named(op(0, 230, 240, 6), 5),
        ]);
        f.ops = vec![GpuOp {
            stream: 7,
            start: 0,
            end: 10,
            device: 0,
            name: 0,
            kind: OpKind::Compute,
            corr: -1,
            bytes: 0,
        }];
        f.op_ext = vec![(0, 2)];
        let l = links(&f).unwrap();
        assert_eq!(l.rep, [0, 0, 2, 3, 4, 5]);
        assert_eq!(l.parent[2], 0);
        // S1: 100 - 40 (S2) + S2's own 30 = 90.
        assert_eq!(l.self_ns[0], 90);
        assert_eq!(l.self_ns[3], 80);
        assert_eq!(l.gpu, [0]);
        let mut c = Vec::new();
        l.chain(2, &mut c);
        assert_eq!(c, [0, 2]);
    }

    #[test]
    fn gpu_work_goes_to_its_external_id_else_its_launch() {
        let mut f = file(vec![op(0, 0, 100, 7), op(0, 10, 50, 8)]);
        let api = |start, corr| ApiCall {
            thread: 0,
            start,
            end: start + 1,
            name: 0,
            corr,
            sync: false,
        };
        let gpu = |corr| GpuOp {
            stream: 7,
            start: 0,
            end: 10,
            device: 0,
            name: 0,
            kind: OpKind::Compute,
            corr,
            bytes: 0,
        };
        f.apis = vec![api(20, 1), api(60, 2), api(70, 3)];
        f.api_ext = vec![(0, 8), (1, 7)];
        // Kernel 0 names operator 8 itself; kernel 1 has no External id (launch 2 -> op 7);
        // kernel 2's launch has none; kernel 3 has no launch; kernel 4's id is unknown but its
        // launch is known.
        f.ops = vec![gpu(1), gpu(2), gpu(3), gpu(99), gpu(1)];
        f.op_ext = vec![(0, 8), (4, 12345)];
        let l = links(&f).unwrap();
        assert_eq!(l.api, [1, 0, NONE]);
        assert_eq!(l.gpu, [1, 0, NONE, NONE, 1]);
    }

    #[test]
    fn flops_sum_over_calls_and_divide_the_gpu_time_they_launched() {
        let mut names = Interner::default();
        let mm = names.id("aten::mm");
        let add = names.id("aten::add");
        let call = |start, ext, name, flops| CpuOp {
            name,
            flops,
            ..op(0, start, start + 10, ext)
        };
        // Two mm calls (3e9 and 1e9 FLOPs) launch 1 ms and 3 ms of kernels; add counts none.
        let mut f = file(vec![
            call(0, 1, mm, 3_000_000_000),
            call(20, 2, mm, 1_000_000_000),
            call(40, 3, add, 0),
        ]);
        let kernel = |start, end| GpuOp {
            stream: 7,
            start,
            end,
            device: 0,
            name: 0,
            kind: OpKind::Compute,
            corr: -1,
            bytes: 0,
        };
        f.ops = vec![
            kernel(0, 1_000_000),
            kernel(1_000_000, 4_000_000),
            kernel(0, 5),
        ];
        f.op_ext = vec![(0, 1), (1, 2), (2, 3)];
        let l = links(&f);
        let (o, _) = summarize(&names, &[f], &[l]).unwrap();
        let row = |n: &str| o.top.iter().find(|r| r.name == n).unwrap().clone();
        let mm = row("aten::mm");
        assert_eq!(
            (mm.flops, mm.gpu_total_ns),
            (Some(4_000_000_000), 4_000_000)
        );
        // 4e9 FLOPs in 4 ms: 1 TFLOP/s.
        assert_eq!(mm.achieved_tflops, Some(1.0));
        let add = row("aten::add");
        assert_eq!((add.flops, add.achieved_tflops), (None, None));
    }

    #[test]
    fn allocations_count_in_their_innermost_operator_and_those_around_it() {
        use crate::load::{TensorMemory, TensorMemoryOn::*};
        let mut names = Interner::default();
        let (linear, mm, empty) = (
            names.id("aten::linear"),
            names.id("aten::mm"),
            names.id("aten::empty"),
        );
        let named = |o: CpuOp, name| CpuOp { name, ..o };
        // Thread 0: linear [0,100] holds mm [10,60] (holding only mm [10,50], folded into it,
        // which holds empty [20,30]). Thread 1: empty [0,100].
        let mut f = file(vec![
            named(op(0, 0, 100, 1), linear),
            named(op(0, 10, 60, 2), mm),
            named(op(0, 10, 50, 3), mm),
            named(op(0, 20, 30, 4), empty),
            named(op(1, 0, 100, 5), empty),
        ]);
        let m = |thread, ts, bytes, on| TensorMemory {
            thread,
            ts,
            bytes,
            on,
            device: 0,
            addr: None,
        };
        f.tensor_memory = vec![
            // In empty (its end counts as inside), then in the folded mm: the outer mm's own.
            m(0, 30, 64, Cpu),
            m(0, 40, 1000, Device),
            // In linear, after mm ended; a free in linear.
            m(0, 70, 16, Cpu),
            m(0, 80, -64, Cpu),
            // Outside every operator of its thread, though thread 1's empty spans it.
            m(0, 150, 8, Cpu),
            m(1, 50, 4, Cpu),
        ];
        let l = links(&f).unwrap();
        assert_eq!(l.tensor_memory, [3, 1, 0, 0, NONE, 4]);
        let (o, _) = summarize(&names, &[f], &[Some(l)]).unwrap();
        let mem = |n: &str| o.top.iter().find(|r| r.name == n).unwrap().memory.unwrap();
        let bytes = |m: OperatorMemory| {
            [
                m.cpu_bytes,
                m.self_cpu_bytes,
                m.device_bytes,
                m.self_device_bytes,
            ]
        };
        assert_eq!(bytes(mem("aten::linear")), [16, -48, 1000, 0]);
        assert_eq!(bytes(mem("aten::mm")), [64, 0, 1000, 1000]);
        // Both empty calls: 64 on thread 0, 4 on thread 1.
        assert_eq!(bytes(mem("aten::empty")), [68, 68, 0, 0]);
        assert_eq!(
            o.tensor_memory,
            Some(TensorMemoryTotals {
                events: 6,
                outside_operators_cpu_bytes: 8,
                outside_operators_device_bytes: 0
            })
        );
        // Without allocations in the trace, no row says anything of memory.
        let f = file(vec![op(0, 0, 10, 1)]);
        let l = links(&f);
        let (o, _) = summarize(&names, &[f], &[l]).unwrap();
        assert_eq!((o.tensor_memory, o.top[0].memory), (None, None));
    }

    #[test]
    fn call_site_is_the_innermost_frame_outside_torch_and_the_standard_library() {
        let venv = "/home/u/.venv/lib/python3.11/site-packages";
        let stack = format!(
            "{venv}/torch/nn/functional.py(2621): embedding;{venv}/torch/nn/modules/sparse.py(189): forward;\
             {venv}/torch/nn/modules/module.py(1798): _call_impl;\
             {venv}/transformers/models/llama/modeling_llama.py(372): forward;\
             /usr/lib/python3.11/contextlib.py(81): inner;/home/u/train.py(40): <module>"
        );
        let model = format!("{venv}/transformers/models/llama/modeling_llama.py(372): forward");
        assert_eq!(call_site(&stack), Some(model.as_str()));
        // The user's own line, past the standard library's frames.
        assert_eq!(
            call_site("/usr/lib/python3.11/contextlib.py(81): inner; /home/u/train.py(40): step"),
            Some("/home/u/train.py(40): step")
        );
        assert_eq!(
            call_site("<frozen runpy>(88): _run_code;/srv/m.py(3): <module>"),
            Some("/srv/m.py(3): <module>")
        );
        // Nothing but torch: its innermost frame.
        let only =
            format!("{venv}/torch/nn/functional.py(2621): embedding;{venv}/torch/_tensor.py(9): f");
        assert_eq!(
            call_site(&only),
            Some(format!("{venv}/torch/nn/functional.py(2621): embedding").as_str())
        );
        assert_eq!(call_site(""), None);
        assert_eq!(call_site(" ; "), None);
        // torch.profiler's Python functions, relative to sys.path.
        assert_eq!(
            call_site(
                "torch/nn/modules/linear.py(130): forward;torch/nn/modules/module.py(1791): _call_impl;\
                 contextlib.py(79): inner;transformers/models/llama/modeling_llama.py(300): forward;\
                 train.py(12): step"
            ),
            Some("transformers/models/llama/modeling_llama.py(300): forward")
        );
        assert_eq!(
            call_site("functools.py(40): wrapper;asyncio/events.py(80): _run;serve.py(9): handle"),
            Some("serve.py(9): handle")
        );
    }

    /// An older torch.profiler trace: every launch's and copy's `External id` is its own
    /// correlation id, which equals unrelated operators' ids. The launch inside `aten::copy_`
    /// belongs to it, not to `aten::to` whose id its correlation id happens to be.
    #[test]
    fn older_traces_attribute_by_launch_nesting() {
        let call = |start, corr| ApiCall {
            thread: 0,
            start,
            end: start + 5,
            name: 0,
            corr,
            sync: false,
        };
        let copy = |corr| GpuOp {
            stream: 7,
            start: 1000,
            end: 1100,
            device: 0,
            name: 0,
            kind: OpKind::Compute,
            corr,
            bytes: 0,
        };
        // aten::to [0,50] (id 5); aten::copy_ [100,300] (id 9) holding aten::empty [110,120]
        // (id 10); a launch at 150 (correlation 5) and one at 400, outside every operator
        // (correlation 10).
        let mut f = file(vec![
            op(0, 0, 50, 5),
            op(0, 100, 300, 9),
            op(0, 110, 120, 10),
        ]);
        f.apis = vec![call(150, 5), call(400, 10)];
        f.api_ext = vec![(0, 5), (1, 10)];
        f.ops = vec![copy(5), copy(10)];
        f.op_ext = vec![(0, 5), (1, 10)];
        assert_eq!(AttributionRule::of(&f), AttributionRule::LaunchNesting);
        let l = links(&f).unwrap();
        assert_eq!(l.api, [1, NONE]);
        assert_eq!(l.gpu, [1, NONE]);
        // The same trace with operator ids in the launches (current Kineto): the id decides.
        f.api_ext = vec![(0, 10), (1, 5)];
        f.op_ext = vec![(0, 10)];
        assert_eq!(AttributionRule::of(&f), AttributionRule::ExternalId);
        let l = links(&f).unwrap();
        assert_eq!(l.api, [2, 0]);
        assert_eq!(l.gpu, [2, 0]);
    }

    #[test]
    fn innermost_operator_at_a_time() {
        // A [0,100] holds B [10,60] which holds C [20,30]; D [200,210] alone.
        let f = file(vec![
            op(0, 0, 100, 1),
            op(0, 10, 60, 2),
            op(0, 20, 30, 3),
            op(0, 200, 210, 4),
        ]);
        let l = links(&f).unwrap();
        let by_thread = vec![vec![0u32, 1, 2, 3], vec![]];
        let at = |t| innermost_at(&by_thread, &f.cpu_ops, &l.parent, &l.rep, 0, t);
        assert_eq!(
            [
                at(-1),
                at(0),
                at(15),
                at(25),
                at(30),
                at(50),
                at(80),
                at(150),
                at(205),
                at(300)
            ],
            [NONE, 0, 1, 2, 2, 1, 0, NONE, 3, NONE]
        );
        assert_eq!(
            innermost_at(&by_thread, &f.cpu_ops, &l.parent, &l.rep, 1, 50),
            NONE
        );
        assert_eq!(
            innermost_at(&by_thread, &f.cpu_ops, &l.parent, &l.rep, 7, 50),
            NONE
        );
    }
}
