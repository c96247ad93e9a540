"""One training loop profiled by `torch.profiler` or by `cuprof`, the only difference being the
import line (tests/e2e/python_api.rs compares the two):

    python3 one_import.py torch DIR    # from torch.profiler import profile, schedule
    python3 one_import.py cuprof DIR   # from cuprof import profile, schedule

Five steps of a Linear -> ReLU -> Linear forward and backward under
`profile(activities=[CPU, CUDA], schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
on_trace_ready=handler, record_shapes=True)`, each step in a `record_function("train_step")`;
the handler exports the cycle's trace to DIR/KIND.json. Under cuprof the libcupti double is
CUDA (its cuInit before the loop, as a model moved to the GPU).
"""

import os
import sys

import torch
from torch.profiler import ProfilerActivity

kind, out_dir = sys.argv[1:3]
if kind == "torch":
    from torch.profiler import profile, schedule
else:
    import double

    from cuprof import profile, schedule

    double.load().cuInit(0)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
x = torch.randn(8, 64)


def handler(prof):
    prof.export_chrome_trace(os.path.join(out_dir, f"{kind}.json"))


with profile(
    activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
    schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
    on_trace_ready=handler,
    record_shapes=True,
) as prof:
    for _ in range(5):
        with torch.autograd.profiler.record_function("train_step"):
            model(x).sum().backward()
        prof.step()
