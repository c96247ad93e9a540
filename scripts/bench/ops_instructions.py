"""Instructions the program thread runs per operator inside recorded steps, counted by
valgrind's callgrind: a measure that does not move with the machine's load (this project's
2-core VM spreads an idle step of the same program from 2.0 to 4.5 ms across processes, which
hides differences of 100 ns per operator in time; an instruction count does not move with
load).

    valgrind --tool=callgrind --collect-atstart=no --separate-threads=yes \
        python3 ops_instructions.py MODE MODEL STEPS HELPER

Counting is on only between HELPER's client requests (a C library that scripts/bench-ops-
instructions.sh compiles from steps_helper.c), so startup is not counted, and each thread's
counts go to their own file: dump `steps` holds STEPS steps, all recorded, after six uncounted
warm-up steps; dump `stop` what ending the recording cost (torch.profiler stops and exports
there; cuprof only ends its window). Prints one JSON line with the operators per step
(torch.profiler's count of the same step). MODE: none; torch (CPU activity, record_shapes,
and with_stack when BENCH_WITH_STACK=1); floor (an empty RecordFunction callback asking for
inputs); cuprof (under libcuprof.so, which the libcupti double's cuInit starts; its window
from CUPROF_* in the environment).
"""
import ctypes
import json
import os
import sys
import tempfile

import torch

mode, model_name, steps, helper_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "apps"))
sys.path.insert(0, here)
torch.manual_seed(0)
torch.set_num_threads(1)
import real_models_lib  # noqa: E402

helper = ctypes.CDLL(helper_path)
step = real_models_lib.MODELS[model_name]()


def count_ops():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
        step()
    return sum(1 for e in p.events() if not e.name.startswith("ProfilerStep"))


ops_per_step = count_ops()
start, stop = (lambda: None), (lambda: None)
if mode == "cuprof":
    import double

    double.load().cuInit(0)
    boundary = ctypes.CDLL(None).cuprof_step
    stop = boundary
elif mode == "torch":
    trace = os.path.join(tempfile.mkdtemp(), "t.json")
    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
        with_stack=os.environ.get("BENCH_WITH_STACK") == "1")

    def stop():  # noqa: F811
        prof.stop()
        prof.export_chrome_trace(trace)

    start = prof.start
elif mode == "floor":
    import floor as floor_lib

    floor = floor_lib.load(torch)
    handle = []
    start = lambda: handle.append(floor.floor_start())  # noqa: E731
    stop = lambda: floor.floor_stop(handle[0])  # noqa: E731
elif mode != "none":
    sys.exit("unknown mode %r" % mode)

if mode == "cuprof":
    boundary()  # CUPROF_WAIT=1: the idle step ends and recording starts
# Every step from this one line: a Python stack names its callers' lines, so a step called from
# a line of its own would meet every stack for the first time (what cuprof's first recorded
# step of a new call path pays, not its steady state).
for i in range(6 + steps):
    if i == 3:  # after 3 warm-up steps (the model's first runs, the observer's first load)
        start()
    if i == 6:  # after 3 recorded ones, uncounted
        helper.cuprof_bench_begin()
    step()
    if mode == "cuprof":
        boundary()
helper.cuprof_bench_end(b"steps")
helper.cuprof_bench_begin()
stop()
helper.cuprof_bench_end(b"stop")
print(json.dumps({"mode": mode, "model": model_name, "steps": steps, "ops_per_step": ops_per_step}))
