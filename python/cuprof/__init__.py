"""cuprof's Python API: a handle on libcuprof.so from inside the traced program (docs/python.md).

Pure Python over ctypes. The library is either in the process already (`cuprof run`, or
LD_PRELOAD=libcuprof.so) or, for `profile()` in a program started plainly, loaded here from
this package before CUDA initialises. The `CUPROF_*` environment stays the one configuration:
`profile(wait=1, ...)` sets the variables its arguments stand for (those not set already, by
`cuprof run`'s options for instance, which win) before the library reads them.

Nothing here raises because tracing is unavailable: each cause is said once on stderr, in one
line starting `cuprof: `, and the program runs on untraced.
"""

import ctypes
import os
import sys
import time

__all__ = [
    "annotate",
    "enabled",
    "library_path",
    "profile",
    "start",
    "step",
    "stop",
    "trace_files",
]

#: libcuprof.so as installed with this package.
LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libcuprof.so")

# cuprof_state(): the library's phase (tracer/preload/src/state/phase.rs).
_ARMED, _STARTING, _RUNNING = 1, 2, 3
# CUresult of a driver call made before cuInit.
_CUDA_ERROR_NOT_INITIALIZED = 3

_said = set()
_lib = None  # the library loaded by this module, once armed here
_active = None  # the profile() being entered or run


def _say(msg, key=None):
    """One line on stderr, once per `key` (default: the message), unless CUPROF_QUIET is on."""
    key = msg if key is None else key
    if key in _said:
        return
    _said.add(key)
    if os.environ.get("CUPROF_QUIET", "").strip().lower() in ("1", "true", "yes", "on"):
        return
    sys.stderr.write("cuprof: " + msg + "\n")
    sys.stderr.flush()


def _in_process():
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
    return lib


def library_path():
    """The libcuprof.so this package would load (installed beside this module)."""
    return LIBRARY


def enabled():
    """Whether cuprof traces this process: armed (waiting for CUDA) or running."""
    lib = _in_process()
    return lib is not None and lib.cuprof_state() in (_ARMED, _STARTING, _RUNNING)


def trace_files():
    """The trace files cuprof has finished in this process so far (paths, in order)."""
    lib = _in_process()
    if lib is None:
        return []
    n = lib.cuprof_trace_files(None, 0)
    while True:
        buf = ctypes.create_string_buffer(n + 1)
        m = lib.cuprof_trace_files(buf, n + 1)
        if m <= n:
            return os.fsdecode(buf.value).splitlines()
        n = m


def step():
    """Marks a step boundary (torch.profiler's `prof.step()`): `cuprof_step()`."""
    lib = _in_process()
    if lib is None:
        _not_traced("cuprof.step()")
        return
    lib.cuprof_step()


def start():
    """Starts a capture range (with `cuprof run --capture-range cuprof`)."""
    _capture("cuprof.start()", "cuprof_start")


def stop():
    """Ends a capture range (with `cuprof run --capture-range cuprof`)."""
    _capture("cuprof.stop()", "cuprof_stop")


def _capture(what, entry):
    lib = _in_process()
    if lib is None:
        _not_traced(what)
        return
    if os.environ.get("CUPROF_CAPTURE_RANGE") != "cuprof":
        _say(
            f"{what} marks a capture range only with CUPROF_CAPTURE_RANGE=cuprof: run the program with `cuprof run --capture-range cuprof -- ...`",
            key="capture",
        )
    getattr(lib, entry)()


def _not_traced(what):
    _say(
        f"{what}: cuprof is not in this process, so nothing is traced: run the program with `cuprof run -- python ...`",
        key="not-traced",
    )


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
    _say(
        "cuprof.annotate(): no NVTX loader in this program, so ranges are not recorded: pip install nvtx",
        key="nvtx",
    )
    return None


def _cuda_initialised():
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


def _activity(a):
    """A CUPROF_ACTIVITIES item: "CPU"/"GPU"/"MEM", or torch.profiler.ProfilerActivity."""
    name = getattr(a, "name", str(a)).rsplit(".", 1)[-1].upper()
    return "GPU" if name == "CUDA" else name


class profile:
    """cuprof's profiling window as a context manager shaped like `torch.profiler.profile`
    with `schedule(wait, warmup, active, repeat, skip_first)`: `step()` ends each step.

    Each argument left None keeps the environment's value (cuprof run's option, else the
    library's default); the others become the CUPROF_* variables of docs/configuration."""

    def __init__(
        self,
        *,
        wait=None,
        warmup=None,
        active=None,
        repeat=None,
        skip_first=None,
        dir=None,  # noqa: A002 (torch.profiler's and cuprof run's word)
        name=None,
        activities=None,
        record_shapes=None,
        with_stack=None,
    ):
        switch = lambda b: None if b is None else ("1" if b else "0")  # noqa: E731
        num = lambda n: None if n is None else str(int(n))  # noqa: E731
        self.env = {
            k: v
            for k, v in {
                "CUPROF_WAIT": num(wait),
                "CUPROF_WARMUP": num(warmup),
                "CUPROF_ACTIVE": num(active),
                "CUPROF_REPEAT": num(repeat),
                "CUPROF_SKIP_FIRST": num(skip_first),
                "CUPROF_DIR": None if dir is None else os.fspath(dir),
                "CUPROF_NAME": name,
                "CUPROF_ACTIVITIES": None
                if activities is None
                else ",".join(_activity(a) for a in activities),
                "CUPROF_RECORD_SHAPES": switch(record_shapes),
                "CUPROF_WITH_STACK": switch(with_stack),
            }.items()
            if v is not None
        }
        self._live = False

    def __enter__(self):
        global _active
        if _active is not None:
            _say(
                "cuprof.profile() entered while another is active (nested, or entered twice): this one does nothing, the outer one goes on",
                key="nested",
            )
            return self
        _active = self
        self._live = True
        _attach(self.env)
        return self

    def __exit__(self, *exc):
        global _active
        if self._live:
            self._live = False
            _active = None
        return False

    # torch.profiler.profile's non-context form.
    def start(self):
        return self.__enter__()

    def stop(self):
        self.__exit__(None, None, None)

    def step(self):
        """Ends the running step and begins the next (torch.profiler's `prof.step()`)."""
        if not self._live:
            _say(
                "profile.step() called outside its `with cuprof.profile(...)` block: ignored",
                key="step-outside",
            )
            return
        lib = _in_process()
        if lib is not None:
            lib.cuprof_step()
        elif hasattr(ctypes.CDLL(None), "cuprof_step"):
            ctypes.CDLL(None).cuprof_step()  # an older libcuprof.so (said on entering)

    def trace_files(self):
        """The trace files written so far (`cuprof.trace_files()`)."""
        return trace_files()


def _attach(env):
    """Drives the library with the settings `env`: the one in the process, else this
    package's, loaded here while CUDA is not yet initialised."""
    lib = _in_process()
    if lib is None:
        if _cuda_initialised():
            _say(
                "CUDA was initialised before cuprof could start in this process, so it is not traced: run it as `cuprof run -- python ...`, or enter cuprof.profile() before the first CUDA call",
                key="late",
            )
            return
        _arm(env)
        return
    newly = _set_env(env)
    state = lib.cuprof_state()
    if state == _ARMED:
        lib.cuprof_reload_env()
    elif state in (_STARTING, _RUNNING) and newly:
        _say(
            "CUDA was initialised before cuprof.profile(), so its settings ("
            + ", ".join(f"{k}={env[k]}" for k in newly)
            + ") do not apply: pass them to cuprof run (cuprof run --help), or enter cuprof.profile() before the first CUDA call",
            key="late-settings",
        )


def _set_env(env):
    """Sets the variables of `env` not set already, and returns their names; says which set
    ones differ (the environment's value, a cuprof run option's for instance, wins)."""
    newly = []
    for k, v in env.items():
        have = os.environ.get(k)
        if have is None:
            os.environ[k] = v
            newly.append(k)
        elif have != v:
            _say(f"{k}={have} (from the environment, e.g. a cuprof run option) is used, not {v}")
    return newly


def _arm(env):
    """Loads this package's libcuprof.so with tracing enabled: its constructor reads the
    CUPROF_* environment and waits for CUDA, as under `cuprof run`."""
    global _lib
    if os.environ.get("CUPROF_ENABLED", "").strip() == "0":
        return  # tracing switched off on purpose
    if not os.path.isfile(LIBRARY):
        _say(
            f"{LIBRARY} is missing, so nothing is traced: reinstall cuprof (pip install --force-reinstall cuprof)",
            key="missing",
        )
        return
    injection = os.environ.get("CUDA_INJECTION64_PATH", "")
    if os.path.basename(injection) == "libcuprof.so":
        # CUDA will load cuprof itself at cuInit (injection alone): its settings are enough.
        _set_env(env)
        return
    try:
        ctypes.CDLL(None).cuprof_step  # noqa: B018 (the lookup is the test)
        _say(
            "a libcuprof.so without the Python API's entry points is in this process (an older build?): cuprof.profile() only marks steps; run the program with this package's `cuprof run`",
            key="old",
        )
        return
    except AttributeError:
        pass
    _set_env(env)
    os.environ["CUPROF_ENABLED"] = "1"
    # One name for the whole run, chosen like the launcher does.
    os.environ.setdefault("CUPROF_NAME", f"profile_{int(time.time())}")
    try:
        # RTLD_GLOBAL: the NVTX loader and the program's ctypes.CDLL(None).cuprof_step find it.
        _lib = _declare(ctypes.CDLL(LIBRARY, mode=os.RTLD_NOW | os.RTLD_GLOBAL))
    except (OSError, AttributeError) as e:
        _say(f"cannot load {LIBRARY} ({e}), so nothing is traced: reinstall cuprof", key="load")


if not os.path.isfile(LIBRARY) and _in_process() is None:
    _say(
        f"{LIBRARY} is missing: reinstall cuprof (pip install --force-reinstall cuprof); the program runs untraced",
        key="missing",
    )
