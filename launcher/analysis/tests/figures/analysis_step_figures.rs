//! Step figures (`cuprof.step(tokens=..., kv_len=...)`: `args.work`, `args.figures`) through
//! `cuprof report`: latency percentiles, tokens per second overall and per step, `--bin`, and
//! mean ± std over runs (`--all-runs`), every number exact.
//!
//! Percentiles interpolate linearly between the nearest ranks (numpy's default): p of sorted
//! `x[0..n]` is at index `p/100*(n-1)`.

use crate::analysis_support::*;
use cuprof_analysis::sections::step_figures::BinSpec;
use serde_json::Value;

const MS: i64 = 1_000_000;

/// Steps k = 1..=10 of k ms each, one after the other; step k reports 1000·k² tokens (so
/// 1e6·k tokens/s) and `kv_len` = 256·(k-1).
fn ten_steps() -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    let mut start = 1_000;
    for k in 1..=10i64 {
        let args = format!(
            "\"work\": {}.000000, \"figures\": {{\"kv_len\": {}, \"say \\\"hi\\\"\": 0.5}}",
            1000 * k * k,
            256 * (k - 1)
        );
        t.x(
            "user_annotation",
            &format!("ProfilerStep#{k}"),
            PID,
            MAIN,
            start,
            k * MS,
            &args,
        );
        start += k * MS;
    }
    t
}

fn report(dir: &std::path::Path, extra: &[&str]) -> (String, Value, String) {
    let out = dir.join("out");
    let mut args = vec!["report", dir.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(extra);
    let stdout = cuprof_ok(&args);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    (stdout, read_json(&out.join("summary.json")), md)
}

#[test]
fn latency_percentiles_tokens_per_second_and_bins_are_exact() {
    let dir = tempdir("step-figures");
    ten_steps().write_gz(&dir.join("serve-rank0.trace.json.gz"));
    let (stdout, s, md) = report(&dir, &["--bin", "kv_len=256,512,1024,2048"]);
    let html = std::fs::read_to_string(dir.join("out/report.html")).unwrap();
    let st = &s["steps"];
    assert_eq!(st["count"], 10);
    assert_eq!(st["mean_ns"], 5_500_000.0);
    assert_eq!(st["p50_ns"], 5_500_000.0);
    // p90: index 8.1 -> 9 ms + 0.1 ms; p99: index 8.91 -> 9 ms + 0.91 ms.
    assert_eq!(st["p90_ns"], 9_100_000.0);
    assert_eq!(st["p99_ns"], 9_910_000.0);
    // 385,000 tokens in 55 ms.
    assert_eq!(st["work"], 385_000.0);
    assert_eq!(st["throughput_per_s"], 7_000_000.0);
    assert_eq!(
        st["step_tokens_per_s"],
        serde_json::json!({"p50": 5_500_000.0, "min": 1_000_000.0, "max": 10_000_000.0})
    );
    // Each step's own rate, in summary.json.
    let per_step: Vec<f64> = s["ranks"][0]["step_times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tokens_per_s"].as_f64().unwrap())
        .collect();
    assert_eq!(
        per_step,
        (1..=10).map(|k| k as f64 * 1e6).collect::<Vec<_>>()
    );

    // Bins of kv_len (0, 256, ..., 2304): [256,512) k=2; [512,1024) k=3,4; [1024,2048)
    // k=5..8; [2048,inf) k=9,10; k=1 (kv_len 0) below the first edge.
    let b = &s["step_bins"];
    assert_eq!(b["figure"], "kv_len");
    assert_eq!(b["below"], 1);
    assert_eq!(b["without"], 0);
    let bins = b["bins"].as_array().unwrap();
    let row = |i: usize| {
        let x = &bins[i]["steps"];
        (
            bins[i]["lo"].as_f64().unwrap(),
            bins[i]["hi"].as_f64(),
            x["count"].as_u64().unwrap(),
            x["p50_ns"].as_f64().unwrap(),
            x["p90_ns"].as_f64().unwrap(),
            x["p99_ns"].as_f64().unwrap(),
            x["throughput_per_s"].as_f64().unwrap(),
        )
    };
    let rate = |tokens: f64, ns: f64| tokens / (ns / 1e9);
    assert_eq!(row(0), (256.0, Some(512.0), 1, 2e6, 2e6, 2e6, 2_000_000.0));
    assert_eq!(
        row(1),
        (
            512.0,
            Some(1024.0),
            2,
            3.5e6,
            3.9e6,
            3.99e6,
            rate(25_000.0, 7e6)
        )
    );
    assert_eq!(
        row(2),
        (
            1024.0,
            Some(2048.0),
            4,
            6.5e6,
            7.7e6,
            7.97e6,
            rate(174_000.0, 26e6)
        )
    );
    assert_eq!(
        row(3),
        (2048.0, None, 2, 9.5e6, 9.9e6, 9.99e6, rate(181_000.0, 19e6))
    );
    // `tokens` bins on args.work.
    let (_, t, _) = report(&dir, &["--bin", "tokens=0,50000"]);
    assert_eq!(t["step_bins"]["bins"][0]["steps"]["count"], 7);
    assert_eq!(t["step_bins"]["bins"][1]["steps"]["count"], 3);

    // The terminal and report.md.
    assert!(
        stdout.contains("10 steps, mean 5.500 ms, p50 5.500 ms, p90 9.100 ms, p99 9.910 ms"),
        "{stdout}"
    );
    assert!(
        stdout.contains("throughput 7000000.0 tokens/s (385000 tokens in 10 steps); per step p50 5500000.0 tokens/s, min 1000000.0, max 10000000.0"),
        "{stdout}"
    );
    assert!(stdout.contains("Steps by kv_len"), "{stdout}");
    assert!(
        md.contains("| [1024, 2048) | 4 | 6.500 ms | 6.500 ms | 7.700 ms | 7.970 ms | 6692307.7 |"),
        "{md}"
    );
    assert!(
        md.contains("steps by figure kv_len (args.figures; tokens: args.work): 1 below the first edge, 0 without it"),
        "{md}"
    );
    // The page's steps section: tokens/s, and the bins.
    assert!(
        html.contains(
            r#"<td data-key="steps.throughput_per_s" data-value="7000000.0">7000000.0</td>"#
        ),
        "tokens/s cell"
    );
    assert!(html.contains("<h3>Steps by kv_len</h3>"), "bins table");
    assert!(
        html.contains(r#"<tr><td>[2048, inf)</td><td data-key="step_bins.bins.3.steps.count" data-value="2">2</td>"#),
        "last bin"
    );
    assert!(
        html.contains("<p>1 step(s) below the first edge, 0 without the figure</p>"),
        "bin counts"
    );
}

#[test]
fn bad_bins_are_one_line() {
    let e = |t: &str| t.parse::<BinSpec>().unwrap_err();
    let tail =
        "give FIGURE=E0,E1,... (e.g. kv_len=0,512,1024): a figure name, then increasing numbers";
    assert_eq!(e("kv_len"), format!("\"kv_len\" has no '=': {tail}"));
    assert_eq!(e("=1,2"), format!("\"=1,2\" names no figure: {tail}"));
    assert_eq!(
        e("kv=1,x"),
        format!("edge \"x\" of \"kv=1,x\" is not a finite number: {tail}")
    );
    assert_eq!(
        e("kv=1,inf"),
        format!("edge \"inf\" of \"kv=1,inf\" is not a finite number: {tail}")
    );
    assert_eq!(
        e("kv=0,512,512"),
        format!("edges of \"kv=0,512,512\" must increase, but 512 follows 512: {tail}")
    );
    assert_eq!(
        "kv_len=0, 512".parse::<BinSpec>(),
        Ok(BinSpec {
            figure: "kv_len".into(),
            edges: vec![0.0, 512.0]
        })
    );
}

/// A run `name` whose steps last `durs` ms, each reporting `tokens`.
fn run(dir: &std::path::Path, name: &str, secs: i64, durs: &[i64], tokens: i64) {
    let mut t = Trace::new(0, 1);
    t.run = Some((name.to_string(), format!("node0-{secs}-1")));
    t.clock.0 += secs * 1_000_000_000;
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    let mut start = 1_000;
    for (i, d) in durs.iter().enumerate() {
        t.step(i as i64, MAIN, start, d * MS, Some(tokens as f64));
        start += d * MS;
    }
    t.write_gz(&dir.join(format!("{name}-rank0.trace.json.gz")));
}

#[test]
fn all_runs_give_each_runs_steps_and_their_mean_and_std() {
    let dir = tempdir("step-runs");
    // a: 1 and 3 ms, 400 tokens in 4 ms; b: 3 and 5 ms, 1600 tokens in 8 ms.
    run(&dir, "a", 1, &[1, 3], 200);
    run(&dir, "b", 2, &[3, 5], 800);
    let (stdout, s, md) = report(&dir, &["--all-runs"]);
    let r = &s["runs"];
    assert_eq!(
        r["runs"],
        serde_json::json!(["a (run node0-1-1)", "b (run node0-2-1)"])
    );
    assert_eq!(r["steps"][0]["p90_ns"], 2_800_000.0);
    assert_eq!(r["steps"][1]["p90_ns"], 4_800_000.0);
    let ms = |m: f64, s: f64| serde_json::json!({"mean": m, "std": s});
    // Sample std (n - 1) of two values d apart: d/√2.
    assert_eq!(r["mean_ns"], ms(3e6, 2e12f64.sqrt()));
    assert_eq!(r["p50_ns"], ms(3e6, 2e12f64.sqrt()));
    assert_eq!(r["p99_ns"], ms(3.98e6, 2e12f64.sqrt()));
    assert_eq!(r["tokens_per_s"], ms(150_000.0, 5e9f64.sqrt()));
    // The rest of the report is the newest run's.
    assert_eq!(s["steps"]["count"], 2);
    assert_eq!(s["steps"]["throughput_per_s"], 200_000.0);
    assert!(stdout.contains("Steps over runs"), "{stdout}");
    assert!(
        md.contains("| mean ± std (2 runs) |  | 3.000 ms ± 1.414 ms | 3.000 ms ± 1.414 ms | 3.800 ms ± 1.414 ms | 3.980 ms ± 1.414 ms | 150000.0 ± 70710.7 |"),
        "{md}"
    );
    let html = std::fs::read_to_string(dir.join("out/report.html")).unwrap();
    assert!(
        html.contains("<tr><td>mean ± std (2 runs)</td><td></td><td>3.000 ms ± 1.414 ms</td>"),
        "runs table"
    );
}

#[test]
fn compare_all_runs_gives_each_sides_mean_and_std() {
    // A: runs of 1+3 ms and 3+5 ms (as above); B: one run of 2+2 ms, 800 tokens in 4 ms.
    let root = tempdir("step-runs-compare");
    let (a, b) = (root.join("a"), root.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    run(&a, "a", 1, &[1, 3], 200);
    run(&a, "b", 2, &[3, 5], 800);
    run(&b, "c", 3, &[2, 2], 400);
    let args = ["compare", a.to_str().unwrap(), b.to_str().unwrap()];
    let json: Value =
        serde_json::from_str(&cuprof_ok(&[&args[..], &["--json", "--all-runs"]].concat())).unwrap();
    assert_eq!(
        json["a_runs"]["mean_ns"],
        serde_json::json!({"mean": 3e6, "std": 2e12f64.sqrt()})
    );
    assert_eq!(
        json["b_runs"]["mean_ns"],
        serde_json::json!({"mean": 2e6, "std": 0.0})
    );
    assert_eq!(
        json["b_runs"]["tokens_per_s"],
        serde_json::json!({"mean": 200_000.0, "std": 0.0})
    );
    let text = cuprof_ok(&[&args[..], &["--all-runs"]].concat());
    assert!(
        text.contains("A over 2 run(s): step mean 3.000 ms ± 1.414 ms, p50 3.000 ms ± 1.414 ms, p90 3.800 ms ± 1.414 ms, p99 3.980 ms ± 1.414 ms, 150000.0 ± 70710.7 tokens/s\n"),
        "{text}"
    );
    assert!(
        text.contains("B over 1 run(s): step mean 2.000 ms ± 0 ns"),
        "{text}"
    );
}
