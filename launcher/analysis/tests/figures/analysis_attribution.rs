//! Operator attribution on real torch.profiler traces of an older Kineto generation
//! (tests/data/hta: HTA's own test traces), where a launch's `External id` is its correlation
//! id: `cuprof report`'s GPU time per operator equals an independent recount by launch nesting
//! (each GPU operation to its launch by correlation id, the launch to the innermost `cpu_op`
//! containing it on its thread), operator by operator (issue 26).

use crate::analysis_support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/hta")
        .join(name)
}

/// A thread's operators: (start, end, name), in ns.
type Spans = Vec<(i64, i64, String)>;

fn ns(v: &Value) -> i64 {
    (v.as_f64().unwrap() * 1000.0).round() as i64
}

/// GPU time per launching operator, by launch nesting, from the trace's own events.
fn recount(trace: &Value) -> BTreeMap<String, i64> {
    let events: Vec<&Value> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .collect();
    let thread = |e: &Value| (e["pid"].to_string(), e["tid"].to_string());
    let mut ops: BTreeMap<(String, String), Spans> = BTreeMap::new();
    let mut launches: BTreeMap<i64, &Value> = BTreeMap::new();
    for e in &events {
        match e["cat"].as_str().unwrap_or("") {
            "cpu_op" => ops.entry(thread(e)).or_default().push((
                ns(&e["ts"]),
                ns(&e["ts"]) + ns(&e["dur"]),
                e["name"].as_str().unwrap().to_string(),
            )),
            "cuda_runtime" | "cuda_driver" => {
                if let Some(c) = e["args"]["correlation"].as_i64() {
                    launches.insert(c, e);
                }
            }
            _ => {}
        }
    }
    for list in ops.values_mut() {
        list.sort_by_key(|o| (o.0, std::cmp::Reverse(o.1)));
    }
    let mut gpu = BTreeMap::new();
    for e in &events {
        if !matches!(
            e["cat"].as_str(),
            Some("kernel" | "gpu_memcpy" | "gpu_memset")
        ) {
            continue;
        }
        let launch = e["args"]["correlation"]
            .as_i64()
            .and_then(|c| launches.get(&c));
        let name = launch
            .and_then(|l| {
                let at = ns(&l["ts"]);
                ops.get(&thread(l))?
                    .iter()
                    .take_while(|o| o.0 <= at)
                    .filter(|o| at <= o.1)
                    .last()
                    .map(|o| o.2.clone())
            })
            .unwrap_or_else(|| "(no operator)".to_string());
        *gpu.entry(name).or_insert(0) += ns(&e["dur"]);
    }
    gpu.retain(|_, v| *v != 0);
    gpu
}

fn reported(path: &Path) -> BTreeMap<String, i64> {
    let dir = tempdir("attribution");
    cuprof_ok(&[
        "report",
        path.to_str().unwrap(),
        "-o",
        dir.to_str().unwrap(),
    ]);
    let s = read_json(&dir.join("summary.json"));
    let mut m: BTreeMap<String, i64> = s["operators"]["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["gpu_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    m.insert(
        "(no operator)".into(),
        s["operators"]["gpu_without_operator_ns"].as_i64().unwrap(),
    );
    m.retain(|_, v| *v != 0);
    m
}

#[test]
fn older_kineto_traces_attribute_gpu_time_by_launch_nesting() {
    for (name, first) in [
        ("alexnet-old-kineto.trace.json.gz", "aten::copy_"),
        ("simple-add-old-kineto.trace.json.gz", "aten::copy_"),
        ("sampled-rank0.trace.json.gz", "record_param_comms"),
    ] {
        let path = fixture(name);
        let ours = reported(&path);
        let theirs = recount(&read_gz_json(&path));
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            theirs.keys().collect::<Vec<_>>(),
            "{name}"
        );
        for (op, t) in &theirs {
            // The same durations summed from the same decimal text: at most 1 ns apart each.
            let d = (ours[op] - t).abs();
            assert!(d <= 2, "{name}: {op}: report {} recount {t}", ours[op]);
        }
        let top = ours
            .iter()
            .filter(|(n, _)| n.as_str() != "(no operator)")
            .max_by_key(|(_, t)| **t)
            .unwrap();
        assert_eq!(top.0, first, "{name}");
        assert!(
            !ours.contains_key("(no operator)") || name.starts_with("sampled"),
            "{name}"
        );
    }
}
