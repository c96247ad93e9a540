"""torch's floor for the operator benchmarks: floor_callback.cpp (an empty RecordFunction
callback that asks for inputs), built against the imported torch with the recorder's own
builder (tracer/preload/src/sources/ops/build.py) and loaded."""
import ctypes
import os
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def load(torch):
    """The built callback library: `floor_start()` registers it (returns the handle),
    `floor_stop(handle)` removes it."""
    builder = {}
    with open(os.path.join(HERE, "..", "..", "tracer", "preload", "src", "sources", "ops", "build.py")) as f:
        exec(f.read(), builder)
    so = os.path.join(tempfile.mkdtemp(), "floor.so")
    with open(os.path.join(HERE, "floor_callback.cpp")) as f:
        builder["_compile"](builder["_torch_build"](torch), f.read(), so, so + ".log")
    floor = ctypes.CDLL(so)
    floor.floor_start.restype = ctypes.c_uint64
    floor.floor_stop.argtypes = [ctypes.c_uint64]
    return floor
