//! The native operator observer (tracer/preload/src/ops) on real models: a diffusers
//! transformer's inference and a Hugging Face causal LM's training step (random weights, small
//! configs), traced by cuprof (real libcuprof.so, started through the libcupti double's
//! `cuInit`) and by torch.profiler with `record_shapes=True`: equal operator by operator in
//! every field Kineto writes for one. Then its options (FLOPs, every thread), its fallback to
//! PyTorch's NVTX observer, and the cache's bad inputs.

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn require_models() {
    let ok = Command::new("python3")
        .args(["-c", "import torch, diffusers, transformers"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "python3 cannot import torch, diffusers and transformers: run `bash scripts/test.sh`, which installs scripts/python-requirements.txt into a virtual environment and puts it first on PATH"
    );
}

/// `real_models.py cuprof MODEL` under cuprof (wait=1, warmup=1, active=2): stdout's JSON,
/// stderr, the trace.
fn traced(model: &str, dir: &Path, env: &[(&str, &str)]) -> (Value, String, Value) {
    require_models();
    let mut run = Run::python("real_models.py", &["cuprof", model], dir)
        .env("CUPROF_WAIT", "1")
        .env("CUPROF_WARMUP", "1")
        .env("CUPROF_ACTIVE", "2");
    for (k, v) in env {
        run = run.env(k, v);
    }
    let (out, stderr) = run.ok_json();
    (out, stderr, read_trace(&dir.join("t-rank0.trace.json.gz")))
}

/// The same program under torch.profiler: stdout's JSON and its trace.
fn reference(model: &str, dir: &Path, env: &[(&str, &str)]) -> (Value, Value) {
    let path = dir.join("torch.json");
    let mut cmd = Command::new("python3");
    cmd.arg(apps().join("real_models.py"))
        .args(["torch", model])
        .arg(&path)
        .env("PYTHONPATH", apps());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap();
    (serde_json::from_str(line).unwrap(), read_trace(&path))
}

/// Operators (ProfilerStep annotations aside), by start, outermost first.
fn operators(trace: &Value) -> Vec<&Value> {
    let mut ops: Vec<&Value> = events(trace, "cpu_op")
        .into_iter()
        .filter(|e| !e["name"].as_str().unwrap().starts_with("ProfilerStep#"))
        .collect();
    ops.sort_by(|a, b| {
        let key = |e: &Value| (e["ts"].as_f64().unwrap(), -e["dur"].as_f64().unwrap());
        key(a).partial_cmp(&key(b)).unwrap()
    });
    ops
}

const FIELDS: [&str; 7] = [
    "Input Dims",
    "Input type",
    "Input Strides",
    "Concrete Inputs",
    "Sequence number",
    "Fwd thread id",
    "Record function id",
];

/// An operator's name and every field torch.profiler writes for it (absent ones as null).
fn identity(e: &Value) -> Vec<Value> {
    let mut v = vec![e["name"].clone()];
    v.extend(FIELDS.iter().map(|k| e["args"][*k].clone()));
    v
}

/// How many operators nested in another one (their parent's span holds theirs), which is
/// what TensorBoard and HTA build their operator trees from.
fn nested(ops: &[&Value]) -> usize {
    let span = |e: &Value| {
        let ts = e["ts"].as_f64().unwrap();
        (ts, ts + e["dur"].as_f64().unwrap())
    };
    ops.windows(2)
        .filter(|w| {
            let (a, b) = (span(w[0]), span(w[1]));
            w[0]["tid"] == w[1]["tid"] && a.0 <= b.0 && b.1 <= a.1
        })
        .count()
}

fn equal_to_torch_profiler(model: &str, expected_ops: usize, expected_lists: usize) {
    let dir = TempDir::new(&format!("native-{model}"));
    let (_, stderr, trace) = traced(model, dir.path(), &[]);
    assert!(!stderr.contains("NVTX observer"), "{stderr}");
    assert_eq!(trace["cuprof"]["operators"], "native");
    let (_, theirs) = reference(model, dir.path(), &[]);
    let (ours, theirs) = (operators(&trace), operators(&theirs));
    assert_eq!((ours.len(), theirs.len()), (expected_ops, expected_ops));
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(identity(a), identity(b), "\n{a}\n{b}");
    }
    assert_eq!(nested(&ours), nested(&theirs));
    // Tensor lists keep one level of nesting per tensor, as torch.profiler writes them.
    let lists: Vec<&&Value> = ours
        .iter()
        .filter(|e| {
            e["args"]["Input type"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t == "TensorList"))
        })
        .collect();
    assert_eq!(lists.len(), expected_lists);
    let dims = &lists[0]["args"]["Input Dims"][0];
    assert!(dims[0].is_array(), "{dims}");
}

#[test]
fn a_diffusers_transformer_equals_torch_profiler_field_by_field() {
    equal_to_torch_profiler("flux", 2274, 36);
}

#[test]
fn a_causal_lm_training_step_equals_torch_profiler_field_by_field() {
    equal_to_torch_profiler("llama", 4760, 18);
}

#[test]
fn flops_equal_torch_profilers_with_flops() {
    let dir = TempDir::new("native-flops");
    let (_, _, trace) = traced("llama", dir.path(), &[("CUPROF_WITH_FLOPS", "1")]);
    let (out, _) = reference("llama", dir.path(), &[("CUPROF_TEST_FLOPS", "1")]);
    let mut ours: BTreeMap<String, Value> = BTreeMap::new();
    for e in operators(&trace) {
        if let Some(flops) = e["args"].get("flops").filter(|f| f.as_u64() != Some(0)) {
            let dims = serde_json::to_string(&e["args"]["Input Dims"]).unwrap();
            let key = format!("{} {dims}", e["name"].as_str().unwrap());
            ours.insert(key, flops.clone());
        }
    }
    let theirs: BTreeMap<String, Value> = serde_json::from_value(out["flops"].clone()).unwrap();
    assert_eq!(ours, theirs);
    assert_eq!(ours["aten::mm [[24,32],[32,128]]"], 196608);
}
