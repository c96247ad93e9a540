"""Python stacks of operators whose inner frames are met again from a new call path, traced by
cuprof with --with-stack: the same function called from two lines of the program, so the
second call's stacks are new while their inner frames were seen before (cuprof reuses what it
read of those frames). Every operator must name the lines it was called from.

    python3 stack_lines.py ITERATIONS   # under libcuprof.so + the libcupti double
"""

import ctypes
import sys

import torch

import double

iterations = int(sys.argv[1])
d = double.load()
d.cuInit(0)
step_boundary = ctypes.CDLL(None).cuprof_step


def work(x, n):
    for i in range(n):
        y = torch.relu(x)
        x = torch.neg(y) if i % 3 else torch.abs(y)
    return x


first = work(torch.ones(4), iterations)
second = work(first, iterations)
step_boundary()
d.flush()
