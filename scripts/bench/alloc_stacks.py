"""Cost of `--with-stack` on the allocating thread: N cudaMalloc+cudaFree pairs on the
libcupti double, timed one by one (median, p99, max) and as the thread's CPU time.

    PYTHONPATH=tests/apps CUPTI_DOUBLE_LIB=target/release/libcupti_double.so \
    LD_PRELOAD=target/release/libcuprof.so CUPROF_ENABLED=1 \
    CUPROF_CUPTI_PATH=target/release/libcupti_double.so CUPROF_ACTIVITIES=CPU,GPU,MEM \
    CUPROF_MAX_MEM_EVENTS=1000000 CUPROF_WITH_STACK=1 python3 scripts/bench/alloc_stacks.py 20000
"""
import json
import sys
import time

import double
d = double.load()
d.cuInit(0)
n = int(sys.argv[1])
for _ in range(1000):
    d.free(d.malloc(1 << 20))
ts = []
c = time.thread_time()
for _ in range(n):
    t = time.perf_counter()
    d.free(d.malloc(1 << 20))
    ts.append(time.perf_counter() - t)
cpu = time.thread_time() - c
ts.sort()
print(json.dumps({"us_per_pair_median": ts[n//2]*1e6, "p99": ts[n*99//100]*1e6, "max_us": ts[-1]*1e6, "cpu_us_per_pair": cpu/n*1e6}))
d.flush()
