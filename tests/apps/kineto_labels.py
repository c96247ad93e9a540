"""Labels and keyword inputs, traced two ways for the operator tests: what torch.compile and
record_function open around the operators.

    python3 kineto_labels.py cuprof          # under libcuprof.so + the libcupti double
    python3 kineto_labels.py torch OUT.json  # under torch.profiler

Each step opens, around a few CPU operators:
- a Triton launch as torch.compile's runtime opens it (triton_heuristics.py: a
  `_RecordFunctionFast` named after the kernel, its arguments as inputs and the kernel's file,
  hash, stream, warps... as keyword inputs), plus keyword values of every kind torch.profiler
  formats (doubles of each notation, NaN and infinities, strings it cleans, a string list) and
  two it leaves out (a list of ints, a stream that is not an int);
- a compiled graph's call as torch.compile opens it (output_code.py: `## Call CompiledFxGraph
  KEY ##` with the keyword value scope=user_scope, which makes it a label under a profiler that
  records shapes);
- a `record_function` label, and a label with a string argument opened and closed through
  torch.ops.profiler (TorchScript's form), which ends inside another operator.
Under cuprof each Triton launch and compiled call also launches a kernel through the libcupti
double. Four steps, the schedule wait=1, warmup=1, active=2. CUPROF_TEST_SHAPES=0: torch.profiler
without record_shapes (cuprof is run with CUPROF_RECORD_SHAPES=0 by the test).
"""

import ctypes
import os
import sys

import torch
from torch.profiler import record_function

mode = sys.argv[1]
shapes = os.environ.get("CUPROF_TEST_SHAPES", "1") == "1"
if mode == "cuprof":
    import double

    d = double.load()
    d.cuInit(0)
    step_boundary = ctypes.CDLL(None).cuprof_step

    def launch():
        d.launch(b"_Z6kernelPfi", stream=7)
else:

    def launch():
        pass


torch.set_num_threads(1)
x = torch.ones(4, 4)
triton_kwargs = {
    "kernel_file": "/tmp/torchinductor_user/ab/cabcdef.py",
    "kernel_hash": "4f1e9a",
    "kernel_backend": "triton",
    "stream": 0,
    "num_warps": 4,
    "num_stages": 1,
    "kernel_kwargs": "XBLOCK=16",
    "kernel_name": "triton_poi_fused_add_0",
    "kernel_flop": 1024,
    "kernel_num_gb": 0.000128,
    # Values of each kind torch.profiler formats itself.
    "two": 2.0,
    "third": 1 / 3,
    "big": 1e20,
    "fixed": 100000.0,
    "small": 1e-05,
    "neg_zero": -0.0,
    "nan": float("nan"),
    "neg_inf": float("-inf"),
    "no": False,
    "path": "C:\\kernels\\k.py",
    "quoted": 'say "hi"',
    "lines": "a\nb",
    "names": ["a\\b", "c"],
    "empty": [],
    # Left out by torch.profiler (with a warning).
    "ints": [1, 2],
}


def step():
    with torch._C._profiler._RecordFunctionFast(
        "triton_poi_fused_add_0", [x, 3, 2.5, "s"], triton_kwargs
    ):
        launch()
        torch.add(x, x)
    with torch._C._profiler._RecordFunctionFast(
        "triton_poi_fused_mul_1", [x], {"stream": "not an int", "kernel_backend": "triton"}
    ):
        launch()
    with torch._C._profiler._RecordFunctionFast(
        "## Call CompiledFxGraph fx1234 ##", keyword_values={"scope": "user_scope"}
    ):
        launch()
        torch.mul(x, x)
    with record_function("forward block"):
        torch.sub(x, x)
    handle = torch.ops.profiler._record_function_enter_new("scripted label", "its args")
    y = torch.neg(x)
    torch.ops.profiler._record_function_exit._RecordFunction(handle)
    torch.relu(y)


if mode == "cuprof":
    for _ in range(4):
        step()
        step_boundary()
    d.flush()
else:
    out = sys.argv[2]
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        record_shapes=shapes,
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=lambda p: p.export_chrome_trace(out),
    ) as prof:
        for _ in range(4):
            step()
            prof.step()
