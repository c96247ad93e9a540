"""A PyTorch CPU training loop whose steps are marked two ways, for the wheel test
(tests/wheel/test_wheel.py, tests/e2e/python_api.rs):

    python3 profile_api.py raw DIR NAME      # ctypes.CDLL(None).cuprof_step() after each step;
                                             # the window is cuprof run's --wait/--warmup/--active
    python3 profile_api.py profile DIR NAME  # with cuprof.profile(wait=1, warmup=1, active=2,
                                             # dir=DIR, name=NAME) as p: ... p.step()
    python3 profile_api.py misuse DIR NAME   # profile() as above, plus a nested profile() and a
                                             # p.step() after the block: each said once, no harm

Four steps, each in a `cuprof.annotate("train_step")` range: a Linear -> ReLU -> Linear
forward (in a function decorated with `cuprof.annotate("loss")`) and backward, and one kernel
launched through the libcupti double ($CUPTI_DOUBLE_LIB), whose cuInit (the program's first CUDA call,
made once the window is set, as torch's lazy CUDA initialisation would) starts cuprof.
Prints one JSON line: the mode, cuprof.enabled() and the trace files cuprof reports once the
window has closed (waited for while cuprof is enabled: the writer thread finishes the file).
"""

import ctypes
import json
import sys
import time

import cuprof
import double
import torch

mode, out_dir, name = sys.argv[1:4]
d = double.load()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
x = torch.randn(8, 64)


@cuprof.annotate("loss")
def loss():
    return model(x).sum()


def train_step():
    with cuprof.annotate("train_step"):
        loss().backward()
        d.launch(b"_Z11step_kernelv", stream=7)


if mode == "raw":
    d.cuInit(0)
    for _ in range(4):
        train_step()
        ctypes.CDLL(None).cuprof_step()
else:
    with cuprof.profile(wait=1, warmup=1, active=2, dir=out_dir, name=name) as p:
        d.cuInit(0)
        for i in range(4):
            train_step()
            p.step()
            if mode == "misuse" and i == 0:
                with cuprof.profile(active=5):
                    pass
    if mode == "misuse":
        p.step()
d.flush()
files = cuprof.trace_files()
if mode == "raw":
    # The window closed after the fourth step; the writer thread finishes its file meanwhile.
    deadline = time.monotonic() + 60
    while cuprof.enabled() and not files and time.monotonic() < deadline:
        time.sleep(0.05)
        files = cuprof.trace_files()
    print(json.dumps({"mode": mode, "enabled": cuprof.enabled(), "files": files}))
else:
    # The block's file is complete when the block ends: listed at once, by both.
    print(json.dumps({"mode": mode, "enabled": cuprof.enabled(), "files": files, "block": p.trace_files()}))
