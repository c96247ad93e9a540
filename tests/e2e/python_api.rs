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
    // Listed as the block returns, by the module and by the profile.
    assert_eq!(
        out,
        serde_json::json!({"mode": "profile", "enabled": true, "files": [file.to_str().unwrap()], "block": [file.to_str().unwrap()]})
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

/// Kinds and names of the complete events of a trace, counted: (cat, name) -> count.
fn complete_events(path: &Path) -> BTreeMap<(String, String), usize> {
    let t = read_trace(path);
    let mut out = BTreeMap::new();
    for e in phs(&t, "X") {
        let key = (
            e["cat"].as_str().unwrap_or("").to_string(),
            e["name"].as_str().unwrap().to_string(),
        );
        *out.entry(key).or_insert(0) += 1;
    }
    out
}

/// One step's events in tests/apps/profile_torch.py: an `inside` range around a Linear and
/// one `inside()` kernel, `times` over; plus the steps named.
fn inside_steps(times: usize, steps: &[&str]) -> BTreeMap<(String, String), usize> {
    let mut m: BTreeMap<(String, String), usize> = [
        ("cpu_op", "aten::addmm", 1),
        ("cpu_op", "aten::as_strided", 2),
        ("cpu_op", "aten::copy_", 1),
        ("cpu_op", "aten::expand", 1),
        ("cpu_op", "aten::linear", 1),
        ("cpu_op", "aten::resolve_conj", 2),
        ("cpu_op", "aten::t", 1),
        ("cpu_op", "aten::transpose", 1),
        ("cuda_runtime", "cudaLaunchKernel", 1),
        ("gpu_user_annotation", "inside", 1),
        ("kernel", "inside()", 1),
        ("user_annotation", "inside", 1),
    ]
    .into_iter()
    .map(|(c, n, k)| ((c.to_string(), n.to_string()), k * times))
    .collect();
    for s in steps {
        m.insert(("user_annotation".into(), s.to_string()), 1);
    }
    m
}

#[test]
fn cuprof_profile_is_a_drop_in_for_torch_profiler_profile() {
    require_python("torch");
    let dir = TempDir::new("pyapi-dropin");
    let d = dir.path();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let (out, stderr) = Run::python("profile_torch.py", &["dropin", d.to_str().unwrap()], d)
        .env(
            "PYTHONPATH",
            format!("{}:{}", apps().display(), python.display()),
        )
        .ok_json();
    let path = |n: &str| d.join(n).to_str().unwrap().to_string();
    let (c1, c2, c3) = (
        path("t-rank0.trace.json.gz"),
        path("t-rank0-cycle2.trace.json.gz"),
        path("t-rank0-cycle3.trace.json.gz"),
    );
    // Each block's files are complete and listed when it returns; torch's step counts.
    assert_eq!(out["block1"], serde_json::json!([c1]));
    assert_eq!(out["block1_steps"], 1);
    assert_eq!(out["block2"], serde_json::json!([c2, c3]));
    assert_eq!(out["block2_steps"], 6);
    assert_eq!(out["all"], serde_json::json!([c1, c2, c3]));
    // on_trace_ready ran as each cycle was saved (wait=1, warmup=1, active=1: steps 2 and 5).
    assert_eq!(out["ready_at"], serde_json::json!([3, 6]));
    // No schedule: the whole block, its step() marked; nothing from before or after it (no
    // `outside` range, no `outside()` kernel, in any file).
    assert_eq!(
        complete_events(Path::new(&c1)),
        inside_steps(2, &["ProfilerStep#0", "ProfilerStep#1"])
    );
    // The second block asked for module calls (with_modules=True): its Linear's, each step.
    let with_module = |step: &str| {
        let mut m = inside_steps(1, &[step]);
        m.insert(("python_function".into(), "nn.Module: Linear_0".into()), 1);
        m
    };
    assert_eq!(
        complete_events(Path::new(&c2)),
        with_module("ProfilerStep#2")
    );
    assert_eq!(
        complete_events(Path::new(&c3)),
        with_module("ProfilerStep#5")
    );
    // key_averages() from the block's trace (cuprof.averages: equal to torch's, its own test).
    assert_eq!(
        out["averages"],
        serde_json::json!({"inside": 2, "aten::linear": 2, "inside()": 2})
    );
    assert_eq!(out["table_rows"], 9);
    // export_chrome_trace: the file itself as .json.gz, its JSON as .json.
    assert_eq!(
        std::fs::read(d.join("exported.json.gz")).unwrap(),
        std::fs::read(&c1).unwrap()
    );
    let exported: Value =
        serde_json::from_slice(&std::fs::read(d.join("exported.json")).unwrap()).unwrap();
    assert_eq!(exported, read_trace(Path::new(&c1)));
    // torch's own tensorboard_trace_handler, through export_chrome_trace: one file per cycle.
    let mut tb: Vec<String> = std::fs::read_dir(d.join("tb"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    tb.sort();
    assert_eq!(tb.len(), 2, "{tb:?}");
    for (name, cycle) in tb.iter().zip([&c2, &c3]) {
        let stamp = name
            .strip_prefix("w0.")
            .and_then(|n| n.strip_suffix(".pt.trace.json"))
            .unwrap();
        assert!(stamp.bytes().all(|b| b.is_ascii_digit()), "{name}");
        let v: Value =
            serde_json::from_slice(&std::fs::read(d.join("tb").join(name)).unwrap()).unwrap();
        assert_eq!(v, read_trace(Path::new(cycle)), "{name}");
    }
    // Bad arguments raise as torch's do.
    assert_eq!(
        out["errors"],
        serde_json::json!({
            "wait=1.7": "TypeError: wait must be an int, got 1.7",
            "wait=-1": "AssertionError: Invalid profiler schedule arguments. Got wait=-1 (need >= 0), warmup=1 (need >= 0), active=1 (need > 0), repeat=0 (need >= 0), skip_first=0 (need >= 0).",
            "active=0": "AssertionError: Invalid profiler schedule arguments. Got wait=0 (need >= 0), warmup=0 (need >= 0), active=0 (need > 0), repeat=1 (need >= 0), skip_first=0 (need >= 0).",
            "activities=[]": "AssertionError: No valid profiler activities found",
            "activities=5": "TypeError: activities must be a list of torch.profiler.ProfilerActivity values or names (CPU, CUDA, MEM), got 5",
            "schedule=5": "TypeError: schedule must be torch.profiler.schedule(...) or cuprof.schedule(...), got 5",
            "schedule+wait": "TypeError: give schedule= or wait=, not both",
            "record_shapes=1": "TypeError: record_shapes must be True or False, got 1",
            "on_trace_ready=1": "TypeError: on_trace_ready must be callable, got 1",
        })
    );
    assert_eq!(out["activities"], serde_json::json!(["CPU", "GPU"]));
    assert_eq!(cuprof_lines(&stderr), Vec::<&str>::new());
}

#[test]
fn a_block_in_which_cuda_never_initialises_says_so() {
    require_python("torch");
    let dir = TempDir::new("pyapi-nocuda");
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let (out, stderr) = Run::python(
        "profile_torch.py",
        &["nocuda", dir.path().to_str().unwrap()],
        dir.path(),
    )
    .env(
        "PYTHONPATH",
        format!("{}:{}", apps().display(), python.display()),
    )
    .ok_json();
    assert_eq!(out, serde_json::json!({"files": [], "all": []}));
    assert_eq!(
        cuprof_lines(&stderr),
        ["cuprof: nothing recorded in this profile() block: CUDA was never initialised in this process (cuprof starts at the first CUDA call; a CPU-only program is traced by torch.profiler)"]
    );
    assert_eq!(dir.files(), Vec::<String>::new());
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

#[test]
fn cache_dit_profiler_context_writes_cuprofs_trace_under_as_torch_profiler() {
    // The real cache_dit.profiler.ProfilerContext (scripts/python-requirements-nodeps.txt),
    // in a program that never imports cuprof: `cuprof run --as-torch-profiler` makes its
    // torch.profiler.profile cuprof's, and its export lands where cache-dit says.
    let dir = TempDir::new("pyapi-cache-dit");
    let d = dir.path();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    let out = std::process::Command::new(cuprof_bin())
        .args([
            "run",
            "--as-torch-profiler",
            "--no-report",
            "--name",
            "job",
            "--dir",
        ])
        .arg(d.join("cuprof"))
        .args(["--", "python3"])
        .arg(apps().join("cache_dit_profile.py"))
        .arg(d.join("cache-dit"))
        .arg("flux")
        .env(
            "PYTHONPATH",
            format!("{}:{}", apps().display(), python.display()),
        )
        .env("CUPTI_DOUBLE_LIB", double())
        .env("CUPROF_CUPTI_PATH", double())
        .env("CUPROF_LIB", lib())
        .env_remove("CUPROF_CAPTURE_RANGE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let exported = d.join("cache-dit").join("flux.trace.json.gz");
    let own = d.join("cuprof").join("job-rank0.trace.json.gz");
    let printed: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(printed["trace_path"], exported.to_str().unwrap());
    assert_eq!(printed["profile"], "cuprof._profile.profile");
    // cuprof's file, and cache-dit's export of it, byte for byte: the three steps inside the
    // context, nothing from before or after it.
    assert_eq!(
        std::fs::read(&exported).unwrap(),
        std::fs::read(&own).unwrap()
    );
    let mut expected = inside_steps(3, &[]);
    expected.insert(("python".into(), "GPU work (no steps recorded)".into()), 1);
    assert_eq!(complete_events(&exported), expected);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cuprof: "))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let wrote = format!("cuprof: wrote {} (61 events, ", own.display());
    assert!(lines[0].starts_with(&wrote), "{stderr}");
    // The sitecustomize folder the program had first on its PYTHONPATH is gone with the run.
    let site = Path::new(printed["site"].as_str().unwrap());
    assert_eq!(site.parent(), Some(std::env::temp_dir().as_path()));
    assert!(
        site.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("cuprof-site-"),
        "{site:?}"
    );
    assert!(!site.exists(), "{site:?}");
}

/// The operators and labels of an exported trace (torch's list or object form), counted.
fn host_events(path: &Path) -> BTreeMap<(String, String), usize> {
    let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let events = v
        .get("traceEvents")
        .unwrap_or(&v)
        .as_array()
        .unwrap()
        .clone();
    let mut out = BTreeMap::new();
    for e in &events {
        let cat = e["cat"].as_str().unwrap_or("");
        if e["ph"] == "X" && (cat == "cpu_op" || cat == "user_annotation") {
            let key = (cat.to_string(), e["name"].as_str().unwrap().to_string());
            *out.entry(key).or_insert(0) += 1;
        }
    }
    out
}

#[test]
fn changing_the_import_from_torch_profiler_to_cuprof_keeps_steps_and_operators() {
    require_python("torch");
    let dir = TempDir::new("pyapi-one-import");
    let d = dir.path();
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
    untraced_python("one_import.py", &["torch".as_ref(), d.as_os_str()], &[]);
    let (_, stderr) = Run::python("one_import.py", &["cuprof", d.to_str().unwrap()], d)
        .env(
            "PYTHONPATH",
            format!("{}:{}", apps().display(), python.display()),
        )
        .ok_json();
    let torch = host_events(&d.join("torch.json"));
    let cuprof = host_events(&d.join("cuprof.json"));
    let steps: Vec<&str> = torch
        .keys()
        .filter(|(_, n)| n.starts_with("ProfilerStep#"))
        .map(|(_, n)| n.as_str())
        .collect();
    assert_eq!(steps, ["ProfilerStep#2", "ProfilerStep#3"]);
    assert_eq!(torch[&("cpu_op".into(), "aten::linear".into())], 4);
    assert_eq!(cuprof, torch);
    // Under a bare preload the whole run was being recorded since cuInit (before the loop):
    // the block ended it, as its own file, and said so.
    let first = d.join("t-rank0.trace.json.gz");
    assert_eq!(
        cuprof_lines(&stderr),
        [format!("cuprof: this profile() block ended the recording cuprof run started at CUDA initialisation (written as {}): run with `cuprof run --capture-range cuprof` (or --as-torch-profiler) to record only the program's blocks", first.display())]
    );
    assert_eq!(
        dir.files(),
        [
            "cuprof.json",
            "t-rank0-cycle2.trace.json.gz",
            "t-rank0.trace.json.gz",
            "torch.json"
        ]
    );
}
