"""A 12-layer transformer training step, marked with NVTX `step` ranges (cuprof's step source).

Usage: python3 transformer_step.py STEPS [--torch-profiler DIR --wait W --active A
                                          [--profile-memory [--key-averages FILE]]]
                                         [--cuprof-step] [--stop-file PATH]
--profile-memory: torch.profiler also records allocations (profile_memory);
--key-averages: then writes key_averages' memory per operator name to FILE, as JSON:
  {name: [CPU Mem, Self CPU Mem, CUDA Mem, Self CUDA Mem]};
--cuprof-step: each step also ends with cuprof_step() (the step source of on-demand captures);
--stop-file: the loop ends early once PATH exists (a long-running job, stopped from outside).
Prints one JSON line: {"steps": N, "copy_bytes": B, "max_reserved": R}.
"""
import argparse, ctypes, json, os, sys, torch

p = argparse.ArgumentParser()
p.add_argument("steps", type=int)
p.add_argument("--torch-profiler")
p.add_argument("--wait", type=int, default=3)
p.add_argument("--active", type=int, default=1)
p.add_argument("--profile-memory", action="store_true")
p.add_argument("--key-averages")
p.add_argument("--cuprof-step", action="store_true")
p.add_argument("--stop-file")
a = p.parse_args()
cuprof_step = ctypes.CDLL(None).cuprof_step if a.cuprof_step else None

torch.manual_seed(0)
dev = "cuda"
layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
model = torch.nn.TransformerEncoder(layer, num_layers=12).to(dev).to(torch.bfloat16)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
host = torch.randn(8, 128, 512, dtype=torch.bfloat16).pin_memory()
copy_bytes = host.numel() * host.element_size()

prof = None
if a.torch_profiler:
    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
        record_shapes=True,
        profile_memory=a.profile_memory,
        schedule=torch.profiler.schedule(wait=a.wait, warmup=0, active=a.active, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(a.torch_profiler))
    prof.start()

done = 0
for i in range(a.steps):
    if a.stop_file and os.path.exists(a.stop_file):
        break
    done += 1
    with torch.cuda.nvtx.range("step"):
        torch.cuda.nvtx.range_push("h2d")
        x = host.to(dev, non_blocking=True)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("forward")
        loss = model(x).float().pow(2).mean()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("backward")
        loss.backward()
        torch.cuda.nvtx.range_pop()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    if prof:
        prof.step()
    if cuprof_step:
        cuprof_step()
if prof:
    prof.stop()
    if a.profile_memory and a.key_averages:
        with open(a.key_averages, "w") as f:
            json.dump({e.key: [e.cpu_memory_usage, e.self_cpu_memory_usage, e.device_memory_usage,
                               e.self_device_memory_usage] for e in prof.key_averages()}, f)
print(json.dumps({"steps": done, "copy_bytes": copy_bytes,
                  "max_reserved": torch.cuda.max_memory_reserved()}), flush=True)
