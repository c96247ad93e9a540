"""Ten steps marked with torch.cuda.nvtx.range("step"), each launching exactly 5 add_ kernels."""
import torch
x = torch.zeros(1024, device="cuda")
torch.cuda.synchronize()
for i in range(10):
    with torch.cuda.nvtx.range("step"):
        for _ in range(5):
            x.add_(1)
        torch.cuda.synchronize()
print("done", float(x[0]))
