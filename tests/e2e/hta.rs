//! A real consumer reads the trace: Holistic Trace Analysis (installed by .ci/run) must compute
//! the breakdowns the double's records imply, on a trace with ProfilerStep annotations.

use crate::common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Total length of the union of intervals.
fn union(mut iv: Vec<(i64, i64)>) -> i64 {
    iv.sort();
    let mut total = 0;
    let mut cur: Option<(i64, i64)> = None;
    for (s, e) in iv {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

fn ns(text: &str) -> i64 {
    let (a, b) = text.split_once('.').unwrap();
    a.parse::<i64>().unwrap() * 1000 + b.parse::<i64>().unwrap()
}

#[test]
fn hta_breakdowns_agree_with_the_records() {
    let dir = TempDir::new("hta");
    Run::python("steps.py", &["api", "8", "--no-sync"], dir.path())
        .env("CUPROF_WAIT", "1")
        .env("CUPROF_ACTIVE", "4")
        .ok_json();
    assert_eq!(dir.files(), vec!["t-rank0.trace.json.gz"]);
    let events = raw_events(&dir.path().join("t-rank0.trace.json.gz"));

    // The steps recorded, and what HTA counts: GPU work launched before the last step begins
    // (HTA leaves the last, possibly incomplete, iteration out).
    let steps: Vec<&RawEvent> = events
        .iter()
        .filter(|e| {
            e.v["name"]
                .as_str()
                .unwrap_or("")
                .starts_with("ProfilerStep#")
        })
        .collect();
    let step_names: BTreeSet<&str> = steps
        .iter()
        .map(|e| e.v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        step_names,
        [
            "ProfilerStep#1",
            "ProfilerStep#2",
            "ProfilerStep#3",
            "ProfilerStep#4"
        ]
        .into_iter()
        .collect()
    );
    let last_step = steps.iter().map(|e| ns(&e.ts)).max().unwrap();
    let launched: BTreeSet<u64> = events
        .iter()
        .filter(|e| e.v["cat"] == "cuda_runtime" && ns(&e.ts) < last_step)
        .map(|e| e.v["args"]["correlation"].as_u64().unwrap())
        .collect();
    let gpu: Vec<&RawEvent> = events
        .iter()
        .filter(|e| {
            ["kernel", "gpu_memcpy", "gpu_memset"].contains(&e.v["cat"].as_str().unwrap_or(""))
        })
        .filter(|e| launched.contains(&e.v["args"]["correlation"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        gpu.len(),
        3 * 5,
        "three complete steps of 3 kernels, a copy and a memset"
    );
    let iv = |f: &dyn Fn(&&RawEvent) -> bool| -> Vec<(i64, i64)> {
        gpu.iter()
            .filter(|e| f(e))
            .map(|e| (ns(&e.ts), ns(&e.ts) + ns(&e.dur)))
            .collect()
    };
    let all = iv(&|_| true);
    let span = all.iter().map(|i| i.1).max().unwrap() - all.iter().map(|i| i.0).min().unwrap();
    let busy = union(all.clone());
    let compute = union(iv(&|e| {
        let n = e.v["name"].as_str().unwrap();
        e.v["cat"] == "kernel" && !n.to_lowercase().contains("nccl")
    }));
    let mut per_name: BTreeMap<String, i64> = BTreeMap::new();
    for e in &gpu {
        *per_name
            .entry(e.v["name"].as_str().unwrap().to_string())
            .or_default() += ns(&e.dur);
    }

    let out = Command::new("python3")
        .arg(apps().join("hta_check.py"))
        .arg(dir.path())
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "HTA failed (is it installed? .ci/run installs HolisticTraceAnalysis): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hta: Value = serde_json::from_slice(
        out.stdout
            .split(|&b| b == b'\n')
            .rfind(|l| !l.is_empty())
            .unwrap(),
    )
    .unwrap();
    let close = |got: &Value, want_ns: i64, what: &str| {
        let got = got
            .as_f64()
            .unwrap_or_else(|| panic!("{what} missing in {hta}"));
        assert!(
            (got - want_ns as f64 / 1000.0).abs() < 0.01,
            "{what}: HTA {got} us, records {} us",
            want_ns as f64 / 1000.0
        );
    };
    close(&hta["temporal"]["kernel_time(us)"], span, "kernel time");
    close(&hta["temporal"]["idle_time(us)"], span - busy, "idle time");
    close(
        &hta["temporal"]["compute_time(us)"],
        compute,
        "compute time",
    );
    close(
        &hta["temporal"]["non_compute_time(us)"],
        busy - compute,
        "non-compute time",
    );
    assert_eq!(
        hta["kernels"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<BTreeSet<_>>(),
        per_name.keys().collect::<BTreeSet<_>>()
    );
    for (name, total) in &per_name {
        close(&hta["kernels"][name], *total, name);
    }
    // gemm runs 40+i us in step i: steps 1, 2, 3 -> 41 + 42 + 43.
    assert_eq!(per_name["gemm()"], 126_000);
}
