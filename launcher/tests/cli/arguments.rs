//! What clap refuses before any library call: the binary's own.

use crate::analysis_support::*;

/// `flame --memory --cpu`: refused, one line. Moved unchanged from the figure tests
/// (analysis_operators.rs, `allocations_by_operator_and_python_line`), which now call the
/// library in-process, past the argument parser.
#[test]
fn flame_memory_with_cpu_is_refused() {
    let dir = tempdir("ops-memory-args");
    let trace = dir.join("run-rank0.trace.json.gz");
    with_allocations().write_gz(&trace);
    let o = cuprof(&["flame", trace.to_str().unwrap(), "--memory", "--cpu"]);
    assert!(!o.status.success());
    assert!(
        stderr_of(&o).contains("cannot be used with"),
        "{}",
        stderr_of(&o)
    );
}

/// Every file under `dir`, by path relative to it, with its bytes.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                v.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    v.sort();
    v
}

/// `bytes` with each flame graph colour (`fill="rgb(R,G,B)"`) blanked: inferno draws them at
/// random, so two runs of the binary differ there too.
fn uncoloured(bytes: &[u8]) -> Vec<u8> {
    const FILL: &[u8] = b"fill=\"rgb(";
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = rest.windows(FILL.len()).position(|w| w == FILL) {
        out.extend_from_slice(&rest[..at + FILL.len()]);
        rest = &rest[at + FILL.len()..];
        let end = rest.iter().position(|&b| b == b')').unwrap_or(rest.len());
        rest = &rest[end..];
    }
    out.extend_from_slice(rest);
    out
}

/// The figure tests call the library in-process with the arguments the binary would get
/// (analysis/tests/figures/command.rs). For each kind of argument they pass, the binary gives
/// the same, byte for byte: stdout, stderr, exit status and every file written. So what the
/// figure tests prove in-process holds for `cuprof`.
#[test]
fn the_binary_gives_what_the_figure_tests_call_in_process() {
    let dir = tempdir("cli-in-process");
    let t = dir.join("run-rank0.trace.json.gz");
    with_allocations().write_gz(&t);
    let s = dir.join("sample.trace.json.gz");
    sample().write_gz(&s);
    let ranks = dir.join("ranks");
    std::fs::create_dir_all(&ranks).unwrap();
    for r in 0..2 {
        let mut x = sample();
        x.rank = r;
        x.world = 2;
        x.write_gz(&ranks.join(format!("run-rank{r}.trace.json.gz")));
    }
    let bad = dir.join("bad.trace.json");
    std::fs::write(&bad, "not json").unwrap();
    let out = dir.join("out");
    let o = |name: &str| out.join(name).display().to_string();
    let (t, s, ranks, bad) = (
        t.display().to_string(),
        s.display().to_string(),
        ranks.display().to_string(),
        bad.display().to_string(),
    );
    let cases: Vec<Vec<String>> = vec![
        vec!["report".into(), t.clone()],
        vec!["report".into(), s.clone(), "--top".into(), "1".into()],
        vec!["report".into(), t.clone(), "-o".into(), o("rep")],
        vec!["report".into(), s.clone(), "--html".into(), o("page.html")],
        vec!["report".into(), ranks.clone(), "-j".into(), "2".into()],
        vec!["report".into(), bad.clone()],
        vec![
            "flame".into(),
            t.clone(),
            "-o".into(),
            o("f.svg"),
            "--folded".into(),
            o("f.folded"),
        ],
        vec![
            "flame".into(),
            s.clone(),
            "-o".into(),
            o("f.svg"),
            "--cpu".into(),
        ],
        vec![
            "flame".into(),
            t.clone(),
            "-o".into(),
            o("f.svg"),
            "--memory".into(),
        ],
        vec![
            "flame".into(),
            s.clone(),
            "-o".into(),
            o("f.svg"),
            "--nvtx".into(),
        ],
        vec![
            "flame".into(),
            s.clone(),
            "-o".into(),
            o("f.svg"),
            "--memory".into(),
        ],
        vec!["compare".into(), s.clone(), t.clone()],
        vec!["compare".into(), s.clone(), t.clone(), "--json".into()],
        vec![
            "compare".into(),
            t.clone(),
            s.clone(),
            "--top".into(),
            "1".into(),
        ],
        vec![
            "merge".into(),
            ranks.clone(),
            "-o".into(),
            o("m.trace.json.gz"),
        ],
        vec![
            "merge".into(),
            bad.clone(),
            "-o".into(),
            o("m.trace.json.gz"),
        ],
        vec!["export".into(), t.clone(), "-o".into(), o("ds")],
        vec![
            "export".into(),
            ranks.clone(),
            "-o".into(),
            o("ds"),
            "-j".into(),
            "1".into(),
        ],
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut got = Vec::new();
        for run in [cuprof, crate::in_process::cuprof] {
            let _ = std::fs::remove_dir_all(&out);
            std::fs::create_dir_all(&out).unwrap();
            let r = run(&args);
            got.push((r.status.code(), r.stdout, r.stderr, files(&out)));
        }
        let (binary, library) = (&got[0], &got[1]);
        assert_eq!(binary.0, library.0, "{args:?}: exit status");
        assert_eq!(
            String::from_utf8_lossy(&binary.1),
            String::from_utf8_lossy(&library.1),
            "{args:?}: stdout"
        );
        assert_eq!(
            String::from_utf8_lossy(&binary.2),
            String::from_utf8_lossy(&library.2),
            "{args:?}: stderr"
        );
        let names = |f: &[(String, Vec<u8>)]| f.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&binary.3), names(&library.3), "{args:?}: files");
        for ((name, a), (_, b)) in binary.3.iter().zip(&library.3) {
            assert!(uncoloured(a) == uncoloured(b), "{args:?}: {name} differs");
        }
    }
}
