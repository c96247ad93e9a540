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
//!
//! Why, from cuprof's trace only (its recorder reads what dynamo reports, docs/trace-format.md):
//! a label `torch.compile graph break: compile_id=F/N, at=FILE:LINE, reason=R` per graph break
//! dynamo met compiling `F/N` (where in the user's code, and torch's reason), and
//! `torch.compile recompile: compile_id=F/N, reason=R` per recompilation (the guard that failed,
//! as torch words it: `F/M: guard`, `M` the compilation whose guard failed). torch.profiler's
//! traces carry neither.

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

/// The label prefixes of a graph break and a recompilation (recorder.py writes them).
const BREAK_LABEL: &str = "torch.compile graph break: ";
const RECOMPILE_LABEL: &str = "torch.compile recompile: ";

/// A graph break dynamo met compiling one compilation.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Break {
    /// The user's code where it broke.
    pub file: String,
    pub line: u64,
    /// torch's reason, its kind and explanation (`Call to `torch._dynamo.graph_break()`:
    /// User-inserted graph break. Message: None`).
    pub reason: String,
}

/// A graph break of one frame, over its compilations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameBreak {
    pub frame: u64,
    pub file: String,
    pub line: u64,
    pub reason: String,
    /// Compilations of the frame that met it.
    pub count: u64,
}

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
    /// Where and why (cuprof's traces only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breaks: Vec<Break>,
    /// The guard whose failure made this recompilation, as torch words it (cuprof's traces
    /// only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recompile_reason: Option<String>,
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
    /// Each frame's graph breaks where and why, by frame, then place (cuprof's traces only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breaks: Vec<FrameBreak>,
}

impl TorchCompile {
    /// The compilations that were recompilations with their failed guard, in order.
    pub fn recompiled(&self) -> Vec<(&Compilation, &str)> {
        self.compilations
            .iter()
            .filter_map(|k| Some((k, k.recompile_reason.as_deref()?)))
            .collect()
    }
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

/// The values of a label's fields `k1=v1, k2=v2, ..., kn=vn` (`keys` in order), each up to
/// the next key (a value may hold `, `), the last taking the rest of the text.
fn fields<'a>(mut rest: &'a str, keys: &[&str]) -> Option<Vec<&'a str>> {
    let mut out = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        rest = rest.strip_prefix(k)?.strip_prefix('=')?;
        match keys.get(i + 1) {
            Some(next) => {
                let (v, _) = rest.split_once(&format!(", {next}="))?;
                out.push(v);
                rest = &rest[v.len() + ", ".len()..];
            }
            None => out.push(rest),
        }
    }
    Some(out)
}

/// torch's graph-break reason, short: its kind (the line before its `Explanation:`) and the
/// explanation, after `frame skipped: ` where dynamo fell back to eager for the whole frame
/// (torch's preambles, `Encountered graph break when attempting to trace ...`, left out).
fn short_reason(reason: &str) -> String {
    let lines: Vec<&str> = reason
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let skipped = lines
        .first()
        .is_some_and(|l| l.starts_with("Failed to handle graph break gracefully"));
    let explained = lines
        .iter()
        .position(|l| l.starts_with("Explanation: "))
        .filter(|&i| i > 0);
    let short = match explained {
        Some(i) => format!(
            "{}: {}",
            lines[i - 1].trim_end_matches(':'),
            &lines[i]["Explanation: ".len()..]
        ),
        None => lines
            .iter()
            .find(|l| !l.starts_with("Encountered graph break when"))
            .map_or(String::new(), |l| l.trim_end_matches(':').to_string()),
    };
    if skipped {
        format!("frame skipped: {short}")
    } else {
        short
    }
}

/// A graph-break label's compile id and break.
fn break_label(name: &str) -> Option<(&str, Break)> {
    let f = fields(
        name.strip_prefix(BREAK_LABEL)?,
        &["compile_id", "at", "reason"],
    )?;
    parse_id(f[0])?;
    let (file, line) = f[1].rsplit_once(':')?;
    Some((
        f[0],
        Break {
            file: file.to_string(),
            line: line.parse().ok()?,
            reason: short_reason(f[2]),
        },
    ))
}

/// A recompilation label's compile id and reason.
fn recompile_label(name: &str) -> Option<(&str, String)> {
    let f = fields(
        name.strip_prefix(RECOMPILE_LABEL)?,
        &["compile_id", "reason"],
    )?;
    parse_id(f[0])?;
    Some((f[0], f[1].trim().to_string()))
}

#[derive(Default)]
struct Acc {
    /// (thread, start, end) of each phase call, and its phase.
    phases: Vec<(u32, i64, i64, String)>,
    graph_breaks: u64,
    breaks: Vec<Break>,
    recompile_reason: Option<String>,
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
        for r in &f.ranges {
            let name = names.name(r.name);
            if let Some((id, b)) = break_label(name) {
                let acc = by_id.entry(id.to_string()).or_default();
                if !acc.breaks.contains(&b) {
                    acc.breaks.push(b);
                }
            } else if let Some((id, reason)) = recompile_label(name) {
                by_id.entry(id.to_string()).or_default().recompile_reason = Some(reason);
            }
        }
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
        .map(|(id, mut a)| {
            a.breaks.sort();
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
                // A break seen is one met, also where the attempts were not recorded.
                graph_breaks: a.graph_breaks.max(a.breaks.len() as u64),
                breaks: a.breaks,
                recompile_reason: a.recompile_reason,
                calls: a.calls,
                cpu_ns: a.cpu,
            }
        })
        .collect();
    compilations.sort_by_key(|c| (c.frame, c.recompile));
    let mut breaks: Vec<FrameBreak> = Vec::new();
    for c in &compilations {
        for b in &c.breaks {
            match breaks.iter_mut().find(|x| {
                x.frame == c.frame && x.file == b.file && x.line == b.line && x.reason == b.reason
            }) {
                Some(x) => x.count += 1,
                None => breaks.push(FrameBreak {
                    frame: c.frame,
                    file: b.file.clone(),
                    line: b.line,
                    reason: b.reason.clone(),
                    count: 1,
                }),
            }
        }
    }
    breaks.sort_by(|x, y| {
        (x.frame, &x.file, x.line, &x.reason).cmp(&(y.frame, &y.file, y.line, &y.reason))
    });
    Some(TorchCompile {
        breaks,
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

    #[test]
    fn labels_name_their_break_or_recompilation() {
        let name = "torch.compile graph break: compile_id=2/1, at=/a, b/m.py:31, reason=Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nCall to `torch._dynamo.graph_break()`\n  Explanation: User-inserted graph break. Message: None\n  Hint: Remove it.";
        assert_eq!(
            break_label(name),
            Some((
                "2/1",
                Break {
                    file: "/a, b/m.py".into(),
                    line: 31,
                    reason: "Call to `torch._dynamo.graph_break()`: User-inserted graph break. \
                             Message: None"
                        .into()
                }
            ))
        );
        assert_eq!(
            recompile_label("torch.compile recompile: compile_id=0/1, reason=0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"),
            Some(("0/1", "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8".into()))
        );
        assert_eq!(
            break_label("torch.compile graph break: compile_id=x, at=f:1, reason=r"),
            None
        );
        assert_eq!(
            break_label("torch.compile graph break: compile_id=0/0, at=f, reason=r"),
            None
        );
        assert_eq!(recompile_label("torch.compile recompile: reason=r"), None);
        assert_eq!(short_reason("frame skipped: loop"), "frame skipped: loop");
        // A break in a loop: dynamo runs the whole frame eagerly (torch 2.15's words).
        assert_eq!(
            short_reason("Failed to handle graph break gracefully. Skipping the function and falling back to eager. Graph break encountered:\n\nFailed to trace builtin operator\n  Explanation: Dynamo does not know how to trace builtin operator `print`\n  Hint: Avoid it."),
            "frame skipped: Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print`"
        );
    }
}
