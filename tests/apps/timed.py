"""Launches one kernel every 10 ms for argv[1] seconds; prints the kernel count."""
import json
import sys
import time

import double as dbl

d = dbl.load()
assert d.cuInit(0) == 0
n = 0
end = time.time() + float(sys.argv[1])
while time.time() < end:
    d.double_launch_kernel(b"tick", 0, 7, 1, 1, 1, 32, 1, 1, 1_000)
    n += 1
    time.sleep(0.01)
print(json.dumps({"kernels": n}))
