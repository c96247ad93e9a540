"""torch's floor for the operator benchmarks: floor_callback.cpp (an empty RecordFunction
callback that asks for inputs), built against the imported torch with the recorder's own
builder (tracer/preload/src/sources/ops/build.py) and loaded."""
import ctypes
import hashlib
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def load(torch):
    """The built callback library: `floor_start()` registers it (returns the handle),
    `floor_stop(handle)` removes it. Built once per torch build and source, kept in
    CUPROF_CACHE (else ~/.cache/cuprof) as bench-floor-HASH.so: each benchmark process loads it
    without a compile."""
    builder = {}
    with open(os.path.join(HERE, "..", "..", "tracer", "preload", "src", "sources", "ops", "build.py")) as f:
        exec(f.read(), builder)
    with open(os.path.join(HERE, "floor_callback.cpp")) as f:
        source = f.read()
    build = builder["_torch_build"](torch)
    key = hashlib.sha256((repr(sorted(build.items())) + source).encode()).hexdigest()[:16]
    cache = os.environ.get("CUPROF_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cuprof")
    os.makedirs(cache, exist_ok=True)
    so = os.path.join(cache, "bench-floor-%s.so" % key)
    if not os.path.exists(so):
        tmp = "%s.%d" % (so, os.getpid())
        builder["_compile"](build, source, tmp, tmp + ".log")
        os.replace(tmp, so)
    floor = ctypes.CDLL(so)
    floor.floor_start.restype = ctypes.c_uint64
    floor.floor_stop.argtypes = [ctypes.c_uint64]
    return floor
