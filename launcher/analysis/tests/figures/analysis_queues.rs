//! `cuprof report`'s launch queues (HTA's queue length): per rank, device and stream, the
//! operations launched and not yet started (+1 at a launch call's start, -1 at its operation's
//! start), their mean over time, peak and time at a full queue; checked against HTA on real
//! Kineto traces.

use crate::analysis_support::*;
use serde_json::json;

const US: i64 = 1_000;

/// Stream 7: three launches 10 µs apart, their kernels starting from 30 µs, 10 µs apart (the
/// queue holds 1, 2, 3, 2, 1 for 10 µs each). Stream 13: a `cudaMemsetAsync` whose memset starts
/// 1 µs after it, and a synchronous `cudaMemcpy` (not a queued launch). Stream 20: 1,024
/// launches 1 ns apart from 100 µs, their kernels from 200 µs, 1 ns apart: the queue is full
/// from the last launch to the first start.
fn queues_trace() -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7), (0, 13), (0, 20)], &[MAIN]);
    for i in 0..3 {
        let c = t.corr();
        t.runtime("cudaLaunchKernel", MAIN, i * 10 * US, 2 * US, c);
        t.kernel("k", 0, 7, 30 * US + i * 10 * US, 5 * US, c);
    }
    let c = t.corr();
    t.runtime("cudaMemsetAsync", MAIN, 60 * US, US / 2, c);
    t.memset(0, 13, 61 * US, US, c, 4096);
    let c = t.corr();
    t.runtime("cudaMemcpy", MAIN, 70 * US, 5 * US, c);
    t.memcpy(
        "Memcpy DtoH (Device -> Pageable)",
        0,
        13,
        71 * US,
        US,
        c,
        4096,
    );
    for i in 0..1024 {
        let c = t.corr();
        t.runtime("cudaLaunchKernel", MAIN, 100 * US + i, 1, c);
        t.kernel("tiny", 0, 20, 200 * US + i, 1, c);
    }
    t
}

#[test]
fn queue_lengths_over_time_per_stream() {
    let dir = tempdir("queues");
    let trace = dir.join("t-rank0.trace.json.gz");
    queues_trace().write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    // Stream 20: lengths 1..1,023 for 1 ns each on the way up and down, 1,024 from 101,023 to
    // 200,000 ns; from its first launch (100,000) to its last start (201,023).
    let full_ns = 200_000 - (100_000 + 1023);
    let area = 2 * (1023 * 1024 / 2) + 1024 * full_ns;
    let mean_20 = area as f64 / 101_023.0;
    // Through JSON text as summary.json is read (serde_json's float parsing may differ from
    // the division in the last bit).
    let as_read = |v: serde_json::Value| -> serde_json::Value {
        serde_json::from_str(&v.to_string()).unwrap()
    };
    assert_eq!(
        s["launch_queues"],
        as_read(json!([
            {"rank": 0, "device": 0, "stream": 20, "launches": 1024, "mean": mean_20,
             "max": 1024, "full_ns": full_ns},
            // 90 µs·operations over 50 µs.
            {"rank": 0, "device": 0, "stream": 7, "launches": 3, "mean": 1.8, "max": 3,
             "full_ns": 0},
            {"rank": 0, "device": 0, "stream": 13, "launches": 1, "mean": 1.0, "max": 1,
             "full_ns": 0},
        ]))
    );
    assert_eq!(
        section_lines(&stdout, "Launch queues (HTA's queue length)"),
        [
            "operations launched on a stream and not yet started, over time: near 0, each starts \
             as soon as it is launched and the stream waits on the host; deep, the host runs \
             ahead (at 1024 the next launch blocks)",
            "  rank  device  stream  launches  mean queue   max  at full queue",
            "     0       0      20      1024     1013.63  1024      98.977 µs",
            "     0       0       7         3        1.80     3           0 ns",
            "     0       0      13         1        1.00     1           0 ns",
        ]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| 0 | 0 | 7 | 3 | 1.80 | 3 | 0 ns |"), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(r##"<a href="#cp-queues">Launch queues</a>"##));
    assert!(html.contains(r#"<section id="cp-queues"><h2>Launch queues</h2>"#));
    assert!(
        html.contains(r#"<td data-key="launch_queues.1.mean" data-value="1.8">1.80</td>"#),
        "{html}"
    );
    assert!(html
        .contains(r#"<td data-key="launch_queues.0.full_ns" data-value="98977">98.977 µs</td>"#));

    // `--top 1`: one row, the others counted.
    let stdout = cuprof_ok(&["report", trace.to_str().unwrap(), "--top", "1"]);
    assert!(stdout.contains("     0       0      20      1024     1013.63  1024      98.977 µs\n(2 more in summary.json)\n"), "{stdout}");
}

/// Without a full queue there is no column for it; without a queued launch, no section.
#[test]
fn the_full_column_and_the_section_only_when_there_is_something() {
    let dir = tempdir("queues-none");
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    let c = t.corr();
    t.runtime("cudaLaunchKernel", MAIN, 0, 2 * US, c);
    t.kernel("k", 0, 7, 4 * US, US, c);
    let trace = dir.join("t-rank0.trace.json.gz");
    t.write_gz(&trace);
    let (stdout, _) = report(&trace, &dir.join("out"));
    assert!(stdout.contains("  rank  device  stream  launches  mean queue  max\n     0       0       7         1        1.00    1\n"), "{stdout}");

    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    let c = t.corr();
    t.kernel("orphan", 0, 7, 0, US, c);
    t.write_gz(&trace);
    let (stdout, s) = report(&trace, &dir.join("out-none"));
    assert_eq!(s.get("launch_queues"), None);
    assert!(!stdout.contains("Launch queues"));
    let html = std::fs::read_to_string(dir.join("out-none/report.html")).unwrap();
    assert!(!html.contains("cp-queues"));
}

/// On three real Kineto traces, every stream's launches, peak, time at a full queue and mean
/// over time equal what HTA's queue length series gives (`tests/hta/queues_with_hta.py`).
#[test]
fn launch_queues_agree_with_hta() {
    agrees_with_hta(
        "queues_with_hta.py",
        "queues-hta",
        &["cuprof and HTA agree on launch queues"],
        |name, s| {
            assert!(
                !s["launch_queues"].as_array().unwrap().is_empty(),
                "{name}: no queues"
            )
        },
    );
}
