"""A torch.compile'd model on the CPU, traced two ways for the compiled-region test.

    python3 compiled_model.py cuprof          # under libcuprof.so + the libcupti double
    python3 compiled_model.py torch OUT.json  # under torch.profiler (CPU, record_shapes as cuprof's default)

4 steps, schedule wait=1, warmup=1, active=2 (compilation happens in the first, unrecorded).
Prints one JSON line.
"""

import ctypes
import json
import sys

import torch

mode = sys.argv[1]
if mode == "cuprof":
    import double

    d = double.load()
    d.cuInit(0)
    step_boundary = ctypes.CDLL(None).cuprof_step
torch.manual_seed(0)
model = torch.compile(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()))
x = torch.randn(4, 16)
if mode == "cuprof":
    for _ in range(4):
        model(x)
        step_boundary()
    d.flush()
else:
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        record_shapes=True,
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[2]),
    ) as prof:
        for _ in range(4):
            model(x)
            prof.step()
print(json.dumps({"mode": mode}))
