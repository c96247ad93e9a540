"""cuprof's Python API: a handle on libcuprof.so from inside the traced program (docs/python.md).

Pure Python over ctypes. The library is either in the process already (`cuprof run`, or
LD_PRELOAD=libcuprof.so) or, for `profile()` in a program started plainly, loaded here from
this package before CUDA initialises. `profile` and `schedule` are shaped like
torch.profiler's: a program changes its import and keeps its code.

Nothing here raises because tracing is unavailable: each cause is said once on stderr, in one
line starting `cuprof: `, and the program runs on untraced. Bad arguments raise as torch's do.
"""

import os
import sys

from . import _figures, _native
from ._native import LIBRARY, trace_files
from ._profile import Schedule as schedule
from ._profile import profile

__all__ = [
    "annotate",
    "enabled",
    "install",
    "library_path",
    "profile",
    "schedule",
    "start",
    "step",
    "stop",
    "trace_files",
]


def library_path():
    """The libcuprof.so this package would load (installed beside this module): for
    `LD_PRELOAD=$(python -c 'import cuprof; print(cuprof.library_path())')`."""
    return LIBRARY


def enabled():
    """Whether cuprof traces this process: armed (waiting for CUDA) or running."""
    lib = _native.in_process()
    return lib is not None and lib.cuprof_state() in (_native.ARMED, _native.STARTING, _native.RUNNING)


def step(tokens=None, **figures):
    """Marks a step boundary (torch.profiler's `prof.step()`): `cuprof_step()`. `tokens` (an
    int) and named numbers (`kv_len=1024`) are attached to the step this call ends first:
    `args.work` and `args.figures` of its `ProfilerStep#N`, which `cuprof report` reads."""
    tokens, pairs = _figures.check(tokens, figures)
    lib = _native.in_process()
    if lib is None:
        _native.not_traced("cuprof.step()")
        return
    _figures.attach(lib, tokens, pairs)
    lib.cuprof_step()


def start():
    """Starts a capture range (with `cuprof run --capture-range cuprof`)."""
    _capture("cuprof.start()", "cuprof_start")


def stop():
    """Ends a capture range (with `cuprof run --capture-range cuprof`)."""
    _capture("cuprof.stop()", "cuprof_stop")


def _capture(what, entry):
    lib = _native.in_process()
    if lib is None:
        _native.not_traced(what)
        return
    if os.environ.get("CUPROF_CAPTURE_RANGE") != "cuprof":
        _native.say(
            f"{what} marks a capture range only with CUPROF_CAPTURE_RANGE=cuprof: run the program with `cuprof run --capture-range cuprof -- ...`",
            key="capture",
        )
    getattr(lib, entry)()


class annotate:
    """A named range, as a context manager or a decorator: an NVTX range (cuprof is the
    program's NVTX injection library, so the range is in the trace, and on the GPU work it
    launched). NVTX comes from the `nvtx` package, else from torch.cuda.nvtx."""

    def __init__(self, name):
        self.name = str(name)

    def __enter__(self):
        nvtx = _nvtx()
        if nvtx is not None:
            nvtx[0](self.name)
        return self

    def __exit__(self, *exc):
        nvtx = _nvtx()
        if nvtx is not None:
            nvtx[1]()
        return False

    def __call__(self, func):
        import functools

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper


def _nvtx():
    """(push, pop) of an NVTX loader in this program, else None (said once)."""
    try:
        import nvtx

        return (lambda name: nvtx.push_range(name), nvtx.pop_range)
    except ImportError:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        return (torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop)
    _native.say(
        "cuprof.annotate(): no NVTX loader in this program, so ranges are not recorded: pip install nvtx",
        key="nvtx",
    )
    return None



def install():
    """Makes `torch.profiler.profile` this package's `profile` in this process, so a program
    or a tool written against torch.profiler (cache-dit's ProfilerContext) records with
    cuprof unchanged: what `cuprof run --as-torch-profiler` does. Idempotent."""
    from . import _torch_hook

    _torch_hook.install()


if not os.path.isfile(LIBRARY) and _native.in_process() is None:
    _native.say(
        f"{LIBRARY} is missing: reinstall cuprof (pip install --force-reinstall cuprof); the program runs untraced",
        key="missing",
    )
