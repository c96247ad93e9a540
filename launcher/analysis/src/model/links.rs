//! How PyTorch operators nest on each thread and which operator launched each GPU operation
//! and made each PyTorch allocation ([`Links`], derived once per file), under the attribution
//! rule the trace's producer followed ([`AttributionRule`]); and the Python line an operator
//! was called from ([`call_site`]). The operators table itself is `sections::operators`.

use rustc_hash::FxHashMap;

use crate::load::{CpuOp, FileData, NO_NAME};
use crate::saturating::AddSat;

/// Bucket of GPU work that no operator launched.
pub const NO_OPERATOR: &str = "(no operator)";

/// "No operator" in the index columns below.
pub const NONE: u32 = u32::MAX;

/// What is derived once from a file that has operators.
pub struct Links {
    /// Per operator: the innermost operator of its thread that contains it, `NONE` at top level.
    pub parent: Vec<u32>,
    /// Per operator: its duration minus that of the operators directly nested in it.
    pub self_ns: Vec<i64>,
    /// Per operator: itself, or the operator it is folded into (see [`links`]); a folded one
    /// counts nowhere and nothing points at it.
    pub rep: Vec<u32>,
    /// Per GPU operation (index of `FileData::ops`): the operator that launched it, or `NONE`.
    pub gpu: Vec<u32>,
    /// Per API call (index of `FileData::apis`): the operator it ran in, or `NONE`.
    pub api: Vec<u32>,
    /// Per PyTorch allocation or free (index of `FileData::tensor_memory`): the innermost
    /// operator open on its thread when it happened, or `NONE`.
    pub tensor_memory: Vec<u32>,
    /// Per thread: its operators, outer first (by start, then longer first).
    by_thread: Vec<Vec<u32>>,
}

/// The kernels launched by one file's operators: per operator that launched kernels (its
/// `rep` index), their GPU time and count.
pub struct LaunchedKernels<'a> {
    links: &'a Links,
    by_operator: FxHashMap<u32, (i64, u64)>,
}

impl<'a> LaunchedKernels<'a> {
    pub fn of_file(f: &FileData, links: &'a Links) -> Self {
        let mut by_operator: FxHashMap<u32, (i64, u64)> = FxHashMap::default();
        for (op, g) in f.ops.iter().zip(&links.gpu) {
            if *g != NONE && op.kind.is_kernel() {
                let e = by_operator.entry(*g).or_default();
                e.0.add_sat(op.end - op.start);
                e.1 += 1;
            }
        }
        LaunchedKernels { links, by_operator }
    }

    /// The GPU time and count of the kernels attributed to operator `op` (an index of
    /// `FileData::cpu_ops`); `None`: none.
    pub fn of(&self, op: u32) -> Option<(i64, u64)> {
        let rep = self.links.rep.get(op as usize)?;
        self.by_operator.get(rep).copied()
    }
}

impl Links {
    /// The operators from the outermost down to `op` (empty for `NONE`).
    pub fn chain(&self, mut op: u32, out: &mut Vec<u32>) {
        out.clear();
        while op != NONE {
            out.push(op);
            op = self.parent[op as usize];
        }
        out.reverse();
    }

    /// The innermost counted operator of `thread` open at time `t` in `ops` (the file's
    /// `cpu_ops`), or `NONE`.
    pub fn innermost_at(&self, ops: &[CpuOp], thread: u32, t: i64) -> u32 {
        innermost_at(&self.by_thread, ops, &self.parent, &self.rep, thread, t)
    }

    /// The `Call stack` (name id) `op` was called with: its own, else the nearest enclosing
    /// operator's that has one; `NO_NAME` without (or for `NONE`). [`call_site`] of it is the
    /// operator's Python line.
    pub fn stack_of(&self, ops: &[CpuOp], op: u32) -> u32 {
        let mut at = op;
        while at != NONE && ops[at as usize].stack == NO_NAME {
            at = self.parent[at as usize];
        }
        if at == NONE {
            NO_NAME
        } else {
            ops[at as usize].stack
        }
    }
}

/// Nesting and attribution of `f`'s operators; `None` when it has none (nothing is built).
pub fn links(f: &FileData) -> Option<Links> {
    if f.cpu_ops.is_empty() {
        return None;
    }
    let ops = &f.cpu_ops;
    let mut parent = vec![NONE; ops.len()];
    let mut self_ns: Vec<i64> = ops.iter().map(|o| o.end - o.start).collect();
    let mut by_thread: Vec<Vec<u32>> = vec![Vec::new(); f.threads.len()];
    for (i, o) in ops.iter().enumerate() {
        by_thread[o.thread as usize].push(i as u32);
    }
    let mut stack: Vec<u32> = Vec::new();
    for list in &mut by_thread {
        // Outer operators first: earlier start, then longer, then the lower External id (a
        // parent is entered, and numbered, before its children even when the clock cannot
        // tell them apart).
        list.sort_by_key(|&i| {
            let o = &ops[i as usize];
            (o.start, std::cmp::Reverse(o.end), o.ext, i)
        });
        stack.clear();
        for &i in list.iter() {
            let o = &ops[i as usize];
            // An operator that does not contain this one has ended (or crosses it, which
            // well-formed traces do not): it is no parent of this or any later one.
            while let Some(&top) = stack.last() {
                let t = &ops[top as usize];
                if t.start <= o.start && o.end <= t.end {
                    break;
                }
                stack.pop();
            }
            if let Some(&top) = stack.last() {
                parent[i as usize] = top;
                self_ns[top as usize].sub_sat(o.end - o.start);
            }
            stack.push(i);
        }
    }

    // An operator that is the only one directly inside an operator of the same name is that
    // call going through another overload (`aten::sum` -> `aten::sum.dim_IntList`): it is
    // folded into its parent, as torch.profiler's tables do, so that counts and times agree.
    let mut children = vec![0u32; ops.len()];
    for &p in &parent {
        if p != NONE {
            children[p as usize] += 1;
        }
    }
    let mut rep: Vec<u32> = (0..ops.len() as u32).collect();
    for list in &by_thread {
        // Sorted outer first: a parent's `rep` is final before its children are seen.
        for &i in list {
            let p = parent[i as usize];
            if p == NONE {
                continue;
            }
            if ops[p as usize].name == ops[i as usize].name && children[p as usize] == 1 {
                rep[i as usize] = rep[p as usize];
                let own = self_ns[i as usize];
                self_ns[rep[i as usize] as usize].add_sat(own);
            } else {
                parent[i as usize] = rep[p as usize];
            }
        }
    }

    let tensor_memory = f
        .tensor_memory
        .iter()
        .map(|m| innermost_at(&by_thread, ops, &parent, &rep, m.thread, m.ts))
        .collect();
    let rule = AttributionRule::of(f);
    let mut api = vec![NONE; f.apis.len()];
    let mut gpu = vec![NONE; f.ops.len()];
    match rule {
        AttributionRule::ExternalId => {
            let mut by_ext: FxHashMap<i64, u32> = FxHashMap::default();
            by_ext.reserve(ops.len());
            for (i, o) in ops.iter().enumerate() {
                if o.ext >= 0 {
                    by_ext.entry(o.ext).or_insert(rep[i]);
                }
            }
            for &(ai, x) in &f.api_ext {
                if let Some(&op) = by_ext.get(&x) {
                    api[ai as usize] = op;
                }
            }
            for &(oi, x) in &f.op_ext {
                if let Some(&op) = by_ext.get(&x) {
                    gpu[oi as usize] = op;
                }
            }
        }
        AttributionRule::LaunchNesting => {
            for (a, call) in api.iter_mut().zip(&f.apis) {
                *a = innermost_at(&by_thread, ops, &parent, &rep, call.thread, call.start);
            }
        }
    }
    let mut by_corr: FxHashMap<i64, u32> = FxHashMap::default();
    for (&op, call) in api.iter().zip(&f.apis) {
        if op != NONE && call.corr >= 0 {
            by_corr.entry(call.corr).or_insert(op);
        }
    }
    if !by_corr.is_empty() {
        for (g, o) in gpu.iter_mut().zip(&f.ops) {
            if *g == NONE && o.corr >= 0 {
                if let Some(&op) = by_corr.get(&o.corr) {
                    *g = op;
                }
            }
        }
    }
    Some(Links {
        parent,
        self_ns,
        rep,
        gpu,
        api,
        tensor_memory,
        by_thread,
    })
}

/// Which rule tied a trace's launches and GPU work to its operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttributionRule {
    /// A launch's (and its GPU work's) `External id` is its operator's (current Kineto, cuprof).
    ExternalId,
    /// A launch's `External id` is its own correlation id (older torch.profiler): its operator
    /// is the innermost one containing it on its thread.
    LaunchNesting,
}

impl AttributionRule {
    /// The trace's rule, from its data: launches whose `External id` equals their own
    /// correlation id, in the majority of those that carry both, mean the older rule (by
    /// chance an operator id can equal a correlation id, but not for most launches).
    pub fn of(f: &FileData) -> AttributionRule {
        let (mut own, mut carried) = (0usize, 0usize);
        for &(ai, x) in &f.api_ext {
            let corr = f.apis[ai as usize].corr;
            if corr >= 0 {
                carried += 1;
                own += (x == corr) as usize;
            }
        }
        AttributionRule::from_launches(own, carried)
    }

    /// The rule from the launches that carry both ids (`carried`) and those of them whose
    /// `External id` is their own correlation id (`own`).
    pub fn from_launches(own: usize, carried: usize) -> AttributionRule {
        if carried > 0 && own * 2 > carried {
            AttributionRule::LaunchNesting
        } else {
            AttributionRule::ExternalId
        }
    }

    /// Its name in `cuprof export`'s files table (`operator_link`).
    pub fn column(self) -> &'static str {
        match self {
            AttributionRule::ExternalId => "external_id",
            AttributionRule::LaunchNesting => "launch_nesting",
        }
    }
}

/// The innermost operator (its `rep`) of `thread` whose span holds time `t`, or `NONE`.
/// `by_thread` lists each thread's operators outer first (by start, then longer first).
pub fn innermost_at(
    by_thread: &[Vec<u32>],
    ops: &[crate::load::CpuOp],
    parent: &[u32],
    rep: &[u32],
    thread: u32,
    t: i64,
) -> u32 {
    let Some(list) = by_thread.get(thread as usize) else {
        return NONE;
    };
    // The last operator to start at or before `t`, then up its parents to one still open.
    let n = list.partition_point(|&i| ops[i as usize].start <= t);
    let Some(&last) = n.checked_sub(1).and_then(|k| list.get(k)) else {
        return NONE;
    };
    let mut op = rep[last as usize];
    while op != NONE && ops[op as usize].end < t {
        op = parent[op as usize];
    }
    op
}

/// The Python line an operator was called from, in its `Call stack` (innermost frame first,
/// `;` between frames): the innermost frame that is neither PyTorch's own code (a `/torch/`
/// directory: `nn/modules/module.py`'s call machinery, `nn/functional.py`, `_tensor.py`) nor
/// Python's standard library (`/lib/pythonX.Y/` outside `site-packages`, `<frozen ...>`), so
/// that an operator run through `nn.Linear` lands on the model's line that called the layer
/// (a Hugging Face model's own `modeling_*.py` line, or the user's). A stack of nothing else
/// gives its innermost frame; an empty one, `None`. torch.profiler's Python functions name
/// files relative to `sys.path` (`torch/nn/modules/module.py`, `contextlib.py`): there a
/// path starting `torch/` is PyTorch's, and the standard library's modules are known by name.
pub fn call_site(stack: &str) -> Option<&str> {
    let frames = stack.split(';').map(str::trim).filter(|f| !f.is_empty());
    let is_own = |f: &&str| {
        let path = f.rsplit_once('(').map_or(*f, |(p, _)| p);
        let library = path.contains("/site-packages/") || path.contains("/dist-packages/");
        let torch = path.contains("/torch/") || path.starts_with("torch/");
        let stdlib = path.starts_with("<frozen")
            || (!library && path.contains("/lib/python"))
            || is_relative_stdlib(path);
        !torch && !stdlib
    };
    frames
        .clone()
        .find(is_own)
        .or_else(|| frames.clone().next())
}

/// Whether `path`, relative to `sys.path` as torch.profiler writes it, is one of the standard
/// library's modules that run between a program and PyTorch (context managers, decorators,
/// threads, copies, pickling).
fn is_relative_stdlib(path: &str) -> bool {
    const MODULES: [&str; 17] = [
        "abc.py",
        "contextlib.py",
        "copy.py",
        "copyreg.py",
        "dataclasses.py",
        "enum.py",
        "functools.py",
        "inspect.py",
        "pickle.py",
        "queue.py",
        "runpy.py",
        "threading.py",
        "typing.py",
        "warnings.py",
        "weakref.py",
        "collections/__init__.py",
        "concurrent/futures/thread.py",
    ];
    const PACKAGES: [&str; 4] = ["asyncio/", "importlib/", "multiprocessing/", "unittest/"];
    MODULES.contains(&path) || PACKAGES.iter().any(|p| path.starts_with(p))
}
