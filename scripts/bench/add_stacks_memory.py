"""Adds to a rank trace of scripts/bench/gen_ranks.py what `cuprof report`'s per-operator memory
and call-site passes read: a `Call stack` on every operator (one of 40 model lines under a torch
frame) and one PyTorch allocation or free (`[memory]`, on the GPU) inside each. For timing those
passes on a large trace (BENCHMARKS.md, "Operators' allocations and Python lines").

Usage: add_stacks_memory.py IN.trace.json.gz OUT.trace.json.gz"""

import gzip
import json
import random
import re
import sys

src, dst = sys.argv[1], sys.argv[2]
rnd = random.Random(0)
stacks = [
    f"/srv/venv/lib/python3.11/site-packages/torch/nn/functional.py(2{i:03d}): linear;"
    f"/srv/model/model.py({i}): forward;/srv/model/train.py(40): <module>"
    for i in range(40)
]
with gzip.open(src, "rt") as f, gzip.open(dst, "wt", compresslevel=1) as g:
    for line in f:
        if '"cat": "cpu_op"' not in line:
            g.write(line)
            continue
        m = re.search(r'"ts": ([0-9.]+), "dur": ([0-9.]+)', line)
        ts, dur = float(m.group(1)), float(m.group(2))
        stack = json.dumps(rnd.choice(stacks))
        g.write(line.replace('"Fwd thread id": 0,', f'"Fwd thread id": 0, "Call stack": {stack},', 1))
        b = rnd.choice([4096, -4096, 1 << 20, -(1 << 20)])
        g.write(
            f'{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, '
            f'"tid": 4242, "ts": {ts + dur / 2:.3f}, "args": {{"Total Reserved": 0, "Total Allocated": 0, '
            f'"Bytes": {b}, "Device Id": 0, "Device Type": 1, "Addr": 1}}}},\n'
        )
