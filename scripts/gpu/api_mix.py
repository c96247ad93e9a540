"""Runtime launches (eager add_, a cuBLAS matmul) and driver launches (a torch.compile'd, so
Triton, pointwise function) inside one cudaProfilerStart/Stop range of 10 iterations. Compiling
and warming up happen before the range; each iteration is an NVTX range "iter", which reaches
the GPU timeline through CUPTI's external correlation records. Prints JSON with what ran."""
import json

import torch

x = torch.randn(512, 512, device="cuda")


@torch.compile
def fused(a):
    return (a.sin() * 2 + a.cos()).relu()


for _ in range(3):
    fused(x)
    x @ x
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(10):
    with torch.cuda.nvtx.range("iter"):
        y = fused(x)
        z = x @ x
        x.add_(1)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print(json.dumps({"iterations": 10, "checksum": float(y.sum() + z.sum())}))
