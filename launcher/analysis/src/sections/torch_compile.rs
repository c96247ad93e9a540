//! torch.compile as people debug it: per compiled frame, how long it took to compile (and in
//! which of dynamo's phases), how often it recompiled, how many graph breaks split it, and what
//! its compiled code cost when it ran.
//!
//! Everything comes from what torch writes into any profiler's trace while one collects
//! (torch.profiler's and cuprof's alike):
//! - at run time, `Torch-Compiled Region: F/N` around each call of compiled frame `F`'s `N`th
//!   compilation (`N > 0`: a recompilation, after a guard failed);
//! - at compile time, one `cpu_op` per timed phase (`entire_frame_compile`, `dynamo`,
//!   `backend_compile`, `inductor_compile`, ...), and inside it a `user_annotation`
//!   `PHASE_data: ..., compile_id=F/N` naming the compilation it belongs to
//!   (`CompileEventLogger.add_record_function_data`);
//! - dynamo restarts its analysis of a frame at a graph break (it compiles the part before the
//!   break and a resume function, a frame of its own); each attempt is a phase
//!   `compile_attempt_K`, so a compilation whose last attempt is `K` met `K` graph breaks.
//!
//! Compilations that happened before the profiling window have regions but no phases: their
//! compile time is absent, not 0.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use crate::load::FileData;
use crate::load::Interner;
use crate::saturating::AddSat;
use crate::sections::operators::Operators;

/// The run-time region torch puts around each call of a compiled frame.
const REGION: &str = "Torch-Compiled Region: ";
/// The suffix of a phase's marker, before its metadata.
const MARKER: &str = "_data: ";
/// The phase that is a whole compilation of a frame (dynamo and the backend).
const WHOLE_FRAME: &str = "entire_frame_compile";
/// Phases shown as columns in the report (all are in summary.json).
pub const SHOWN_PHASES: [&str; 3] = ["bytecode_tracing", "backend_compile", "inductor_compile"];

/// One compilation of one frame (`compile_id` `F/N`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compilation {
    pub compile_id: String,
    pub frame: u64,
    /// 0 for the first compilation, then one per recompilation.
    pub recompile: u64,
    /// Time in its phases that no other phase of it contains (the whole-frame compile, plus
    /// what was compiled later, such as a backward graph at the first backward); absent when
    /// it was compiled outside the recorded window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile_ns: Option<i64>,
    /// Time per phase (calls of one phase added), by name.
    pub phases: Vec<(String, i64)>,
    /// Graph breaks dynamo met compiling it (its restarted analyses).
    pub graph_breaks: u64,
    /// Calls of its compiled code (`Torch-Compiled Region: F/N`).
    pub calls: u64,
    pub cpu_ns: i64,
    /// GPU time launched inside its calls.
    pub gpu_ns: i64,
}

/// `summary.json`'s `torch_compile`, present when a trace has compiled regions or phases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TorchCompile {
    /// By frame, then recompilation.
    pub compilations: Vec<Compilation>,
    /// Compile time recorded, all compilations.
    pub compile_ns: i64,
    /// Compilations after the first of their frame.
    pub recompilations: u64,
    pub graph_breaks: u64,
}

/// `F/N` as numbers.
fn parse_id(id: &str) -> Option<(u64, u64)> {
    let (f, n) = id.split_once('/')?;
    Some((f.parse().ok()?, n.parse().ok()?))
}

/// A phase marker's phase and compile id: `PHASE_data: k=v, ..., compile_id=F/N`.
fn marker(name: &str) -> Option<(&str, &str)> {
    let (phase, meta) = name.split_once(MARKER)?;
    let id = meta.rsplit(", ").next()?.strip_prefix("compile_id=")?;
    parse_id(id)?;
    Some((phase, id))
}

#[derive(Default)]
struct Acc {
    /// (thread, start, end) of each phase call, and its phase.
    phases: Vec<(u32, i64, i64, String)>,
    graph_breaks: u64,
    calls: u64,
    cpu: i64,
}

/// The section, from every file's markers and phases and the operators' figures (regions are
/// operators: their GPU time is what was launched inside them). `None` without torch.compile.
pub fn summarize(
    names: &Interner,
    files: &[FileData],
    ops: Option<&Operators>,
) -> Option<TorchCompile> {
    let mut by_id: FxHashMap<String, Acc> = FxHashMap::default();
    // What each name is, decided once per name (traces hold millions of operators).
    let mut class: FxHashMap<u32, Option<String>> = FxHashMap::default();
    for f in files {
        let markers: Vec<(&crate::load::Range, &str, &str)> = f
            .ranges
            .iter()
            .filter_map(|r| marker(names.name(r.name)).map(|(p, id)| (r, p, id)))
            .collect();
        let phases: FxHashSet<&str> = markers.iter().map(|m| m.1).collect();
        let mut is_phase: FxHashMap<u32, bool> = FxHashMap::default();
        let mut phase_calls: Vec<&crate::load::CpuOp> = Vec::new();
        for o in &f.cpu_ops {
            let region = class
                .entry(o.name)
                .or_insert_with(|| {
                    let n = names.name(o.name);
                    n.strip_prefix(REGION)
                        .filter(|id| parse_id(id).is_some())
                        .map(str::to_string)
                })
                .clone();
            if let Some(id) = region {
                let acc = by_id.entry(id).or_default();
                acc.calls += 1;
                acc.cpu.add_sat(o.end - o.start);
            } else if !phases.is_empty()
                && *is_phase
                    .entry(o.name)
                    .or_insert_with(|| phases.contains(names.name(o.name)))
            {
                phase_calls.push(o);
            }
        }
        // Each marker names the phase call it starts in: the innermost operator of that name
        // containing it on its thread.
        for (r, phase, id) in markers {
            let call = phase_calls
                .iter()
                .filter(|o| {
                    o.thread == r.thread
                        && o.start <= r.start
                        && r.start <= o.end
                        && names.name(o.name) == phase
                })
                .min_by_key(|o| o.end - o.start);
            let acc = by_id.entry(id.to_string()).or_default();
            if let Some(k) = phase.strip_prefix("compile_attempt_") {
                acc.graph_breaks = acc.graph_breaks.max(k.parse().unwrap_or(0));
            }
            if let Some(o) = call {
                let call = (o.thread, o.start, o.end, phase.to_string());
                if !acc.phases.contains(&call) {
                    acc.phases.push(call);
                }
            }
        }
    }
    if by_id.is_empty() {
        return None;
    }
    let gpu_of = |id: &str| {
        let name = format!("{REGION}{id}");
        ops.and_then(|o| o.top.iter().find(|r| r.name == name))
            .map_or(0, |r| r.gpu_total_ns)
    };
    let mut compilations: Vec<Compilation> = by_id
        .into_iter()
        .map(|(id, a)| {
            let (frame, recompile) = parse_id(&id).expect("parsed when collected");
            let mut phases: Vec<(String, i64)> = Vec::new();
            for (_, s, e, p) in &a.phases {
                match phases.iter_mut().find(|(n, _)| n == p) {
                    Some((_, t)) => t.add_sat(e - s),
                    None => phases.push((p.clone(), e - s)),
                }
            }
            phases.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
            // Outermost phase calls: contained in no other call of this compilation.
            let outer = a.phases.iter().filter(|(t, s, e, _)| {
                !a.phases
                    .iter()
                    .any(|(t2, s2, e2, _)| t2 == t && s2 <= s && e <= e2 && (s2, e2) != (s, e))
            });
            let mut seen: Vec<(u32, i64, i64)> = Vec::new();
            let mut compile = 0i64;
            for (t, s, e, _) in outer {
                if !seen.contains(&(*t, *s, *e)) {
                    seen.push((*t, *s, *e));
                    compile.add_sat(e - s);
                }
            }
            let whole = a.phases.iter().any(|p| p.3 == WHOLE_FRAME);
            Compilation {
                gpu_ns: gpu_of(&id),
                compile_id: id,
                frame,
                recompile,
                compile_ns: whole.then_some(compile),
                phases,
                graph_breaks: a.graph_breaks,
                calls: a.calls,
                cpu_ns: a.cpu,
            }
        })
        .collect();
    compilations.sort_by_key(|c| (c.frame, c.recompile));
    Some(TorchCompile {
        compile_ns: compilations.iter().filter_map(|c| c.compile_ns).sum(),
        recompilations: compilations.iter().filter(|c| c.recompile > 0).count() as u64,
        graph_breaks: compilations.iter().map(|c| c.graph_breaks).sum(),
        compilations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_name_their_phase_and_compilation() {
        assert_eq!(
            marker("entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id=0/1"),
            Some(("entire_frame_compile", "0/1"))
        );
        assert_eq!(
            marker("compile_attempt_1_data: compile_id=12/0"),
            Some(("compile_attempt_1", "12/0"))
        );
        assert_eq!(marker("dynamo_data: compile_id=x/0"), None);
        assert_eq!(marker("my_data: label"), None);
        assert_eq!(marker("aten::add"), None);
    }
}
