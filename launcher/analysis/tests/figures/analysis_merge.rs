//! `cuprof merge`: pids remapped per rank, names prefixed, clocks aligned on the anchors.

use crate::analysis_support::*;
use serde_json::Value;

fn kernel_ts(v: &Value, pid: i64, name: &str) -> Vec<String> {
    v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "kernel" && e["pid"] == pid && e["name"] == name)
        .map(|e| e["ts"].to_string())
        .collect()
}

#[test]
fn merge_three_ranks() {
    let dir = tempdir("merge");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();

    const NCCL: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
    let mut r0 = Trace::new(0, 3);
    r0.metadata(&[0], &[(0, 7)], &[MAIN]);
    r0.launch("gemm", MAIN, 1_000, 0, 7, 1_000_000, 5_000);
    r0.launch(NCCL, MAIN, 2_000, 0, 13, 1_500_000, 500_000);
    r0.write_gz(&traces.join("job-rank0.trace.json.gz"));

    // Same host: one CLOCK_REALTIME, no skew, though the anchors' realtime - monotonic moved
    // by 250 ns (NTP slew between them), which is reported.
    let mut r1 = Trace::new(1, 3);
    r1.clock = (BASE + 1_000_000_000 + 7_000 + 250, 5_000_000_000 + 7_000);
    r1.metadata(&[0], &[(0, 7)], &[MAIN]);
    r1.launch("gemm", MAIN, 1_000, 0, 7, 1_000_000, 5_000);
    r1.write_gz(&traces.join("job-rank1.trace.json.gz"));

    // Another host whose clock runs 300 ns ahead (its all-reduce ends 300 ns "later"), with a
    // base one second earlier.
    let mut r2 = Trace::new(2, 3);
    r2.hostname = "node1".into();
    r2.clock = (BASE + 77, 123);
    r2.base = BASE - 1_000_000_000;
    r2.launch("gemm", MAIN, 1_000, 0, 7, 1_000_005_000, 5_000);
    r2.launch(NCCL, MAIN, 2_000, 0, 13, 1_001_500_300, 500_000);
    r2.write_gz(&traces.join("job-rank2.trace.json.gz"));

    let out = dir.join("merged.trace.json.gz");
    let stdout = cuprof_ok(&[
        "merge",
        traces.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(
        stdout.contains("estimated clock skew against rank 0 (max |skew| 300 ns)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("anchors drifted 250 ns, not applied"),
        "{stdout}"
    );
    assert!(
        stdout.contains("median end offset of 1 matched NCCL kernels"),
        "{stdout}"
    );

    let m = read_gz_json(&out);
    assert_eq!(m["baseTimeNanoseconds"], BASE);
    // The mark: the run (no run id in these traces: their name) and the ranks it holds.
    assert_eq!(
        m["cuprofMerged"],
        serde_json::json!({"run_id": null, "name": "job", "ranks": [0, 1, 2]})
    );
    let ranks = m["cuprof"]["merged"]["ranks"].as_array().unwrap();
    let placed: Vec<(i64, i64, i64)> = ranks
        .iter()
        .map(|r| {
            (
                r["rank"].as_i64().unwrap(),
                r["skew_ns"].as_i64().unwrap(),
                r["shift_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(placed, [(0, 0, 0), (1, 0, 0), (2, 300, -1_000_000_300)]);
    assert_eq!(ranks[1]["anchor_drift_ns"], 250);

    // Kernels: pid = rank * 10^7 + device; times moved by the shift, the all-reduces aligned.
    assert_eq!(kernel_ts(&m, 0, "gemm"), ["1000.0"]);
    assert_eq!(kernel_ts(&m, 10_000_000, "gemm"), ["1000.0"]);
    assert_eq!(kernel_ts(&m, 20_000_000, "gemm"), ["4.7"]);
    assert_eq!(kernel_ts(&m, 0, NCCL), kernel_ts(&m, 20_000_000, NCCL));
    let text = read_gz_text(&out);
    assert!(text.contains("\"ts\": 4.700"), "three decimals kept");

    let events = m["traceEvents"].as_array().unwrap();
    let names: Vec<(i64, String)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_i64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(
        names.contains(&(4242, "rank 0 python3".into())),
        "{names:?}"
    );
    assert!(
        names.contains(&(10_000_000, "rank 1 GPU 0".into())),
        "{names:?}"
    );
    assert!(
        names.contains(&(10_004_242, "rank 1 python3".into())),
        "{names:?}"
    );
    // Rank 2 had no metadata: names are made up.
    assert!(
        names.contains(&(20_000_000, "rank 2 pid 0".into())),
        "{names:?}"
    );
    let sort: Vec<(i64, i64)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_sort_index")
        .map(|e| {
            (
                e["pid"].as_i64().unwrap(),
                e["args"]["sort_index"].as_i64().unwrap(),
            )
        })
        .collect();
    assert!(sort.contains(&(10_000_000, 15_000_000)), "{sort:?}");

    // Flow ids unique across ranks.
    let mut ids: Vec<i64> = events
        .iter()
        .filter(|e| e["ph"] == "s")
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, [1, 2, (1 << 32) + 1, (2 << 32) + 1, (2 << 32) + 2]);

    // Merging again skips the merged file sitting beside the traces.
    let again = traces.join("merged.trace.json.gz");
    std::fs::copy(&out, &again).unwrap();
    let out2 = dir.join("m2.trace.json.gz");
    let o = cuprof(&[
        "merge",
        traces.to_str().unwrap(),
        "-o",
        out2.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "skipping {}: a merged trace of run job, whose rank files are among the inputs\n",
            again.display()
        )
    );

    // The merged file is itself a readable trace.
    cuprof_ok(&["report", out2.to_str().unwrap()]);
}

/// Members in any order: only `pid`, `ts`, `id` and a process name's or sort index's `args` are
/// rewritten, wherever they stand (before or after the long `args`, a string `id` after
/// `args`), and every other byte is kept as it was.
#[test]
fn merge_rewrites_members_wherever_they_stand() {
    let dir = tempdir("merge-order");
    let input = dir.join("job-rank1.trace.json");
    let events = [
        r#"{"args": {"name": "python3"}, "name": "process_name", "ph": "M", "pid": 3, "tid": 0}"#,
        r#"{"ph": "M", "name": "process_sort_index", "args": {"sort_index": 4}, "pid": 3, "tid": 0}"#,
        r#"{"args": {"grid": [1, 2, 3], "note": "pid \"ts\" {"}, "ph": "X", "id": 5, "cat": "kernel", "name": "k", "pid": 3, "tid": 1, "ts": 1.5, "dur": 2}"#,
        r#"{"ph": "s", "cat": "ac2g", "name": "f", "args": {}, "id": "a7", "bp": "e", "tid": 1, "ts": 4, "pid": 3}"#,
        r#"{"name": "z", "ph": "i", "s": "g", "ts": 0.0015, "pid": 3, "tid": 1}"#,
    ];
    let text = format!(
        "{{\"schemaVersion\": 1, \"baseTimeNanoseconds\": {BASE}, \"traceEvents\": [\n{}\n]}}",
        events.join(",\n")
    );
    std::fs::write(&input, text).unwrap();
    let out = dir.join("merged.trace.json.gz");
    cuprof_ok(&[
        "merge",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let merged = read_gz_text(&out);
    let start = merged.find("\"traceEvents\": [\n").unwrap() + "\"traceEvents\": [\n".len();
    let end = merged.find("\n],\n").unwrap();
    let lines: Vec<&str> = merged[start..end].split(",\n").collect();
    assert_eq!(
        lines,
        [
            r#"{"args": {"name": "rank 1 python3"}, "name": "process_name", "ph": "M", "pid": 10000003, "tid": 0}"#,
            r#"{"ph": "M", "name": "process_sort_index", "args": {"sort_index": 10000004}, "pid": 10000003, "tid": 0}"#,
            r#"{"args": {"grid": [1, 2, 3], "note": "pid \"ts\" {"}, "ph": "X", "id": 4294967301, "cat": "kernel", "name": "k", "pid": 10000003, "tid": 1, "ts": 1.500, "dur": 2}"#,
            r#"{"ph": "s", "cat": "ac2g", "name": "f", "args": {}, "id": "r1:a7", "bp": "e", "tid": 1, "ts": 4.000, "pid": 10000003}"#,
            r#"{"name": "z", "ph": "i", "s": "g", "ts": 0.002, "pid": 10000003, "tid": 1}"#,
        ]
    );
}

/// What `merge` copies it must leave readable (issue 26): an event with a member the reader
/// decodes written twice is refused with the line `report` gives for the same input, and bytes
/// that are not UTF-8 inside a string `report` skips are merged as U+FFFD, so the output is
/// UTF-8 and `report` reads it.
#[test]
fn merge_never_writes_what_report_refuses() {
    let dir = tempdir("merge-hostile-bytes");
    // Both ranks share the reference's host: merge does not load them in full for collectives,
    // so only its own (lean) read sees the events.
    let write = |name: &str, ev: &[u8]| {
        let t = Trace::new(0, 1);
        let mut bytes = t.header().into_bytes();
        bytes.extend_from_slice(ev);
        bytes.extend_from_slice(b"\n]}\n");
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("job-rank0.trace.json");
        std::fs::write(&p, bytes).unwrap();
        p
    };
    for (arg, tail) in [
        ("\"correlation\": 3, \"correlation\": 4", ""),
        ("\"device\": 0, \"External id\": 3, \"External id\": 4", ""),
        ("\"device\": 0", ", \"dur\": 1.000"),
    ] {
        let ev = format!(
            "{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 1.000, \"dur\": 2.000{tail}, \"args\": {{{arg}}}}}"
        );
        let input = write("dup", ev.as_bytes());
        let p = input.to_str().unwrap();
        let out = dir.join("dup.merged.trace.json.gz");
        let merged = cuprof(&["merge", p, "-o", out.to_str().unwrap()]);
        let report = cuprof(&["report", p]);
        assert_eq!(merged.status.code(), Some(1), "{ev}");
        assert_eq!(report.status.code(), Some(1), "{ev}");
        let line = stderr_of(&merged);
        assert_eq!(line, stderr_of(&report), "{ev}");
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(line.contains("duplicate field"), "{line}");
        assert!(!out.exists());
        assert_eq!(listing(&dir), ["dup"]);
    }

    let mut ev = b"{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 1.000, \"dur\": 2.000, \"args\": {\"device\": 0, \"note\": \"a".to_vec();
    ev.extend_from_slice(b"\xff\xfe");
    ev.extend_from_slice(b"b\", \"more\": [\"\xc3\"]}}");
    let input = write("bytes", &ev);
    let p = input.to_str().unwrap();
    let out = dir.join("bytes.merged.trace.json.gz");
    let said = cuprof_ok(&["merge", p, "-o", out.to_str().unwrap()]);
    assert!(
        said.contains(&format!(
            "\nwarning: {p}: 1 event(s) held bytes that are not UTF-8; merged with U+FFFD in \
             their place\n"
        )),
        "{said}"
    );
    let v = read_gz_json(&out);
    let k = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "k")
        .unwrap();
    assert_eq!(k["args"]["note"], "a\u{fffd}\u{fffd}b");
    assert_eq!(k["args"]["more"][0], "\u{fffd}");
    assert_eq!(k["pid"], 0);
    assert_eq!(k["ts"], 1.0);
    let rep = cuprof_ok(&["report", out.to_str().unwrap()]);
    assert!(rep.contains("1 file(s), 1 rank(s), "), "{rep}");
}

/// A reference rank without a host name (a trace another tool wrote) is placed by its own
/// clock, not by matching its NCCL kernels against themselves (two more full reads of the file:
/// what held merge to 0.4x report's speed, BENCHMARKS.md); the other rank is still placed by
/// the collectives they share.
#[test]
fn the_reference_rank_is_placed_by_its_own_clock() {
    let dir = tempdir("merge-reference");
    for (r, late) in [(0, 0), (1, 7 * 1000)] {
        let mut events = Vec::new();
        for k in 0..3i64 {
            let ts = 1_000 + k * 100 + late / 1000;
            events.push(format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 7, "ts": {ts}.000, "dur": 10.000, "args": {{"device": 0, "correlation": {k}}}}}"#
            ));
        }
        std::fs::write(
            dir.join(format!("plain-rank{r}.json")),
            format!(
                "{{\"distributedInfo\": {{\"rank\": {r}}}, \"traceEvents\": [{}]}}",
                events.join(",\n")
            ),
        )
        .unwrap();
    }
    let out = dir.join("merged.trace.json.gz");
    let said = cuprof_ok(&[
        "merge",
        dir.join("plain-rank0.json").to_str().unwrap(),
        dir.join("plain-rank1.json").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let lines: Vec<&str> = said.lines().collect();
    assert!(
        lines[1].ends_with("3  the reference: its own clock"),
        "{said}"
    );
    assert!(
        lines[2].ends_with("3  other host: median end offset of 3 matched NCCL kernels"),
        "{said}"
    );
    assert!(lines[2].contains(" 7.000 µs "), "{said}");
}

/// JSON that is no trace (`{}`, `[]`) is refused by `merge` as by `report` and `export`, and
/// no output is written.
#[test]
fn merge_refuses_json_that_is_no_trace() {
    let dir = tempdir("merge-not-a-trace");
    for (name, text, why) in [
        (
            "object.json",
            "{}",
            "a JSON object without `traceEvents` (0 other member(s)), not a Chrome trace; pass a cuprof `*.trace.json.gz` or another Kineto/Chrome JSON trace",
        ),
        (
            "array.json",
            "[]",
            "an empty JSON array, with no trace events; pass a cuprof `*.trace.json.gz` or another Kineto/Chrome JSON trace",
        ),
    ] {
        let input = dir.join(name);
        std::fs::write(&input, text).unwrap();
        let out = dir.join(format!("{name}.merged.trace.json.gz"));
        let o = crate::command::cuprof(&[
            "merge",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(!o.status.success(), "{name}");
        assert_eq!(
            stderr_of(&o),
            format!("cuprof: {}: {why}\n", input.display()),
            "{name}"
        );
        assert!(!out.exists(), "{name}");
    }
}
