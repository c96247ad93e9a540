//! The `cuprof` Python module (python/cuprof) driving the preloaded libcuprof.so: the module
//! from the source tree, the library and the double from the build, so it runs in every
//! `cargo test` (tests/wheel/test_wheel.py does the same from the installed wheel, plus the
//! plain start where the module loads the library itself).

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// `tests/apps/profile_api.py MODE` under the preloaded library, the module on PYTHONPATH.
fn profile_api(mode: &str, dir: &Path, env: &[(&str, &str)]) -> (Value, String) {
    require_python("torch");
    let dir_arg = dir.to_str().unwrap();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let mut run = Run::python("profile_api.py", &[mode, dir_arg, "t"], dir).env(
        "PYTHONPATH",
        format!("{}:{}", apps().display(), python.display()),
    );
    for (k, v) in env {
        run = run.env(k, v);
    }
    run.ok_json()
}

type Counts = BTreeMap<String, usize>;

/// The recorded steps; the operators, kernels and annotations (CPU, GPU) by name.
fn recorded(dir: &Path) -> (Vec<String>, Counts, Counts, Counts, Counts) {
    let t = read_trace(&dir.join("t-rank0.trace.json.gz"));
    let mut steps: Vec<String> = names(&phs(&t, "X"))
        .into_iter()
        .filter(|n| n.starts_with("ProfilerStep#"))
        .collect();
    steps.sort();
    (
        steps,
        count_by_name(&events(&t, "cpu_op")),
        count_by_name(&events(&t, "kernel")),
        count_by_name(&events(&t, "user_annotation")),
        count_by_name(&events(&t, "gpu_user_annotation")),
    )
}

fn cuprof_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("cuprof: ") && !l.starts_with("cuprof: wrote "))
        .collect()
}

#[test]
fn profile_sets_the_window_of_a_preloaded_library_as_cuprof_run_would() {
    // The window from the environment (cuprof run --wait 1 --warmup 1 --active 2), steps from
    // cuprof_step(): the reference.
    let raw = TempDir::new("pyapi-raw");
    profile_api(
        "raw",
        raw.path(),
        &[
            ("CUPROF_WAIT", "1"),
            ("CUPROF_WARMUP", "1"),
            ("CUPROF_ACTIVE", "2"),
        ],
    );
    let reference = recorded(raw.path());
    assert_eq!(reference.0, ["ProfilerStep#2", "ProfilerStep#3"]);
    assert_eq!(reference.1["aten::linear"], 4);
    assert_eq!(reference.2, Counts::from([("step_kernel()".into(), 2)]));
    // cuprof.annotate's ranges, the `with` and the decorator, on the CPU and the GPU.
    assert_eq!(
        reference.3,
        Counts::from([
            ("ProfilerStep#2".into(), 1),
            ("ProfilerStep#3".into(), 1),
            ("loss".into(), 2),
            ("train_step".into(), 2)
        ])
    );
    assert_eq!(reference.4, Counts::from([("train_step".into(), 2)]));

    // No window in the environment: cuprof.profile(wait=1, warmup=1, active=2) sets it while
    // the library waits for CUDA (cuprof_reload_env).
    let api = TempDir::new("pyapi-profile");
    let (out, stderr) = profile_api("profile", api.path(), &[]);
    assert_eq!(recorded(api.path()), reference);
    let file = api.path().join("t-rank0.trace.json.gz");
    assert_eq!(
        out,
        serde_json::json!({"mode": "profile", "enabled": true, "files": [file.to_str().unwrap()]})
    );
    assert_eq!(cuprof_lines(&stderr), Vec::<&str>::new());

    // The environment's value wins over the argument, and one line says so.
    let env_wins = TempDir::new("pyapi-env-wins");
    let (_, stderr) = profile_api("profile", env_wins.path(), &[("CUPROF_ACTIVE", "1")]);
    assert_eq!(recorded(env_wins.path()).0, ["ProfilerStep#2"]);
    assert_eq!(
        cuprof_lines(&stderr),
        ["cuprof: CUPROF_ACTIVE=1 (from the environment, e.g. a cuprof run option) is used, not 2"]
    );
}

#[test]
fn a_nested_profile_and_a_step_outside_are_said_once_and_change_nothing() {
    let dir = TempDir::new("pyapi-misuse");
    let (out, stderr) = profile_api("misuse", dir.path(), &[]);
    assert_eq!(out["enabled"], true);
    assert_eq!(
        cuprof_lines(&stderr),
        [
            "cuprof: cuprof.profile() entered while another is active (nested, or entered twice): this one does nothing, the outer one goes on",
            "cuprof: profile.step() called outside its `with cuprof.profile(...)` block: ignored",
        ]
    );
    let (steps, ops, ..) = recorded(dir.path());
    assert_eq!(steps, ["ProfilerStep#2", "ProfilerStep#3"]);
    assert_eq!(ops["aten::linear"], 4);
}

#[test]
fn key_averages_are_torch_profilers_from_its_trace_and_read_cuprofs_device_times() {
    // tests/apps/key_averages.py: under torch.profiler, cuprof.averages' rows, times and table
    // text from the exported trace equal torch's own key_averages(); then, under cuprof, the
    // same rows plus the launches and kernels, the launching operator's device times exact.
    require_python("torch");
    let dir = TempDir::new("pyapi-averages");
    let module = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let path = format!("{}:{}", apps().display(), module.display());
    let dir_arg = dir.path().to_str().unwrap();
    let stdout = untraced_python(
        "key_averages.py",
        &["torch".as_ref(), dir_arg.as_ref()],
        &[("PYTHONPATH", path.as_ref())],
    );
    let torch: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        torch,
        serde_json::json!({"mode": "torch", "rows": 37, "shape_rows": 84, "tables": 14})
    );
    let (out, _) = Run::python("key_averages.py", &["cuprof", dir_arg], dir.path())
        .env("PYTHONPATH", &path)
        .env("CUPROF_WAIT", "1")
        .env("CUPROF_WARMUP", "1")
        .env("CUPROF_ACTIVE", "2")
        .env("CUPROF_WITH_STACK", "1")
        .ok_json();
    assert_eq!(
        out,
        serde_json::json!({"mode": "cuprof", "rows": 43, "tables": 21})
    );
}
