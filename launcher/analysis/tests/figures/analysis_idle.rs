//! `cuprof report`'s idle time by stream (HTA's idle time breakdown): per rank, device and
//! stream, the gaps between its operations as host waits, kernel waits and other; checked
//! against HTA on real Kineto traces.

use crate::analysis_support::*;
use serde_json::json;

const US: i64 = 1_000;

/// Stream 7: a kernel; the next launched 20 µs after it ended (host wait, 25 µs gap); the next
/// launched early, 10 µs after (kernel wait); the next launched early, 100 µs after (other).
/// Stream 13: a memset and a copy 2 µs apart, launched before (kernel wait). Stream 20: one
/// kernel, no gap.
fn idle_trace() -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7), (0, 13), (0, 20)], &[MAIN]);
    let launch = |t: &mut Trace, at: i64, stream: i64, start: i64, dur: i64| {
        let c = t.corr();
        t.runtime("cudaLaunchKernel", MAIN, at, US, c);
        t.kernel("k", 0, stream, start, dur, c);
    };
    launch(&mut t, 0, 7, 5 * US, 10 * US);
    launch(&mut t, 35 * US, 7, 40 * US, 10 * US);
    launch(&mut t, 36 * US, 7, 60 * US, 10 * US);
    launch(&mut t, 37 * US, 7, 170 * US, 10 * US);
    let c = t.corr();
    t.runtime("cudaMemsetAsync", MAIN, 200 * US, US, c);
    t.memset(0, 13, 202 * US, US, c, 4096);
    let c = t.corr();
    t.runtime("cudaMemcpyAsync", MAIN, 201 * US, US, c);
    t.memcpy(
        "Memcpy HtoD (Pinned -> Device)",
        0,
        13,
        205 * US,
        US,
        c,
        4096,
    );
    launch(&mut t, 300 * US, 20, 301 * US, US);
    t
}

#[test]
fn idle_gaps_per_stream_by_kind() {
    let dir = tempdir("idle");
    let trace = dir.join("t-rank0.trace.json.gz");
    idle_trace().write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    assert_eq!(
        s["idle_by_stream"],
        json!([
            {"rank": 0, "device": 0, "stream": 7, "ops": 4, "idle_ns": 135 * US,
             "host_wait_ns": 25 * US, "kernel_wait_ns": 10 * US, "other_ns": 100 * US},
            {"rank": 0, "device": 0, "stream": 13, "ops": 2, "idle_ns": 2 * US,
             "host_wait_ns": 0, "kernel_wait_ns": 2 * US, "other_ns": 0},
            {"rank": 0, "device": 0, "stream": 20, "ops": 1, "idle_ns": 0,
             "host_wait_ns": 0, "kernel_wait_ns": 0, "other_ns": 0},
        ])
    );
    assert_eq!(
        section_lines(&stdout, "Idle time by stream (HTA's idle time breakdown)"),
        [
            "the gaps between a stream's operations: host wait, the next one's launch call \
             started after the previous one ended (the GPU waited on the host); kernel wait, a \
             gap under 30.000 µs between operations already launched (launch overhead: CUDA \
             graphs and fusion shrink it); other, a longer one (an event, another stream, a \
             synchronization)",
            "  rank  device  stream  operations        idle          host wait        kernel wait               other",
            "     0       0       7           4  135.000 µs  25.000 µs (18.5%)   10.000 µs (7.4%)  100.000 µs (74.1%)",
            "     0       0      13           2    2.000 µs        0 ns (0.0%)  2.000 µs (100.0%)         0 ns (0.0%)",
            "     0       0      20           1        0 ns        0 ns (0.0%)        0 ns (0.0%)         0 ns (0.0%)",
        ]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| 0 | 0 | 7 | 4 | 135.000 µs | 25.000 µs (18.5%) | 10.000 µs (7.4%) | 100.000 µs (74.1%) |"),
        "{md}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(r##"<a href="#cp-idle">Idle time by stream</a>"##));
    assert!(html.contains(r#"<section id="cp-idle"><h2>Idle time by stream</h2>"#));
    assert!(
        html.contains(
            r#"<td data-key="idle_by_stream.0.host_wait_ns" data-value="25000">25.000 µs</td>"#
        ),
        "{html}"
    );
    assert!(html.contains(
        r#"<td data-key="idle_by_stream.1.kernel_wait_ns" data-value="2000">2.000 µs</td>"#
    ));

    // `--top 1`: one row, the others counted.
    let stdout = cuprof_ok(&["report", trace.to_str().unwrap(), "--top", "1"]);
    assert!(
        stdout.contains("100.000 µs (74.1%)\n(2 more in summary.json)\n"),
        "{stdout}"
    );
}

/// Without a GPU operation on a stream there is no section.
#[test]
fn no_section_without_operations() {
    let dir = tempdir("idle-none");
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[], &[MAIN]);
    t.runtime("cudaStreamSynchronize", MAIN, 0, US, 1);
    let trace = dir.join("t-rank0.trace.json.gz");
    t.write_gz(&trace);
    let (stdout, s) = report(&trace, &dir.join("out"));
    assert_eq!(s.get("idle_by_stream"), None);
    assert!(!stdout.contains("Idle time by stream"));
    let html = std::fs::read_to_string(dir.join("out/report.html")).unwrap();
    assert!(!html.contains("cp-idle"));
}

/// `cuprof compare` puts the idle time of A's and B's streams side by side, summed by kind;
/// with no GPU operation on either side there are no rows.
#[test]
fn compare_puts_idle_kinds_side_by_side() {
    let dir = tempdir("idle-compare");
    let (a, b) = (
        dir.join("a-rank0.trace.json.gz"),
        dir.join("b-rank0.trace.json.gz"),
    );
    idle_trace().write_gz(&a);
    // B: two kernels on stream 7, the second launched 4 µs after the first ended (host wait).
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    for (at, start) in [(0, 2 * US), (16 * US, 18 * US)] {
        let c = t.corr();
        t.runtime("cudaLaunchKernel", MAIN, at, US, c);
        t.kernel("k", 0, 7, start, 10 * US, c);
    }
    t.write_gz(&b);
    let (rows, _) = compared(&a, &b, "idle");
    assert_eq!(
        rows,
        [
            ("idle, other".to_string(), 100 * US, 0),
            ("idle, host wait".to_string(), 25 * US, 6 * US),
            ("idle, kernel wait".to_string(), 12 * US, 0),
        ]
    );
    let stdout = cuprof_ok(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(
        stdout.contains("idle time between a stream's operations"),
        "{stdout}"
    );

    let none = dir.join("n-rank0.trace.json.gz");
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[], &[MAIN]);
    t.runtime("cudaStreamSynchronize", MAIN, 0, US, 1);
    t.write_gz(&none);
    let c = compare_json(&none, &none);
    assert_eq!(c.get("idle"), None);
}

/// On three real Kineto traces, every stream's host wait, kernel wait and other idle time equal
/// what HTA's idle time breakdown gives (`tests/hta/idle_with_hta.py`).
#[test]
fn idle_by_stream_agrees_with_hta() {
    agrees_with_hta(
        "idle_with_hta.py",
        "idle-hta",
        &["cuprof and HTA agree on idle time by stream"],
        |name, s| {
            assert!(
                !s["idle_by_stream"].as_array().unwrap().is_empty(),
                "{name}: no streams"
            )
        },
    );
}
