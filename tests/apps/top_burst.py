"""A burst of GPU work of known shape for `cuprof top`, on the libcupti double.

Waits for the file argv[1] (go), then: allocates 3 MiB and 1 MiB of device memory and frees
the 3 MiB; runs gemm (200 ms), softmax (100 ms), gemm (200 ms) on stream 7, each started after
the one before has ended, all within 0.7 s: in the last second GPU busy 50.0%, gemm 2x
400 ms, softmax 1x 100 ms. Then writes the file argv[2] (done) and waits for argv[3] (stop).
Calls cuprof_step() never: no step times."""
import os
import sys
import time

import double as dbl

go, done, stop = sys.argv[1:4]
d = dbl.load()
assert d.cuInit(0) == 0
while not os.path.exists(go):
    time.sleep(0.01)
MiB = 1 << 20
a = d.double_malloc(0, 3 * MiB)
d.double_malloc(0, 1 * MiB)
d.double_free(0, a)
# Kernel durations are the double's; the sleeps only keep one kernel from starting before the
# one before it ends.
for name, ms in [(b"_Z4gemmv", 200), (b"_Z7softmaxv", 100), (b"_Z4gemmv", 200)]:
    d.double_launch_kernel(name, 0, 7, 132, 1, 1, 256, 1, 1, ms * 1_000_000)
    time.sleep(ms / 1000 + 0.02)
open(done, "w").close()
while not os.path.exists(stop):
    time.sleep(0.01)
