# cuprof's PyTorch operator recorder. libcuprof.so runs this inside the traced program (see
# python.rs), in a namespace of its own, and calls _cuprof_set(level) when its window starts
# or stops collecting: 0 off, 1 operators, 2 operators with input shapes.
#
# It turns on PyTorch's NVTX observer (the profiler state behind emit_nvtx) on the calling
# thread: every operator then becomes an NVTX range, and cuprof, the program's NVTX injection
# library, turns those ranges into Kineto's cpu_op events. It never imports torch itself: it
# acts only once the program has. It never raises into the program.
import sys
import threading

_state = {"thread": None, "gave_way": False, "patched": False, "said": set(), "broken": False}


def _say(msg):
    if msg in _state["said"]:
        return
    _state["said"].add(msg)
    try:
        sys.stderr.write("cuprof: " + msg + "\n")
    except Exception:
        pass


def _originals(torch):
    autograd = torch.autograd
    enable = getattr(autograd._enable_profiler, "__wrapped__", autograd._enable_profiler)
    return enable, autograd._disable_profiler


def _stop_ours():
    # The observer is per thread: only the thread that turned it on can turn it off.
    if _state["thread"] != threading.get_ident():
        return False
    torch = sys.modules["torch"]
    _state["thread"] = None
    _originals(torch)[1]()
    return True


def _give_way():
    # The program starts a profiler of its own (torch.profiler, emit_nvtx): a thread holds
    # one profiler state, so ours goes first, for good. emit_nvtx's ranges still reach cuprof.
    _state["gave_way"] = True
    try:
        _stop_ours()
    except Exception:
        pass


def _wrap(fn):
    def enable_profiler(*args, **kwargs):
        _give_way()
        return fn(*args, **kwargs)

    enable_profiler.__wrapped__ = fn
    enable_profiler.__name__ = getattr(fn, "__name__", "enable_profiler")
    enable_profiler.__doc__ = getattr(fn, "__doc__", None)
    return enable_profiler


def _patch_record_function(torch):
    # record_function scopes (the program's labels, DataLoader's and the optimizers' own) as
    # plain NVTX ranges while operators are recorded: Kineto's user_annotation events.
    rf = getattr(getattr(torch.autograd, "profiler", None), "record_function", None)
    nvtx = getattr(torch._C, "_nvtx", None)
    if rf is None or nvtx is None or hasattr(rf.__enter__, "__wrapped__"):
        return
    push, pop = nvtx.rangePushA, nvtx.rangePop
    enter, exit_ = rf.__enter__, rf.__exit__

    def __enter__(self):
        r = enter(self)
        if _state["thread"] is not None:
            push(self.name)
            self._cuprof_range = True
        return r

    def __exit__(self, *exc):
        if self.__dict__.pop("_cuprof_range", False):
            pop()
        return exit_(self, *exc)

    __enter__.__wrapped__ = enter
    __exit__.__wrapped__ = exit_
    rf.__enter__, rf.__exit__ = __enter__, __exit__


def _patch(torch):
    # Wherever torch bound the profiler's enable functions by name, so that a profiler the
    # program starts later finds this thread free.
    _state["patched"] = True
    _patch_record_function(torch)
    names = ("_enable_profiler", "_enable_profiler_legacy")
    modules = ("torch.autograd", "torch.autograd.profiler", "torch.autograd.profiler_legacy")
    for module_name in modules:
        module = sys.modules.get(module_name)
        for name in names:
            fn = getattr(module, name, None)
            if fn is not None and not hasattr(fn, "__wrapped__"):
                setattr(module, name, _wrap(fn))


def _start(torch, shapes):
    if _state["thread"] is not None or _state["gave_way"]:
        return
    autograd = torch.autograd
    if autograd._profiler_enabled():
        _say(
            "a PyTorch profiler is already running on this thread: cuprof records its "
            "operators only if it is emit_nvtx"
        )
        return
    from torch.autograd import ProfilerConfig, ProfilerState
    from torch._C._profiler import _ExperimentalConfig

    from torch._C._profiler import RecordScope

    config = ProfilerConfig(
        ProfilerState.NVTX, shapes, False, False, False, False, _ExperimentalConfig()
    )
    # record_function scopes are left out: the observer's push and pop for one interleave
    # with those of the operator that opens it. They come as plain NVTX ranges instead.
    scopes = {s for s in RecordScope.__members__.values() if s != RecordScope.USER_SCOPE}
    _originals(torch)[0](config, set(), scopes)
    _state["thread"] = threading.get_ident()


def _cuprof_set(level):
    if _state["broken"]:
        return
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "autograd"):
        return
    try:
        if not _state["patched"]:
            _patch(torch)
        if level:
            _start(torch, level == 2)
        else:
            _stop_ours()
    except Exception as e:
        _state["broken"] = True
        version = getattr(torch, "__version__", "?")
        _say(
            "PyTorch operators are not recorded (torch %s: %s: %s); the rest of the trace is "
            "unchanged" % (version, type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        )
