//! Names in a trace are data: escape sequences, BEL, newlines, tabs and bidirectional controls
//! in kernel, operator and range names reach neither the terminal nor `report.md` as they
//! are, and every table row stays on one line (issue 26).

use crate::analysis_support::*;

/// Each hostile name, and what it must look like where it is shown.
const NAMES: [(&str, &str); 5] = [
    ("k_title\u{1b}]0;pwned\u{7}", "k_title\\u{1b}]0;pwned\\u{7}"),
    ("k_clear\u{1b}[2J\u{1b}[H", "k_clear\\u{1b}[2J\\u{1b}[H"),
    (
        "k_two\nlines\tand\rtab",
        "k_two\\u{a}lines\\u{9}and\\u{d}tab",
    ),
    ("k_csi\u{9b}31m", "k_csi\\u{9b}31m"),
    (
        "k_bidi\u{202e}exe.txt\u{2066}",
        "k_bidi\\u{202e}exe.txt\\u{2066}",
    ),
];

fn hostile_trace(dir: &std::path::Path) -> std::path::PathBuf {
    let mut t = Trace::new(0, 1);
    for n in 0..2 {
        t.step(n, MAIN, n * 1_000_000, 1_000_000, None);
    }
    for (i, (name, _)) in NAMES.iter().enumerate() {
        let i = i as i64;
        t.range(&format!("r_{name}"), MAIN, i * 100_000, 50_000);
        t.cpu_op(
            &format!("op_{name}"),
            MAIN,
            i * 100_000,
            40_000,
            100 + i,
            None,
            None,
        );
        t.launch(
            name,
            MAIN,
            i * 100_000 + 1_000,
            0,
            7,
            i * 100_000 + 5_000,
            10_000 + i,
        );
    }
    let path = dir.join("hostile-rank0.trace.json.gz");
    t.write_gz(&path);
    path
}

/// Nothing that could act on a terminal, and every hostile name shown escaped.
fn check(what: &str, text: &str) {
    let active: Vec<char> = text
        .chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(active.is_empty(), "{what}: {active:?} in\n{text}");
    for (_, shown) in NAMES {
        assert!(text.contains(shown), "{what}: {shown} missing in\n{text}");
    }
}

#[test]
fn report_compare_and_report_md_escape_every_hostile_name() {
    let dir = tempdir("hostile-names");
    let trace = hostile_trace(&dir);
    let trace = trace.to_str().unwrap();
    let out_dir = dir.join("out");
    let text = cuprof_ok(&[
        "report",
        trace,
        "--top",
        "20",
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    check("report", &text);
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    check("report.md", &md);
    // Every Markdown table row is one line: it starts and ends with a pipe; and a table ends
    // with a blank line, so that a note after it is not read as a row.
    for line in md.lines().filter(|l| l.starts_with('|')) {
        assert!(line.ends_with('|'), "broken row: {line:?}");
    }
    let short_dir = dir.join("top1");
    cuprof_ok(&[
        "report",
        trace,
        "--top",
        "1",
        "-o",
        short_dir.to_str().unwrap(),
    ]);
    let md = std::fs::read_to_string(short_dir.join("report.md")).unwrap();
    assert!(md.contains("more in summary.json)"), "{md}");
    let lines: Vec<&str> = md.lines().collect();
    for w in lines.windows(2) {
        if w[0].starts_with('|') {
            assert!(
                w[1].starts_with('|') || w[1].is_empty(),
                "{:?} after a table",
                w[1]
            );
        }
    }
    let compared = cuprof_ok(&["compare", trace, trace]);
    check("compare", &compared);
    // JSON keeps the names exact (serde_json escapes what JSON needs).
    let json = cuprof_ok(&["compare", trace, trace, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let kernels: Vec<&str> = v["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    for (name, _) in NAMES {
        assert!(kernels.contains(&name), "{name:?} not in {kernels:?}");
    }
}
