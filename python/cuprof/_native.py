"""The handle on libcuprof.so: the library already in the process, or this package's copy
loaded here before CUDA initialises; and the one-line messages (`cuprof: ...` on stderr)."""

import ctypes
import os
import sys
import time

#: libcuprof.so as installed with this package.
LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libcuprof.so")

#: The environment the program started with: `cuprof run`'s options, or the user's own
#: CUPROF_* variables. What a profile() sets later is not in it.
ENV_AT_START = dict(os.environ)

# cuprof_state(): the library's phase (tracer/preload/src/state/phase.rs).
ARMED, STARTING, RUNNING = 1, 2, 3
# CUresult of a driver call made before cuInit.
_CUDA_ERROR_NOT_INITIALIZED = 3

_said = set()
_lib = None  # the library loaded by this module, once armed here


def say(msg, key=None):
    """One line on stderr, once per `key` (default: the message), unless CUPROF_QUIET is on."""
    key = msg if key is None else key
    if key in _said:
        return
    _said.add(key)
    if os.environ.get("CUPROF_QUIET", "").strip().lower() in ("1", "true", "yes", "on"):
        return
    sys.stderr.write("cuprof: " + msg + "\n")
    sys.stderr.flush()


def in_process():
    """The libcuprof.so of this process (preloaded, or loaded by this module), else None."""
    if _lib is not None:
        return _lib
    try:
        glob = ctypes.CDLL(None)
        glob.cuprof_state  # noqa: B018 (the lookup is the test)
    except (OSError, AttributeError):
        return None
    return _declare(glob)


def _declare(lib):
    lib.cuprof_state.restype = ctypes.c_int
    lib.cuprof_state.argtypes = []
    lib.cuprof_reload_env.restype = ctypes.c_int
    lib.cuprof_reload_env.argtypes = []
    lib.cuprof_trace_files.restype = ctypes.c_size_t
    lib.cuprof_trace_files.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    for f in ("cuprof_step", "cuprof_start", "cuprof_stop"):
        getattr(lib, f).restype = None
        getattr(lib, f).argtypes = []
    lib.cuprof_step_tokens.restype = None
    lib.cuprof_step_tokens.argtypes = [ctypes.c_uint64]
    if hasattr(lib, "cuprof_step_figure"):
        lib.cuprof_step_figure.restype = ctypes.c_int
        lib.cuprof_step_figure.argtypes = [ctypes.c_char_p, ctypes.c_double]
    if hasattr(lib, "cuprof_begin_window"):
        lib.cuprof_begin_window.restype = ctypes.c_int
        lib.cuprof_begin_window.argtypes = [ctypes.c_char_p]
        for f in ("cuprof_end_window", "cuprof_wait_files"):
            getattr(lib, f).restype = ctypes.c_int
            getattr(lib, f).argtypes = [ctypes.c_uint32]
    return lib


def trace_files():
    """The trace files cuprof has finished in this process so far (paths, in order)."""
    lib = in_process()
    if lib is None:
        return []
    n = lib.cuprof_trace_files(None, 0)
    while True:
        buf = ctypes.create_string_buffer(n + 1)
        m = lib.cuprof_trace_files(buf, n + 1)
        if m <= n:
            return os.fsdecode(buf.value).splitlines()
        n = m


def not_traced(what):
    say(
        f"{what}: cuprof is not in this process, so nothing is traced: run the program with `cuprof run -- python ...`",
        key="not-traced",
    )


def cuda_initialised():
    """Whether CUDA is initialised in this process (torch says so, or libcuda answers)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                return True
        except Exception:  # noqa: BLE001 (a torch without CUDA support)
            pass
    try:
        cuda = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:
        return False
    count = ctypes.c_int(0)
    try:
        return cuda.cuDeviceGetCount(ctypes.byref(count)) != _CUDA_ERROR_NOT_INITIALIZED
    except AttributeError:
        return False


def set_env(env):
    """Sets the variables of `env` the program did not start with, for the library to read
    when it starts; says which ones the start environment sets differently (it wins: a
    `cuprof run` option changes a program's settings without editing it)."""
    for k, v in env.items():
        have = ENV_AT_START.get(k)
        if have is None:
            os.environ[k] = v
        elif have != v:
            say(f"{k}={have} (from the environment, e.g. a cuprof run option) is used, not {v}")


def arm(env):
    """Loads this package's libcuprof.so with tracing enabled: its constructor reads the
    CUPROF_* environment and waits for CUDA, as under `cuprof run`. The library, or None
    (the cause said)."""
    global _lib
    if os.environ.get("CUPROF_ENABLED", "").strip() == "0":
        return None  # tracing switched off on purpose
    if not os.path.isfile(LIBRARY):
        say(
            f"{LIBRARY} is missing, so nothing is traced: reinstall cuprof (pip install --force-reinstall cuprof)",
            key="missing",
        )
        return None
    set_env(env)
    os.environ["CUPROF_ENABLED"] = "1"
    # One name for the whole run, chosen like the launcher does.
    os.environ.setdefault("CUPROF_NAME", f"profile_{int(time.time())}")
    # CUDA will load the libcuprof.so its injection variable names at cuInit: that one is
    # loaded now (the same path gives CUDA the same library), so one cuprof runs.
    injection = os.environ.get("CUDA_INJECTION64_PATH", "")
    path = injection if os.path.basename(injection) == "libcuprof.so" else LIBRARY
    try:
        # RTLD_GLOBAL: the NVTX loader and the program's ctypes.CDLL(None).cuprof_step find it.
        _lib = _declare(ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_GLOBAL))
    except (OSError, AttributeError) as e:
        say(f"cannot load {path} ({e}), so nothing is traced: reinstall cuprof", key="load")
        return None
    return _lib
