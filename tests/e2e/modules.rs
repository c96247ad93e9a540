//! Modules on real models.
//! - Recording (`--with-modules`): a Hugging Face GPT-2 (tiny config, random weights) traced by
//!   cuprof (real libcuprof.so, the libcupti double) and by torch.profiler's `with_stack`.
//!   TensorBoard's Module View reads the same module tree, calls and operators from both, and
//!   each of cuprof's module calls carries its path and its enclosing call.
//! - The module view: GPT-2 (transformers) and Flux (diffusers) under torch.profiler's
//!   `with_stack`, given one deterministic kernel per leaf operator
//!   (tests/apps/module_figures.py): `cuprof report`'s figures per module path equal a recount
//!   from the raw events, to the nanosecond.

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

/// The module calls of a trace: torch's `python_function` events named `nn.Module: ...`.
fn module_calls(trace: &Value) -> Vec<&Value> {
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["cat"] == "python_function" && e["name"].as_str().unwrap().starts_with("nn.Module: ")
        })
        .collect()
}

/// TensorBoard's Module View of each trace (tests/apps/modules.py `view`).
fn module_views(paths: &[&std::path::Path]) -> Vec<Value> {
    let mut args = vec!["view".as_ref()];
    args.extend(paths.iter().map(|p| p.as_os_str()));
    let stdout = untraced_python("modules.py", &args, &[]);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

#[test]
fn module_calls_are_torch_profilers_with_their_paths() {
    require_python("torch, transformers");
    let dir = TempDir::new("modules");
    let (_, stderr) = windowed("modules.py", &["cuprof"], dir.path(), &[])
        .env("CUPROF_WITH_MODULES", "1")
        .ok_json();
    assert!(!stderr.contains("--with-modules"), "{stderr}");
    let ours_path = dir.path().join("t-rank0.trace.json.gz");
    let ours = read_trace(&ours_path);
    let theirs_path = dir.path().join("torch.json");
    untraced_python(
        "modules.py",
        &["torch".as_ref(), theirs_path.as_os_str()],
        &[],
    );

    // The plugin's tree, with each module's calls and operators, is torch.profiler's.
    let views = module_views(&[&ours_path, &theirs_path]);
    assert_eq!(views[0], views[1]);
    let view = &views[0];
    assert_eq!(view["complaints"], serde_json::json!([]));
    let root = &view["modules"][0];
    assert_eq!(root[0], "GPT2LMHeadModel_0");
    assert_eq!((root[1].as_u64(), root[2].as_u64()), (Some(2), Some(2)));

    // Per step: the model's 31 module calls and the LayerNorm called alone (its thread's call
    // is not recorded: that thread's operators are not either).
    let calls = module_calls(&ours);
    assert_eq!(calls.len(), 2 * 32);
    assert_eq!(module_calls(&read_trace(&theirs_path)).len(), 2 * 32);
    let paths: BTreeMap<&str, &str> = calls
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["args"]["Module path"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(paths.len(), 32);
    for (name, path) in [
        ("nn.Module: GPT2LMHeadModel_0", "GPT2LMHeadModel"),
        ("nn.Module: GPT2Model_0", "GPT2LMHeadModel.transformer"),
        (
            "nn.Module: Conv1D_0",
            "GPT2LMHeadModel.transformer.h.0.attn.c_attn",
        ),
        (
            "nn.Module: Conv1D_7",
            "GPT2LMHeadModel.transformer.h.1.mlp.c_proj",
        ),
        ("nn.Module: Linear_0", "GPT2LMHeadModel.lm_head"),
        ("nn.Module: LayerNorm_4", "GPT2LMHeadModel.transformer.ln_f"),
        ("nn.Module: LayerNorm_5", "LayerNorm"),
    ] {
        assert_eq!(paths.get(name), Some(&path), "{name}");
    }
    // Each call's parent is the call that encloses it on its thread (0 for a root), and its
    // `Python module id` is its name's number.
    let by_id: BTreeMap<u64, &Value> = calls
        .iter()
        .map(|e| (e["args"]["Python id"].as_u64().unwrap(), *e))
        .collect();
    assert_eq!(by_id.len(), calls.len());
    let mut roots = Vec::new();
    for e in &calls {
        let name = e["name"].as_str().unwrap();
        let number = name.rsplit_once('_').unwrap().1;
        assert_eq!(e["args"]["Python module id"].to_string(), number, "{name}");
        match e["args"]["Python parent id"].as_u64().unwrap() {
            0 => roots.push(name),
            parent => {
                let p = by_id[&parent];
                let span = |e: &Value| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
                let ((ts, dur), (pts, pdur)) = (span(e), span(p));
                assert!(
                    ts >= pts && ts + dur <= pts + pdur,
                    "{name} outside its parent"
                );
                assert_eq!(e["tid"], p["tid"]);
                let (path, parent_path) = (paths[name], paths[p["name"].as_str().unwrap()]);
                assert!(path.starts_with(&format!("{parent_path}.")), "{path}");
            }
        }
    }
    // The report's module view names cuprof's paths: every module of the model, called twice
    // (once per recorded step), and the lone LayerNorm under its class.
    let summary = report_summary(&ours_path, dir.path());
    let rows: BTreeMap<&str, u64> = summary["modules"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["calls"].as_u64().unwrap()))
        .collect();
    let mut want: Vec<&str> = paths.values().copied().collect();
    want.sort_unstable();
    assert_eq!(rows.keys().copied().collect::<Vec<_>>(), want);
    assert!(rows.values().all(|&calls| calls == 2), "{rows:?}");
    roots.sort_unstable();
    assert_eq!(
        roots,
        [
            "nn.Module: GPT2LMHeadModel_0",
            "nn.Module: GPT2LMHeadModel_0",
            "nn.Module: LayerNorm_5",
            "nn.Module: LayerNorm_5"
        ]
    );
}
