"""Two versions of the native observer's source compared in one process, into no-op hooks.

    python3 scripts/bench/observer_ab.py MODEL STEPS ROUNDS OTHER_OBSERVER.cpp

Builds tracer/preload/src/ops/observer.cpp and OTHER_OBSERVER.cpp (for example an earlier
commit's: `git show REV:tracer/preload/src/ops/observer.cpp > /tmp/old.cpp`) against this
torch, then runs STEPS steps of MODEL (flux or llama) with no callback, with the other
observer, and with this one, ROUNDS rounds interleaved; both record shapes into hooks that do
nothing (scripts/bench/floor_callback.cpp's, their version number set to what each observer
speaks). Prints the median step and the µs per operator over the steps with no callback:
torch's floor plus the observer's own work on the program thread.
"""
import ctypes
import os
import re
import statistics
import sys
import tempfile
import time

import torch

model_name, steps, rounds, other = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
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
        text = f.read()
    builder["_compile"](build, text, out, out + ".log")
    version = int(re.search(r"kHooksVersion = (\d+);", text).group(1)) if "kHooksVersion" in text else 0
    return ctypes.CDLL(out), version


floor, _ = built(os.path.join(root, "scripts", "bench", "floor_callback.cpp"), "floor.so")
floor.noop_hooks.restype = ctypes.c_void_p
hooks = floor.noop_hooks()
observers = {}
for name, source in (("other", other), ("this", os.path.join(root, "tracer", "preload", "src", "ops", "observer.cpp"))):
    lib, version = built(source, name + ".so")
    lib.cuprof_observer_start.restype = ctypes.c_uint64
    lib.cuprof_observer_start.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.cuprof_observer_stop.argtypes = [ctypes.c_uint64]
    # The no-op hooks with the version this observer checks (the struct's first field).
    copy = ctypes.create_string_buffer(ctypes.string_at(hooks, 40), 40)
    ctypes.c_uint32.from_buffer(copy).value = version
    observers[name] = (lib, copy)


def starter(name):
    lib, copy = observers[name]

    def start():
        handle = lib.cuprof_observer_start(ctypes.addressof(copy), 1)
        if not handle:
            raise SystemExit("observer_ab: the %s observer refused the hooks" % name)
        return handle

    return start, lib.cuprof_observer_stop


step = real_models_lib.MODELS[model_name]()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
    step()
ops = len(p.events())
parts = {"no callback": (lambda: 0, lambda h: None)}
parts["other observer"] = starter("other")
parts["this observer"] = starter("this")
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
print("%s: %d operators per step" % (model_name, ops))
for name, t in times.items():
    m = statistics.median(t)
    print("  %-15s %.2f ms  %+.3f us/op" % (name, m / 1e6, (m - base) / 1e3 / ops))
