"""A fixed CUDA-like workload on the libcupti double, with NVTX ranges from the real NVTX3
loader (the `nvtx` package). Prints the correlation ids it got, as JSON, on its last line."""
import json
import threading

import nvtx

import double as dbl

d = dbl.load()
assert d.cuInit(0) == 0
corr = {}

with nvtx.annotate("train"):
    corr["k1"] = [d.double_launch_kernel(b"_Z6kernelPfi", 0, 7, 4, 1, 1, 128, 1, 1, 10_000) for _ in range(3)]
    corr["h2d"] = d.double_memcpy(dbl.HTOD, dbl.MEM_PAGEABLE, dbl.MEM_DEVICE, 1 << 20, 0, 7, 20_000, 1)
    corr["memset"] = d.double_memset(4096, 0, 0, 7, 1_000)
    with nvtx.annotate("inner"):
        corr["k2"] = [
            d.double_launch_kernel(b"_ZN2at6native29vectorized_elementwise_kernelILi4EEEvi", 0, 9, 132, 1, 1, 256, 1, 1, 30_000)
            for _ in range(2)
        ]
    corr["sync"] = d.double_sync(dbl.SYNC_STREAM, 7, 50_000)
    corr["graph"] = d.double_launch_graph(0, 7, 4, b"_Z9graphnodev", 5_000)
    corr["d2h"] = d.double_memcpy(dbl.DTOH, dbl.MEM_DEVICE, dbl.MEM_PINNED, 4096, 0, 7, 2_000, 0)


def worker():
    with nvtx.annotate("worker", domain="side"):
        corr["k3"] = [d.double_launch_kernel(b"ncclDevKernel_AllReduce_Sum_f32", 0, 11, 8, 1, 1, 512, 1, 1, 40_000) for _ in range(2)]


t = threading.Thread(target=worker, name="side-thread")
t.start()
t.join()
corr["weird"] = d.double_launch_kernel(b'weird"name\\\x01\n', 0, 7, 1, 1, 1, 32, 1, 1, 1_000)
print(json.dumps(corr))
