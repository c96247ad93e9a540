//! `cuprof report` agrees with HolisticTraceAnalysis on the same traces (kernel-type breakdown
//! and idle time within 1%): tests/hta/compare_with_hta.py runs HTA and compares.
//!
//! Needs HolisticTraceAnalysis for `python3`: scripts/test.sh installs it (with the other
//! Python packages of scripts/python-requirements.txt) into a virtual environment first on
//! PATH. Without it the test fails, naming what to run: it never passes silently.

use std::path::Path;
use std::process::Command;

use crate::analysis_support::*;

const US: i64 = 1000;

/// A deterministic mix: per step, compute kernels on stream 7, an all-reduce on stream 13 that
/// partly overlaps them, copies and a memset, host gaps and a cudaDeviceSynchronize. Times are
/// whole microseconds, or with `ns` nanosecond fractions added to the kernel durations.
fn rank_trace(rank: i64, world: i64, ns: bool) -> Trace {
    let mut t = Trace::new(rank, world);
    t.metadata(&[0], &[(0, 7), (0, 13), (0, 21)], &[MAIN]);
    let mut seed: u64 = 0x9e37_79b9 + rank as u64;
    let mut rnd = |lo: i64, hi: i64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        lo + ((seed >> 33) as i64 % (hi - lo + 1))
    };
    let kernels = [
        "sm90_xmma_gemm_bf16",
        "flash_fwd_kernel",
        "elementwise_add",
        "layer_norm_fwd",
    ];
    let mut now = 100 * US;
    for step in 0..6 {
        let step_start = now;
        let fwd_start = now;
        let mut gpu = now + 20 * US;
        let mut api = now + 5 * US;
        for k in 0..8 {
            let name = kernels[(k + step as usize) % kernels.len()];
            let dur = rnd(30, 400) * US + if ns { rnd(1, 999) } else { 0 };
            t.launch(name, MAIN, api, 0, 7, gpu, dur);
            api += rnd(2, 10) * US;
            gpu += dur + rnd(0, 3) * US * (k as i64 % 2);
        }
        t.range("forward", MAIN, fwd_start, api - fwd_start + US);
        // All-reduce overlapping the tail of the compute kernels.
        let ar_dur = rnd(200, 600) * US;
        t.launch(
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
            MAIN,
            api,
            0,
            13,
            gpu - 150 * US,
            ar_dur,
        );
        api += 3 * US;
        // A copy back and a memset on another stream, after a host gap.
        let after = (gpu - 150 * US + ar_dur).max(gpu) + rnd(20, 80) * US;
        t.copy(
            "Memcpy DtoH (Device -> Pinned)",
            MAIN,
            api,
            0,
            21,
            after,
            rnd(20, 60) * US,
            4 << 20,
        );
        api += 2 * US;
        let c = t.corr();
        t.runtime("cudaMemsetAsync", MAIN, api, US, c);
        t.memset(0, 21, after + 100 * US, rnd(5, 15) * US, c, 1 << 20);
        let end_gpu = after + 200 * US;
        let c = t.corr();
        t.runtime(
            "cudaDeviceSynchronize",
            MAIN,
            api + 2 * US,
            end_gpu - api,
            c,
        );
        now = end_gpu + rnd(50, 300) * US;
        t.step(step, MAIN, step_start, now - step_start, Some(256.0));
    }
    t.window_end(now);
    t
}

fn hta_available() -> bool {
    Command::new("python3")
        .args(["-c", "import hta.trace_analysis"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Writes two ranks, runs `cuprof report -o`, then the comparison script with `extra` args.
fn check(ns: bool, extra: &[&str]) {
    let dir = tempdir("hta");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    for r in 0..2 {
        rank_trace(r, 2, ns).write_gz(&traces.join(format!("hta-rank{r}.trace.json.gz")));
    }
    let out = dir.join("out");
    cuprof_ok(&[
        "report",
        traces.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let s = read_json(&out.join("summary.json"));
    // The trace exercises every class the comparison covers.
    for k in [
        "compute_ns",
        "communication_ns",
        "memcpy_ns",
        "memset_ns",
        "idle_ns",
        "comm_compute_overlap_ns",
    ] {
        assert!(s["gpu"][k].as_i64().unwrap() > 0, "{k} is 0");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/hta/compare_with_hta.py");
    let o = Command::new("python3")
        .arg(&script)
        .arg(&traces)
        .arg(out.join("summary.json"))
        .args(extra)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "HTA disagrees:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("cuprof and HTA agree within 1.0%"),
        "{stdout}\n{stderr}"
    );
    eprintln!("{stdout}");
}

fn skip_without_hta() -> bool {
    assert!(
        hta_available(),
        "HTA is not installed for python3: run `bash scripts/test.sh`, which installs scripts/python-requirements.txt into a virtual environment and puts it first on PATH"
    );
    false
}

/// Whole-microsecond times: HTA's own API figures, as it reports them.
#[test]
fn report_agrees_with_hta() {
    if !skip_without_hta() {
        check(false, &[]);
    }
}

/// Nanosecond times, as real traces have: HTA's kernel-type breakdown truncates each segment to
/// whole microseconds, so the kernel types are taken from HTA's intervals untruncated.
#[test]
fn report_agrees_with_hta_at_nanosecond_precision() {
    if !skip_without_hta() {
        check(true, &["--untruncated"]);
    }
}
