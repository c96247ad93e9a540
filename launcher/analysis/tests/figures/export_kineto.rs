//! `cuprof export` of a trace PyTorch's own profiler (Kineto) wrote: operators with their
//! shapes, steps and `[memory]` events come out with the file's exact values.
//!
//! Needs PyTorch for `python3`: `bash scripts/test.sh` installs scripts/python-requirements.txt
//! into a virtual environment and puts it first on PATH.

use std::process::Command;

use crate::analysis_support::*;
use crate::export_support::Rows;
use serde::Deserialize;
use serde_json::value::RawValue;

const PROFILE: &str = r#"
import sys, torch
from torch.profiler import profile, ProfilerActivity, schedule
a, b = torch.randn(64, 32), torch.randn(32, 16)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True,
             schedule=schedule(wait=0, warmup=0, active=3, repeat=1),
             on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as p:
    for _ in range(3):
        torch.mm(a, b).relu()
        p.step()
"#;

/// The members of an event this test checks, times as their text.
#[derive(Deserialize)]
struct Ev<'a> {
    ph: Option<String>,
    cat: Option<String>,
    name: Option<String>,
    #[serde(borrow)]
    ts: Option<&'a RawValue>,
    #[serde(borrow)]
    dur: Option<&'a RawValue>,
    #[serde(default)]
    args: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct File<'a> {
    #[serde(borrow, rename = "traceEvents")]
    events: Vec<Ev<'a>>,
    #[serde(rename = "baseTimeNanoseconds")]
    base: Option<i64>,
}

/// `123.456` (µs, at most 3 decimals) as integer ns, by its digits.
fn ns(raw: &RawValue) -> i64 {
    let t = raw.get();
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    assert!(frac.len() <= 3, "{t}");
    int.parse::<i64>().unwrap() * 1000 + format!("{frac:0<3}").parse::<i64>().unwrap()
}

fn arg(e: &Ev<'_>, k: &str) -> Option<i64> {
    e.args.get(k).and_then(|v| v.as_i64())
}

#[test]
fn torch_profiler_trace() {
    let dir = tempdir("export-kineto");
    let trace = dir.join("torch.json");
    let o = Command::new("python3")
        .args(["-c", PROFILE])
        .arg(&trace)
        .output()
        .expect("run python3");
    assert!(
        o.status.success() && trace.is_file(),
        "PyTorch's profiler did not write a trace ({}): run `bash scripts/test.sh`, which \
         installs scripts/python-requirements.txt (torch) into a virtual environment and puts \
         it first on PATH",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    let file: File<'_> = serde_json::from_str(&text).unwrap();
    let ops: Vec<&Ev<'_>> = file
        .events
        .iter()
        .filter(|e| e.ph.as_deref() == Some("X") && e.cat.as_deref() == Some("cpu_op"))
        .collect();
    let mem: Vec<&Ev<'_>> = file
        .events
        .iter()
        .filter(|e| e.name.as_deref() == Some("[memory]"))
        .collect();
    assert!(ops.len() >= 6 && !mem.is_empty(), "{} ops", ops.len());

    let out = dir.join("ds");
    cuprof_ok(&[
        "export",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let part = |t: &str| out.join(t).join("rank=0/cycle=0/torch.parquet");

    let o = Rows::read(&part("operators"));
    let names: Vec<String> = ops.iter().map(|e| e.name.clone().unwrap()).collect();
    assert_eq!(o.text("name"), names);
    let start: Vec<i64> = ops.iter().map(|e| ns(e.ts.unwrap())).collect();
    assert_eq!(o.int("start_ns"), start);
    let end: Vec<i64> = ops
        .iter()
        .map(|e| ns(e.ts.unwrap()) + ns(e.dur.unwrap()))
        .collect();
    assert_eq!(o.int("end_ns"), end);
    let ext: Vec<Option<i64>> = ops.iter().map(|e| arg(e, "External id")).collect();
    assert_eq!(o.ints("external_id"), ext);
    let seq: Vec<Option<i64>> = ops.iter().map(|e| arg(e, "Sequence number")).collect();
    assert_eq!(o.ints("sequence_number"), seq);
    let mm = names
        .iter()
        .position(|n| n == "aten::mm")
        .expect("aten::mm");
    assert_eq!(
        o.texts("input_dims")[mm].as_deref(),
        Some("[[64, 32], [32, 16]]")
    );

    let s = Rows::read(&part("steps"));
    assert_eq!(s.int("step"), [0, 1, 2]);

    let m = Rows::read(&part("memory"));
    let mut want = Vec::new();
    for e in &mem {
        for k in ["Total Reserved", "Total Allocated", "Bytes"] {
            if let Some(v) = arg(e, k) {
                want.push((k.to_string(), v, arg(e, "Device Id"), ns(e.ts.unwrap())));
            }
        }
    }
    want.sort();
    let mut got: Vec<(String, i64, Option<i64>, i64)> = (0..m.len())
        .map(|i| {
            (
                m.text("counter")[i].clone(),
                m.int("value")[i],
                m.ints("device")[i],
                m.int("ts_ns")[i],
            )
        })
        .collect();
    got.sort();
    assert_eq!(got, want);

    let f = Rows::read(&out.join("files/files.parquet"));
    assert_eq!((f.int("rank"), f.int("cycle")), (vec![0], vec![0]));
    assert_eq!(f.ints("base_time_ns"), [file.base]);
    assert_eq!(f.int("events"), [file.events.len() as i64]);
    assert_eq!(f.texts("hostname"), [None]);
    assert_eq!(f.bools("complete"), [None]);
}
