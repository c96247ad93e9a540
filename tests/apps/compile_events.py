"""A torch.compile'd function with a graph break, called with two shapes (a recompilation),
compiled inside the recorded window, traced two ways for the report's torch.compile test.

    python3 compile_events.py cuprof          # under libcuprof.so + the libcupti double
    python3 compile_events.py torch OUT.json  # under torch.profiler (CPU activity)

4 calls, all recorded (cuprof: whole run; torch.profiler: no schedule). Dynamo compiles frame
0 (the function up to the break) and frame 1 (its resume function) at the first call, and both
again at the first call with the new shape (0/1 and 1/1). Prints one JSON line.
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
linear = torch.nn.Linear(16, 16)


def f(x):
    y = torch.relu(linear(x))
    torch._dynamo.graph_break()
    return y.sum(dim=-1)


compiled = torch.compile(f)
inputs = [torch.randn(4, 16), torch.randn(4, 16), torch.randn(8, 16), torch.randn(8, 16)]
if mode == "cuprof":
    for x in inputs:
        compiled(x)
        step_boundary()
    d.flush()
else:
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[2]),
    ) as prof:
        for x in inputs:
            compiled(x)
            prof.step()
print(json.dumps({"mode": mode}))
