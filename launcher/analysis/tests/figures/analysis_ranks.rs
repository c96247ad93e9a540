//! `cuprof report` across ranks: imbalance, slowest rank per step, overlap, profiling cycles.

use crate::analysis_support::*;
use serde_json::Value;

const MS: i64 = 1_000_000;

fn steps(t: &mut Trace, durs: &[i64], first: i64) {
    let mut start = 0;
    for (k, d) in durs.iter().enumerate() {
        t.step(first + k as i64, MAIN, start, *d, None);
        start += d;
    }
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn two_ranks_imbalance_and_stragglers() {
    let dir = tempdir("ranks");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();

    // Rank 0: steps 10, 20, 9, 5 ms; gemm 0-4 ms and an all-reduce 3-5 ms (1 ms under compute).
    let mut r0 = Trace::new(0, 2);
    steps(&mut r0, &[10 * MS, 20 * MS, 9 * MS, 5 * MS], 0);
    r0.launch("gemm", MAIN, 0, 0, 7, 0, 4 * MS);
    r0.launch(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        MAIN,
        1000,
        0,
        13,
        3 * MS,
        2 * MS,
    );
    r0.write_gz(&traces.join("job-rank0.trace.json.gz"));

    // Rank 1, in two profiling cycles: steps 15, 15 then 12, 5 ms; gemm 0-3 ms in the first,
    // all-reduce 3-6 ms in the second.
    let mut c1 = Trace::new(1, 2);
    steps(&mut c1, &[15 * MS, 15 * MS], 0);
    c1.launch("gemm", MAIN, 0, 0, 7, 0, 3 * MS);
    c1.write_gz(&traces.join("job-rank1-cycle1.trace.json.gz"));
    let mut c2 = Trace::new(1, 2);
    c2.step(2, MAIN, 30 * MS, 12 * MS, None);
    c2.step(3, MAIN, 42 * MS, 5 * MS, None);
    c2.launch(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        MAIN,
        1000,
        0,
        13,
        3 * MS,
        3 * MS,
    );
    c2.write_gz(&traces.join("job-rank1-cycle2.trace.json.gz"));

    let out = dir.join("out");
    let stdout = cuprof_ok(&[
        "report",
        traces.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let s = read_json(&out.join("summary.json"));

    assert_eq!(s["ranks"].as_array().unwrap().len(), 2);
    assert_eq!(s["ranks"][1]["files"].as_array().unwrap().len(), 2);

    // All 8 steps: 5, 5, 9, 10, 12, 15, 15, 20 ms.
    assert_eq!(i(&s["steps"]["count"]), 8);
    assert_eq!(s["steps"]["mean_ns"], 11_375_000.0);
    assert_eq!(s["steps"]["p50_ns"], 11_000_000.0);
    assert_eq!(s["steps"]["p90_ns"], 16_500_000.0);
    assert_eq!(s["steps"]["p99_ns"], 19_650_000.0);

    let c = &s["cross_rank"];
    let r0 = &c["per_rank"][0];
    let r1 = &c["per_rank"][1];
    assert_eq!(r0["mean_step_ns"], 11_000_000.0);
    assert_eq!(r1["mean_step_ns"], 11_750_000.0);
    assert_eq!(i(&r0["busy_ns"]), 5 * MS);
    assert_eq!(i(&r1["busy_ns"]), 6 * MS);
    assert_eq!(i(&r0["communication_total_ns"]), 2 * MS);
    assert_eq!(i(&r0["comm_compute_overlap_ns"]), MS);
    assert_eq!(r0["comm_overlap_fraction"], 0.5);
    assert_eq!(r1["comm_overlap_fraction"], 0.0);
    assert_eq!(c["step_time_imbalance"], 11.75 / 11.375);
    assert_eq!(c["busy_imbalance"], 6.0 / 5.5);

    // Step 3 is a tie (5 ms each): the lowest rank.
    let slow: Vec<(i64, i64, i64, f64)> = c["slowest_rank_per_step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                i(&x["step"]),
                i(&x["rank"]),
                i(&x["dur_ns"]),
                x["mean_ns"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        slow,
        [
            (0, 1, 15 * MS, 12.5e6),
            (1, 0, 20 * MS, 17.5e6),
            (2, 1, 12 * MS, 10.5e6),
            (3, 0, 5 * MS, 5e6)
        ]
    );
    assert_eq!(i(&r0["slowest_in_steps"]), 2);
    assert_eq!(i(&r1["slowest_in_steps"]), 2);

    // Totals: compute 4 + 3 ms, communication not under compute 1 + 3 ms, no idle.
    assert_eq!(i(&s["gpu"]["compute_ns"]), 7 * MS);
    assert_eq!(i(&s["gpu"]["communication_ns"]), 4 * MS);
    assert_eq!(i(&s["gpu"]["idle_ns"]), 0);
    assert_eq!(i(&s["gpu"]["wall_ns"]), 11 * MS);

    assert!(
        stdout.contains("imbalance (max/mean): step time 1.033, GPU busy 1.091"),
        "{stdout}"
    );
    // The straggler table shows the steps whose slowest rank lagged the mean most, worst
    // first (2.5 ms: steps 0 and 1, by step number; then 1.5 ms; then the tie), and says how
    // many it left out.
    let table = |stdout: &str| -> Vec<String> {
        let at = stdout.find("behind the mean").unwrap();
        stdout[at..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    assert_eq!(table(&stdout), ["0", "1", "2", "3"], "{stdout}");
    let top2 = cuprof_ok(&["report", traces.to_str().unwrap(), "--top", "2"]);
    assert_eq!(table(&top2), ["0", "1"], "{top2}");
    assert!(top2.contains("(2 more steps in summary.json)"), "{top2}");
    assert!(stdout.contains("2 steps"), "{stdout}");
}
