//! `cuprof report`'s kernel launches (HTA's launch statistics): each kernel joined to its
//! launch call on `correlation`, the call's CPU time and the delay from its end to the kernel's
//! start, over all launches and per kernel name, with HTA's outlier cutoffs (calls over 50 µs,
//! delays over 100 µs).

use crate::analysis_support::*;
use serde_json::{json, Value};

const US: i64 = 1_000;

/// `api` on the main thread from `at` for `call` ns, then its kernel `delay` ns after the call
/// returned.
fn launched(t: &mut Trace, api: &str, kernel: &str, at: i64, call: i64, delay: i64) {
    let c = t.corr();
    t.runtime(api, MAIN, at, call, c);
    t.kernel(kernel, 0, 7, at + call + delay, 5 * US, c);
}

/// gemm: calls of 4, 6 and 60 µs (one over HTA's cutoff), delays of 2, 150 (over) and -1 µs
/// (the kernel started before its call returned: 0, as HTA counts it); relu through the driver: 10 µs calls, 20 and
/// 40 µs delays. Not launches: a copy, a kernel whose call is not in the trace, a graph's.
fn launches_trace() -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    launched(&mut t, "cudaLaunchKernel", "gemm", 0, 4 * US, 2 * US);
    launched(
        &mut t,
        "cudaLaunchKernel",
        "gemm",
        100 * US,
        6 * US,
        150 * US,
    );
    launched(&mut t, "cudaLaunchKernel", "gemm", 400 * US, 60 * US, -US);
    launched(&mut t, "cuLaunchKernel", "relu", 600 * US, 10 * US, 20 * US);
    launched(&mut t, "cuLaunchKernel", "relu", 700 * US, 10 * US, 40 * US);
    t.copy(
        "Memcpy HtoD (Pinned -> Device)",
        MAIN,
        800 * US,
        0,
        7,
        900 * US,
        4 * US,
        4096,
    );
    let orphan = t.corr();
    t.kernel("orphan", 0, 7, 950 * US, US, orphan);
    launched(
        &mut t,
        "cudaGraphLaunch",
        "graph_node",
        1_000 * US,
        3 * US,
        2 * US,
    );
    t
}

fn as_read(v: Value) -> Value {
    serde_json::from_str(&v.to_string()).unwrap()
}

#[test]
fn launch_calls_and_delays_as_hta_counts_them() {
    let dir = tempdir("launches");
    let trace = dir.join("t-rank0.trace.json.gz");
    launches_trace().write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    let spread = |median: f64, p90: f64, min: i64, max: i64| json!({"median_ns": median, "p90_ns": p90, "min_ns": min, "max_ns": max});
    assert_eq!(
        s["launches"],
        as_read(json!({
            "kernels": 5,
            // Calls 4, 6, 10, 10, 60 µs; p90 at 0.9 x 4 = 3.6: 10 + 0.6 x 50 µs.
            "call": spread(10_000.0, 40_000.0, 4_000, 60_000),
            // Delays 0, 2, 20, 40, 150 µs: 40 + 0.6 x 110 µs.
            "delay": spread(20_000.0, 106_000.0, 0, 150_000),
            "slow_calls": 1,
            "late_starts": 1,
            "by_kernel": [
                {"name": "relu", "kernels": 2, "call": spread(10_000.0, 10_000.0, 10_000, 10_000),
                 "delay": spread(30_000.0, 38_000.0, 20_000, 40_000)},
                {"name": "gemm", "kernels": 3, "call": spread(6_000.0, 49_200.0, 4_000, 60_000),
                 "delay": spread(2_000.0, 120_400.0, 0, 150_000)},
            ],
        }))
    );
    assert_eq!(
        section_lines(&stdout, "Kernel launches (HTA's launch statistics)"),
        [
            "5 kernels with their launch call (delay: from the call's end to the kernel's start)",
            "                   median         p90       min         max           outliers",
            "  launch call   10.000 µs   40.000 µs  4.000 µs   60.000 µs   1 over 50.000 µs",
            "  launch delay  20.000 µs  106.000 µs      0 ns  150.000 µs  1 over 100.000 µs",
            "",
            "  kernel  kernels  call median  delay median   delay p90   delay max",
            "  relu          2    10.000 µs     30.000 µs   38.000 µs   40.000 µs",
            "  gemm          3     6.000 µs      2.000 µs  120.400 µs  150.000 µs",
        ]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| launch delay | 20.000 µs |"), "{md}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(r#"<section id="cp-launches"><h2>Kernel launches</h2>"#));
    assert!(
        html.contains(
            r#"<td data-key="launches.delay.p90_ns" data-value="106000.0">106.000 µs</td>"#
        ),
        "{html}"
    );
    assert!(html
        .contains(r#"<td data-key="launches.late_starts" data-value="1">1 over 100.000 µs</td>"#));
    assert!(
        html.contains(
            r#"<td data-key="launches.by_kernel.1.delay.min_ns" data-value="0">0 ns</td>"#
        ),
        "{html}"
    );
}

/// A trace without a kernel joined to its launch call: no section and no key.
#[test]
fn no_launch_calls_no_section() {
    let dir = tempdir("no-launches");
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    let c = t.corr();
    t.kernel("orphan", 0, 7, 0, US, c);
    let trace = dir.join("t-rank0.trace.json.gz");
    t.write_gz(&trace);
    let (stdout, s) = report(&trace, &dir.join("out"));
    assert_eq!(s.get("launches"), None);
    assert!(!stdout.contains("Kernel launches"));
}

/// `cuprof compare` puts the medians and p90s of the launch calls and delays side by side.
#[test]
fn compare_puts_launch_figures_side_by_side() {
    let dir = tempdir("launches-compare");
    let (a, b) = (
        dir.join("a-rank0.trace.json.gz"),
        dir.join("b-rank0.trace.json.gz"),
    );
    launches_trace().write_gz(&a);
    // B: one 5 µs call whose kernel starts 3 µs after it.
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    launched(&mut t, "cudaLaunchKernel", "gemm", 0, 5 * US, 3 * US);
    t.write_gz(&b);
    let (rows, _) = compared(&a, &b, "launches");
    assert_eq!(
        rows,
        [
            ("launch delay, p90".to_string(), 106_000, 3_000),
            ("launch call, p90".to_string(), 40_000, 5_000),
            ("launch delay, median".to_string(), 20_000, 3_000),
            ("launch call, median".to_string(), 10_000, 5_000),
        ]
    );
}
