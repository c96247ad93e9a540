# The fallback operator recorder, for a process where the native observer cannot be built or
# loaded: PyTorch's NVTX observer (the profiler state behind emit_nvtx), turned on on the
# calling thread. Every operator then becomes an NVTX range, and cuprof, the program's NVTX
# injection library, turns those ranges into Kineto's cpu_op events (no dtypes, strides or
# scalars; tensor lists flattened: what the observer's range names carry).


def _nvtx_originals(torch):
    autograd = torch.autograd
    enable = getattr(autograd._enable_profiler, "__wrapped__", autograd._enable_profiler)
    disable = getattr(autograd._disable_profiler, "__wrapped__", autograd._disable_profiler)
    return enable, disable


def _nvtx_patch_record_function(torch):
    # record_function scopes (the program's labels, DataLoader's and the optimizers' own) as
    # plain NVTX ranges while operators are recorded: Kineto's user_annotation events. The
    # observer itself leaves them out: its push and pop for one interleave with those of the
    # operator that opens it.
    rf = getattr(getattr(torch.autograd, "profiler", None), "record_function", None)
    nvtx = getattr(torch._C, "_nvtx", None)
    if rf is None or nvtx is None or hasattr(rf.__enter__, "__wrapped__"):
        return
    push, pop = nvtx.rangePushA, nvtx.rangePop
    enter, exit_ = rf.__enter__, rf.__exit__

    def __enter__(self):
        r = enter(self)
        if _state["path"] == "nvtx" and _state["thread"] is not None:
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


def _nvtx_start(torch, shapes):
    from torch.autograd import ProfilerConfig, ProfilerState
    from torch._C._profiler import RecordScope, _ExperimentalConfig

    _nvtx_patch_record_function(torch)
    config = ProfilerConfig(
        ProfilerState.NVTX, shapes, False, False, False, False, _ExperimentalConfig()
    )
    scopes = {s for s in RecordScope.__members__.values() if s != RecordScope.USER_SCOPE}
    _nvtx_originals(torch)[0](config, set(), scopes)


def _nvtx_stop(torch):
    _nvtx_originals(torch)[1]()
