//! `cuprof export` reads what `report` reads and refuses what it refuses (issue 26): JSON that
//! is not a trace gets `report`'s one line, older Kineto categories (`Kernel`, `Runtime`, ...)
//! fill the same tables as the current ones, and what no table took is warned of, one line
//! each, with exact counts.

use std::path::{Path, PathBuf};

use crate::analysis_support::*;
use crate::export_support::Rows;

fn alexnet() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/hta/alexnet-old-kineto.trace.json.gz")
}

/// The rows of `TABLE` that exporting one file named `NAME.*` wrote, rank 0, cycle 0.
fn table(out: &Path, table: &str, name: &str) -> Rows {
    Rows::read(
        &out.join(table)
            .join("rank=0/cycle=0")
            .join(format!("{name}.parquet")),
    )
}

#[test]
fn what_report_refuses_export_refuses_with_the_same_line() {
    let dir = tempdir("export-refuses");
    let cases = [
        ("object.json", "{}"),
        ("array.json", "[]"),
        ("et.json", r#"{"schema": "1.0.1", "nodes": [{"id": 1}]}"#),
    ];
    for (name, text) in cases {
        let input = dir.join(name);
        std::fs::write(&input, text).unwrap();
        let p = input.to_str().unwrap();
        let report = cuprof(&["report", p]);
        let out = dir.join(format!("{name}.out"));
        let export = cuprof(&["export", p, "-o", out.to_str().unwrap()]);
        assert_eq!(export.status.code(), Some(1), "{name}");
        assert_eq!(report.status.code(), Some(1), "{name}");
        let line = stderr_of(&export);
        assert_eq!(line, stderr_of(&report), "{name}");
        assert_eq!(line.lines().count(), 1, "{line}");
        assert_eq!(line.matches(p).count(), 1, "{line}");
        assert!(export.stdout.is_empty(), "{name}");
        // Refused before anything is written: not even the output directory.
        assert!(!out.exists(), "{name}");
    }
    let expected = [
        format!(
            "cuprof: {}: a JSON object without `traceEvents` (0 other member(s)), not a Chrome \
             trace; pass a cuprof `*.trace.json.gz` or another Kineto/Chrome JSON trace\n",
            dir.join("object.json").display()
        ),
        format!(
            "cuprof: {}: an empty JSON array, with no trace events; pass a cuprof \
             `*.trace.json.gz` or another Kineto/Chrome JSON trace\n",
            dir.join("array.json").display()
        ),
    ];
    for (i, (name, _)) in cases[..2].iter().enumerate() {
        let p = dir.join(name);
        let out = dir.join("o");
        let e = cuprof(&["export", p.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(stderr_of(&e), expected[i]);
    }
}

#[test]
fn a_broken_file_is_one_line_naming_it_once() {
    let dir = tempdir("export-broken");
    let input = dir.join("broken.json");
    std::fs::write(
        &input,
        r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2}, {"ph": ]}"#,
    )
    .unwrap();
    let p = input.to_str().unwrap();
    let out = dir.join("out");
    let e = cuprof(&["export", p, "-o", out.to_str().unwrap()]);
    assert_eq!(e.status.code(), Some(1));
    let line = stderr_of(&e);
    assert_eq!(line.lines().count(), 1, "{line}");
    assert_eq!(line.matches(p).count(), 1, "{line}");
    assert_eq!(line, stderr_of(&cuprof(&["report", p])));
}

/// The fixture with its CUDA categories renamed as older Kineto wrote them.
fn with_old_categories(from: &Path, to: &Path) {
    let text = read_gz_text(from);
    let mut renamed = text.clone();
    for (new, old) in [
        ("kernel", "Kernel"),
        ("gpu_memcpy", "Memcpy"),
        ("gpu_memset", "Memset"),
        ("cuda_runtime", "Runtime"),
    ] {
        renamed = renamed.replace(
            &format!("\"cat\": \"{new}\""),
            &format!("\"cat\": \"{old}\""),
        );
    }
    assert_ne!(renamed, text, "the fixture's categories were not found");
    assert!(!renamed.contains("\"cat\": \"kernel\""));
    std::fs::write(to, renamed).unwrap();
}

#[test]
fn older_kineto_categories_fill_the_same_tables_as_report_counts() {
    let dir = tempdir("export-old-cats");
    let old = dir.join("alexnet-old-cats.json");
    with_old_categories(&alexnet(), &old);
    for (input, name) in [
        (alexnet(), "alexnet-old-kineto"),
        (old.clone(), "alexnet-old-cats"),
    ] {
        let p = input.to_str().unwrap();
        let out = dir.join(format!("{name}.out"));
        let said = cuprof_ok(&["export", p, "-o", out.to_str().unwrap()]);
        assert_eq!(
            said,
            format!(
                "exported 1 file (1408 events) to {}: kernels 79, copies 19, api_calls 361, \
                 operators 359, ranges 8, steps 0, memory 0, modules 0\n",
                out.display()
            )
        );
        let kernels = table(&out, "kernels", name);
        let copies = table(&out, "copies", name);
        let api = table(&out, "api_calls", name);
        assert_eq!((kernels.len(), copies.len(), api.len()), (79, 19, 361));
        // An older torch.profiler trace: its launches' External ids are their own correlation
        // ids, and the files table says so.
        let files = Rows::read(&out.join("files/files.parquet"));
        assert_eq!(files.text("operator_link"), ["launch_nesting"]);
        let kinds = copies.text("kind");
        assert_eq!(kinds.iter().filter(|k| *k == "memcpy").count(), 16);
        assert_eq!(kinds.iter().filter(|k| *k == "memset").count(), 3);
        assert!(api.text("kind").iter().all(|k| k == "runtime"));

        // The same operations as `report` counts in summary.json.
        let rep = dir.join(format!("{name}.report"));
        cuprof_ok(&["report", p, "-o", rep.to_str().unwrap()]);
        let s = read_json(&rep.join("summary.json"));
        assert_eq!(s["files"][0]["gpu_ops"], 98);
        let top_sum = |member: &str| -> i64 {
            s["top_kernels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k[member].as_i64().unwrap())
                .sum()
        };
        assert_eq!(top_sum("count"), 79);
        let time: i64 = kernels
            .int("end_ns")
            .iter()
            .zip(kernels.int("start_ns"))
            .map(|(e, s)| e - s)
            .sum();
        assert_eq!(time, top_sum("total_ns"));
    }
}

#[test]
fn skipped_events_are_warned_of_as_report_does() {
    let dir = tempdir("export-skipped");
    let input = dir.join("mixed.json");
    // One good kernel, one without `ts`, one with a `ts` that is not a number, one beyond
    // 2^62 ns, one of negative `dur` (kept, as lasting 0), and three of another accelerator.
    let events = [
        r#"{"ph": "X", "cat": "Kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": {"correlation": 3}}"#,
        r#"{"ph": "X", "cat": "kernel", "name": "no_ts", "pid": 0, "tid": 7, "dur": 2}"#,
        r#"{"ph": "X", "cat": "kernel", "name": "text_ts", "pid": 0, "tid": 7, "ts": "x", "dur": 2}"#,
        r#"{"ph": "X", "cat": "kernel", "name": "far", "pid": 0, "tid": 7, "ts": 5e15, "dur": 2}"#,
        r#"{"ph": "X", "cat": "kernel", "name": "neg", "pid": 0, "tid": 7, "ts": 4, "dur": -1}"#,
        r#"{"ph": "X", "cat": "xpu_kernel", "name": "x", "pid": 0, "tid": 7, "ts": 5, "dur": 1}"#,
        r#"{"ph": "X", "cat": "xpu_kernel", "name": "y", "pid": 0, "tid": 7, "ts": 6, "dur": 1}"#,
        "{\"ph\": \"X\", \"cat\": \"npu\\u001b[2J\", \"name\": \"z\", \"pid\": 0, \"tid\": 7, \"ts\": 6, \"dur\": 1}",
        r#"{"ph": "X", "cat": "python_function", "name": "f", "pid": 0, "tid": 7, "ts": 6, "dur": 1}"#,
    ];
    std::fs::write(&input, format!("[{}]", events.join(",\n"))).unwrap();
    let p = input.to_str().unwrap();
    let out = dir.join("out");
    let said = cuprof_ok(&["export", p, "-o", out.to_str().unwrap()]);
    assert_eq!(
        said,
        format!(
            "exported 1 file (9 events) to {}: kernels 2, copies 0, api_calls 0, operators 0, \
             ranges 0, steps 0, memory 0, modules 0\n\
             warning: {p}: 3 malformed event(s) skipped (ts or dur missing, not a number, not \
             finite or beyond ±2^62 ns), 1 clamped (negative dur read as 0)\n\
             warning: {p}: 3 event(s) of categories `npu\\u{{1b}}[2J`, `xpu_kernel` skipped: \
             not CUDA activity nor host events, which no table holds\n",
            out.display()
        )
    );
    let k = table(&out, "kernels", "mixed");
    assert_eq!(k.text("name"), ["k", "neg"]);
    assert_eq!(k.int("end_ns"), [3000, 4000]);
    // `report` warns of the same malformed events in the same words.
    let rep = cuprof_ok(&["report", p]);
    let warning = said.lines().nth(1).unwrap();
    assert_eq!(rep.lines().filter(|l| *l == warning).count(), 1, "{rep}");
}
