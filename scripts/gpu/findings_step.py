"""A step loop with the patterns `cuprof report`'s findings name (scripts/gpu/gpu_check.py,
check `findings`): each step copies a batch from pageable host memory, multiplies it, reads a
value back with `.item()` (a stream synchronization), then runs small element-wise kernels.
The lines the findings must name carry the markers `# PAGEABLE` and `# SYNC`.

    python3 scripts/gpu/findings_step.py [STEPS]
"""
import sys

import torch


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    batch = torch.randn(256, 1024)  # pageable: not pinned
    w = torch.randn(1024, 1024, device="cuda")
    total = 0.0
    for _ in range(steps):
        x = batch.to("cuda")  # PAGEABLE
        y = (x @ w).relu()
        total += y.mean().item()  # SYNC
        z = y[:1, :8]
        for _ in range(20):
            z = z * 1.0001
    torch.cuda.synchronize()
    print(f"total {total:.3f}")


if __name__ == "__main__":
    main()
