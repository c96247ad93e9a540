"""A torch.compile'd MLP block on the GPU (inductor: Triton kernels), 6 steps, each marked as a
step by cuprof_step (under cuprof) or prof.step() (under torch.profiler). Compilation happens
in step 0, so a window of wait=2 active=2 records compiled code only; --with-compile records
steps 0-1, compilation included.

With --eager the same steps run uncompiled (compare's eager-against-compiled regions).

Usage: python3 compiled_step.py [--torch-profiler DIR] [--eager]
Prints one JSON line: {"steps": 6}.
"""
import argparse, ctypes, json, torch

p = argparse.ArgumentParser()
p.add_argument("--torch-profiler")
p.add_argument("--eager", action="store_true")
a = p.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024), torch.nn.LayerNorm(1024)).cuda()
def forward(x):
    return model(x).relu().sum()


step = forward if a.eager else torch.compile(forward)
x = torch.randn(64, 1024, device="cuda")
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
for _ in range(6):
    step(x)
    torch.cuda.synchronize()
    boundary()
if prof:
    prof.stop()
print(json.dumps({"steps": 6}), flush=True)
