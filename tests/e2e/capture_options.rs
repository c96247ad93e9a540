//! Issue 27: `cuprof capture` takes the activity, shape and stack options `cuprof run` takes,
//! for that capture only: the next capture without them records as the process started.

use crate::common::on_demand::*;
use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn trace(caps: &Path, name: &str, cycle: u32) -> Value {
    read_trace(&caps.join(format!("{name}-rank0-cycle{cycle}.trace.json.gz")))
}

/// Kernels, and runtime API calls by name.
fn kernels_and_calls(t: &Value) -> (usize, BTreeMap<String, usize>) {
    (
        events(t, "kernel").len(),
        count_by_name(&events(t, "cuda_runtime")),
    )
}

#[test]
fn each_capture_records_the_activities_it_asks_for_and_only_it() {
    let mut job = Job::start("acts", "acts", 1, 0, 20);
    job.wait_ready();
    let pid = job.pids()[0].to_string();
    let caps = job.dir.path().join("caps");
    let launches = BTreeMap::from([("cudaLaunchKernel".to_string(), 4)]);
    // Two steps of two kernels each.
    job.capture_steps_with(&pid, "2", &caps, &["--activities", "GPU"]);
    assert_eq!(
        kernels_and_calls(&trace(&caps, "acts", 1)),
        (4, BTreeMap::new())
    );
    job.capture_steps_with(&pid, "2", &caps, &["--activities", "cpu"]);
    assert_eq!(
        kernels_and_calls(&trace(&caps, "acts", 2)),
        (0, launches.clone())
    );
    // As the process started: both.
    job.capture_steps(&pid, "2", &caps);
    assert_eq!(
        kernels_and_calls(&trace(&caps, "acts", 3)),
        (4, launches.clone())
    );
    job.capture_steps_with(&pid, "2", &caps, &["--activities", "GPU,CPU"]);
    assert_eq!(kernels_and_calls(&trace(&caps, "acts", 4)), (4, launches));

    // MEM runs for the whole program or not at all: refused before any process is asked.
    let out = job.cuprof(&[
        "capture",
        "--pid",
        &pid,
        "--steps",
        "1",
        "--activities",
        "GPU,MEM",
    ]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "cuprof: --activities MEM cannot be chosen per capture: device memory records run for the whole program (start it with cuprof run --activities CPU,GPU,MEM)\n"
    );
    let (ps, _) = job.ok(&["ps"]);
    assert_eq!(ps_rows(&ps).values().next().unwrap().3, "4");
    job.finish();
}

/// The aten::mm operators of a trace: (count, with input dims, with a call stack).
fn mm_ops(t: &Value) -> (usize, usize, usize) {
    let ops = torch_operators(t);
    let mm: Vec<&&Value> = ops.iter().filter(|o| o["name"] == "aten::mm").collect();
    let with = |arg: &str| mm.iter().filter(|o| o["args"].get(arg).is_some()).count();
    (mm.len(), with("Input Dims"), with("Call stack"))
}

#[test]
fn shapes_stacks_and_operators_are_chosen_per_capture() {
    require_python("torch");
    // Two processes: one started as by default (shapes, no stacks), one without shapes.
    let mut job = Job::empty("torchopts");
    let stop = job.stop_file();
    let args = [stop.to_str().unwrap(), "0", "20"];
    let torch = ("ON_DEMAND_TORCH", "1");
    job.spawn("on_demand.py", &args, "dflt", (0, 1), &[torch]);
    job.spawn(
        "on_demand.py",
        &args,
        "noshapes",
        (0, 1),
        &[torch, ("CUPROF_RECORD_SHAPES", "0")],
    );
    job.wait_ready();
    let [dflt, noshapes] = [0, 1].map(|i| job.pids()[i].to_string());
    let caps = job.dir.path().join("caps");
    // One torch.mm a step; two steps a capture.
    job.capture_steps_with(&dflt, "2", &caps, &["--no-torch-ops"]);
    assert_eq!(mm_ops(&trace(&caps, "dflt", 1)), (0, 0, 0));
    job.capture_steps_with(&dflt, "2", &caps, &["--with-stack", "--no-record-shapes"]);
    assert_eq!(mm_ops(&trace(&caps, "dflt", 2)), (2, 0, 2));
    job.capture_steps(&dflt, "2", &caps);
    assert_eq!(mm_ops(&trace(&caps, "dflt", 3)), (2, 2, 0));
    job.capture_steps_with(&noshapes, "2", &caps, &["--record-shapes"]);
    assert_eq!(mm_ops(&trace(&caps, "noshapes", 1)), (2, 2, 0));
    job.capture_steps(&noshapes, "2", &caps);
    assert_eq!(mm_ops(&trace(&caps, "noshapes", 2)), (2, 0, 0));
    job.finish();
}
