"""Device allocations on the libcupti double: cudaMalloc/cudaFree segments and stream-ordered
pool allocations on a stream the program knows by its cudaStream_t handle. Prints the
addresses, the handle and the peak of reserved bytes it caused."""
import json

import double as dbl

d = dbl.load()
assert d.cuInit(0) == 0
MiB = 1 << 20
STREAM_ID = 7                  # CUPTI's id, in the records
STREAM = 0x7F00DEAD0000        # the program's cudaStream_t, in the calls' parameters
a = d.double_malloc(0, 2 * MiB)        # reserved  2 MiB
b = d.double_malloc(0, 20 * MiB)       # reserved 22 MiB
d.double_launch_kernel(b"_Z3usev", 0, 7, 1, 1, 1, 32, 1, 1, 1_000)
d.double_free(0, a)                    # reserved 20 MiB
c = d.double_malloc(0, 64 * MiB)       # reserved 84 MiB  <- peak
d.double_free(0, c)                    # reserved 20 MiB
p = d.double_malloc_async(0, STREAM_ID, STREAM, 4 * MiB)    # pool allocation: 24 MiB
d.double_free_async(0, STREAM_ID, STREAM, p)                # 20 MiB
q = d.double_malloc_async(0, STREAM_ID, STREAM, 20 * MiB)   # live at the end: 40 MiB
print(json.dumps({"a": a, "b": b, "c": c, "p": p, "q": q, "stream": STREAM,
                  "peak": 84 * MiB, "live_end": 40 * MiB}))
