//! The native operator observer (tracer/preload/src/sources/ops) on real models: a diffusers
//! transformer's inference and a Hugging Face causal LM's training step (random weights, small
//! configs), traced by cuprof (real libcuprof.so, started through the libcupti double's
//! `cuInit`) and by torch.profiler with `record_shapes=True`: equal operator by operator in
//! every field Kineto writes for one. Then its options (FLOPs, every thread), its fallback to
//! PyTorch's NVTX observer, and the cache's bad inputs.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn require_models() {
    require_python("torch, diffusers, transformers");
}

/// `real_models.py cuprof MODEL` under cuprof (wait=1, warmup=1, active=2): stdout's JSON,
/// stderr, the trace.
fn traced(model: &str, dir: &Path, env: &[(&str, &str)]) -> (Value, String, Value) {
    require_models();
    let (out, stderr) = windowed("real_models.py", &["cuprof", model], dir, env).ok_json();
    (out, stderr, read_trace(&dir.join("t-rank0.trace.json.gz")))
}

/// `torch_model.py cuprof` (a small training loop: 214 operators in the recorded steps) under
/// cuprof with the same window, for the tests of how the observer is found, built or given up,
/// which any torch program shows as well as a real model: stderr, the trace.
fn small_traced(dir: &Path, env: &[(&str, &str)]) -> (String, Value) {
    let (_, stderr) = windowed("torch_model.py", &["cuprof"], dir, env).ok_json();
    (stderr, read_trace(&dir.join("t-rank0.trace.json.gz")))
}

/// The same program under torch.profiler: stdout's JSON and its trace.
fn reference(model: &str, dir: &Path, env: &[(&str, &str)]) -> (Value, Value) {
    let path = dir.join("torch.json");
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(k, v)| (*k, v.as_ref())).collect();
    let stdout = untraced_python(
        "real_models.py",
        &["torch".as_ref(), model.as_ref(), path.as_os_str()],
        &env,
    );
    let line = stdout.lines().last().unwrap();
    (serde_json::from_str(line).unwrap(), read_trace(&path))
}

/// torch.profiler's run of the causal LM's training step, made once and shared by the tests
/// that compare against it: with FLOPs and memory both on (each only adds its own fields or
/// events; every test reads its own part), as one run of the reference costs about 9 s of CPU.
/// Not with Python stacks: torch then counts its labels' memory differently. Its stdout's JSON,
/// and its trace written to `dir/torch.json` and read back.
fn llama_reference(dir: &Path) -> (Value, Value) {
    static RUN: std::sync::OnceLock<(Value, Vec<u8>)> = std::sync::OnceLock::new();
    let (out, bytes) = RUN.get_or_init(|| {
        require_models();
        let shared = TempDir::new("native-llama-reference");
        let env = [("CUPROF_TEST_FLOPS", "1"), ("CUPROF_TEST_MEMORY", "1")];
        let (out, _) = reference("llama", shared.path(), &env);
        (
            out,
            std::fs::read(shared.path().join("torch.json")).unwrap(),
        )
    });
    let path = dir.join("torch.json");
    std::fs::write(&path, bytes).unwrap();
    (out.clone(), read_trace(&path))
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
    // PyTorch's allocations only with the MEM activity, as torch.profiler's profile_memory.
    assert_eq!(memory_events(&trace).len(), 0);
    let (_, theirs) = match model {
        "llama" => llama_reference(dir.path()),
        _ => reference(model, dir.path(), &[]),
    };
    let (ours, theirs) = (torch_operators(&trace), torch_operators(&theirs));
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
    let (out, _) = llama_reference(dir.path());
    let mut ours: BTreeMap<String, Value> = BTreeMap::new();
    for e in torch_operators(&trace) {
        if let Some(flops) = e["args"].get("flops").filter(|f| f.as_u64() != Some(0)) {
            let dims = serde_json::to_string(&e["args"]["Input Dims"]).unwrap();
            let key = format!("{} {dims}", e["name"].as_str().unwrap());
            ours.insert(key, flops.clone());
        }
    }
    let theirs: BTreeMap<String, Value> = serde_json::from_value(out["flops"].clone()).unwrap();
    assert_eq!(ours, theirs);
    assert_eq!(ours["aten::mm [[24,32],[32,128]]"], 196608);
    // `cuprof report` sums them per operator (summary.json; the TFLOP/s they achieved needs
    // GPU time, which a CPU run has none of).
    let in_trace: u64 = torch_operators(&trace)
        .iter()
        .filter(|e| e["name"] == "aten::mm")
        .filter_map(|e| e["args"]["flops"].as_u64())
        .sum();
    let summary = report_summary(&dir.path().join("t-rank0.trace.json.gz"), dir.path());
    let mm = summary["operators"]["top"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "aten::mm")
        .unwrap();
    assert_eq!(mm["flops"].as_u64(), Some(in_trace));
    assert!(in_trace > 0);
    assert_eq!(mm.get("achieved_tflops"), None);
}

/// The metadata torch.profiler adds to a collective's `record_param_comms` operator (from the
/// collective's description ProcessGroupNCCL leaves in the thread's debug info), with each
/// value as torch formats it: `Collective name`, `dtype`, message sizes, split sizes (past 30,
/// torch keeps the first 29 and the last), the process group's name, description, ranks and size, `Seq`, `Comms Id`... Chakra,
/// PARAM's replay and HTA's communication views read them. collectives.cpp opens the operators
/// as ProcessGroupNCCL does, through torch's own macro (gloo opens none, and NCCL needs GPUs).
#[test]
fn collectives_carry_torch_profilers_metadata() {
    require_models();
    let dir = TempDir::new("native-collectives");
    let (_, stderr) = windowed(
        "collectives.py",
        &["cuprof", dir.path().to_str().unwrap()],
        dir.path(),
        &[],
    )
    .ok_json();
    assert!(!stderr.contains("NVTX observer"), "{stderr}");
    let trace = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    let path = dir.path().join("torch.json");
    untraced_python(
        "collectives.py",
        &["torch".as_ref(), dir.path().as_os_str(), path.as_os_str()],
        &[],
    );
    // torch.profiler writes the description as it is, inside quotes: not JSON when it holds a
    // quote. cuprof writes the same text escaped.
    let text = std::fs::read_to_string(&path).unwrap();
    let unescaped = r#""Process Group Description": "my "tp" group""#;
    assert_eq!(text.matches(unescaped).count(), 2);
    let text = text.replace(
        unescaped,
        r#""Process Group Description": "my \"tp\" group""#,
    );
    let theirs: Value = serde_json::from_str(&text).unwrap();
    let comms = |trace: &Value| -> Vec<serde_json::Map<String, Value>> {
        torch_operators(trace)
            .into_iter()
            .filter(|e| e["name"] == "record_param_comms")
            .map(|e| {
                let mut args = e["args"].as_object().unwrap().clone();
                for k in ["External id", "Ev Idx", "Record function id"] {
                    args.remove(k);
                }
                args
            })
            .collect()
    };
    let (ours, theirs) = (comms(&trace), comms(&theirs));
    assert_eq!((ours.len(), theirs.len()), (10, 10));
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b);
    }
    let first = &ours[0];
    assert_eq!(first["Collective name"], "allreduce");
    assert_eq!(first["dtype"], "Float");
    assert_eq!(first["In msg nelems"], 1024);
    assert_eq!(first["Out msg nelems"], 8192);
    assert_eq!(first["Group size"], 8);
    assert_eq!(first["Seq"], 11);
    assert_eq!(ours[2]["Process Group Description"], "my \"tp\" group");
    assert_eq!(
        ours[3]["In split size"]
            .as_str()
            .unwrap()
            .matches(", ")
            .count(),
        30
    );
    assert!(ours[3]["In split size"]
        .as_str()
        .unwrap()
        .ends_with(", 32, ..., 32]"));
    assert_eq!(ours[1]["dtype"], "BFloat16");
    // The operator inside each collective nests in it, as under torch.profiler.
    let inside = torch_operators(&trace)
        .windows(2)
        .filter(|w| w[0]["name"] == "record_param_comms" && w[1]["name"] == "aten::add_")
        .count();
    assert_eq!(inside, 10);
    // `cuprof report` sizes them as nccl-tests does (no GPU here: no kernels, no bandwidth).
    let summary = report_summary(&dir.path().join("t-rank0.trace.json.gz"), dir.path());
    let mut rows: Vec<(String, String, i64, u64, i64, i64)> = summary["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["dtype"].as_str().unwrap().to_string(),
                r["group_size"].as_i64().unwrap(),
                r["count"].as_u64().unwrap(),
                r["bytes"].as_i64().unwrap(),
                r["gpu_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    rows.sort();
    let row = |name: &str, dtype: &str, group, bytes| {
        (name.to_string(), dtype.to_string(), group, 2, bytes, 0)
    };
    assert_eq!(
        rows,
        [
            row("all_to_allv", "Float", 4, 2 * 5120 * 4),
            row(
                "allgather_into_tensor_coalesced",
                "BFloat16",
                8,
                2 * 32768 * 2
            ),
            row("allreduce", "Float", 8, 2 * 8192 * 4),
            row("broadcast", "Float", 2, 2 * 32 * 4),
            row(
                "reduce_scatter_tensor_coalesced",
                "BFloat16",
                8,
                2 * 512 * 2
            ),
        ]
    );
}

/// A trace's `[memory]` events, each with the innermost operator it happened in on its thread
/// ("" outside every operator).
fn memory_events(trace: &Value) -> Vec<(&Value, String)> {
    let ops = torch_operators(trace);
    let span = |e: &Value| {
        let ts = e["ts"].as_f64().unwrap();
        (ts, ts + e["dur"].as_f64().unwrap())
    };
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "[memory]")
        .map(|m| {
            let at = m["ts"].as_f64().unwrap();
            let inside = ops
                .iter()
                .filter(|o| o["tid"] == m["tid"] && span(o).0 <= at && at <= span(o).1)
                .min_by(|a, b| {
                    let (a, b) = (span(a), span(b));
                    (a.1 - a.0).total_cmp(&(b.1 - b.0))
                });
            let name = inside.map_or(String::new(), |o| o["name"].as_str().unwrap().to_string());
            (m, name)
        })
        .collect()
}

#[test]
fn allocations_equal_torch_profilers_profile_memory() {
    let dir = TempDir::new("native-memory");
    let (_, stderr, trace) = traced("llama", dir.path(), &[("CUPROF_ACTIVITIES", "CPU,MEM")]);
    assert!(!stderr.contains("NVTX observer"), "{stderr}");
    let (out, theirs) = llama_reference(dir.path());
    let (ours, theirs) = (memory_events(&trace), memory_events(&theirs));
    assert_eq!((ours.len(), theirs.len()), (2_192, 2_192));
    // `finished` is not written by cuprof on any event; each side numbers its own `Ev Idx`.
    assert!(ours.iter().all(|(e, _)| e["args"]["Ev Idx"].is_u64()));
    let keys = |e: &Value| -> Vec<String> {
        let mut k: Vec<String> = e["args"].as_object().unwrap().keys().cloned().collect();
        k.retain(|k| k != "Ev Idx" && k != "finished");
        k.sort();
        k
    };
    let fields = [
        "Bytes",
        "Total Allocated",
        "Total Reserved",
        "Device Type",
        "Device Id",
    ];
    for ((a, a_op), (b, b_op)) in ours.iter().zip(&theirs) {
        assert_eq!(keys(a), keys(b));
        assert_eq!(
            (a["ph"].as_str(), a["cat"].as_str(), a["s"].as_str()),
            (Some("i"), Some("cpu_instant_event"), Some("t"))
        );
        for f in fields {
            assert_eq!(a["args"][f], b["args"][f], "{f}\n{a}\n{b}");
        }
        assert_eq!(a_op, b_op, "\n{a}\n{b}");
    }
    // A free names the address its allocation did.
    let mut live = std::collections::HashMap::new();
    let (mut frees, mut level, mut peak) = (0, 0i64, 0i64);
    for (m, _) in &ours {
        assert_eq!(m["args"]["Device Type"], 0, "{m}");
        let addr = m["args"]["Addr"].as_u64().unwrap();
        let bytes = m["args"]["Bytes"].as_i64().unwrap();
        if bytes > 0 {
            assert!(live.insert(addr, bytes).is_none());
            level += bytes;
            peak = peak.max(level);
        } else if let Some(b) = live.remove(&addr) {
            frees += 1;
            level -= b;
        }
    }
    let their_frees = theirs
        .iter()
        .filter(|(m, _)| m["args"]["Bytes"].as_i64().unwrap() < 0)
        .count();
    assert!(
        frees > 0 && frees <= their_frees,
        "{frees} of {their_frees}"
    );
    // TensorBoard's memory view: shown, with the same statistics per operator.
    let tb = |trace: &Path| -> Value {
        let out = untraced_python("tb_memory.py", &[trace.as_os_str()], &[]);
        serde_json::from_str(out.lines().last().unwrap()).unwrap()
    };
    let (ours, theirs) = (
        tb(&dir.path().join("t-rank0.trace.json.gz")),
        tb(&dir.path().join("torch.json")),
    );
    assert_eq!(
        ours["views"],
        serde_json::json!(["Overview", "Operator", "Trace", "Memory"])
    );
    assert_eq!(ours["stats"]["CPU"].as_object().unwrap().len(), 76);
    assert_eq!(ours["stats"], theirs["stats"]);
    // `cuprof report`: each operator's net CPU allocations, with and without the operators
    // nested in it, equal to torch's key_averages() (CPU Mem, Self CPU Mem).
    let summary = report_summary(&dir.path().join("t-rank0.trace.json.gz"), dir.path());
    let theirs: BTreeMap<String, [i64; 2]> = serde_json::from_value(out["memory"].clone()).unwrap();
    // Its leaks and peak: the allocations left unfreed and the highest live bytes, as paired
    // above.
    let cpu = &summary["allocations"][0];
    assert_eq!(cpu["device"], "CPU");
    assert_eq!(
        (
            cpu["leaked_count"].as_u64(),
            cpu["leaked_bytes"].as_i64(),
            cpu["peak_bytes"].as_i64()
        ),
        (
            Some(live.len() as u64),
            Some(live.values().sum::<i64>()),
            Some(peak)
        )
    );
    let rows = summary["operators"]["top"].as_array().unwrap();
    let mut allocating = 0;
    for r in rows {
        let name = r["name"].as_str().unwrap();
        let m = &r["memory"];
        let ours = [
            m["cpu_bytes"].as_i64().unwrap(),
            m["self_cpu_bytes"].as_i64().unwrap(),
        ];
        assert_eq!(ours, theirs[name], "{name}");
        assert_eq!(
            (m["device_bytes"].as_i64(), m["self_device_bytes"].as_i64()),
            (Some(0), Some(0))
        );
        allocating += (ours[1] != 0) as usize;
    }
    assert_eq!((rows.len(), allocating), (119, 42));
    // The report reads torch.profiler's own trace to the same figures.
    let from_torch = report_summary(&dir.path().join("torch.json"), dir.path());
    assert_eq!(
        from_torch["operators"]["top"].as_array().unwrap().len(),
        119
    );
    for r in from_torch["operators"]["top"].as_array().unwrap() {
        let m = &r["memory"];
        let name = r["name"].as_str().unwrap();
        let bytes = [m["cpu_bytes"].as_i64(), m["self_cpu_bytes"].as_i64()];
        assert_eq!(bytes, theirs[name].map(Some), "{name}");
    }
    let mm = rows.iter().find(|r| r["name"] == "aten::mm").unwrap();
    assert_eq!(mm["memory"]["self_cpu_bytes"], 407_552);
    // The report's table shows it (398.0 KiB). Every operator is listed: the tables rank them
    // by CPU time on a CPU run, which a loaded machine reorders.
    let all = dir.path().join("report-all");
    let trace = dir.path().join("t-rank0.trace.json.gz");
    let args: [&std::ffi::OsStr; 6] = [
        "report".as_ref(),
        trace.as_os_str(),
        "-o".as_ref(),
        all.as_os_str(),
        "--top".as_ref(),
        "1000".as_ref(),
    ];
    cuprof_ok(&args);
    let md = std::fs::read_to_string(all.join("report.md")).unwrap();
    assert!(md.contains("| CPU self | self CPU mem |"), "{md}");
    let row = md.lines().find(|l| l.contains(" aten::mm |")).unwrap();
    assert!(row.ends_with("| 398.0 KiB |"), "{row}");
    let totals = &summary["operators"]["tensor_memory"];
    assert_eq!(totals["events"], 2_192);
    // What no operator holds is in torch's labels' own figures (the steps and the optimizer's
    // `record_function`s, which cuprof's tables do not list as operators).
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let labels: BTreeMap<&str, i64> = theirs
        .iter()
        .filter(|(k, _)| !names.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v[1]))
        .collect();
    assert_eq!(
        labels.keys().copied().collect::<Vec<_>>(),
        [
            "Optimizer.step#AdamW.step",
            "Optimizer.zero_grad#AdamW.zero_grad",
            "ProfilerStep*"
        ]
    );
    assert_eq!(
        totals["outside_operators_cpu_bytes"],
        labels.values().sum::<i64>()
    );
    assert_eq!(totals["outside_operators_device_bytes"], 0);
}

/// A directory holding only a `python3` that runs the tests' Python: a PATH with no compiler.
fn path_without_compiler(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(python.stdout).unwrap();
    let script = bin.join("python3");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nexec {} \"$@\"\n", python.trim()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn with_no_compiler_the_nvtx_observer_records_and_one_line_says_why() {
    let dir = TempDir::new("native-nocompiler");
    let bin = path_without_compiler(dir.path());
    let cache = dir.path().join("cache");
    let (_, stderr, trace) = traced(
        "flux",
        dir.path(),
        &[
            ("PATH", bin.to_str().unwrap()),
            ("CUPROF_CACHE", cache.to_str().unwrap()),
        ],
    );
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cuprof: PyTorch operators"))
        .collect();
    assert_eq!(lines, ["cuprof: PyTorch operators are recorded through PyTorch's NVTX observer (slower; no dtypes, strides or scalar inputs), not cuprof's native observer: no C++ compiler (c++) on PATH to build it: install one (Debian: g++), or build it ahead of time with `cuprof observer build --python PYTHON` on a machine that has one and share CUPROF_CACHE"]);
    assert_eq!(trace["cuprof"]["operators"], "nvtx");
    let ops = torch_operators(&trace);
    assert_eq!(ops.len(), 2274);
    assert!(ops.iter().all(|e| e["args"].get("Input type").is_none()));
    // With MEM the line also says that PyTorch's allocations need the native observer.
    let dir = TempDir::new("native-nocompiler-mem");
    let (stderr, trace) = small_traced(
        dir.path(),
        &[
            ("PATH", bin.to_str().unwrap()),
            ("CUPROF_CACHE", cache.to_str().unwrap()),
            ("CUPROF_ACTIVITIES", "CPU,MEM"),
        ],
    );
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cuprof: PyTorch operators"))
        .collect();
    assert_eq!(lines, ["cuprof: PyTorch operators are recorded through PyTorch's NVTX observer (slower; no dtypes, strides or scalar inputs, and no PyTorch allocations for MEM), not cuprof's native observer: no C++ compiler (c++) on PATH to build it: install one (Debian: g++), or build it ahead of time with `cuprof observer build --python PYTHON` on a machine that has one and share CUPROF_CACHE"]);
    assert_eq!(torch_operators(&trace).len(), 214);
    assert_eq!(memory_events(&trace).len(), 0);
}

#[test]
fn an_unwritable_cache_and_a_failing_compiler_each_get_one_line() {
    let dir = TempDir::new("native-badcache");
    // A cache path under a regular file cannot be created, even by root.
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let cache = file.join("cache");
    let (stderr, trace) = small_traced(dir.path(), &[("CUPROF_CACHE", cache.to_str().unwrap())]);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cuprof: PyTorch"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].ends_with(&format!(
            "cache directory {} is not writable (Not a directory): set CUPROF_CACHE to a writable directory",
            cache.display()
        )),
        "{}",
        said[0]
    );
    assert_eq!(torch_operators(&trace).len(), 214);

    let dir = TempDir::new("native-badcompiler");
    let cache = dir.path().join("cache");
    let (stderr, trace) = small_traced(
        dir.path(),
        &[("CUPROF_CACHE", cache.to_str().unwrap()), ("CXX", "false")],
    );
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cuprof: PyTorch"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(
        said[0].contains(": false failed to build it against torch "),
        "{}",
        said[0]
    );
    assert!(said[0].contains("(exit 1; full log: "), "{}", said[0]);
    assert_eq!(trace["cuprof"]["operators"], "nvtx");
    assert_eq!(torch_operators(&trace).len(), 214);
}

/// The observer's thread-local is initial-exec (its two reads per operator are two moves, not
/// two `__tls_get_addr` calls), so it needs a few bytes of glibc's spare static TLS. Where the
/// program's libraries took it all, the observer's global-dynamic build is built and loaded
/// instead: the operators are recorded natively all the same, and nothing more is said.
#[test]
fn with_no_static_tls_left_the_global_dynamic_observer_records() {
    require_models();
    let dir = TempDir::new("native-static-tls");
    let cache = dir.path().join("cache");
    let (out, stderr) = Run::python("static_tls.py", &[dir.path().to_str().unwrap()], dir.path())
        .env("CUPROF_CACHE", &cache)
        .ok_json();
    assert_eq!(out["shape"], serde_json::json!([2, 4]));
    // Two builds, in this order: the initial-exec one, which did not load, then the other.
    let built: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("cuprof: building the native operator observer for torch "))
        .map(|l| l.rsplit_once("cached in ").unwrap().1.trim_end_matches(')'))
        .collect();
    assert_eq!(built.len(), 2, "{stderr}");
    let loaded = format!("{}/libcuprof_observer.so", built[1]);
    assert_eq!(out["observers"], serde_json::json!([loaded]));
    assert!(!stderr.contains("NVTX observer"), "{stderr}");
    let trace = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    assert_eq!(trace["cuprof"]["operators"], "native");
    let ops: Vec<(&str, &Value)> = torch_operators(&trace)
        .into_iter()
        .map(|e| (e["name"].as_str().unwrap(), &e["args"]["Input type"]))
        .filter(|(n, _)| *n == "aten::linear" || *n == "aten::addmm")
        .collect();
    assert_eq!(
        ops,
        [
            (
                "aten::linear",
                &serde_json::json!(["float", "float", "float"])
            ),
            (
                "aten::addmm",
                &serde_json::json!(["float", "float", "float", "Scalar", "Scalar"])
            ),
        ]
    );
}

/// `cuprof observer build` builds into the cache a traced program then uses as it is.
#[test]
fn an_observer_built_ahead_of_time_is_the_one_the_program_loads() {
    require_models();
    let dir = TempDir::new("native-ahead");
    let cache = dir.path().join("cache");
    let out = Command::new(cuprof_bin())
        .args(["observer", "build"])
        .env("CUPROF_CACHE", &cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let built = String::from_utf8(out.stdout).unwrap();
    let built = Path::new(built.trim());
    assert!(
        built.starts_with(cache.join("observer")),
        "{}",
        built.display()
    );
    assert!(built.is_file());
    // And the global-dynamic build, for a process with no static TLS left.
    let builds = std::fs::read_dir(cache.join("observer")).unwrap().count();
    assert_eq!(builds, 2);
    // The program finds it there with no compiler on its PATH.
    let bin = path_without_compiler(dir.path());
    let (stderr, trace) = small_traced(
        dir.path(),
        &[
            ("PATH", bin.to_str().unwrap()),
            ("CUPROF_CACHE", cache.to_str().unwrap()),
        ],
    );
    assert!(!stderr.contains("building"), "{stderr}");
    assert_eq!(trace["cuprof"]["operators"], "native");
    // Refused in one line when that Python has no torch.
    let out = Command::new(cuprof_bin())
        .args(["observer", "build", "--python", "/bin/false"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "cuprof: no observer was built for /bin/false\n"
    );
}

/// Each thread's operators (name and input shapes, by start), the threads in a stable order.
fn per_thread(trace: &Value) -> Vec<Vec<(String, String)>> {
    let mut threads: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for e in torch_operators(trace) {
        threads.entry(e["tid"].to_string()).or_default().push((
            e["name"].as_str().unwrap().to_string(),
            e["args"]["Input Dims"].to_string(),
        ));
    }
    let mut v: Vec<_> = threads.into_values().collect();
    v.sort();
    v
}

#[test]
fn all_threads_equals_torch_profilers_profile_all_threads_thread_by_thread() {
    let dir = TempDir::new("native-allthreads");
    let second = [("CUPROF_TEST_ALL_THREADS", "1")];
    let (_, _, trace) = traced(
        "flux",
        dir.path(),
        &[second[0], ("CUPROF_ALL_THREADS", "1")],
    );
    let (_, theirs) = reference("flux", dir.path(), &second);
    let (ours, theirs) = (per_thread(&trace), per_thread(&theirs));
    let lengths: Vec<usize> = ours.iter().map(Vec::len).collect();
    assert_eq!(lengths, [1137, 1137, 2274]);
    assert_eq!(ours, theirs);
    // Off by default, as in torch.profiler: the thread that started collecting, alone.
    let dir = TempDir::new("native-onethread");
    let (_, _, trace) = traced("flux", dir.path(), &second);
    let lengths: Vec<usize> = per_thread(&trace).iter().map(Vec::len).collect();
    assert_eq!(lengths, [2274]);
}

/// torch.compile's compiled regions record themselves only under a profiler: cuprof's
/// recorded steps show the ones torch.profiler's show, name for name; with `--with-modules`,
/// the compiled model's call goes by the model's class.
#[test]
fn compiled_regions_appear_as_under_torch_profiler() {
    require_models();
    let dir = TempDir::new("native-compiled");
    // One inductor cache for both runs: the second compiles from it.
    let cache = dir.path().join("inductor");
    let (_, _) = windowed("compiled_model.py", &["cuprof"], dir.path(), &[])
        .env("TORCHINDUCTOR_CACHE_DIR", &cache)
        .env("CUPROF_WITH_MODULES", "1")
        .ok_json();
    let ours = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    // The compiled model's one module call per step (its wrapper's: the modules inside run in
    // the compiled graph) goes by the model's own class, as an eager run's root does
    // (compare's regions pair them).
    let modules: Vec<(&str, &str)> = ours["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "python_function")
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["args"]["Module path"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        modules,
        [
            ("nn.Module: OptimizedModule_0", "Sequential"),
            ("nn.Module: OptimizedModule_0", "Sequential")
        ]
    );
    let path = dir.path().join("torch.json");
    untraced_python(
        "compiled_model.py",
        &["torch".as_ref(), path.as_os_str()],
        &[("TORCHINDUCTOR_CACHE_DIR", cache.as_os_str())],
    );
    let theirs = read_trace(&path);
    let names = |t: &Value| count_by_name(&torch_operators(t));
    let ours_ops = names(&ours);
    assert_eq!(ours_ops, names(&theirs));
    for region in [
        "Torch-Compiled Region: 0/0",
        "Pregraph bytecode",
        "AOTDispatcher Runtime Wrapper Prologue",
        "CompiledFunction",
    ] {
        assert_eq!(ours_ops.get(region), Some(&2), "{region}: {ours_ops:?}");
    }
    // The compiled graph's call is a label (its keyword value scope=user_scope) under both.
    let labels = |t: &Value| count_by_name(&labels(t));
    let ours_labels = labels(&ours);
    assert_eq!(ours_labels, labels(&theirs));
    let calls: usize = ours_labels
        .iter()
        .filter(|(n, _)| n.starts_with("## Call CompiledFxGraph ") && n.ends_with(" ##"))
        .map(|(_, c)| c)
        .sum();
    assert_eq!(calls, 2);
}

/// An operator's or label's category, name and args, less the ids that differ between two
/// runs (`External id`, torch.profiler's `Ev Idx`).
fn kineto_fields(e: &Value) -> (Value, Value, BTreeMap<String, Value>) {
    let args = e["args"].as_object().map_or_else(BTreeMap::new, |a| {
        a.iter()
            .filter(|(k, _)| *k != "External id" && *k != "Ev Idx")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    });
    (e["cat"].clone(), e["name"].clone(), args)
}

/// What torch.compile and record_function open around operators (`kineto_labels.py`): a Triton
/// launch's keyword inputs (kernel file, hash, stream, warps, and values of every kind
/// torch.profiler formats), a compiled graph's call (a label when shapes are recorded),
/// `record_function` and TorchScript labels with their inputs: equal to torch.profiler's,
/// field by field, with shapes and without. A label's `External id` is its projection's onto
/// the GPU, and GPU work inside a Triton launch carries the launch's.
#[test]
fn labels_and_keyword_inputs_equal_torch_profilers() {
    require_python("torch");
    for shapes in [true, false] {
        let dir = TempDir::new("native-labels");
        let flag = if shapes { "1" } else { "0" };
        let (_, stderr) = windowed("kineto_labels.py", &["cuprof"], dir.path(), &[])
            .env("CUPROF_RECORD_SHAPES", flag)
            .ok_json();
        assert!(!stderr.contains("NVTX observer"), "{stderr}");
        let ours = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
        let path = dir.path().join("torch.json");
        untraced_python(
            "kineto_labels.py",
            &["torch".as_ref(), path.as_os_str()],
            &[("CUPROF_TEST_SHAPES", flag.as_ref())],
        );
        let theirs = read_trace(&path);
        let all = |t: &Value| -> Vec<(Value, Value, BTreeMap<String, Value>)> {
            let mut evs = events(t, "cpu_op");
            evs.extend(events(t, "user_annotation"));
            not_steps_by_start(evs)
                .into_iter()
                .map(kineto_fields)
                .collect()
        };
        let (mine, reference) = (all(&ours), all(&theirs));
        // Per step: 5 labels or Triton launches, 6 operators (relu's clamp_min inside it).
        assert_eq!((mine.len(), reference.len()), (22, 22), "shapes {shapes}");
        for (a, b) in mine.iter().zip(&reference) {
            assert_eq!(a, b, "shapes {shapes}");
        }
        let label_names = count_by_name(&labels(&ours));
        let call = "## Call CompiledFxGraph fx1234 ##";
        assert_eq!(label_names.get(call), if shapes { Some(&2) } else { None });
        if !shapes {
            continue;
        }
        // The Triton launch's keyword inputs, as torch.profiler formats each kind.
        let launch = torch_operators(&ours)
            .into_iter()
            .find(|e| e["name"] == "triton_poi_fused_add_0")
            .unwrap();
        let expected = serde_json::json!({
            "kernel_backend": "triton", "stream": 0, "num_warps": 4, "kernel_num_gb": 0.000128,
            "two": 2, "fixed": 100000, "big": 1e20, "small": 1e-05, "third": 0.3333333333333333,
            "nan": "nan", "neg_inf": "-inf", "no": false, "path": "C:/kernels/k.py",
            "quoted": "None", "lines": "ab", "names": ["a/b", "c"], "empty": [],
        });
        for (k, v) in expected.as_object().unwrap() {
            assert_eq!(&launch["args"][k], v, "{k}");
        }
        assert!(launch["args"].get("ints").is_none());
        // Numbers as torch.profiler's file spells them (a reader sees 2 and 2.0 alike).
        let text = trace_text(&dir.path().join("t-rank0.trace.json.gz"));
        for spelled in [
            "\"two\": 2,",
            "\"fixed\": 100000,",
            "\"big\": 1e+20",
            "\"neg_zero\": -0",
        ] {
            assert!(text.contains(spelled), "{spelled}");
        }
        // Labels' ids link their projection onto the GPU; a launch's kernel carries the
        // launch's id, and the kernel inside the compiled call (a label, which Kineto does not
        // push as an operator) none.
        let gpu_labels = events(&ours, "gpu_user_annotation");
        let calls: Vec<&Value> = labels(&ours)
            .into_iter()
            .filter(|e| e["name"] == call)
            .collect();
        assert_eq!(gpu_labels.len(), 2);
        for (gpu, cpu) in gpu_labels.iter().zip(&calls) {
            assert_eq!(gpu["name"], call);
            assert_eq!(gpu["args"]["External id"], cpu["args"]["External id"]);
        }
        // In launch order (CUPTI's correlation ids): the file holds them in the order their
        // buffers reached the writer, which a loaded host can change.
        let mut kernels = events(&ours, "kernel");
        kernels.sort_by_key(|k| k["args"]["correlation"].as_u64().unwrap());
        let launches: Vec<&Value> = torch_operators(&ours)
            .into_iter()
            .filter(|e| e["name"].as_str().unwrap().starts_with("triton_"))
            .collect();
        assert_eq!((kernels.len(), launches.len()), (6, 4));
        let linked = |k: &Value| k["args"].get("External id").cloned();
        let ids: Vec<Option<Value>> = kernels.iter().map(|k| linked(k)).collect();
        let launch_ids: Vec<Option<Value>> = launches
            .iter()
            .map(|l| Some(l["args"]["External id"].clone()))
            .collect();
        assert_eq!(
            ids,
            vec![
                launch_ids[0].clone(),
                launch_ids[1].clone(),
                None,
                launch_ids[2].clone(),
                launch_ids[3].clone(),
                None
            ]
        );
        // `cuprof report` reads the launches alike from both files: its Triton kernels.
        let triton = |trace: &Path, out: &str| -> Value {
            let out = dir.path().join(out);
            cuprof_ok(&[
                "report".as_ref(),
                trace.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
            ]);
            let s: Value =
                serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                    .unwrap();
            s["triton_kernels"].clone()
        };
        let (mine, reference) = (
            triton(&dir.path().join("t-rank0.trace.json.gz"), "report-cuprof"),
            triton(&path, "report-torch"),
        );
        let row = |rows: &Value, name: &str| -> Value {
            let r = rows
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == name)
                .unwrap_or_else(|| panic!("{name}: {rows}"));
            serde_json::json!([
                r["file"],
                r["launches"],
                r["num_warps"],
                r["num_stages"],
                r["config"]
            ])
        };
        assert_eq!(
            row(&mine, "triton_poi_fused_add_0"),
            serde_json::json!([
                "/tmp/torchinductor_user/ab/cabcdef.py",
                2,
                4,
                1,
                "XBLOCK=16"
            ])
        );
        assert_eq!(
            row(&mine, "triton_poi_fused_add_0"),
            row(&reference, "triton_poi_fused_add_0")
        );
        // cuprof's trace has the double's kernels: one per launch, attributed to it.
        let add = &mine
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "triton_poi_fused_add_0")
            .unwrap();
        assert_eq!(
            (add["kernels"].as_u64(), add["gpu_ns"].as_i64()),
            (Some(2), Some(20_000))
        );
    }
}

/// The report's torch.compile section, from a trace that recorded the compilations: a graph
/// break (frame 0 and its resume function, frame 1) and a recompilation of both (a new
/// shape), counted alike from cuprof's trace and torch.profiler's; and, from cuprof's only
/// (its recorder reads dynamo's reports), where the break is and why, and which guard failed.
#[test]
fn the_report_counts_compilations_recompilations_and_graph_breaks() {
    require_models();
    let dir = TempDir::new("native-compile-report");
    // A fresh inductor cache: cuprof's run compiles every phase. torch.profiler's then compiles
    // from that cache (its backend compilations load inductor's code instead of generating it,
    // 28 s of CPU less here), and its figures compared below are the same.
    let cache = dir.path().join("inductor");
    let (_, stderr) = Run::python("compile_events.py", &["cuprof"], dir.path())
        .env("TORCHINDUCTOR_CACHE_DIR", &cache)
        .ok_json();
    // Reading dynamo's graph-break log prints nothing of it.
    assert!(!stderr.contains("Graph break"), "{stderr}");
    let ours = report_summary(&dir.path().join("t-rank0.trace.json.gz"), dir.path());
    let path = dir.path().join("torch.json");
    untraced_python(
        "compile_events.py",
        &["torch".as_ref(), path.as_os_str()],
        &[("TORCHINDUCTOR_CACHE_DIR", cache.as_os_str())],
    );
    let theirs = report_summary(&path, dir.path());
    // What both agree on, exactly (times differ between runs).
    let shape = |s: &Value| {
        let c = &s["torch_compile"];
        let rows: Vec<_> = c["compilations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                let phases: std::collections::BTreeSet<&str> = k["phases"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p[0].as_str().unwrap())
                    .collect();
                let shown = [
                    "entire_frame_compile",
                    "bytecode_tracing",
                    "backend_compile",
                ];
                (
                    k["compile_id"].as_str().unwrap().to_string(),
                    k["graph_breaks"].as_u64().unwrap(),
                    k["calls"].as_u64().unwrap(),
                    k["compile_ns"].as_i64().is_some_and(|n| n > 0),
                    shown.iter().all(|p| phases.contains(p)),
                )
            })
            .collect();
        (c["recompilations"].clone(), c["graph_breaks"].clone(), rows)
    };
    let expected = (
        serde_json::json!(2),
        serde_json::json!(2),
        vec![
            ("0/0".to_string(), 1, 2, true, true),
            ("0/1".to_string(), 1, 2, true, true),
            ("1/0".to_string(), 0, 2, true, true),
            ("1/1".to_string(), 0, 2, true, true),
        ],
    );
    assert_eq!(shape(&ours), expected);
    assert_eq!(shape(&theirs), expected);
    // Why, in cuprof's trace only: where the break is in the program (compile_events.py's
    // `torch._dynamo.graph_break()`, line 31) and torch's reason, met by both compilations of
    // frame 0; the guard on each frame's input size that failed at the new shape.
    let script = apps().join("compile_events.py").display().to_string();
    let reason = "Call to `torch._dynamo.graph_break()`: User-inserted graph break. Message: None";
    assert_eq!(
        ours["torch_compile"]["breaks"],
        serde_json::json!([
            {"frame": 0, "file": script, "line": 31, "reason": reason, "count": 2}
        ])
    );
    let why = |s: &Value| -> Vec<(String, Value)> {
        s["torch_compile"]["compilations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| {
                (
                    k["compile_id"].as_str().unwrap().to_string(),
                    k["recompile_reason"].clone(),
                )
            })
            .collect()
    };
    let null = Value::Null;
    assert_eq!(
        why(&ours),
        [
            ("0/0".to_string(), null.clone()),
            (
                "0/1".to_string(),
                serde_json::json!("0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8")
            ),
            ("1/0".to_string(), null.clone()),
            (
                "1/1".to_string(),
                serde_json::json!("1/0: tensor 'y' size mismatch at index 0. expected 4, actual 8")
            ),
        ]
    );
    // torch.profiler's trace carries no reasons.
    assert_eq!(theirs["torch_compile"].get("breaks"), None);
    assert!(why(&theirs).iter().all(|(_, r)| r.is_null()));
    // The compile time is the frames' whole compilations, which contain their phases.
    for k in ours["torch_compile"]["compilations"].as_array().unwrap() {
        let phase = |name: &str| {
            k["phases"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p[0] == name)
                .map(|p| p[1].as_i64().unwrap())
                .unwrap()
        };
        let compile = k["compile_ns"].as_i64().unwrap();
        assert!(compile >= phase("entire_frame_compile"), "{k}");
        assert!(
            phase("entire_frame_compile") >= phase("backend_compile"),
            "{k}"
        );
    }
    let report = std::fs::read_to_string(
        dir.path()
            .join("report-t-rank0.trace.json.gz")
            .join("report.md"),
    )
    .unwrap();
    assert!(
        report.contains("4 compilations (2 recompilations, 2 graph breaks)"),
        "{report}"
    );
    // The page's marks carry summary.json's values.
    let page = std::fs::read_to_string(
        dir.path()
            .join("report-t-rank0.trace.json.gz")
            .join("report.html"),
    )
    .unwrap();
    for (i, k) in ours["torch_compile"]["compilations"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        for field in ["compile_ns", "cpu_ns", "gpu_ns"] {
            let mark = format!(
                r#"data-key="torch_compile.compilations.{i}.{field}" data-value="{}""#,
                k[field]
            );
            assert!(page.contains(&mark), "{mark}");
        }
    }
}

/// The observer writes doubles itself (a stream cost more than the rest of a record): exactly
/// as torch prints the same IValue, which is what torch.profiler writes, on 400,026 doubles.
#[test]
fn the_observers_doubles_print_as_torchs() {
    require_models();
    let observer =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tracer/preload/src/sources/ops/observer.cpp");
    let out = untraced_python("double_format.py", &[observer.as_os_str()], &[]);
    let out: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(out["checked"], 400026);
    assert_eq!(out["mismatches"], 0);
}

/// Ranks that start at once with an empty cache: one builds the observer, the others wait for
/// it and load it; every one records natively.
#[test]
fn ranks_starting_at_once_build_the_observer_once() {
    require_models();
    let dir = TempDir::new("native-ranks");
    let cache = dir.path().join("cache");
    let ranks: Vec<_> = (0..4)
        .map(|rank| {
            let rank_dir = dir.path().join(format!("rank{rank}"));
            std::fs::create_dir_all(&rank_dir).unwrap();
            let child =
                windowed("torch_model.py", &["cuprof"], &rank_dir, &[]).env("CUPROF_CACHE", &cache);
            (rank_dir, std::thread::spawn(move || child.ok_json()))
        })
        .collect();
    let mut builds = 0;
    for (rank_dir, run) in ranks {
        let (_, stderr) = run.join().unwrap();
        builds += stderr
            .lines()
            .filter(|l| l.starts_with("cuprof: building the native operator observer"))
            .count();
        assert!(!stderr.contains("NVTX observer"), "{stderr}");
        let trace = read_trace(&rank_dir.join("t-rank0.trace.json.gz"));
        assert_eq!(trace["cuprof"]["operators"], "native");
        assert_eq!(torch_operators(&trace).len(), 214);
    }
    assert_eq!(builds, 1);
}

/// The observer's source builds, with build.py's flags, against torch 2.11's headers as well as
/// against the tests' torch: 2.11 is the CUDA machines' torch, where `getTLS` (a later torch's
/// name for the thread's profiler state) once stopped the build and sent every operator to the
/// NVTX fallback. scripts/python-env.sh keeps those headers (taken from the wheel, not installed).
#[test]
fn the_observer_compiles_against_torch_2_11s_headers() {
    let root = std::env::var_os("CUPROF_TORCH_HEADERS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(&std::env::var_os("HOME").expect("HOME")).join(".cache/cuprof/torch-headers")
        });
    let include = root.join("2.11.0/include");
    assert!(
        include.join("ATen/record_function.h").is_file(),
        "torch 2.11's headers are not in {}: run `bash scripts/python-env.sh` (scripts/test.sh does)",
        include.display()
    );
    let out = Command::new("python3")
        .arg(apps().join("observer_compiles.py"))
        .arg(&include)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("observer.cpp compiles against {}\n", include.display()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success());
}

/// The report's operators by call site (`operators` of summary.json), as (call site, calls),
/// after checking that every operator's self CPU time is counted at one of them.
fn call_sites(o: &Value) -> Vec<(String, u64)> {
    let self_cpu = |rows: &Value| -> i64 {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r["self_cpu_ns"].as_i64().unwrap())
            .sum()
    };
    assert_eq!(self_cpu(&o["by_call_site"]), self_cpu(&o["top"]));
    o["by_call_site"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["call_site"].as_str().unwrap().to_string(),
                r["calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `cuprof flame --memory` on a causal LM's training step recorded with `MEM` and
/// `--with-stack`: the bytes PyTorch allocated, under the model's Python lines and operators;
/// then the report's operators by the Python line that called them.
#[test]
fn flame_memory_and_report_show_the_python_lines_that_allocated() {
    let dir = TempDir::new("native-flame-memory");
    let (_, _, trace) = traced(
        "llama",
        dir.path(),
        &[("CUPROF_ACTIVITIES", "CPU,MEM"), ("CUPROF_WITH_STACK", "1")],
    );
    let allocated: u64 = memory_events(&trace)
        .iter()
        .filter_map(|(m, _)| m["args"]["Bytes"].as_i64())
        .filter(|&b| b > 0)
        .map(|b| b as u64)
        .sum();
    let folded = dir.path().join("memory.folded");
    let (trace_path, svg) = (
        dir.path().join("t-rank0.trace.json.gz"),
        dir.path().join("memory.svg"),
    );
    let args: [&std::ffi::OsStr; 7] = [
        "flame".as_ref(),
        trace_path.as_os_str(),
        "--memory".as_ref(),
        "-o".as_ref(),
        svg.as_os_str(),
        "--folded".as_ref(),
        folded.as_os_str(),
    ];
    cuprof_ok(&args);
    let folded = std::fs::read_to_string(&folded).unwrap();
    let stacks: Vec<(&str, u64)> = folded
        .lines()
        .map(|l| {
            let (s, w) = l.rsplit_once(' ').unwrap();
            (s, w.parse().unwrap())
        })
        .collect();
    // Every byte allocated is drawn once; frees are not drawn.
    assert_eq!(stacks.iter().map(|s| s.1).sum::<u64>(), allocated);
    assert_eq!(allocated, 1_719_432);
    assert_eq!(stacks[0], ("(no operator);[CPU allocations]", 1_808));
    // The rest hang under the program's lines, then the model's, then the operators.
    for (stack, _) in &stacks[1..] {
        assert!(
            stack.contains("/tests/apps/real_models.py(")
                && stack.contains("/tests/apps/real_models_lib.py(")
                && stack.ends_with(";[CPU allocations]"),
            "{stack}"
        );
    }
    // The embedding's lookup, under the model's forward.
    let embedding: Vec<&(&str, u64)> = stacks
        .iter()
        .filter(|(s, _)| s.ends_with(";aten::embedding;aten::index_select;[CPU allocations]"))
        .collect();
    assert_eq!(embedding.len(), 1);
    assert_eq!(embedding[0].1, 6_144);
    assert!(
        embedding[0].0.contains("modeling_llama.py("),
        "{}",
        embedding[0].0
    );
    assert!(std::fs::read_to_string(dir.path().join("memory.svg"))
        .unwrap()
        .contains("bytes PyTorch allocated"));

    // The report's operators by the Python line that called them: every operator's self time
    // and every allocation in an operator counted at one line.
    let summary = report_summary(&dir.path().join("t-rank0.trace.json.gz"), dir.path());
    let o = &summary["operators"];
    assert_eq!(o["call_sites"], "lines");
    let sites = call_sites(o);
    let sum = |rows: &Value, f: &dyn Fn(&Value) -> i64| -> i64 {
        rows.as_array().unwrap().iter().map(f).sum()
    };
    let net: i64 = memory_events(&trace)
        .iter()
        .map(|(m, _)| m["args"]["Bytes"].as_i64().unwrap())
        .sum();
    assert_eq!(
        sum(&o["by_call_site"], &|r| r["memory"]["cpu_bytes"]
            .as_i64()
            .unwrap())
            + o["tensor_memory"]["outside_operators_cpu_bytes"]
                .as_i64()
                .unwrap(),
        net
    );
    // The training step's backward and optimizer lines (in torch's own code past them), and
    // the model's own lines for the forward pass.
    let calls = |line: &str| {
        sites
            .iter()
            .find(|(site, _)| site.ends_with(line))
            .map(|&(_, n)| n)
    };
    assert_eq!(calls("/tests/apps/real_models_lib.py(44): step"), Some(354));
    assert_eq!(calls("/tests/apps/real_models_lib.py(45): step"), Some(420));
    assert!(sites.iter().all(|(site, _)| !site.contains("/torch/")));
    let model_lines = sites
        .iter()
        .filter(|(site, _)| site.contains("/transformers/models/llama/modeling_llama.py("))
        .count();
    assert!(model_lines >= 10, "{model_lines}");
    // The page draws the allocations by line too (the run launched no GPU work to draw).
    let page = std::fs::read_to_string(dir.path().join("report-t-rank0.trace.json.gz/report.html"))
        .unwrap();
    let at = page.find(r#"<section id="cp-flame-memory">"#).unwrap();
    let memory = &page[at..at + page[at..].find("</section>").unwrap()];
    assert!(memory.contains("modeling_llama.py(") && memory.contains("[CPU allocations]"));
}

/// torch.profiler's `with_stack` on a causal LM's training step (torch 2.x records Python
/// functions as events and writes no `Call stack`): the report reads the functions open at each
/// operator as its stack, and counts every operator at the function that called into PyTorch,
/// where cuprof's own `--with-stack` counts the lines.
#[test]
fn the_report_reads_torch_profilers_python_functions_as_call_stacks() {
    let dir = TempDir::new("torch-python-functions");
    let (_, trace) = reference("llama", dir.path(), &[("CUPROF_TEST_STACK", "1")]);
    let events = trace["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["cat"] == "python_function"));
    assert!(events.iter().all(|e| e["args"].get("Call stack").is_none()));
    let summary = report_summary(&dir.path().join("torch.json"), dir.path());
    // torch names each function by the line it is defined on: the sites are functions.
    assert_eq!(summary["operators"]["call_sites"], "functions");
    let sites = call_sites(&summary["operators"]);
    let calls = |site: &str| sites.iter().find(|(s, _)| s == site).map(|&(_, n)| n);
    // real_models_lib.py's `def step():` is line 42; cuprof counts 354 calls at its line 44
    // (`loss.backward()`) and 420 at 45 (`opt.step()`) in the same steps.
    assert_eq!(calls("real_models_lib.py(42): step"), Some(354 + 420));
    assert!(sites.iter().all(|(site, _)| !site.starts_with("torch/")));
    let model_functions = sites
        .iter()
        .filter(|(site, _)| site.starts_with("transformers/models/llama/modeling_llama.py("))
        .count();
    assert!(model_functions >= 5, "{sites:?}");
}
