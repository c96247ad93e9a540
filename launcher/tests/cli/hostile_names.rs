//! Names in a trace and names of files are data (issues 26 and 52): hostile kernel, operator,
//! range, thread and Python frame names, and hostile file names in a trace folder, go through
//! every command and every output, and each output is checked with its own parser: the
//! terminal's bytes (stdout and stderr) hold no control but newline, report.md rendered by
//! markdown-it holds no HTML element of a name's, every SVG parses as XML, the HTML page has no
//! script, JSON round-trips to the exact names, folded stacks keep one frame per name, and
//! Parquet holds the exact names.

use std::path::PathBuf;
use std::process::Command;

use crate::analysis_support::*;

/// Each hostile name (one per kind of attack), the table the test runs on.
const NAMES: [&str; 14] = [
    "osc\u{1b}]0;pwned\u{7}",
    "csi\u{1b}[2J\u{1b}[H",
    "cr\rbel\u{7}nul\u{0}tab\tnl\n",
    "c1\u{85}csi\u{9b}31m\u{80}\u{9f}",
    "sep\u{2028}para\u{2029}",
    "bidi\u{202e}exe.txt\u{2066}\u{2067}\u{2068}\u{2069}",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "</svg><svg onload=alert(1)>",
    "cdata]]><x>",
    "pipe|cell|",
    "tick`code` ``x``",
    "amp&lt;&#x3c;\"'",
    "semi;colon;frames",
];

/// What the terminal shows of `s`: each control, DEL, C1, bidirectional control and line
/// separator as `\u{..}`.
fn shown(s: &str) -> String {
    s.chars()
        .map(|c| {
            if active(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn active(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// A very long name (past every cut to a width), hostile at both ends.
fn long_name() -> String {
    format!("long\u{1b}[31m{}<script>\u{9b}", "x".repeat(5000))
}

/// The hostile part of a file name (no NUL nor `/`: the file system refuses them).
const FILE: &str = "f\u{1b}]0;pwned\u{7}\r\n\u{9b}1m\u{2028}\u{202e}<script>|`x`]]>";

/// A trace of every hostile name: each a kernel (in an operator, in a range), an operator and
/// a range; a thread named after it; the Python frames of the operators; allocations.
fn hostile_trace() -> Trace {
    let mut t = Trace::new(0, 1);
    t.step(0, MAIN, 0, 4_000_000, None);
    let names: Vec<String> = NAMES
        .iter()
        .map(|s| s.to_string())
        .chain([long_name()])
        .collect();
    for (i, name) in names.iter().enumerate() {
        let i = i as i64;
        let at = 10_000 + i * 200_000;
        let stack = format!("py_{name}.py(1): f_{name};main.py(3): <module>");
        t.range(&format!("r_{name}"), MAIN, at, 150_000);
        t.cpu_op(
            &format!("op_{name}"),
            MAIN,
            at + 1_000,
            100_000,
            100 + i,
            None,
            Some(&stack),
        );
        t.launch_in(
            100 + i,
            "cudaLaunchKernel",
            "kernel",
            &format!("k_{name}"),
            MAIN,
            at + 2_000,
            at + 20_000,
            10_000 + i,
            false,
        );
        t.tensor_memory_at(MAIN, at + 3_000, 1024 * (i + 1), 1, 0x1000 + i as u64);
    }
    t.events.push(format!(
        "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {PID}, \"tid\": {MAIN}, \"ts\": 0.000, \"args\": {{\"name\": {}}}}}",
        q(&format!("t_{}", NAMES[0]))
    ));
    t
}

/// One command's output as the terminal gets it: nothing in `stdout` nor `stderr` can act on
/// it.
struct Run {
    what: String,
    status: bool,
    stdout: String,
    stderr: String,
}

fn run(args: &[&std::ffi::OsStr]) -> Run {
    let o = Command::new(env!("CARGO_BIN_EXE_cuprof"))
        .args(args)
        .output()
        .expect("run cuprof");
    let what = format!("cuprof {args:?}");
    let stdout = String::from_utf8(o.stdout).unwrap_or_else(|e| panic!("{what}: stdout: {e}"));
    let stderr = String::from_utf8(o.stderr).unwrap_or_else(|e| panic!("{what}: stderr: {e}"));
    for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        let bad: Vec<char> = text.chars().filter(|&c| active(c) && c != '\n').collect();
        assert!(bad.is_empty(), "{what}: {stream} holds {bad:?}:\n{text}");
    }
    Run {
        what,
        status: o.status.success(),
        stdout,
        stderr,
    }
}

fn os<'a>(parts: &'a [&'a dyn AsRef<std::ffi::OsStr>]) -> Vec<&'a std::ffi::OsStr> {
    parts.iter().map(|p| p.as_ref()).collect()
}

/// No character an output must not hold raw (JSON holds them as `\u` escapes).
fn no_raw_active(what: &str, text: &str) {
    let bad: Vec<char> = text.chars().filter(|&c| active(c) && c != '\n').collect();
    assert!(bad.is_empty(), "{what}: raw {bad:?}");
}

/// Every string of a JSON value, keys too.
fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        serde_json::Value::Object(o) => o.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings(x, out)
        }),
        _ => {}
    }
}

/// Checks with their own parsers, in one Python process: report.md through markdown-it (the
/// HTML elements it renders), the page's elements and `on*` attributes, each SVG through an
/// XML parser, and the kernel and operator names of the Parquet dataset through DuckDB.
const CHECKER: &str = r#"
import glob, json, sys, xml.dom.minidom
from html.parser import HTMLParser
from markdown_it import MarkdownIt
import duckdb
md, page, exported, *svgs = sys.argv[1:]
class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.on = set(), []
    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.on += [k for k, _ in attrs if k.lower().startswith("on")]
def tags(html):
    t = Tags(); t.feed(html); t.close(); return t
rendered = tags(MarkdownIt("commonmark").enable("table").render(open(md, encoding="utf-8").read()))
page = tags(open(page, encoding="utf-8").read())
svg_errors = {}
for s in svgs:
    try:
        xml.dom.minidom.parse(s)
    except Exception as e:
        svg_errors[s] = str(e)
names = lambda t: sorted(r[0] for r in duckdb.sql(
    f"SELECT DISTINCT name FROM read_parquet('{exported}/{t}/**/*.parquet')").fetchall())
print(json.dumps({
    "md_tags": sorted(rendered.tags), "md_on": rendered.on,
    "page_has_script": "script" in page.tags, "page_on": page.on,
    "svg_errors": svg_errors,
    "kernels": names("kernels"), "operators": names("operators"),
}))
"#;

#[test]
fn hostile_names_and_file_names_reach_no_output_raw() {
    let dir = tempdir("hostile");
    let d1 = dir.join("d1");
    std::fs::create_dir(&d1).unwrap();
    let trace = d1.join(format!("{FILE}-rank0.trace.json.gz"));
    hostile_trace().write_gz(&trace);
    let all: Vec<String> = NAMES
        .iter()
        .map(|s| s.to_string())
        .chain([long_name()])
        .collect();
    let kernels: Vec<String> = all.iter().map(|n| format!("k_{n}")).collect();
    let operators: Vec<String> = all.iter().map(|n| format!("op_{n}")).collect();
    let out = dir.join("out");
    let (svg, folded, mem_svg) = (dir.join("f.svg"), dir.join("f.folded"), dir.join("m.svg"));
    let (merged, exported) = (dir.join("merged.trace.json.gz"), dir.join("exp"));

    // Every command on the hostile trace: it succeeds, and its terminal holds no control.
    let ok = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let r = run(&os(args));
        assert!(r.status, "{} failed:\n{}{}", r.what, r.stdout, r.stderr);
        r
    };
    let report = ok(&[&"report", &d1, &"--top", &"20", &"-o", &out]);
    ok(&[&"flame", &d1, &"-o", &svg, &"--folded", &folded]);
    ok(&[&"flame", &d1, &"--memory", &"-o", &mem_svg]);
    let compare = ok(&[&"compare", &d1, &d1, &"--top", &"20"]);
    let compare_json = ok(&[&"compare", &d1, &d1, &"--json"]);
    let merge = ok(&[&"merge", &d1, &"-o", &merged]);
    ok(&[&"export", &d1, &"-o", &exported]);
    let memory = ok(&[&"memory", &trace, &"--top", &"20"]);

    // The terminal shows each short name escaped, and the file's name escaped where it names it.
    for (r, prefixes) in [
        (&report, &["k_", "op_", "r_"][..]),
        (&compare, &["k_", "r_"][..]),
        (&memory, &["op_"][..]),
    ] {
        for n in NAMES {
            for p in prefixes {
                let want = shown(&format!("{p}{n}"));
                assert!(
                    r.stdout.contains(&want),
                    "{}: no {want} in\n{}",
                    r.what,
                    r.stdout
                );
            }
        }
    }
    let file = shown(FILE);
    let names_the_file = |r: &Run| {
        assert!(
            (r.stdout.clone() + &r.stderr).contains(&file),
            "{}: the file's name {file} is not shown:\n{}{}",
            r.what,
            r.stdout,
            r.stderr
        );
    };
    names_the_file(&merge);
    names_the_file(&memory);

    // report.md: every table row on one line; summary.json: the exact names and file name.
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    no_raw_active("report.md", &md);
    for line in md.lines().filter(|l| l.starts_with('|')) {
        assert!(line.ends_with('|'), "report.md: broken row {line:?}");
    }
    // With one row a table: its note after a blank line, so that it is not read as a row.
    let short_out = dir.join("top1");
    ok(&[&"report", &d1, &"--top", &"1", &"-o", &short_out]);
    let short_md = std::fs::read_to_string(short_out.join("report.md")).unwrap();
    assert!(short_md.contains("more in summary.json)"), "{short_md}");
    let lines: Vec<&str> = short_md.lines().collect();
    for w in lines.windows(2) {
        if w[0].starts_with('|') {
            assert!(
                w[1].starts_with('|') || w[1].is_empty(),
                "{:?} after a table",
                w[1]
            );
        }
    }
    let summary_text = std::fs::read_to_string(out.join("summary.json")).unwrap();
    no_raw_active("summary.json", &summary_text);
    let summary: serde_json::Value = serde_json::from_str(&summary_text).unwrap();
    let mut in_summary = Vec::new();
    strings(&summary, &mut in_summary);
    for want in kernels
        .iter()
        .chain(&operators)
        .chain([&trace.to_string_lossy().into_owned()])
    {
        assert!(in_summary.contains(want), "summary.json: no {want:?}");
    }

    // compare --json and the merged trace: JSON that round-trips to the exact names.
    let v: serde_json::Value = serde_json::from_str(&compare_json.stdout).unwrap();
    let mut compared = Vec::new();
    strings(&v, &mut compared);
    let merged_text = read_gz_text(&merged);
    no_raw_active("merged trace", &merged_text);
    let v: serde_json::Value = serde_json::from_str(&merged_text).unwrap();
    let mut in_merged = Vec::new();
    strings(&v, &mut in_merged);
    for k in &kernels {
        assert!(compared.contains(k), "compare --json: no {k:?}");
        assert!(in_merged.contains(k), "merged trace: no {k:?}");
    }

    // Folded stacks: one line per stack, ending in its weight; each name one frame, shown.
    let folded_text = std::fs::read_to_string(&folded).unwrap();
    no_raw_active("folded", &folded_text);
    let frames: Vec<&str> = folded_text
        .lines()
        .flat_map(|l| {
            let (stack, weight) = l.rsplit_once(' ').expect("a weight");
            assert!(weight.parse::<u64>().is_ok(), "folded: {l:?}");
            stack.split(';')
        })
        .collect();
    for k in &kernels {
        let want = shown(k).replace(';', ":");
        assert!(frames.contains(&want.as_str()), "folded: no frame {want:?}");
    }

    for p in [out.join("report.html"), svg.clone(), mem_svg.clone()] {
        no_raw_active(&p.to_string_lossy(), &std::fs::read_to_string(&p).unwrap());
    }

    // The parsers: markdown-it, HTML, XML, DuckDB.
    let checked = Command::new("python3")
        .args(["-c", CHECKER])
        .arg(out.join("report.md"))
        .arg(out.join("report.html"))
        .arg(&exported)
        .args([&svg, &mem_svg])
        .output()
        .expect("run python3");
    assert!(
        checked.status.success(),
        "the checker failed (python3 with markdown-it-py and duckdb: scripts/test.sh's venv): {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let c: serde_json::Value = serde_json::from_slice(&checked.stdout).unwrap();
    let md_tags: Vec<&str> = c["md_tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let allowed = [
        "h1", "h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td", "code", "em", "strong",
        "ul", "li", "pre",
    ];
    let foreign: Vec<&&str> = md_tags.iter().filter(|t| !allowed.contains(t)).collect();
    assert!(foreign.is_empty(), "report.md renders {foreign:?}");
    assert_eq!(c["md_on"], serde_json::json!([]));
    assert_eq!(c["page_has_script"], false, "report.html");
    assert_eq!(c["page_on"], serde_json::json!([]), "report.html");
    assert_eq!(c["svg_errors"], serde_json::json!({}));
    let mut sorted_kernels = kernels.clone();
    sorted_kernels.sort();
    let mut sorted_ops = operators.clone();
    sorted_ops.sort();
    assert_eq!(
        c["kernels"],
        serde_json::json!(sorted_kernels),
        "Parquet kernels"
    );
    assert_eq!(
        c["operators"],
        serde_json::json!(sorted_ops),
        "Parquet operators"
    );

    // repair: a cut trace of a hostile name, then again on its output ("already complete").
    let d2 = dir.join("d2");
    std::fs::create_dir(&d2).unwrap();
    let cut = d2.join(format!("{FILE}.trace.json.gz"));
    let t = hostile_trace();
    t.write_cut(&cut, t.events.len() - 1);
    let repaired = ok(&[&"repair", &cut]);
    let fixed: PathBuf = std::fs::read_dir(&d2)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p != &cut)
        .expect("the repaired trace");
    let repaired_text = read_gz_text(&fixed);
    no_raw_active("repaired trace", &repaired_text);
    let v: serde_json::Value = serde_json::from_str(&repaired_text).unwrap();
    let mut in_repaired = Vec::new();
    strings(&v, &mut in_repaired);
    for k in &kernels[..kernels.len() - 1] {
        assert!(in_repaired.contains(k), "repaired trace: no {k:?}");
    }
    let again = ok(&[&"repair", &fixed]);
    names_the_file(&repaired);
    names_the_file(&again);

    // Refusals name the path escaped, on one line: a missing path, a FIFO, a folder whose only
    // file is not a trace (found by listing it), and `flame --memory` on a trace without
    // allocations.
    let d3 = dir.join("d3");
    std::fs::create_dir(&d3).unwrap();
    let fifo = d3.join(format!("{FILE}.json"));
    let made = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; mkfifo reads it only.
    assert_eq!(unsafe { libc::mkfifo(made.as_ptr(), 0o600) }, 0);
    let d4 = dir.join("d4");
    std::fs::create_dir(&d4).unwrap();
    std::fs::write(d4.join(format!("{FILE}.json")), "{}").unwrap();
    let d5 = dir.join("d5");
    std::fs::create_dir(&d5).unwrap();
    let plain = d5.join(format!("{FILE}-rank0.trace.json.gz"));
    let mut t = Trace::new(0, 1);
    t.launch("k", MAIN, 0, 0, 7, 5_000, 10_000);
    t.write_gz(&plain);
    let missing = d1.join(format!("missing{FILE}"));
    let refusals: [(&str, Vec<&dyn AsRef<std::ffi::OsStr>>); 8] = [
        ("report missing", vec![&"report", &missing]),
        ("flame missing", vec![&"flame", &missing, &"-o", &svg]),
        ("report fifo", vec![&"report", &fifo]),
        ("compare fifo", vec![&"compare", &fifo, &trace]),
        ("report {}", vec![&"report", &d4]),
        ("merge {}", vec![&"merge", &d4, &"-o", &merged]),
        ("export {}", vec![&"export", &d4, &"-o", &exported]),
        (
            "flame --memory",
            vec![&"flame", &plain, &"--memory", &"-o", &mem_svg],
        ),
    ];
    for (what, args) in refusals {
        let r = run(&os(&args));
        assert!(!r.status, "{what}: succeeded");
        assert!(
            r.stderr.contains(&file),
            "{what}: {file} not in {:?}",
            r.stderr
        );
        assert_eq!(r.stderr.lines().count(), 1, "{what}: {:?}", r.stderr);
    }
}
