"""A small PyTorch training loop on the CPU, traced two ways for the operators test.

    python3 torch_model.py cuprof          # under libcuprof.so + the libcupti double
    python3 torch_model.py torch OUT.json  # under torch.profiler (CPU activity, shapes on)
    python3 torch_model.py both OUT.json   # under cuprof, then torch.profiler, then cuprof again

Under cuprof, steps are marked with cuprof_step(), or with NVTX ranges named "step" when
CUPROF_STEP_NVTX=step.

Both run the same 4 steps with the schedule wait=1, warmup=1, active=2: steps 2 and 3 are
recorded. Each step runs a Linear -> ReLU -> Linear forward and backward, a
`record_function` label, and a custom operator `cuproftest::launch` which, under cuprof,
launches one kernel through the double (its runtime call must carry the operator's External
id) and allocates and frees 1 MiB of device memory. With TORCH_MODEL_DIST_STORE=PATH,
torch.distributed is initialised first (gloo, one rank). Prints one JSON line: what ran.
"""

import ctypes
import json
import os
import sys

import torch

mode = sys.argv[1]
if os.environ.get("TORCH_MODEL_BREAK_PROFILER"):
    # A torch whose profiler internals differ from what cuprof's recorder uses.
    del torch.autograd.ProfilerState
if mode in ("cuprof", "both"):
    import double

    d = double.load()
    # The test double is libcuda here: cuInit starts cuprof, as torch's CUDA init would.
    d.cuInit(0)
    if os.environ.get("CUPROF_STEP_NVTX") == "step":
        # Steps as NVTX ranges (torch.cuda.nvtx): what works whichever way cuprof got in.
        step_range = True
        step_boundary = lambda: None  # noqa: E731
    else:
        step_range = False
        step_boundary = ctypes.CDLL(None).cuprof_step
else:
    d = None


@torch.library.custom_op("cuproftest::launch", mutates_args=())
def launch(x: torch.Tensor) -> torch.Tensor:
    if d is not None:
        d.launch(b"_Z12test_kernelv", stream=7)
        d.free(d.malloc(1 << 20))
    return x.clone()


launch.register_autograd(lambda ctx, grad: grad)

if os.environ.get("TORCH_MODEL_DIST_STORE"):
    # torch.distributed initialised (gloo, one rank, a file store at this path): the trace's
    # header has distributedInfo, as torch.profiler's has.
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method="file://" + os.environ["TORCH_MODEL_DIST_STORE"], rank=0, world_size=1
    )


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
x = torch.randn(8, 64)


def step():
    if mode == "cuprof" and step_range:
        torch.cuda.nvtx.range_push("step")
    with torch.autograd.profiler.record_function("model_step"):
        y = launch(model(x))
    y.sum().backward()
    if mode == "cuprof" and step_range:
        torch.cuda.nvtx.range_pop()


# Whether torch sees a profiler on while each step runs (what torch.compile gates its
# compiled-region labels on): only during warm-up and recorded steps.
profiling = []
if mode == "cuprof":
    for _ in range(4):
        profiling.append(torch.autograd.profiler._is_profiler_enabled)
        step()
        step_boundary()
    profiling.append(torch.autograd.profiler._is_profiler_enabled)
    d.flush()
else:
    if mode == "both":
        # Two steps under cuprof (its observer on from the second), then the program's own
        # profiler: it must start, and record every operator of its steps.
        for _ in range(2):
            step()
            step_boundary()
    out = sys.argv[2]
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        record_shapes=True,
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=lambda p: p.export_chrome_trace(out),
    ) as prof:
        for _ in range(4):
            step()
            prof.step()
    if mode == "both":
        # The program's profiler has stopped: cuprof records operators again.
        for _ in range(4):
            step()
            step_boundary()
        d.flush()
print(json.dumps({"mode": mode, "profiling": profiling}))
