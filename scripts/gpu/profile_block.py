"""A GPU loop profiled by a block (scripts/gpu/gpu_check.py's `block` check):

    python3 profile_block.py cuprof DIR   # with cuprof.profile(schedule=...) as p
    python3 profile_block.py torch DIR    # with torch.profiler.profile(schedule=...) as p
                                          # (run under cuprof run --as-torch-profiler)

CUDA is initialised before the block (the model moved to the GPU, a `torch.sort` run): five
steps of a Linear -> ReLU forward, schedule(wait=1, warmup=1, active=2, repeat=1), the trace
exported by on_trace_ready; after the block, `torch.sort` again, which no file may hold.
Prints one JSON line: the block's files as it returned, and the exported path.
"""

import json
import os
import sys

import torch

kind, out_dir = sys.argv[1:3]
if kind == "cuprof":
    import cuprof

    profile = cuprof.profile
else:
    profile = torch.profiler.profile

model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU()).cuda()
x = torch.randn(256, 1024, device="cuda")
torch.sort(torch.randn(4096, device="cuda"))
torch.cuda.synchronize()
exported = os.path.join(out_dir, f"{kind}-export.json.gz")
with profile(
    activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
    schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
    on_trace_ready=lambda p: p.export_chrome_trace(exported),
) as p:
    for _ in range(5):
        model(x)
        p.step()
files = p.trace_files() if hasattr(p, "trace_files") else []
torch.sort(torch.randn(4096, device="cuda"))
torch.cuda.synchronize()
print(json.dumps({"files": files, "exported": exported, "profile": f"{type(p).__module__}.{type(p).__name__}"}))
