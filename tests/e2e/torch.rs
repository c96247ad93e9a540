//! PyTorch operators with no code change: real PyTorch (PyPI's CUDA build, running CPU
//! operators with no GPU) under the real libcuprof.so, started through the libcupti double's
//! `cuInit`, against the same program under torch.profiler. Needs `torch`,
//! `torch-tb-profiler` and `HolisticTraceAnalysis` for `python3` (scripts/test.sh installs
//! them into its virtual environment and puts it first on PATH).

use crate::common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn require_torch() {
    require_python("torch, torch_tb_profiler, hta");
}

/// `torch_model.py cuprof` under cuprof with the schedule wait=1, warmup=1, active=2.
fn traced(dir: &Path, env: &[(&str, &str)]) -> (Value, Value) {
    require_torch();
    let (out, stderr) = windowed("torch_model.py", &["cuprof"], dir, env).ok_json();
    assert!(!stderr.contains("not recorded"), "{stderr}");
    (out, read_trace(&dir.join("t-rank0.trace.json.gz")))
}

/// `python3 tests/apps/SCRIPT ARGS` under cuprof, recording from its start to its first step
/// boundary, once.
fn one_recorded_step(script: &str, args: &[&str], dir: &Path) -> Run {
    Run::python(script, args, dir)
        .env("CUPROF_WAIT", "0")
        .env("CUPROF_WARMUP", "0")
        .env("CUPROF_ACTIVE", "1")
        .env("CUPROF_REPEAT", "1")
}

/// The line number (from 1) of the first line of `tests/apps/SCRIPT` whose code starts with
/// `code`.
fn app_line(script: &str, code: &str) -> u64 {
    let source = std::fs::read_to_string(apps().join(script)).unwrap();
    let at = source
        .lines()
        .position(|l| l.trim_start().starts_with(code))
        .unwrap_or_else(|| panic!("{script} has no line starting with {code:?}"));
    1 + at as u64
}

/// `python3 tests/apps/SCRIPT ARGS` without the tracer; asserts success, returns stdout.
fn python(script: &str, args: &[&std::ffi::OsStr]) -> String {
    untraced_python(script, args, &[])
}

/// The same program under torch.profiler (CPU activity, record_shapes), its Chrome trace.
fn torch_profiler_trace(dir: &Path) -> Value {
    require_torch();
    let path = dir.join("torch.json");
    python("torch_model.py", &["torch".as_ref(), path.as_os_str()]);
    read_trace(&path)
}

/// What torch.profiler and cuprof must agree on for one operator.
fn identity(e: &Value) -> (String, Value, Value, Value) {
    let a = &e["args"];
    (
        e["name"].as_str().unwrap().to_string(),
        a["Input Dims"].clone(),
        a["Sequence number"].clone(),
        a["Fwd thread id"].clone(),
    )
}

/// What TensorBoard's profiler plugin and HTA read from a trace (tests/apps/ops_consumers.py).
fn consumers(trace_path: &Path) -> Value {
    let stdout = python("ops_consumers.py", &[trace_path.as_os_str()]);
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

#[test]
fn operators_equal_torch_profilers_and_launches_carry_their_external_id() {
    let dir = TempDir::new("torch-ops");
    let (out, trace) = traced(dir.path(), &[]);
    // The observer is on during warm-up and recorded steps only.
    assert_eq!(
        out["profiling"],
        serde_json::json!([false, true, true, true, false])
    );
    let reference = torch_profiler_trace(dir.path());

    let ours = torch_operators(&trace);
    let theirs = torch_operators(&reference);
    assert_eq!(ours.len(), 214);
    assert_eq!(theirs.len(), 214);
    let ours_ids: Vec<_> = ours.iter().map(|e| identity(e)).collect();
    let theirs_ids: Vec<_> = theirs.iter().map(|e| identity(e)).collect();
    assert_eq!(ours_ids, theirs_ids);
    // Forward ops link to their backward nodes through the sequence number.
    let seq_of = |name: &str| -> Vec<i64> {
        let mut v: Vec<i64> = ours
            .iter()
            .filter(|e| e["name"] == name)
            .map(|e| e["args"]["Sequence number"].as_i64().unwrap())
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(seq_of("aten::addmm"), seq_of("AddmmBackward0"));
    assert_eq!(
        seq_of("AddmmBackward0"),
        seq_of("autograd::engine::evaluate_function: AddmmBackward0")
    );
    // record_function labels are user annotations, as in Kineto.
    let labels = |t: &Value| count_by_name(&events(t, "user_annotation"))["model_step"];
    assert_eq!((labels(&trace), labels(&reference)), (2, 2));
    // Each operator and label (steps included) has its `Ev Idx`, as in torch.profiler's file:
    // the host events' numbers run from 0 without a gap or a repeat.
    let indices = |t: &Value| -> (usize, Vec<u64>) {
        let host: Vec<&Value> = ["cpu_op", "user_annotation"]
            .iter()
            .flat_map(|cat| events(t, cat))
            .collect();
        let mut idx: Vec<u64> = host
            .iter()
            .filter_map(|e| e["args"]["Ev Idx"].as_u64())
            .collect();
        idx.sort_unstable();
        (host.len(), idx)
    };
    for t in [&trace, &reference] {
        let (n, idx) = indices(t);
        assert_eq!(idx, (0..n as u64).collect::<Vec<u64>>());
    }
    assert_eq!(indices(&trace).0, 218);
    // A single process that never initialised torch.distributed: no distributedInfo in either.
    assert_eq!(trace.get("distributedInfo"), None);
    assert_eq!(reference.get("distributedInfo"), None);

    // Each step's custom operator launched one kernel and allocated and freed memory: its
    // runtime calls and its kernel carry the External id of the innermost operator they were
    // made in.
    let launching: Vec<u64> = ours
        .iter()
        .filter(|e| e["name"] == "GeneratedBackwardFor_cuproftest_launch_default")
        .map(|e| e["args"]["External id"].as_u64().unwrap())
        .collect();
    assert_eq!(launching.len(), 2);
    let external = |cat: &str| -> Vec<u64> {
        events(&trace, cat)
            .iter()
            .map(|e| e["args"]["External id"].as_u64().unwrap())
            .collect()
    };
    // cudaLaunchKernel, cudaMalloc and cudaFree, each inside the operator.
    assert_eq!(
        external("cuda_runtime"),
        launching
            .iter()
            .flat_map(|&id| [id, id, id])
            .collect::<Vec<u64>>()
    );
    assert_eq!(external("kernel"), launching);
    // External ids are unique per operator.
    let mut ids: Vec<u64> = ours
        .iter()
        .map(|e| e["args"]["External id"].as_u64().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 214);

    // TensorBoard's Operator view and HTA read the same operators from both files.
    let torch_path = dir.path().join("torch.json");
    let a = consumers(&dir.path().join("t-rank0.trace.json.gz"));
    let b = consumers(&torch_path);
    assert_eq!(a["tensorboard"], b["tensorboard"]);
    assert_eq!(a["hta"], b["hta"]);
    // The plugin nested every range of cuprof's file (it drops one it cannot).
    assert_eq!(a["tensorboard_complaints"], serde_json::json!([]));
    // HTA keeps the steps but the last (it may be incomplete): the operators of step 2.
    let hta_total: u64 = a["hta"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let step2 = events(&trace, "user_annotation")
        .into_iter()
        .find(|e| e["name"] == "ProfilerStep#2")
        .unwrap();
    let (from, to) = (
        step2["ts"].as_f64().unwrap(),
        step2["ts"].as_f64().unwrap() + step2["dur"].as_f64().unwrap(),
    );
    let in_step2 = ours
        .iter()
        .filter(|e| (from..to).contains(&e["ts"].as_f64().unwrap()))
        .count();
    assert_eq!((hta_total, in_step2), (107, 107));
    assert!(a["tensorboard"]["aten::addmm"].as_u64().unwrap() > 0);
}

#[test]
fn device_allocations_name_the_operator_and_the_line_they_were_made_in() {
    // The custom operator's 1 MiB device allocation, in the memory snapshot: made inside the
    // operator (the native observer's open operators, asked from CUPTI's callback), called
    // from the forward line.
    let dir = TempDir::new("torch-alloc-stacks");
    traced(
        dir.path(),
        &[
            ("CUPROF_WITH_STACK", "1"),
            ("CUPROF_ACTIVITIES", "CPU,GPU,MEM"),
        ],
    );
    let forward_line = app_line("torch_model.py", "y = launch(model(x))");
    let call_line = app_line("torch_model.py", "step()");
    let pickles: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    assert_eq!(pickles.len(), 1, "{pickles:?}");
    // Each 1 MiB entry's frames after the native stack (which ends in `_start`).
    let entries = snapshot_json(
        &pickles[0],
        "[[e['action'], e['size'], [[f['name'], f['line']] for f in e['frames'][[f['name'] for f in e['frames']].index('_start') + 1:]]] for t in s['device_traces'] for e in t if e['size'] == 1 << 20]",
    );
    let allocs: Vec<&Value> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e[0] == "alloc")
        .collect();
    // One allocation a step: the first step's is before the window collects (no operators
    // are recorded, no stacks read); warm-up and the two recorded steps name the operator
    // open around it (its autograd wrapper, which runs the Python implementation) and then
    // the Python stack read at its start, which ends in the forward line.
    assert_eq!(allocs.len(), 4, "{entries}");
    assert_eq!(allocs[0][2], json!([]), "{entries}");
    for e in &allocs[1..] {
        let frames = e[2].as_array().unwrap();
        assert_eq!(
            frames[0],
            json!(["GeneratedBackwardFor_cuproftest_launch_default", 0]),
            "{entries}"
        );
        assert_eq!(
            frames[frames.len() - 2..],
            [
                json!(["step", forward_line]),
                json!(["<module>", call_line])
            ],
            "{entries}"
        );
    }
}

#[test]
fn shapes_can_be_turned_off_and_operators_too() {
    // This run initialises torch.distributed (gloo, one rank): its header has distributedInfo.
    let dir = TempDir::new("torch-noshapes");
    let store = dir.path().join("store");
    let (_, trace) = traced(
        dir.path(),
        &[
            ("CUPROF_RECORD_SHAPES", "0"),
            ("TORCH_MODEL_DIST_STORE", store.to_str().unwrap()),
        ],
    );
    let ops = torch_operators(&trace);
    assert_eq!(ops.len(), 214);
    assert!(ops.iter().all(|e| e["args"].get("Input Dims").is_none()));
    assert_eq!(count_by_name(&ops)["aten::addmm"], 4);
    assert_eq!(
        trace["distributedInfo"],
        json!({"rank": 0, "world_size": 1, "local_rank": 0})
    );

    let dir = TempDir::new("torch-noops");
    let (out, trace) = traced(dir.path(), &[("CUPROF_TORCH_OPS", "0")]);
    assert_eq!(
        out["profiling"],
        serde_json::json!([false, false, false, false, false])
    );
    assert!(torch_operators(&trace).is_empty());
    // The rest of the trace is unchanged: both launches are there.
    assert_eq!(events(&trace, "kernel").len(), 2);
}

#[test]
fn python_stacks_name_the_programs_lines() {
    let dir = TempDir::new("torch-stacks");
    let (_, trace) = traced(dir.path(), &[("CUPROF_WITH_STACK", "1")]);
    let forward_line = app_line("torch_model.py", "y = launch(model(x))");
    let call_line = app_line("torch_model.py", "step()");
    let app = apps().join("torch_model.py");
    let app = app.to_str().unwrap();
    let linear: Vec<&Value> = torch_operators(&trace)
        .into_iter()
        .filter(|e| e["name"] == "aten::linear")
        .collect();
    assert_eq!(linear.len(), 4);
    for e in &linear {
        let stack = e["args"]["Call stack"].as_str().unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        assert!(
            frames.contains(&format!("{app}({forward_line}): step").as_str()),
            "{stack}"
        );
        assert_eq!(
            *frames.last().unwrap(),
            format!("{app}({call_line}): <module>"),
            "{stack}"
        );
    }
    // On the CPU, backward runs on the calling thread (with the GIL released, which cuprof
    // takes for the read): its operators name the line that called backward().
    let backward_line = app_line("torch_model.py", "y.sum().backward()");
    for e in torch_operators(&trace)
        .iter()
        .filter(|e| e["name"] == "autograd::engine::evaluate_function: AddmmBackward0")
    {
        let stack = e["args"]["Call stack"].as_str().unwrap();
        assert!(
            stack.contains(&format!("{app}({backward_line}): step")),
            "{stack}"
        );
    }
    let tb = consumers(&dir.path().join("t-rank0.trace.json.gz"));
    assert!(tb["tensorboard_call_stacks"].as_u64().unwrap() > 0);
}

#[test]
fn stacks_met_again_from_a_new_caller_name_both_callers_lines() {
    // The second call's stacks are new, their inner frames are not: what cuprof read of those
    // frames is reused, and every line must still be the one each operator was called from.
    let dir = TempDir::new("torch-stack-lines");
    require_torch();
    one_recorded_step("stack_lines.py", &["40"], dir.path())
        .env("CUPROF_WITH_STACK", "1")
        .ok_json();
    let trace = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    let app = apps().join("stack_lines.py");
    let app = app.to_str().unwrap();
    // (operator, innermost frame's line, its caller's line) -> operators.
    let mut seen: BTreeMap<(String, u64, u64), usize> = BTreeMap::new();
    for e in torch_operators(&trace) {
        let name = e["name"].as_str().unwrap();
        if !["aten::relu", "aten::neg", "aten::abs"].contains(&name) {
            continue;
        }
        let stack = e["args"]["Call stack"].as_str().unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        assert_eq!(frames.len(), 2, "{stack}");
        let line_of = |frame: &str, function: &str| -> u64 {
            let rest = frame
                .strip_prefix(&format!("{app}("))
                .and_then(|r| r.strip_suffix(&format!("): {function}")))
                .unwrap_or_else(|| panic!("{stack}"));
            rest.parse().unwrap()
        };
        let at = line_of(frames[0], "work");
        let caller = line_of(frames[1], "<module>");
        *seen.entry((name.to_string(), at, caller)).or_default() += 1;
    }
    let line = |code: &str| app_line("stack_lines.py", code);
    let (relu, neg_abs) = (line("y = torch.relu(x)"), line("x = torch.neg(y)"));
    let (first, second) = (line("first = work("), line("second = work("));
    // torch.abs runs `aten::abs` inside `aten::abs` (its out= overload): 2 operators per call.
    let want: BTreeMap<(String, u64, u64), usize> = [
        ("aten::relu", relu, first, 40),
        ("aten::abs", neg_abs, first, 28),
        ("aten::neg", neg_abs, first, 26),
        ("aten::relu", relu, second, 40),
        ("aten::abs", neg_abs, second, 28),
        ("aten::neg", neg_abs, second, 26),
    ]
    .into_iter()
    .map(|(op, at, caller, n)| ((op.to_string(), at, caller), n))
    .collect();
    assert_eq!(seen, want);
}

#[test]
fn a_program_starting_its_own_profiler_keeps_working() {
    let dir = TempDir::new("torch-both");
    require_torch();
    let path = dir.path().join("both.json");
    let (_, stderr) = windowed(
        "torch_model.py",
        &["both", path.to_str().unwrap()],
        dir.path(),
        &[],
    )
    .env("CUPROF_REPEAT", "0")
    .ok_json();
    assert!(!stderr.contains("Traceback"), "{stderr}");
    // torch.profiler's own trace is whole: every operator of its two recorded steps.
    let theirs = read_trace(&path);
    assert_eq!(torch_operators(&theirs).len(), 214);
    let steps: BTreeMap<String, usize> = count_by_name(&events(&theirs, "user_annotation"));
    assert_eq!(steps["model_step"], 2);
    // cuprof gave way with one line, and took operators back with one more when it stopped:
    // its recorded steps (the two after the program's profiler) have every operator.
    let said = |what: &str| stderr.lines().filter(|l| l.contains(what)).count();
    assert_eq!(
        said("cuprof: the program started its own PyTorch profiler: cuprof stops recording operators until it stops"),
        1,
        "{stderr}"
    );
    assert_eq!(
        said("cuprof: the program's own PyTorch profiler stopped: cuprof records operators again"),
        1,
        "{stderr}"
    );
    let ours = read_trace(&dir.path().join("t-rank0-cycle1.trace.json.gz"));
    assert_eq!(torch_operators(&ours).len(), 2 * 214);
}

#[test]
fn allocations_name_their_operator_and_python_line() {
    let dir = TempDir::new("torch-memory");
    let (_, _) = traced(
        dir.path(),
        &[
            ("CUPROF_WITH_STACK", "1"),
            ("CUPROF_ACTIVITIES", "CPU,GPU,MEM"),
        ],
    );
    let pickle = dir
        .files()
        .into_iter()
        .find(|f| f.ends_with(".pickle"))
        .expect("a memory snapshot");
    // The frames of every segment allocation in the snapshot's trace, as torch's viewer reads
    // them (pickle.load, no torch needed).
    let script = "import json, pickle, sys\n\
s = pickle.load(open(sys.argv[1], 'rb'))\n\
print(json.dumps([[(f['name'], f['filename'], f['line']) for f in e['frames']] \
for t in s['device_traces'] for e in t if e['action'] == sys.argv[2]]))";
    let frames_of = |action: &str| -> Vec<Vec<(String, String, i64)>> {
        let out = Command::new("python3")
            .args(["-c", script])
            .arg(dir.path().join(&pickle))
            .arg(action)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // Frees carry their stacks too: the viewer shows where each block was released.
    let frees = frames_of("segment_free");
    assert_eq!(frees.len(), 4);
    assert!(frees.iter().all(|f| !f.is_empty()), "{frees:?}");
    let allocs = frames_of("segment_alloc");
    // One allocation in each of the warm-up and two recorded steps, and one in the wait step
    // (memory is tracked over the whole run; operators only while the window collects).
    assert_eq!(allocs.len(), 4);
    let forward_line = app_line("torch_model.py", "y = launch(model(x))") as i64;
    let app = apps().join("torch_model.py").to_str().unwrap().to_string();
    // No frame of libcuprof.so's own, which captured the stack (known by address, whatever
    // the symboliser names its inlined functions: `capture`, `on_api_call`, `guard<..>`).
    for frames in allocs.iter().chain(&frees) {
        assert!(
            !frames.iter().any(|f| f.1.contains("tracer/preload/src")),
            "{frames:?}"
        );
    }
    for frames in &allocs[1..] {
        let op = frames
            .iter()
            .position(|f| f.0 == "GeneratedBackwardFor_cuproftest_launch_default")
            .unwrap_or_else(|| panic!("{frames:?}"));
        let line = frames
            .iter()
            .position(|f| f.1 == app && f.2 == forward_line && f.0 == "step")
            .unwrap_or_else(|| panic!("{frames:?}"));
        // Native frames, then the operators, then the Python caller: innermost first.
        assert!(op < line, "{frames:?}");
    }
    assert!(
        !allocs[0]
            .iter()
            .any(|f| f.0 == "GeneratedBackwardFor_cuproftest_launch_default"),
        "{:?}",
        allocs[0]
    );
}

#[test]
fn injection_alone_records_operators_with_nvtx_steps() {
    // CUDA_INJECTION64_PATH alone loads cuprof inside cuInit; NVTX_INJECTION64_PATH makes it the
    // NVTX injection library too, which operators (and NVTX steps) need. The window moves on
    // inside NVTX callbacks, on the thread that holds the GIL.
    require_torch();
    let dir = TempDir::new("torch-injection");
    let (out, _) = Run::python("torch_model.py", &["cuprof"], dir.path())
        .env_remove("LD_PRELOAD")
        .env("CUDA_INJECTION64_PATH", lib())
        .env("NVTX_INJECTION64_PATH", lib())
        .env("CUPROF_STEP_NVTX", "step")
        .env("CUPROF_WAIT", "1")
        .env("CUPROF_WARMUP", "1")
        .env("CUPROF_ACTIVE", "2")
        .ok_json();
    assert_eq!(
        out["profiling"],
        serde_json::json!([false, true, true, true, false])
    );
    let trace = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    let ops = torch_operators(&trace);
    assert_eq!(ops.len(), 214);
    assert_eq!(count_by_name(&ops)["aten::addmm"], 4);
}

#[test]
fn a_torch_whose_profiler_differs_gets_one_line_and_the_rest_of_the_trace() {
    require_torch();
    let dir = TempDir::new("torch-broken");
    // Neither recorder can start: the native observer fails to build (a compiler that fails)
    // and the NVTX observer's profiler state is gone.
    let (out, stderr) = Run::python("torch_model.py", &["cuprof"], dir.path())
        .env("TORCH_MODEL_BREAK_PROFILER", "1")
        .env("CXX", "false")
        .env("CUPROF_CACHE", dir.path().join("cache"))
        .env("CUPROF_WAIT", "1")
        .env("CUPROF_WARMUP", "1")
        .env("CUPROF_ACTIVE", "2")
        .ok_json();
    assert_eq!(
        out["profiling"],
        serde_json::json!([false, false, false, false, false])
    );
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("PyTorch operators are not recorded"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("cuprof: "), "{}", lines[0]);
    assert!(lines[0].contains("ProfilerState"), "{}", lines[0]);
    let trace = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    assert!(torch_operators(&trace).is_empty());
    assert_eq!(events(&trace, "kernel").len(), 2);
    assert_eq!(
        count_by_name(&events(&trace, "user_annotation"))["ProfilerStep#2"],
        1
    );
}

/// Operators are batched per thread on their way to the writer (op_batch.rs): a batch sent
/// full, one sent when its thread exits, one the writer takes from a quiet thread, and the
/// last one at shutdown all arrive, each operator on its own thread's row.
#[test]
fn every_threads_operators_arrive_whichever_way_their_batch_is_sent() {
    require_torch();
    let dir = TempDir::new("torch-threads");
    let (out, _) = Run::python("torch_threads.py", &[], dir.path()).ok_json();
    let trace = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    let mut recorded: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for e in events(&trace, "cpu_op") {
        let name = e["name"].as_str().unwrap();
        if name == "aten::add" || name == "cuproftest::threaded" {
            *recorded
                .entry(e["tid"].to_string())
                .or_default()
                .entry(name.to_string())
                .or_default() += 1;
        }
    }
    let ran: BTreeMap<String, BTreeMap<String, u64>> =
        serde_json::from_value(out["ran"].clone()).unwrap();
    let total: u64 = ran.values().flat_map(|per| per.values()).sum();
    assert_eq!(total, 3 * 12_000 + 100 + 5);
    assert_eq!(recorded, ran);
    assert_eq!(trace["cuprofStats"]["dropped_channel"], 0);
}

/// A thread's operators wait in a batch of its own until its outermost operator ends. Those it
/// finished inside an operator still open when the window ends the cycle reach the cycle all
/// the same: the thread hands them over at its next operator's end, while the cycle drains.
#[test]
fn operators_finished_inside_one_open_across_the_cycles_end_are_in_the_cycle() {
    require_torch();
    let dir = TempDir::new("torch-thread-transition");
    let (out, _) = one_recorded_step("torch_thread_transition.py", &[], dir.path()).ok_json();
    let trace = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    let names = count_by_name(&events(&trace, "cpu_op"));
    assert_eq!(names.get("cuproftest::nested"), Some(&10), "{names:?}");
    assert_eq!(out["nested_before_the_end"], 10);
    assert_eq!(names.get("cuproftest::after"), None, "{names:?}");
}

/// Real PyTorch operators (custom operators that copy and synchronize through the double, which
/// PyTorch records as their autograd nodes), recorded with stacks, read back by `cuprof report`: the synchronizations and the pageable
/// copies are findings, each tied to its operator and to the program's line that called it.
#[test]
fn findings_name_the_operators_and_lines_of_a_torch_program() {
    let dir = TempDir::new("torch-findings");
    require_torch();
    one_recorded_step("findings_torch.py", &[], dir.path())
        .env("CUPROF_WITH_STACK", "1")
        .ok_json();
    let s = report_summary(&dir.path().join("t-rank0.trace.json.gz"), dir.path());
    let app = apps().join("findings_torch.py");
    let at = |code: &str| {
        format!(
            "{}({}): <module>",
            app.display(),
            app_line("findings_torch.py", code)
        )
    };
    let finding = |rule: &str| -> Value {
        s["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == rule)
            .unwrap_or_else(|| panic!("no {rule} in {}", s["findings"]))
            .clone()
    };
    // The double's stream sync call lasts its 40 µs and 1 µs more.
    let sync = finding("synchronize");
    assert_eq!(
        (&sync["count"], &sync["time_ns"]),
        (&json!(3), &json!(123_000))
    );
    assert_eq!(
        sync["sources"],
        json!([{"operator": "GeneratedBackwardFor_cuproftest_read_back_default", "call_site": at("z = read_back(y)"), "count": 3, "time_ns": 123_000}])
    );
    // The double's cudaMalloc and cudaFree calls last 2 µs each, inside the recorded step.
    let alloc = finding("device_allocation");
    assert_eq!(
        (&alloc["count"], &alloc["time_ns"]),
        (&json!(6), &json!(12_000))
    );
    assert_eq!(
        alloc["sources"],
        json!([{"operator": "GeneratedBackwardFor_cuproftest_read_back_default", "call_site": at("z = read_back(y)"), "count": 6, "time_ns": 12_000}])
    );
    let copies = finding("pageable_copy");
    assert_eq!(
        (&copies["count"], &copies["time_ns"], &copies["bytes"]),
        (&json!(6), &json!(24_000), &json!(3 * 4096 + 3 * 65536))
    );
    assert_eq!(
        copies["sources"],
        json!([
            {"operator": "GeneratedBackwardFor_cuproftest_upload_default", "call_site": at("y = upload(x)"), "count": 3, "time_ns": 15_000, "bytes": 3 * 65536},
            {"operator": "GeneratedBackwardFor_cuproftest_read_back_default", "call_site": at("z = read_back(y)"), "count": 3, "time_ns": 9_000, "bytes": 3 * 4096},
        ])
    );
}
