"""Cost of recording PyTorch operators, per operator, on the CPU (any machine, no GPU).

    python3 torch_ops.py MODE OPS STEPS

Runs STEPS steps of OPS cheap CPU operators (`torch.add(a, b, out=c)` on 16 floats: about
1 µs of work each, so the recording's cost dominates) and prints one JSON line with the median
step time, wall and CPU time of the program's thread. MODE:
  none            untraced (run it without libcuprof.so)
  cuprof          under libcuprof.so (the libcupti double's cuInit starts it): set
                  CUPROF_TORCH_OPS / CUPROF_RECORD_SHAPES / CUPROF_WITH_STACK to choose
  torch, torch-shapes   torch.profiler with the CPU activity, record_shapes off / on; also
                  prints what its stop (leaving the `with` block: Kineto builds its results
                  there) and export_chrome_trace cost the program's thread, per operator
  observer, observer-shapes   PyTorch's NVTX observer alone, with no NVTX tool to receive its
                  ranges: PyTorch's own share of cuprof's cost
"""
import json
import statistics
import sys
import time

import torch

mode, ops, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if mode == "cuprof":
    import double

    d = double.load()
    d.cuInit(0)

a, b, c = torch.ones(16), torch.ones(16), torch.empty(16)


def step():
    for _ in range(ops):
        torch.add(a, b, out=c)


def run():
    # Wall time, and the CPU time of this (the program's) thread: cuprof's writer thread runs
    # beside it, on another core when the machine has one free.
    times, cpu = [], []
    for _ in range(steps):
        t, c = time.perf_counter(), time.thread_time()
        step()
        times.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
    return times, cpu


if mode.startswith("observer"):
    from torch.autograd import ProfilerConfig, ProfilerState
    from torch._C._profiler import _ExperimentalConfig

    config = ProfilerConfig(
        ProfilerState.NVTX, mode == "observer-shapes", False, False, False, False,
        _ExperimentalConfig(),
    )
    torch.autograd._enable_profiler(config, set())
    step()
    times, cpu = run()
    torch.autograd._disable_profiler()
elif mode.startswith("torch"):
    import os
    import tempfile

    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=mode == "torch-shapes"
    )
    prof.__enter__()
    step()  # as in the other modes: every mode runs, and records, STEPS + 1 steps
    times, cpu = run()
    t = time.perf_counter()
    prof.__exit__(None, None, None)
    stop_s = time.perf_counter() - t
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    t = time.perf_counter()
    prof.export_chrome_trace(path)
    export_s = time.perf_counter() - t
    os.unlink(path)
    print(json.dumps({"mode": mode, "recorded_ops": ops * (steps + 1), "stop_s": stop_s,
                      "export_s": export_s}))
else:
    step()  # warm-up: first calls, and cuprof's recorder starting
    times, cpu = run()
print(json.dumps({"mode": mode, "ops": ops, "median_step_s": statistics.median(times),
                  "median_step_thread_cpu_s": statistics.median(cpu)}))
