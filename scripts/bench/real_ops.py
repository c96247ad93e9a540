"""Program-thread CPU per operator inside recorded steps, on real models (issue 25).

    python3 real_ops.py MODE MODEL STEPS

MODEL: flux (a diffusers transformer's inference) or llama (a Hugging Face causal LM's
training step), as tests/apps/real_models.py builds them. One process runs STEPS steps in
which idle and recording steps alternate (a repeating schedule: wait=1, warmup=1, active=1),
and prints one JSON line: the median program-thread CPU time of idle steps and of recording
steps (warm-up and active, both record operators), what the step boundaries that end a cycle
cost the program thread (torch.profiler stops, builds its results and exports there; cuprof's
window only flushes), and the operators per step. MODE:
  cuprof   under libcuprof.so (CUPROF_LIB, else target/release's), which the libcupti
           double's cuInit starts, on the same schedule (the script runs itself again with
           cuprof's environment); CUPROF_* variables given, such as CUPROF_WITH_STACK, apply
  torch    torch.profiler, CPU activity, record_shapes, the same schedule
  none     no profiler: every step idle (the baseline)
  floor    an empty RecordFunction callback that asks for inputs (floor_callback.cpp), on the
           same schedule: what torch itself charges any observer that records shapes
With REAL_OPS_FLOOR=1 in mode cuprof, every other idle step runs with torch's floor on (the
callback above, registered for that step only), and the line also holds `floor_ms`, their
median: cuprof's own part above the floor, (recording_ms - floor_ms) / operators, is then a
difference inside one process. The libcupti double is CUPTI_DOUBLE_LIB's, else
CARGO_TARGET_DIR's release build's.
"""
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

mode, model_name, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def run_under_cuprof():
    """Runs this script again under libcuprof.so (CUPROF_LIB, else the release build's) and the
    libcupti double, on the schedule above, into a trace directory removed afterwards, and
    returns its exit status. What the caller set (CUPROF_WITH_STACK, CUPROF_CACHE, CXX, ...)
    passes through; what is set here wins. The one place the benchmarks set cuprof up for a
    model run (bench-real-ops.sh, ops_ab.py)."""
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    double = os.environ.get("CUPTI_DOUBLE_LIB") or os.path.join(
        target, "release", "libcupti_double.so")
    lib = os.environ.get("CUPROF_LIB", os.path.join(target, "release", "libcuprof.so"))
    with tempfile.TemporaryDirectory() as out:
        env = dict(
            os.environ, REAL_OPS_UNDER_CUPROF="1", PYTHONPATH=os.path.join(root, "tests", "apps"),
            CUPTI_DOUBLE_LIB=double, LD_PRELOAD=os.path.abspath(lib), CUPROF_ENABLED="1",
            CUPROF_CUPTI_PATH=double, CUPROF_DIR=out, CUPROF_NAME="b", CUPROF_QUIET="1",
            CUPROF_WAIT="1", CUPROF_WARMUP="1", CUPROF_ACTIVE="1", CUPROF_REPEAT="0",
            OMP_NUM_THREADS="1")
        return subprocess.run([sys.executable, *sys.argv], env=env).returncode


if mode == "cuprof" and not os.environ.get("REAL_OPS_UNDER_CUPROF"):
    sys.exit(run_under_cuprof())

import torch  # noqa: E402

sys.argv = [sys.argv[0], "none", model_name]
sys.path.insert(0, os.path.join(root, "tests", "apps"))
if mode == "cuprof":
    import double

    d = double.load()
    d.cuInit(0)
    boundary = ctypes.CDLL(None).cuprof_step
torch.manual_seed(0)
torch.set_num_threads(1)
import real_models_lib  # noqa: E402

step = real_models_lib.MODELS[model_name]()


def recording():
    return bool(torch.autograd.profiler._is_profiler_enabled)


idle, busy, ends = [], [], []
ops_per_step = None
if mode == "torch":
    import tempfile

    counted = []
    trace = os.path.join(tempfile.mkdtemp(), "t.json")

    def ready(p):
        if not counted:
            counted.append(sum(1 for e in p.events() if not e.name.startswith("ProfilerStep")))
        p.export_chrome_trace(trace)

    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        record_shapes=True,
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=1, repeat=0),
        on_trace_ready=ready,
    )
    prof.start()
    boundary = prof.step
elif mode == "none":
    boundary = lambda: None  # noqa: E731
elif mode == "floor":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import floor as floor_lib

    floor = floor_lib.load(torch)
    registered = {"handle": 0, "steps": 0}

    def boundary():  # wait=1, warmup=1, active=1: on for the two steps after each idle one
        registered["steps"] += 1
        if registered["steps"] % 3 == 1:
            registered["handle"] = floor.floor_start()
        elif registered["steps"] % 3 == 0:
            floor.floor_stop(registered["handle"])
            registered["handle"] = 0

    def recording():  # noqa: F811
        return registered["handle"] != 0

with_floor = []
floor_idle = None
if mode == "cuprof" and os.environ.get("REAL_OPS_FLOOR") == "1":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import floor as floor_lib

    floor_idle = floor_lib.load(torch)
idle_seen = 0
for i in range(steps):
    on = recording()
    floored = 0
    if floor_idle is not None and not on:
        idle_seen += 1
        if idle_seen % 2 == 0:
            floored = floor_idle.floor_start()
    c = time.thread_time()
    step()
    spent = time.thread_time() - c
    if floored:
        floor_idle.floor_stop(floored)
        if i >= 3:
            with_floor.append(spent)
        spent = None
    c = time.thread_time()
    boundary()
    ended = time.thread_time() - c
    if i >= 3 and spent is not None:  # past the first cycle (warm-up, the observer's load)
        (busy if on else idle).append(spent)
        if i % 3 == 2:  # the boundary after each cycle's active step
            ends.append(ended)
if mode == "torch":
    prof.stop()
    ops_per_step = counted[0] if counted else None
print(json.dumps({
    "mode": mode, "model": model_name,
    "idle_ms": statistics.median(idle) * 1e3,
    "recording_ms": statistics.median(busy) * 1e3 if busy else None,
    "cycle_end_ms": statistics.median(ends) * 1e3, "ops_per_step": ops_per_step,
    "floor_ms": statistics.median(with_floor) * 1e3 if with_floor else None,
}))
