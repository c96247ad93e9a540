"""A step loop with the patterns `cuprof report`'s findings name (scripts/gpu/gpu_check.py,
check `findings`): each step copies a batch from pageable host memory, multiplies it, reads a
value back with `.item()` (a stream synchronization), then runs small element-wise kernels;
every fifth step empties PyTorch's cache (cudaFree inside a step). Each step is an NVTX range
`step` (`cuprof run --step-nvtx step`). The lines the findings must name carry the markers
`# PAGEABLE` and `# SYNC`.

    python3 scripts/gpu/findings_step.py [STEPS]
"""
import sys

import torch


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    batch = torch.randn(256, 1024)  # pageable: not pinned
    w = torch.randn(1024, 1024, device="cuda")
    total = 0.0
    for step in range(steps):
        torch.cuda.nvtx.range_push("step")
        x = batch.to("cuda")  # PAGEABLE
        y = (x @ w).relu()
        total += y.mean().item()  # SYNC
        z = y[:1, :8]
        for _ in range(20):
            z = z * 1.0001
        if step % 5 == 4:
            del x, y
            torch.cuda.empty_cache()  # FREE
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"total {total:.3f}")


if __name__ == "__main__":
    main()
