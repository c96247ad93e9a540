"""A program profiled by cache-dit's own `ProfilerContext` (PyPI's cache-dit,
cache_dit/profiler.py), which drives `torch.profiler.profile`: `start()`, `stop()`,
`export_chrome_trace(DIR/NAME.trace.json.gz)`. It never imports cuprof: run under
`cuprof run --as-torch-profiler` (tests/e2e/python_api.rs), the same program writes cuprof's
trace where cache-dit writes torch's.

    python3 cache_dit_profile.py DIR NAME

The libcupti double is this run's CUDA (its cuInit, before profiling, as a model moved to the
GPU); cache-dit profiles only on CUDA devices, so its platform is told the device is one.
Inside the context, three steps: an `inside` range around a Linear forward and one
`_Z6insidev` kernel; before and after it, an `outside` range and a `_Z7outsidev` kernel that
no trace may hold. Prints one JSON line: the trace path cache-dit reports, which
`torch.profiler.profile` it used, and the first folder of its PYTHONPATH.
"""

import json
import os
import sys

import cache_dit.profiler as cache_dit_profiler
import double
import torch

out_dir, name = sys.argv[1:3]


class DoubleCudaPlatform:
    """cache-dit's platform for this run: CUDA is the libcupti double."""

    device_type = "cuda"

    @staticmethod
    def is_accelerator_available():
        return True

    @staticmethod
    def synchronize(*args, **kwargs):
        pass


cache_dit_profiler.current_platform = DoubleCudaPlatform()
d = double.load()
torch.manual_seed(0)
model = torch.nn.Linear(16, 8)
x = torch.randn(4, 16)


def work(label, kernel):
    with torch.autograd.profiler.record_function(label):
        model(x)
        d.launch(kernel, stream=7)


d.cuInit(0)
work("outside", b"_Z7outsidev")
with cache_dit_profiler.ProfilerContext(
    activities=["CPU", "GPU"], output_dir=out_dir, profile_name=name, with_stack=False
) as ctx:
    for _ in range(3):
        work("inside", b"_Z6insidev")
work("outside", b"_Z7outsidev")
profile = torch.profiler.profile
site = os.environ.get("PYTHONPATH", "").split(":")[0]
print(json.dumps({"trace_path": str(ctx.trace_path), "profile": f"{profile.__module__}.{profile.__qualname__}", "site": site}))
