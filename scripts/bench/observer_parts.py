"""Where the native observer's cost goes, in one process (less noisy than comparing processes).

    python3 observer_parts.py MODEL STEPS ROUNDS [OTHER_OBSERVER.cpp]

MODEL: flux or llama (tests/apps/real_models_lib.py). Each round runs STEPS steps of each of,
interleaved: no callback; torch's floor (floor_callback.cpp: an empty callback asking for
inputs); cuprof's observer (ops/observer.cpp, built here with build.py) writing every
record, shapes on, into hooks that do nothing (so none of libcuprof.so's work is counted);
and, given OTHER_OBSERVER.cpp (another version of the observer, for example an earlier
commit's: `git show REV:tracer/preload/src/sources/ops/observer.cpp > /tmp/old.cpp`), that one too,
into the same hooks with the version number it speaks. Prints, per part, the median step's
program-thread CPU and the µs per operator over the steps without a callback.
"""
import ctypes
import os
import re
import statistics
import sys
import tempfile
import time

import torch

model_name, steps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
other = sys.argv[4] if len(sys.argv) > 4 else None
here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
sys.path.insert(0, os.path.join(root, "tests", "apps"))
torch.manual_seed(0)
torch.set_num_threads(1)
import real_models_lib  # noqa: E402

builder = {}
with open(os.path.join(root, "tracer", "preload", "src", "sources", "ops", "build.py")) as f:
    exec(f.read(), builder)
build = builder["_torch_build"](torch)
tmp = tempfile.mkdtemp()


def built(source, name):
    out = os.path.join(tmp, name)
    with open(source) as f:
        builder["_compile"](build, f.read(), out, out + ".log")
    return ctypes.CDLL(out)


def observer(source, name):
    """The observer built from `source`, started into the no-op hooks (floor_callback.cpp's,
    the layout of version 8: an observer of an older version must be given hooks of its own)."""
    lib = built(source, name)
    lib.cuprof_observer_start.restype = ctypes.c_uint64
    lib.cuprof_observer_start.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.cuprof_observer_stop.argtypes = [ctypes.c_uint64]
    with open(source) as f:
        version = int(re.search(r"kHooksVersion = (\d+);", f.read()).group(1))
    size = floor.noop_hooks_size()
    hooks = ctypes.create_string_buffer(ctypes.string_at(floor.noop_hooks(), size), size)
    if ctypes.c_uint32.from_buffer(hooks).value != version:
        raise SystemExit(
            "observer_parts: %s speaks hooks version %d, floor_callback.cpp's no-op hooks %d"
            % (source, version, ctypes.c_uint32.from_buffer(hooks).value))

    def start():
        handle = lib.cuprof_observer_start(ctypes.addressof(hooks), 1)
        if not handle:
            raise SystemExit("observer_parts: %s refused the hooks" % source)
        return handle

    return start, lib.cuprof_observer_stop


floor = built(os.path.join(here, "floor_callback.cpp"), "floor.so")
floor.floor_start.restype = ctypes.c_uint64
floor.floor_stop.argtypes = [ctypes.c_uint64]
floor.noop_hooks.restype = ctypes.c_void_p
floor.noop_hooks_size.restype = ctypes.c_size_t

step = real_models_lib.MODELS[model_name]()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
    step()
ops = len(p.events())
parts = {
    "no callback": (lambda: 0, lambda h: None),
    "torch floor (empty callback, inputs)": (floor.floor_start, floor.floor_stop),
}
if other:
    parts["other observer, no-op hooks"] = observer(other, "other.so")
parts["cuprof observer, no-op hooks"] = observer(
    os.path.join(root, "tracer", "preload", "src", "sources", "ops", "observer.cpp"), "obs.so")
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
