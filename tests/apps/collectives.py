"""Collectives' `record_param_comms` operators, traced two ways: what torch.profiler adds to
them (the collective's name, dtype, message sizes, process group...) must be in cuprof's trace.

    python3 collectives.py cuprof BUILD_DIR          # under libcuprof.so + the libcupti double
    python3 collectives.py torch BUILD_DIR OUT.json  # under torch.profiler (record_shapes)

ProcessGroupNCCL is what opens these operators (gloo opens none), and it needs GPUs: so
collectives.cpp opens them as it does, through torch's own RECORD_PARAM_COMMS_DATA, built here
against the imported torch with the flags of cuprof's observer (BUILD_DIR keeps it for the next
run). 4 steps, wait=1, warmup=1, active=2; each step runs five collectives, among them one
whose process group's description holds a double quote and one with 40 split sizes (torch
truncates lists past 30).
"""

import ctypes
import os
import subprocess
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(here)), "tracer", "preload", "src", "sources", "ops"))
import build  # noqa: E402  (the observer's builder: its flags match torch's build)

mode, build_dir = sys.argv[1], sys.argv[2]
lib = os.path.join(build_dir, "libcollectives.so")
if not os.path.exists(lib):
    torch_dir = os.path.dirname(os.path.realpath(torch.__file__))
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    flags = build.compile_flags(os.path.join(torch_dir, "include"), abi)
    libdir = os.path.join(torch_dir, "lib")
    subprocess.run(
        ["c++"] + flags + [os.path.join(here, "collectives.cpp"), "-o", lib + ".tmp",
                           "-L", libdir, "-Wl,-rpath," + libdir, "-lc10", "-ltorch_cpu"],
        check=True,
    )
    os.replace(lib + ".tmp", lib)
collective = ctypes.CDLL(lib).cuproftest_collective
collective.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_char_p, ctypes.c_char_p,
                       ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int, ctypes.c_int]

seq = 0


def step():
    global seq
    for name, desc, world, elements, bf16, splits in [
        (b"allreduce", b"default_pg", 8, 1024, 0, 0),
        (b"allgather_into_tensor_coalesced", b"default_pg", 8, 4096, 1, 0),
        (b"broadcast", b'my "tp" group', 2, 16, 0, 0),
        (b"all_to_allv", b"ep_group", 4, 1280, 0, 40),
        (b"reduce_scatter_tensor_coalesced", b"default_pg", 8, 64, 1, 2),
    ]:
        seq += 1
        assert collective(name, seq, b"0", desc, 1, world, elements, bf16, splits) == 0


if mode == "cuprof":
    import double

    d = double.load()
    d.cuInit(0)
    step_boundary = ctypes.CDLL(None).cuprof_step
    for _ in range(4):
        step()
        step_boundary()
    d.flush()
else:
    out = sys.argv[3]
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        record_shapes=True,
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=lambda p: p.export_chrome_trace(out),
    ) as prof:
        for _ in range(4):
            step()
            prof.step()
print('{"steps": 4}')
