"""Written by `cuprof run --as-torch-profiler` into a private folder put first on the
program's PYTHONPATH: `torch.profiler.profile` becomes `cuprof.profile` in every Python
process of the run (`cuprof.install()`). Then the program's own sitecustomize, which this one
hides, runs as it would have."""

import importlib
import os
import sys


def _cuprof_install():
    try:
        import cuprof
    except ImportError as e:
        sys.stderr.write(
            f"cuprof: --as-torch-profiler: {sys.executable} cannot import the cuprof package ({e}): "
            "install cuprof into that environment (pip install cuprof); torch.profiler stays torch's\n"
        )
        return
    cuprof.install()


def _run_hidden_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    mine = sys.modules.pop("sitecustomize", None)
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        sys.modules["sitecustomize"] = mine
    finally:
        sys.path[:] = saved


_cuprof_install()
_run_hidden_sitecustomize()
