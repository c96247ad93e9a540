"""Where the native observer's cost goes, in one process (less noisy than comparing processes).

    python3 observer_parts.py MODEL STEPS ROUNDS

MODEL: flux or llama (tests/apps/real_models_lib.py). Each round runs STEPS steps of each of,
interleaved: no callback; torch's floor (floor_callback.cpp: an empty callback asking for
inputs); cuprof's observer (ops/observer.cpp, built here with build.py) formatting every
record, shapes on, into hooks that do nothing (so none of libcuprof.so's work is counted).
Prints, per part, the median step's program-thread CPU and the µs per operator over the
steps without a callback.
"""
import ctypes
import os
import statistics
import sys
import tempfile
import time

import torch

model_name, steps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
sys.path.insert(0, os.path.join(root, "tests", "apps"))
torch.manual_seed(0)
torch.set_num_threads(1)
import real_models_lib  # noqa: E402

builder = {}
with open(os.path.join(root, "tracer", "preload", "src", "ops", "build.py")) as f:
    exec(f.read(), builder)
build = builder["_torch_build"](torch)
tmp = tempfile.mkdtemp()


def built(source, name):
    out = os.path.join(tmp, name)
    with open(source) as f:
        builder["_compile"](build, f.read(), out, out + ".log")
    return ctypes.CDLL(out)


floor = built(os.path.join(here, "floor_callback.cpp"), "floor.so")
floor.floor_start.restype = ctypes.c_uint64
floor.floor_stop.argtypes = [ctypes.c_uint64]
floor.noop_hooks.restype = ctypes.c_void_p
observer = built(os.path.join(root, "tracer", "preload", "src", "ops", "observer.cpp"), "obs.so")
observer.cuprof_observer_start.restype = ctypes.c_uint64
observer.cuprof_observer_start.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
observer.cuprof_observer_stop.argtypes = [ctypes.c_uint64]

step = real_models_lib.MODELS[model_name]()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
    step()
ops = len(p.events())


def observer_start():
    handle = observer.cuprof_observer_start(floor.noop_hooks(), 1)
    if not handle:
        raise SystemExit("observer_parts: observer.cpp refused floor_callback.cpp's hooks "
                         "(their versions differ: keep the two in step)")
    return handle


parts = {
    "no callback": (lambda: 0, lambda h: None),
    "torch floor (empty callback, inputs)": (floor.floor_start, floor.floor_stop),
    "cuprof observer, no-op hooks": (
        observer_start,
        observer.cuprof_observer_stop,
    ),
}
times = {name: [] for name in parts}
for _ in range(3):
    step()
for _ in range(rounds):
    for name, (start, stop) in parts.items():
        handle = start()
        spent = []
        for _ in range(steps):
            c = time.thread_time_ns()
            step()
            spent.append(time.thread_time_ns() - c)
        stop(handle)
        times[name].append(statistics.median(spent))
base = statistics.median(times["no callback"])
print("%s: %d operators per step, no callback %.2f ms" % (model_name, ops, base / 1e6))
for name, t in times.items():
    m = statistics.median(t)
    print("  %-38s %6.2f ms  %+.2f us/op" % (name, m / 1e6, (m - base) / 1e3 / ops))
