"""GPU-bound work on the libcupti double, as a training loop that waits for the GPU at the end of
each iteration: 4 kernels of 5 ms on stream 7 and a 10 us HtoD copy, then the program sleeps
until the GPU is done. argv[1] says how the iterations are delimited:

- whole: nothing (the whole run is recorded);
- steps: cuprof_step() after each iteration (use with a schedule);
- capture: cudaProfilerStart/Stop around each iteration (use with --capture-range);
- sigkill: like whole, then the program kills itself once the trace was flushed.

argv[2]: iterations (default 4). Prints {"iterations": N}."""
import ctypes
import json
import os
import signal
import sys
import time

import double as dbl

mode = sys.argv[1]
iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 4
d = dbl.load()
assert d.cuInit(0) == 0
me = ctypes.CDLL(None)

KERNEL_NS = 5_000_000


def iteration():
    t0 = time.time()
    for _ in range(4):
        d.double_launch_kernel(b"_Z4gemmv", 0, 7, 132, 1, 1, 256, 1, 1, KERNEL_NS)
    d.double_memcpy(dbl.HTOD, dbl.MEM_PINNED, dbl.MEM_DEVICE, 1 << 16, 0, 7, 10_000, 1)
    # The double runs the work from the launch on, back to back: wait until it would be done.
    time.sleep(max(0.0, t0 + 4 * KERNEL_NS / 1e9 + 0.001 - time.time()))


for _ in range(iterations):
    if mode == "capture":
        d.double_profiler_start()
    iteration()
    if mode == "capture":
        d.double_profiler_stop()
    if mode == "steps":
        me.cuprof_step()
print(json.dumps({"iterations": iterations}), flush=True)
if mode == "sigkill":
    time.sleep(2.5)  # past two sync-flush intervals
    os.kill(os.getpid(), signal.SIGKILL)
