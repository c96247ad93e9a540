"""A long-running step loop for on-demand captures, on the libcupti double.

Each step launches two kernels (`gemm`, `softmax`) on stream 7, then calls `cuprof_step()`;
it lasts about argv[3] ms (default 20). Runs until the file argv[1] exists, or for argv[2]
steps when given (0: no limit). Prints {"steps": N, "sum": S} with S the sum of i*i over the steps: a result
that nothing cuprof does may change. With ON_DEMAND_SECOND_CLIENT_AT=N, a second CUPTI client
(torch.profiler's way) subscribes at step N: cuprof steps aside. With ON_DEMAND_TORCH=1, each
step also runs one `torch.mm` on the CPU (an `aten::mm` operator). ON_DEMAND_KERNEL_SCALE=K
makes both kernels K times longer (K=100: 4 ms and 1 ms). With ON_DEMAND_HOLD=FILE, no step
begins while FILE exists (a step capture asked meanwhile waits). With ON_DEMAND_MALLOC_MIB=N, it
allocates (RANK + 1) * N MiB of device memory before its first step, and keeps it."""
import ctypes
import json
import os
import sys
import time

import double as dbl

stop_file = sys.argv[1]
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 0
step_s = (int(sys.argv[3]) if len(sys.argv) > 3 else 20) / 1000
d = dbl.load()
assert d.cuInit(0) == 0
me = ctypes.CDLL(None)
if os.environ.get("ON_DEMAND_TORCH") == "1":
    import torch

    a = torch.ones(4, 4)
    operator = lambda: torch.mm(a, a)  # noqa: E731
else:
    operator = lambda: None  # noqa: E731
second_at = int(os.environ.get("ON_DEMAND_SECOND_CLIENT_AT", "-1"))
scale = int(os.environ.get("ON_DEMAND_KERNEL_SCALE", "1"))
hold = os.environ.get("ON_DEMAND_HOLD")
malloc_mib = int(os.environ.get("ON_DEMAND_MALLOC_MIB", "0"))
if malloc_mib:
    d.double_malloc(0, (int(os.environ.get("RANK", "0")) + 1) * malloc_mib << 20)
i = 0
total = 0
while not os.path.exists(stop_file) and (limit == 0 or i < limit):
    if hold and os.path.exists(hold):
        time.sleep(0.01)
        continue
    d.double_launch_kernel(b"_Z4gemmv", 0, 7, 132, 1, 1, 256, 1, 1, 40_000 * scale)
    d.double_launch_kernel(b"_Z7softmaxv", 0, 7, 64, 1, 1, 128, 1, 1, 10_000 * scale)
    operator()
    if i == second_at:
        assert d.double_second_client_subscribe() == 0
    total += i * i
    i += 1
    time.sleep(step_s)
    me.cuprof_step()
print(json.dumps({"steps": i, "sum": total}))
