"""Capture ranges on the libcupti double: argv[1] is "cuda" (cudaProfilerStart/Stop, as
torch.cuda.profiler.start()/stop() call) or "cuprof" (the exported cuprof_start/cuprof_stop).
Three ranges of 2, 3 and 4 kernels, with 5 kernels outside them before, between and after."""
import ctypes
import sys

import double as dbl

d = dbl.load()
assert d.cuInit(0) == 0
me = ctypes.CDLL(None)
start, stop = (d.double_profiler_start, d.double_profiler_stop) if sys.argv[1] == "cuda" else (me.cuprof_start, me.cuprof_stop)


def launch(name, n):
    for _ in range(n):
        d.double_launch_kernel(name, 0, 7, 1, 1, 1, 64, 1, 1, 3_000)


launch(b"outside", 5)
for i, n in enumerate([2, 3, 4]):
    start()
    launch(f"inside{i}".encode(), n)
    stop()
    launch(b"outside", 5)
print("{}")
