"""Device allocations on the libcupti double: cudaMalloc/cudaFree segments and a stream-ordered
pool allocation. Prints the addresses and the peak of reserved bytes it caused."""
import json

import double as dbl

d = dbl.load()
assert d.cuInit(0) == 0
MiB = 1 << 20
a = d.double_malloc(0, 2 * MiB)        # reserved  2 MiB
b = d.double_malloc(0, 20 * MiB)       # reserved 22 MiB
d.double_launch_kernel(b"_Z3usev", 0, 7, 1, 1, 1, 32, 1, 1, 1_000)
d.double_free(0, a)                    # reserved 20 MiB
c = d.double_malloc(0, 64 * MiB)       # reserved 84 MiB  <- peak
d.double_free(0, c)                    # reserved 20 MiB
p = d.double_malloc_async(0, 7, 4 * MiB)   # pool allocation: 24 MiB
d.double_free_async(0, 7, p)               # 20 MiB
print(json.dumps({"a": a, "b": b, "c": c, "p": p, "peak": 84 * MiB, "live_end": 20 * MiB}))
