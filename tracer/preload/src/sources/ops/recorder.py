# cuprof's PyTorch operator recorder. libcuprof.so runs this inside the traced program (see
# python.rs), after build.py and nvtx_fallback.py, in a namespace of its own, and calls
# _cuprof_set(level) when its window starts or stops collecting; `level` is a set of bits:
# 1 operators, 2 input shapes (with dtypes, strides and scalars), 4 every thread, 8 FLOPs,
# 16 PyTorch's allocations (the MEM activity: torch.profiler's profile_memory), 32 nn.Module
# calls (--with-modules).
# It leaves in _cuprof_path which recorder runs: 0 none, 1 native, 2 NVTX fallback; and in
# _cuprof_distributed whether torch.distributed is initialised (1) or not (0), for the
# trace headers' distributedInfo.
#
# The native observer (observer.cpp, built for this torch by build.py) is tried first; where
# it cannot be built or loaded, PyTorch's NVTX observer records instead, and one line says why.
# It never imports torch itself: it acts only once the program has. It never raises into the
# program.
#
# torch.compile's reasons (trace-format.md, "torch.compile's graph breaks and recompilations"):
# while it records operators, each graph break dynamo logs (its `graph_breaks` artifact loggers,
# listened to without printing: enabled for DEBUG with no propagation unless the program enabled
# them itself) and each recompilation's failed guard (read at the start of the compilation, from
# a `torch._dynamo.callback_handler` start callback) become a record_function label, so they
# reach the trace where torch's own compile markers do. Nothing of it runs per operator.
import logging
import sys
import threading

_state = {
    "thread": None,  # the thread that turned recording on
    "path": None,  # "native" or "nvtx", once chosen
    "lib": None,
    "handle": 0,
    "all_threads": False,
    "gave_way": False,
    "patched": False,
    "said": set(),
    "broken": False,
    "level": 0,
    "was_enabled": None,
}
_PATHS = {None: 0, "native": 1, "nvtx": 2}
_cuprof_path = 0
_cuprof_distributed = 0


def _say(msg):
    if msg in _state["said"]:
        return
    _state["said"].add(msg)
    try:
        sys.stderr.write("cuprof: " + msg + "\n")
    except Exception:
        pass


# The hooks' version libcuprof.so passes (ops/mod.rs `HOOKS`, observer.cpp `kHooksVersion`).
_HOOKS_VERSION = 8


def _native_load(torch):
    import ctypes

    path = _observer(torch, _cuprof_observer_source, say=_say)
    lib = _open_observer(path)
    if lib is None:
        # The libraries loaded before it took glibc's spare static TLS, which its initial-exec
        # thread-local needs (observer.cpp, t_bufs): the global-dynamic build loads anyway.
        path = _observer(torch, _dynamic_tls(_cuprof_observer_source), say=_say)
        lib = _open_observer(path)
        if lib is None:
            raise ObserverUnavailable("%s does not load: no static TLS is left" % path)
    lib.cuprof_observer_start.restype = ctypes.c_uint64
    lib.cuprof_observer_start.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.cuprof_observer_stop.argtypes = [ctypes.c_uint64]
    return lib


def _open_observer(path):
    """The observer library at `path`, loaded and of this version; None where dlopen found no
    static TLS left for it."""
    import ctypes

    try:
        lib = ctypes.CDLL(path)
        abi = lib.cuprof_observer_abi()
    except (OSError, AttributeError) as e:
        cause = str(e).splitlines()[0] if str(e) else type(e).__name__
        if "static TLS" in cause:
            return None
        raise ObserverUnavailable(
            "%s does not load into this torch (%s): delete it and run again to rebuild"
            % (path, cause)
        )
    if abi != _HOOKS_VERSION:
        raise ObserverUnavailable(
            "%s speaks version %d, not %d: delete it to rebuild" % (path, abi, _HOOKS_VERSION)
        )
    return lib


def _choose(torch):
    try:
        _state["lib"] = _native_load(torch)
        _state["path"] = "native"
    except ObserverUnavailable as e:
        _fallback(str(e))


def _fallback(cause):
    _state["path"] = "nvtx"
    lost = "no dtypes, strides or scalar inputs"
    if _state["level"] & 16:
        lost += ", and no PyTorch allocations for MEM"
    _say(
        "PyTorch operators are recorded through PyTorch's NVTX observer (slower; %s), not "
        "cuprof's native observer: %s" % (lost, cause)
    )


def _set_profiler_flag(torch, on):
    # What torch gates on a profiler being on (torch.compile's compiled-region labels), as
    # torch.profiler and emit_nvtx set it.
    profiler = getattr(torch.autograd, "profiler", None)
    if profiler is None or not hasattr(profiler, "_is_profiler_enabled"):
        return
    if on:
        _state["was_enabled"] = profiler._is_profiler_enabled
        value = True
    else:
        value = bool(_state["was_enabled"])
    setter = getattr(profiler, "_set_is_profiler_enabled", None)
    if setter is not None:
        setter(value)
    else:
        profiler._is_profiler_enabled = value


def _stop_ours(torch):
    if _state["thread"] is None:
        return False
    # A thread-local observer can only be removed by the thread that added it.
    if not _state["all_threads"] and _state["thread"] != threading.get_ident():
        return False
    _state["thread"] = None
    _modules_off()
    if _state["path"] == "native":
        handle, _state["handle"] = _state["handle"], 0
        _state["lib"].cuprof_observer_stop(handle)
    else:
        _nvtx_stop(torch)
    _set_profiler_flag(torch, False)
    return True


def _start(torch, level):
    if _state["thread"] is not None or _state["gave_way"]:
        return
    if torch.autograd._profiler_enabled():
        _state["gave_way"] = True
        _say(
            "the program's own PyTorch profiler is running on this thread: cuprof records "
            "operators once it stops"
        )
        return
    if _state["path"] is None:
        _choose(torch)
    shapes = bool(level & 2)
    if _state["path"] == "native":
        # The observer's flags (shapes 1, every thread 2, FLOPs 4, allocations 8) are the
        # level's option bits, below its "operators" bit.
        handle = _state["lib"].cuprof_observer_start(_cuprof_hooks, level >> 1)
        if handle:
            _state["handle"] = handle
            _state["all_threads"] = bool(level & 4)
        else:
            _fallback("its callbacks could not be registered with this torch")
    if _state["path"] == "nvtx":
        if level & 4:
            _say("--all-threads needs the native observer: operators of this thread only")
        _nvtx_start(torch, shapes)
    _state["thread"] = threading.get_ident()
    _set_profiler_flag(torch, True)
    if level & 32:
        _modules_on(torch)


# --with-modules: each nn.Module forward call, timed by global forward hooks and handed to
# libcuprof.so through the native observer, which writes it as torch.profiler's `with_stack`
# writes module calls (`nn.Module: Linear_0`, numbered per class in the order first called).
# A module's path is its root's class, then the name named_modules() gives it under that root
# (`GPT2LMHeadModel.transformer.h.3.attn`), read once per root, when the root is first called;
# a torch.compile'd model's wrapper (OptimizedModule) takes the path of the model it wraps.
# The hooks do nothing while torch.compile traces (no graph break; a compiled region's modules
# run inside it as one call), on threads whose operators are not recorded, and never raise.
_module_calls = {"handles": None, "paths": {}, "names": {}, "instances": {}}


def _modules_on(torch):
    import ctypes
    import itertools
    import time
    import weakref

    if _module_calls["handles"] is not None:
        return
    if _state["path"] != "native":
        _say("--with-modules needs cuprof's native observer: nn.Module calls are not recorded")
        return
    record = _state["lib"].cuprof_observer_module
    record.restype = None
    record.argtypes = [ctypes.c_uint64] * 4 + [ctypes.c_char_p, ctypes.c_size_t] * 2
    compiler = getattr(torch, "compiler", None)
    is_compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
    only = None if _state["all_threads"] else _state["thread"]
    get_ident, now, ref, ids = threading.get_ident, time.time_ns, weakref.ref, itertools.count(1)
    local = threading.local()
    paths, names, instances = _module_calls["paths"], _module_calls["names"], _module_calls["instances"]

    def alive(kept, key, module):
        # Whether `kept` holds `module` itself under its id (a dead module's id is reused).
        entry = kept.get(key)
        return entry is not None and entry[0]() is module

    def keep(kept, key, entry):
        # Both maps are keyed by id and hold weak references: dead entries go past 65,536.
        if len(kept) > 1 << 16:
            for k in [k for k, v in kept.items() if v[0]() is None]:
                del kept[k]
        kept[key] = entry

    def learn(module, stack):
        # The module's event name and path, the first time it is called.
        cls = type(module).__name__
        if not alive(paths, id(module), module):
            if stack:
                path = stack[-1][1][2].decode("utf-8", "replace") + "." + cls
            else:
                # torch.compile(model)'s wrapper goes by the model's own class and its modules
                # by their names in the model, as in an eager run of it (compare's regions).
                inner = getattr(module, "_orig_mod", None)
                root = inner if isinstance(inner, torch.nn.Module) else module
                path = type(root).__name__
                for qualified, sub in root.named_modules():
                    if not alive(paths, id(sub), sub) and (qualified or sub is not module):
                        named = path + "." + qualified if qualified else path
                        keep(paths, id(sub), (ref(sub), named))
            keep(paths, id(module), (ref(module), path))
        known = paths[id(module)]
        n = instances.get(cls, 0)
        instances[cls] = n + 1
        info = (known[0], ("nn.Module: %s_%d" % (cls, n)).encode(), known[1].encode())
        keep(names, id(module), info)
        return info

    def enter(module, args):
        try:
            if is_compiling() or (only is not None and get_ident() != only):
                return None
            stack = getattr(local, "stack", None)
            if stack is None:
                stack = local.stack = []
            info = names.get(id(module))
            if info is None or info[0]() is not module:
                info = learn(module, stack)
            stack.append((module, info, next(ids), now()))
        except Exception:
            pass
        return None

    def leave(module, args, output):
        try:
            if is_compiling():
                return None
            end = now()
            stack = getattr(local, "stack", None)
            if not stack:
                return None
            at = len(stack) - 1
            while at >= 0 and stack[at][0] is not module:
                at -= 1
            if at < 0:
                return None
            _, info, call, start = stack[at]
            del stack[at:]
            parent = stack[at - 1][2] if at else 0
            record(start, end, call, parent, info[1], len(info[1]), info[2], len(info[2]))
        except Exception:
            pass
        return None

    hooks = torch.nn.modules.module
    pre = hooks.register_module_forward_pre_hook(enter)
    try:
        post = hooks.register_module_forward_hook(leave, always_call=True)
    except TypeError:
        post = hooks.register_module_forward_hook(leave)
    _module_calls["handles"] = (pre, post)


def _modules_off():
    handles, _module_calls["handles"] = _module_calls["handles"], None
    for h in handles or ():
        try:
            h.remove()
        except Exception:
            pass


def _give_way():
    # The program starts a profiler of its own (torch.profiler, emit_nvtx): a thread holds one
    # profiler state, and the program's profiler gets the operators. Ours comes back when the
    # program's stops.
    try:
        torch = sys.modules["torch"]
        if _stop_ours(torch) or (_state["level"] & 1 and not _state["gave_way"]):
            _say(
                "the program started its own PyTorch profiler: cuprof stops recording "
                "operators until it stops"
            )
        _state["gave_way"] = True
    except Exception:
        pass


def _take_back():
    try:
        if not _state["gave_way"]:
            return
        _state["gave_way"] = False
        torch = sys.modules["torch"]
        if _state["level"] & 1 and not torch.autograd._profiler_enabled():
            _start(torch, _state["level"])
            _say("the program's own PyTorch profiler stopped: cuprof records operators again")
    except Exception:
        pass


def _wrap(fn, before, after):
    def wrapper(*args, **kwargs):
        if before is not None:
            before()
        r = fn(*args, **kwargs)
        if after is not None:
            after()
        return r

    wrapper.__wrapped__ = fn
    wrapper.__name__ = getattr(fn, "__name__", "profiler")
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    return wrapper


def _at_exit():
    # Nothing stays registered at exit (PyTorch warns of a leaked profiler callback otherwise).
    try:
        torch = sys.modules.get("torch")
        if torch is not None:
            _stop_ours(torch)
    except Exception:
        pass


def _patch(torch):
    # Wherever torch bound the profiler's enable and disable functions by name, so that a
    # profiler the program starts finds this thread free, and its end gives operators back.
    import atexit

    _state["patched"] = True
    atexit.register(_at_exit)
    hooks = {
        "_enable_profiler": (_give_way, None),
        "_enable_profiler_legacy": (_give_way, None),
        "_disable_profiler": (None, _take_back),
        "_disable_profiler_legacy": (None, _take_back),
    }
    modules = ("torch.autograd", "torch.autograd.profiler", "torch.autograd.profiler_legacy")
    for module_name in modules:
        module = sys.modules.get(module_name)
        for name, (before, after) in hooks.items():
            fn = getattr(module, name, None)
            if fn is not None and not hasattr(fn, "__wrapped__"):
                setattr(module, name, _wrap(fn, before, after))


# The loggers of dynamo's `graph_breaks` artifact (torch._logging.getArtifactLogger's names).
_GRAPH_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.convert_frame.__graph_breaks",
)
# Label prefixes (torch_compile.rs in the analysis reads them).
_BREAK_LABEL = "torch.compile graph break: "
_RECOMPILE_LABEL = "torch.compile recompile: "
_compile_watch = {"handler": None, "callback": False, "finder": None}


def _compile_label(torch, text):
    # Only into cuprof's recording: never into a profiler the program runs itself.
    if _state["thread"] is None or _state["gave_way"]:
        return
    with torch.autograd.profiler.record_function(text):
        pass


def _compile_id(torch):
    guards = sys.modules.get("torch._guards")
    cid = guards.CompileContext.current_compile_id() if guards is not None else None
    return str(cid) if cid is not None else "?"


def _break_site(msg):
    """(file, line, reason) of one of dynamo's graph-break log lines; None for another line."""
    head, sep, rest = msg.partition("\nGraph Break Reason: ")
    if sep and " in user code at " in head:
        site = head.rsplit(" in user code at ", 1)[1]
        path, _, line = site.rpartition(":")
        for end in ("\n\nStack variable source attribution:", "\n\nUser code traceback:"):
            rest = rest.split(end, 1)[0]
        return path, line, rest.strip()
    return None


class _BreakHandler(logging.Handler):
    def emit(self, record):
        try:
            torch = sys.modules.get("torch")
            if torch is None or _state["thread"] is None:
                return
            msg = record.getMessage()
            site = _break_site(msg)
            if site is None and msg.startswith("Graph break: torch.compile cannot properly resume"):
                # A frame dynamo skips (falls back to eager): the reason is the exception, the
                # site the last user frame of the stack it prints.
                import re

                frames = re.findall(r'File "([^"]+)", line (\d+)', msg)
                exc = record.exc_info[1] if record.exc_info else None
                reason = str(exc).strip() if exc is not None else msg.splitlines()[1]
                if frames:
                    site = (frames[-1][0], frames[-1][1], "frame skipped: " + reason)
            if site is None:
                return
            path, line, reason = site
            _compile_label(
                torch,
                "%scompile_id=%s, at=%s:%s, reason=%s"
                % (_BREAK_LABEL, _compile_id(torch), path, line, reason),
            )
        except Exception:
            pass


def _on_compile_start(args):
    try:
        torch = sys.modules.get("torch")
        utils = sys.modules.get("torch._dynamo.utils")
        if torch is None or utils is None or _state["thread"] is None:
            return
        # Set by convert_frame before the compilation starts (CompilationMetrics'
        # recompile_reason): the first guard that failed, "F/N: guard".
        metrics = getattr(utils.get_metrics_context(), "_metrics", None) or {}
        reason = metrics.get("recompile_reason")
        if reason:
            _compile_label(
                torch, "%scompile_id=%s, reason=%s" % (_RECOMPILE_LABEL, args.compile_id, reason)
            )
    except Exception:
        pass


def _compile_callback():
    """Registers the start-of-compilation callback once dynamo is imported; True once done."""
    if _compile_watch["callback"]:
        return True
    callback = sys.modules.get("torch._dynamo.callback")
    handler = getattr(callback, "callback_handler", None)
    if handler is None:
        return False
    handler.register_start_callback(_on_compile_start)
    _compile_watch["callback"] = True
    return True


class _DynamoImport:
    # On sys.meta_path until dynamo is imported (torch imports it at the program's first
    # torch.compile): it finds nothing, it only registers the callback then.
    def find_spec(self, name, path=None, target=None):
        try:
            if name.startswith("torch._dynamo") and _compile_callback():
                sys.meta_path.remove(self)
                _compile_watch["finder"] = None
        except Exception:
            pass
        return None


def _watch_compile():
    if _compile_watch["handler"] is None:
        _compile_watch["handler"] = _BreakHandler(logging.DEBUG)
    for name in _GRAPH_BREAK_LOGGERS:
        log = logging.getLogger(name)
        if not log.isEnabledFor(logging.DEBUG):
            # Not enabled by the program (or reset by its torch._logging.set_logs since):
            # enabled for this handler only, printing nothing.
            log.propagate = False
            log.setLevel(logging.DEBUG)
        if _compile_watch["handler"] not in log.handlers:
            log.addHandler(_compile_watch["handler"])
    if not _compile_callback() and _compile_watch["finder"] is None:
        _compile_watch["finder"] = _DynamoImport()
        sys.meta_path.insert(0, _compile_watch["finder"])


def _distributed_initialised():
    dist = sys.modules.get("torch.distributed")
    try:
        return 1 if dist is not None and dist.is_available() and dist.is_initialized() else 0
    except Exception:
        return 0


def _cuprof_set(level):
    global _cuprof_path, _cuprof_distributed
    _state["level"] = level
    _cuprof_distributed = _distributed_initialised()
    if _state["broken"]:
        return
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "autograd"):
        return
    try:
        if not _state["patched"]:
            _patch(torch)
        if level & 1:
            try:
                _watch_compile()
            except Exception:
                pass
        if level & 1:
            _start(torch, level)
        else:
            _stop_ours(torch)
    except Exception as e:
        _state["broken"] = True
        version = getattr(torch, "__version__", "?")
        _say(
            "PyTorch operators are not recorded (torch %s: %s: %s); the rest of the trace is "
            "unchanged" % (version, type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        )
    _cuprof_path = _PATHS.get(_state["path"], 0)
