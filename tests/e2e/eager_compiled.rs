//! An eager run against a torch.compile'd run of the same model (tests/apps/eager_compiled.py:
//! torch.profiler on the CPU, inductor's kernels recorded as operators, one deterministic
//! kernel per operator that does work): `cuprof compare`'s regions (steps and labels both runs
//! have) equal a recount from the raw events: calls, time and GPU time per call, kernels and
//! launching operators per call, speedups and the fusion ratio.

use crate::common::*;
use serde_json::Value;

#[test]
fn compare_regions_equal_a_recount_of_an_eager_and_a_compiled_run() {
    require_python("torch");
    let dir = TempDir::new("eager-compiled");
    let stdout = untraced_python(
        "eager_compiled.py",
        &[dir.path().as_os_str()],
        &[(
            "TORCHINDUCTOR_CACHE_DIR",
            dir.path().join("inductor").as_os_str(),
        )],
    );
    let recount: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let (eager, compiled) = (
        dir.path().join("eager.json"),
        dir.path().join("compiled.json"),
    );
    let args = [
        "compare".as_ref(),
        eager.as_os_str(),
        compiled.as_os_str(),
        "--json".as_ref(),
    ];
    let comparison: Value = serde_json::from_str(&cuprof_ok(&args)).unwrap();
    let mut got = comparison["regions"].as_array().unwrap().clone();
    let key = |r: &Value| (r["kind"].to_string(), r["name"].to_string());
    got.sort_by_key(key);
    let mut want = recount["rows"].as_array().unwrap().clone();
    want.sort_by_key(key);
    assert_eq!(got, want);
    // The regions the two runs share, 3 calls each; the compiled forward does the eager one's
    // 8 operators that do work in 5 kernels: 3 fused by inductor, 2 matrix products.
    let by_name = |name: &str| got.iter().find(|r| r["name"] == name).unwrap();
    let names: Vec<(&str, &str)> = got
        .iter()
        .map(|r| (r["kind"].as_str().unwrap(), r["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [("label", "forward"), ("label", "loss"), ("step", "steps")]
    );
    for r in &got {
        assert_eq!(
            (r["a_calls"].as_u64(), r["b_calls"].as_u64()),
            (Some(3), Some(3))
        );
    }
    let forward = by_name("forward");
    assert_eq!(forward["a_operators_per_call"], 8.0);
    assert_eq!(forward["b_kernels_per_call"], 5.0);
    assert_eq!(forward["fusion_ratio"], 1.6);
    // The eager code after the model is the same in both runs: nothing fused.
    assert_eq!(by_name("loss")["fusion_ratio"], 1.0);
    // The terminal table says the same.
    let text = cuprof_ok(&["compare".as_ref(), eager.as_os_str(), compiled.as_os_str()]);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("label forward"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.ends_with("8.0        5.0  1.600x"), "{line}");
}
