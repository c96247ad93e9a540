"""Collectives through NCCL on one GPU (a world of one rank), 4 steps, each marked as a step by
cuprof_step (under cuprof) or prof.step() (under torch.profiler): all_reduce, all_gather,
broadcast and reduce_scatter of a float32 tensor and a bf16 one. ProcessGroupNCCL opens a
`record_param_comms` operator around each, whose metadata (Collective name, dtype, message
sizes, process group) torch.profiler writes; the check compares cuprof's.

Usage: python3 nccl_step.py [--torch-profiler DIR]
Prints one JSON line: {"steps": 4, "collectives": N}.
"""
import argparse, ctypes, json, os, tempfile

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--torch-profiler")
a = p.parse_args()

store = tempfile.NamedTemporaryFile(prefix="cuprof-nccl-", delete=False).name
os.unlink(store)
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1,
                        device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")
h = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
collectives = 0


def step():
    global collectives
    for t in (x, h):
        dist.all_reduce(t)
        out = torch.empty_like(t)
        dist.all_gather_into_tensor(out, t)
        dist.broadcast(t, 0)
        dist.reduce_scatter_tensor(out, t)
        collectives += 4
    torch.cuda.synchronize()


prof = None
if a.torch_profiler:
    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
        record_shapes=True,
        schedule=torch.profiler.schedule(wait=2, warmup=0, active=2, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(a.torch_profiler))
    prof.start()
    boundary = prof.step
else:
    boundary = ctypes.CDLL(None).cuprof_step
for _ in range(4):
    step()
    boundary()
if prof:
    prof.stop()
dist.destroy_process_group()
print(json.dumps({"steps": 4, "collectives": collectives}), flush=True)
