"""Replays a raw CUPTI buffer dump (tests/data/, see its README.md) through the libcupti
double, rebased to now, as if CUDA had just produced it in this process. Prints the number
of records delivered, as JSON, on its last line.

    python3 replay.py tests/data/cupti-130001-h100-steps10.bin
"""
import json
import sys
import time

import double

path = sys.argv[1]
d = double.load()
assert d.cuInit(0) == 0
n = d.double_replay(path.encode())
assert n > 0, f"double_replay({path}) returned {n}"
# The replayed records lie from now + 1 ms on, over the recording's span (tens of ms for
# tests/data's files); a real process cannot exit before its GPU work ends, so neither
# does this one.
time.sleep(0.2)
print(json.dumps({"records": n}))
