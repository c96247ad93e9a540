//! `cuprof report`'s torch.compile section on a hand-built trace: each frame's graph breaks
//! (where in the user's code, why, in how many compilations) and each recompilation's failed
//! guard, from the labels cuprof's recorder writes (docs/trace-format.md), beside torch's own
//! compile markers and compiled regions.

use crate::analysis_support::*;
use serde_json::json;

const BREAK: &str = "Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nCall to `torch._dynamo.graph_break()`\n  Explanation: User-inserted graph break. Message: None\n  Hint: Remove the `torch._dynamo.graph_break()` call.\n\n  Developer debug context: Called `torch._dynamo.graph_break()` with args `[]`, kwargs `{}`";
const PRINT: &str = "Failed to trace builtin operator\n  Explanation: Dynamo does not know how to trace builtin operator `print` with argument types ['str'] (has_kwargs False)\n  Hint: Avoid calling builtin `print` with argument types ['str'].";

/// Compilation `id` at `start`: its whole-frame phase (100 µs) and marker, a second attempt
/// (one graph break) when `attempts` is 2, and one call of its compiled code after it.
fn compilation(t: &mut Trace, id: &str, start: i64, attempts: i64) {
    t.x(
        "cpu_op",
        "entire_frame_compile",
        PID,
        MAIN,
        start,
        100_000,
        "",
    );
    t.range(
        &format!("entire_frame_compile_data: fn_name=_compile.compile_inner, compile_id={id}"),
        MAIN,
        start + 1_000,
        1_000,
    );
    if attempts == 2 {
        t.x(
            "cpu_op",
            "compile_attempt_1",
            PID,
            MAIN,
            start + 50_000,
            40_000,
            "",
        );
        t.range(
            &format!("compile_attempt_1_data: compile_id={id}"),
            MAIN,
            start + 51_000,
            1_000,
        );
    }
    t.x(
        "cpu_op",
        &format!("Torch-Compiled Region: {id}"),
        PID,
        MAIN,
        start + 200_000,
        10_000,
        "",
    );
}

/// Frame 0 breaks at train.py:31 (compiled twice: 0/1 after a guard on `x`'s size failed),
/// frame 1 is its resume function, frame 2 breaks at a `print` in a file whose name holds a
/// comma (its attempts not recorded: the label alone counts it).
/// Without `labels`: torch's markers and regions only, as torch.profiler writes them.
fn compile_trace(labels: bool) -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[], &[], &[MAIN]);
    compilation(&mut t, "0/0", 0, 2);
    t.range(
        &format!(
            "torch.compile graph break: compile_id=0/0, at=/home/u/train.py:31, reason={BREAK}"
        ),
        MAIN,
        20_000,
        1_000,
    );
    compilation(&mut t, "1/0", 300_000, 1);
    compilation(&mut t, "0/1", 600_000, 2);
    t.range(
        "torch.compile recompile: compile_id=0/1, reason=0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8",
        MAIN,
        600_500,
        1_000,
    );
    t.range(
        &format!(
            "torch.compile graph break: compile_id=0/1, at=/home/u/train.py:31, reason={BREAK}"
        ),
        MAIN,
        620_000,
        1_000,
    );
    compilation(&mut t, "2/0", 900_000, 1);
    t.range(
        &format!(
            "torch.compile graph break: compile_id=2/0, at=/home/u/my, model.py:7, reason={PRINT}"
        ),
        MAIN,
        920_000,
        1_000,
    );
    if !labels {
        t.events.retain(|e| !e.contains("\"torch.compile "));
    }
    t
}

#[test]
fn graph_breaks_and_recompilations_say_where_and_why() {
    let dir = tempdir("compile-why");
    let trace = dir.join("t-rank0.trace.json.gz");
    compile_trace(true).write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    let c = &s["torch_compile"];
    assert_eq!(
        (c["recompilations"].clone(), c["graph_breaks"].clone()),
        (json!(1), json!(3))
    );
    let graph_break =
        "Call to `torch._dynamo.graph_break()`: User-inserted graph break. Message: None";
    let print = "Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print` with argument types ['str'] (has_kwargs False)";
    assert_eq!(
        c["breaks"],
        json!([
            {"frame": 0, "file": "/home/u/train.py", "line": 31, "reason": graph_break, "count": 2},
            {"frame": 2, "file": "/home/u/my, model.py", "line": 7, "reason": print, "count": 1},
        ])
    );
    let rows: Vec<_> = c["compilations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["compile_id"].as_str().unwrap(),
                k["graph_breaks"].as_u64().unwrap(),
                k["breaks"].clone(),
                k["recompile_reason"].clone(),
            )
        })
        .collect();
    let at_31 = json!([{"file": "/home/u/train.py", "line": 31, "reason": graph_break}]);
    assert_eq!(
        rows,
        [
            ("0/0", 1, at_31.clone(), json!(null)),
            (
                "0/1",
                1,
                at_31,
                json!("0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8")
            ),
            ("1/0", 0, json!(null), json!(null)),
            (
                "2/0",
                1,
                json!([{"file": "/home/u/my, model.py", "line": 7, "reason": print}]),
                json!(null)
            ),
        ]
    );
    let section = stdout
        .split("== torch.compile (compilations and their compiled code) ==\n")
        .nth(1)
        .and_then(|r| r.split("\n== ").next())
        .expect("the section");
    let after_table: Vec<&str> = section.lines().skip(7).collect();
    assert_eq!(
        after_table,
        [
            "",
            "Graph breaks (where in the code, in how many compilations, why):",
            "",
            "  frame  at                      compilations  reason",
            "  0      /home/u/train.py:31                2  Call to `torch._dynamo.graph_break()`: User-inserted graph break. Message: None",
            "  2      /home/u/my, model.py:7             1  Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print` with argument types ['str'] (has_kwargs False)",
            "",
            "Recompilations (the guard that failed; its F/N: the compilation it guarded):",
            "",
            "  compile id  reason",
            "  0/1         0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8",
        ],
        "{section}"
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| 0 | /home/u/train.py:31 | 2 | Call to `torch._dynamo.graph_break()`: User-inserted graph break. Message: None |\n"),
        "{md}"
    );
    assert!(
        md.contains("| 0/1 | 0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8 |\n"),
        "{md}"
    );
    // The page lists them too, escaped.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("<li>frame 0, <code>u/train.py:31</code>, 2 compilations: Call to `torch._dynamo.graph_break()`: User-inserted graph break. Message: None</li>"),
        "{html}"
    );
    assert!(
        html.contains("<li>compile id 0/1: <code>0/0: tensor &#39;x&#39; size mismatch at index 0. expected 4, actual 8</code></li>"),
        "{html}"
    );
}

/// A trace without cuprof's labels (torch.profiler's) counts the same breaks it records
/// (their attempts) and has no reasons: no `breaks`, no `recompile_reason`, no lists.
#[test]
fn without_cuprofs_labels_no_reasons() {
    let dir = tempdir("compile-no-why");
    let trace = dir.join("t-rank0.trace.json.gz");
    compile_trace(false).write_gz(&trace);
    let (stdout, s) = report(&trace, &dir.join("out"));
    let c = &s["torch_compile"];
    assert_eq!(
        (c["recompilations"].clone(), c["graph_breaks"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(c.get("breaks"), None);
    for k in c["compilations"].as_array().unwrap() {
        assert_eq!(
            (k.get("breaks"), k.get("recompile_reason")),
            (None, None),
            "{k}"
        );
    }
    assert!(
        stdout.contains("4 compilations (1 recompilation, 2 graph breaks)"),
        "{stdout}"
    );
    assert!(!stdout.contains("Graph breaks (") && !stdout.contains("Recompilations ("));
}
