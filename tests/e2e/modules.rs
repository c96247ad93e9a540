//! The module view on real models: GPT-2 (transformers) and Flux (diffusers) under
//! torch.profiler's `with_stack` (random weights, small configs), given one deterministic
//! kernel per leaf operator (tests/apps/module_figures.py): `cuprof report`'s figures per
//! module path equal a recount from the raw events, to the nanosecond.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;

const FIELDS: [&str; 5] = [
    "calls",
    "cpu_self_ns",
    "cpu_inclusive_ns",
    "gpu_self_ns",
    "gpu_inclusive_ns",
];

#[test]
fn module_times_equal_a_recount_of_torch_profilers_module_events() {
    require_python("torch, diffusers, transformers");
    let dir = TempDir::new("module-figures");
    // Both models in one process: the imports are most of its time.
    let stdout = untraced_python(
        "module_figures.py",
        &[dir.path().as_os_str(), "gpt2".as_ref(), "flux".as_ref()],
        &[],
    );
    let lines: Vec<Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for recount in &lines {
        let model = recount["model"].as_str().unwrap();
        let summary = report_summary(&dir.path().join(format!("{model}.json")), dir.path());
        let m = &summary["modules"];
        assert_eq!(m["by"], "path");
        assert!(m.get("note").is_none(), "{m}");
        let got: BTreeMap<&str, Vec<&Value>> = m["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap(),
                    FIELDS.iter().map(|f| &r[*f]).collect(),
                )
            })
            .collect();
        let want: BTreeMap<&str, Vec<&Value>> = recount["rows"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, r)| (k.as_str(), FIELDS.iter().map(|f| &r[*f]).collect()))
            .collect();
        assert_eq!(got, want, "{model}");
        assert_eq!(m["outside_gpu_ns"], recount["outside_gpu_ns"], "{model}");
        // Every leaf operator's kernel is in the module view: the root's GPU inclusive time
        // and the time outside every module add up to all kernels' time.
        let kernels: i64 = summary["top_kernels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["total_ns"].as_i64().unwrap())
            .sum();
        let roots: i64 = m["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| !r["name"].as_str().unwrap().contains('.'))
            .map(|r| r["gpu_inclusive_ns"].as_i64().unwrap())
            .sum();
        assert_eq!(
            roots + m["outside_gpu_ns"].as_i64().unwrap(),
            kernels,
            "{model}"
        );
        assert!(recount["kernels"].as_u64().unwrap() > 50, "{model}");
    }
    // The model's own structure, by name.
    let gpt2 = &lines[0]["rows"];
    assert_eq!(lines[0]["model"], "gpt2");
    assert_eq!(
        gpt2["GPT2LMHeadModel_0.GPT2Model_0.GPT2Block_1.GPT2Attention_1"]["calls"],
        1
    );
    assert_eq!(lines[1]["model"], "flux");
    assert_eq!(lines[1]["rows"]["FluxTransformer2DModel_0"]["calls"], 1);
}
