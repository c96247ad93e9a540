"""Operator ranges on several threads, for their batching on the way to the writer
(op_batch.rs).

    python3 torch_threads.py    # under libcuprof.so + the libcupti double, recording the run

PyTorch's NVTX observer records the thread that turned it on (as torch.profiler does by
default), so the three worker threads push ranges named as the observer names an operator
(`cuproftest::threaded, op_id = N`) through torch.cuda.nvtx, the real NVTX3 loader: 12,000
each, 23 full 512-range batches (70 in all: more than the 64 that may be in flight at once, so
the writer must give back what it takes) and the rest when the thread exits.
The main thread then runs 100 real `torch.add` operators, stays quiet for 1.5 s (the writer
takes a quiet thread's batch itself) and runs 5 more before the process exits (the last batch
is sent at shutdown). Prints one JSON line: for each thread's native id, how many of each it ran.
"""

import itertools
import json
import threading
import time

import double
import torch

d = double.load()
d.cuInit(0)  # the test double is libcuda here: cuInit starts cuprof

a, b, c = torch.ones(4), torch.ones(4), torch.empty(4)
op_ids = itertools.count(1_000_000)
ran = {}
lock = threading.Lock()


def count(name, n):
    with lock:
        per = ran.setdefault(str(threading.get_native_id()), {})
        per[name] = per.get(name, 0) + n


def worker(n):
    for i in range(n):
        torch.cuda.nvtx.range_push(f"cuproftest::threaded, op_id = {next(op_ids)}")
        torch.cuda.nvtx.range_pop()
        if i % 512 == 511:
            # A batch has just been sent: give the writer time to take it, so that a loaded
            # machine never has 64 batches waiting (past that they are dropped, by design).
            time.sleep(0.01)
    count("cuproftest::threaded", n)


def adds(n):
    for _ in range(n):
        torch.add(a, b, out=c)
    count("aten::add", n)


threads = [threading.Thread(target=worker, args=(12_000,)) for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
adds(100)
time.sleep(1.5)
adds(5)
print(json.dumps({"ran": ran}))
