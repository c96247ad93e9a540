"""Operators a thread finished inside an operator still open when the window ends the cycle
(op_batch.rs: a thread hands over what it staged when its outermost operator ends, or at its
next operator's end after a window transition).

    python3 torch_thread_transition.py   # under libcuprof.so + the libcupti double,
                                         # CUPROF_WAIT=0 CUPROF_ACTIVE=1 CUPROF_REPEAT=1

A worker thread opens `cuproftest::outer`, finishes 10 `cuproftest::nested` inside it, and
waits; the main thread ends the cycle (cuprof_step); the worker then finishes one more nested
operator, stays inside `outer` for 1.5 s (longer than a cycle drains) and closes it. Ranges
are named as PyTorch's NVTX observer names an operator and pushed through torch.cuda.nvtx,
the real NVTX3 loader. Prints one JSON line: the operators finished before the cycle ended.
"""

import ctypes
import itertools
import json
import threading
import time

import double
import torch

d = double.load()
d.cuInit(0)  # the test double is libcuda here: cuInit starts cuprof
step = ctypes.CDLL(None).cuprof_step
op_ids = itertools.count(1_000_000)
inside, ended = threading.Event(), threading.Event()
nested_before_the_end = 0


def push(name):
    torch.cuda.nvtx.range_push(f"{name}, op_id = {next(op_ids)}")


def worker():
    global nested_before_the_end
    push("cuproftest::outer")
    for _ in range(10):
        push("cuproftest::nested")
        torch.cuda.nvtx.range_pop()
        nested_before_the_end += 1
    inside.set()
    ended.wait()
    push("cuproftest::after")
    torch.cuda.nvtx.range_pop()
    time.sleep(1.5)
    torch.cuda.nvtx.range_pop()


t = threading.Thread(target=worker)
t.start()
inside.wait()
step()
ended.set()
t.join()
print(json.dumps({"nested_before_the_end": nested_before_the_end}))
