"""`cuprof.profile`, shaped like `torch.profiler.profile` (the same arguments and methods), and
`cuprof.schedule`, shaped like `torch.profiler.schedule`: a block's window, recorded by the
library from `start()`/`__enter__` to `stop()`/`__exit__`, its files complete when it ends."""

import gzip
import os
import shutil
import sys
import tempfile

from . import _figures, _native

# How long the end of a block waits for the writer to complete its files.
_WRITE_TIMEOUT_MS = 30_000

# The variables by which the command line (`cuprof run --wait ...`) chooses the window: when
# the program started with one, that window is recorded, not the program's.
_SCHEDULE_VARS = {
    "wait": "CUPROF_WAIT",
    "warmup": "CUPROF_WARMUP",
    "active": "CUPROF_ACTIVE",
    "repeat": "CUPROF_REPEAT",
    "skip_first": "CUPROF_SKIP_FIRST",
}
_OTHER_WINDOW_VARS = (
    "CUPROF_CAPTURE_RANGE",
    "CUPROF_DELAY",
    "CUPROF_DURATION",
    "CUPROF_STEP_NVTX",
    "CUPROF_ON_DEMAND",
)


def _count(name, value):
    """A schedule count: an int (not a bool), else TypeError naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return value


class Schedule:
    """`torch.profiler.schedule(wait=, warmup=, active=, repeat=0, skip_first=0,
    skip_first_wait=0)`: the same arguments, checks and actions (calling it with a step number
    gives torch's `ProfilerAction` when torch is imported, else the action's name)."""

    def __init__(self, *, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
        self.wait = _count("wait", wait)
        self.warmup = _count("warmup", warmup)
        self.active = _count("active", active)
        self.repeat = _count("repeat", repeat)
        self.skip_first = _count("skip_first", skip_first)
        self.skip_first_wait = _count("skip_first_wait", skip_first_wait)
        if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
            # torch.profiler.schedule's own check and words.
            raise AssertionError(
                f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} (need >= 0), "
                f"active={active} (need > 0), repeat={repeat} (need >= 0), skip_first={skip_first} (need >= 0)."
            )

    def action(self, step):
        """The action's name at `step`: NONE, WARMUP, RECORD or RECORD_AND_SAVE (torch's)."""
        if step < self.skip_first:
            return "NONE"
        step -= self.skip_first
        if self.skip_first_wait != 0:
            step += self.wait
        num_steps = self.wait + self.warmup + self.active
        if self.repeat > 0 and step / num_steps >= self.repeat:
            return "NONE"
        mod_step = step % num_steps
        if mod_step < self.wait:
            return "NONE"
        if mod_step < self.wait + self.warmup:
            return "WARMUP"
        return "RECORD" if mod_step < num_steps - 1 else "RECORD_AND_SAVE"

    def __call__(self, step):
        name = self.action(step)
        torch = sys.modules.get("torch")
        if torch is not None:
            return getattr(torch.profiler.ProfilerAction, name)
        return name

    def spec(self):
        return (
            f"wait={self.wait} warmup={self.warmup} active={self.active} repeat={self.repeat} "
            f"skip_first={self.skip_first} skip_first_wait={int(self.skip_first_wait != 0)}"
        )

    def __repr__(self):
        return (
            f"cuprof.schedule(wait={self.wait}, warmup={self.warmup}, active={self.active}, "
            f"repeat={self.repeat}, skip_first={self.skip_first}, skip_first_wait={self.skip_first_wait})"
        )


def _from_torch_schedule(fn):
    """The counts of a `torch.profiler.schedule(...)` (a closure over them), else None."""
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None)
    if code is None or cells is None or code.co_name != "schedule_fn":
        return None
    free = dict(zip(code.co_freevars, (c.cell_contents for c in cells)))
    if not {"wait", "warmup", "active"} <= free.keys():
        return None
    return Schedule(
        wait=free["wait"],
        warmup=free["warmup"],
        active=free["active"],
        repeat=free.get("repeat", 0),
        skip_first=free.get("skip_first", 0),
        skip_first_wait=free.get("skip_first_wait", 0),
    )


_ACTIVITY_NAMES = {"CPU": "CPU", "CUDA": "GPU", "GPU": "GPU", "MEM": "MEM"}


def _activities(activities):
    """`activities` as CUPROF_ACTIVITIES names: torch's ProfilerActivity values, or names
    ("CPU", "CUDA"/"GPU", "MEM"; one string may list several, comma-separated)."""
    if isinstance(activities, str):
        items = [a for a in activities.split(",") if a.strip()]
    else:
        try:
            items = list(activities)
        except TypeError:
            raise TypeError(
                f"activities must be a list of torch.profiler.ProfilerActivity values or names (CPU, CUDA, MEM), got {activities!r}"
            ) from None
    names = []
    for a in items:
        raw = getattr(a, "name", a)
        if not isinstance(raw, str):
            raise TypeError(
                f"activities: {a!r} is not a torch.profiler.ProfilerActivity nor a name (CPU, CUDA, MEM)"
            )
        key = raw.strip().rsplit(".", 1)[-1].upper()
        if key not in _ACTIVITY_NAMES:
            _native.say(
                f"activities: {raw} is not recorded by cuprof (it records CPU, CUDA and MEM): ignored",
                key=f"activity-{key}",
            )
            continue
        if _ACTIVITY_NAMES[key] not in names:
            names.append(_ACTIVITY_NAMES[key])
    if not names:
        raise AssertionError("No valid profiler activities found")  # torch's words
    return names


def _switch(name, value):
    if value is None:
        return None
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


_active = None  # the profile() whose block is running


class profile:
    """A profiling block, as `torch.profiler.profile`: `with cuprof.profile(...) as p:` ...
    `p.step()`. The library records from the block's start to its end (or as `schedule`
    says); when the block ends, its files are complete and `on_trace_ready(p)` has run.

    torch.profiler's arguments: `activities`, `schedule` (`torch.profiler.schedule(...)` or
    `cuprof.schedule(...)`), `on_trace_ready`, `record_shapes`, `profile_memory`,
    `with_stack`, `with_flops`, `with_modules`; cuprof's own: `wait`, `warmup`, `active`,
    `repeat`, `skip_first` (a schedule with cuprof's `repeat=1` default), `dir` and `name`
    (where and under which name the files are written). See docs/python.md."""

    def __init__(
        self,
        *,
        activities=None,
        schedule=None,  # noqa: A002 (torch.profiler's word)
        on_trace_ready=None,
        record_shapes=None,
        profile_memory=None,
        with_stack=None,
        with_flops=None,
        with_modules=None,
        experimental_config=None,
        execution_trace_observer=None,
        acc_events=None,
        use_cuda=None,
        wait=None,
        warmup=None,
        active=None,
        repeat=None,
        skip_first=None,
        dir=None,  # noqa: A002 (torch.profiler's and cuprof run's word)
        name=None,
    ):
        counts = {"wait": wait, "warmup": warmup, "active": active, "repeat": repeat, "skip_first": skip_first}
        given = {k: v for k, v in counts.items() if v is not None}
        if schedule is not None and given:
            raise TypeError(
                f"give schedule= or {'/'.join(k + '=' for k in given)}, not both"
            )
        if given:
            self.schedule = Schedule(
                wait=given.get("wait", 0),
                warmup=given.get("warmup", 0),
                active=given.get("active", 1),
                repeat=given.get("repeat", 1),  # cuprof's default: one cycle
                skip_first=given.get("skip_first", 0),
            )
        elif schedule is None:
            self.schedule = None
        elif isinstance(schedule, Schedule):
            self.schedule = schedule
        elif callable(schedule):
            self.schedule = _from_torch_schedule(schedule)
            if self.schedule is None:
                _native.say(
                    "schedule: cuprof follows torch.profiler.schedule(...) and cuprof.schedule(...), not another function: the whole block is recorded",
                    key="custom-schedule",
                )
        else:
            raise TypeError(f"schedule must be torch.profiler.schedule(...) or cuprof.schedule(...), got {schedule!r}")
        if on_trace_ready is not None and not callable(on_trace_ready):
            raise TypeError(f"on_trace_ready must be callable, got {on_trace_ready!r}")
        self.on_trace_ready = on_trace_ready
        self.activities = None if activities is None else _activities(activities)
        self.record_shapes = _switch("record_shapes", record_shapes)
        self.profile_memory = _switch("profile_memory", profile_memory)
        self.with_stack = _switch("with_stack", with_stack)
        self.with_flops = _switch("with_flops", with_flops)
        self.with_modules = _switch("with_modules", with_modules)
        for arg, value in (
            ("experimental_config", experimental_config),
            ("execution_trace_observer", execution_trace_observer),
            ("acc_events", acc_events),
        ):
            if value:
                _native.say(f"{arg} is torch.profiler's own: cuprof ignores it", key=f"ignored-{arg}")
        if use_cuda is not None:
            _native.say("use_cuda is deprecated in torch.profiler: cuprof records CUDA unless activities leave it out", key="use_cuda")
        self.dir = None if dir is None else os.fspath(dir)
        self.name = None if name is None else str(name)
        self.step_num = 0
        self._live = False
        self._nested = False
        self._lib = None  # the library, for steps
        self._windowed = False  # the library records this block's window
        self._seen = []  # the process's trace files, as last looked at
        self._files = []  # this profile's files, in order
        self._last = []  # the files of its last cycle

    # --- what the library is told ---------------------------------------------------------

    def _window(self):
        """The window's spec for cuprof_begin_window, with the command line's window winning."""
        env = _native.ENV_AT_START
        # With CUPROF_CAPTURE_RANGE=cuprof (cuprof run --capture-range cuprof, or
        # --as-torch-profiler) the program's blocks are its ranges.
        chosen = [v for v in _OTHER_WINDOW_VARS if env.get(v)]
        if chosen and chosen != ["CUPROF_CAPTURE_RANGE"] or env.get("CUPROF_CAPTURE_RANGE", "cuprof") != "cuprof":
            return None
        sched = self.schedule
        from_env = {k: env[v] for k, v in _SCHEDULE_VARS.items() if env.get(v)}
        if from_env:
            mine = {} if sched is None else {k: getattr(sched, k) for k in _SCHEDULE_VARS}
            for k, v in from_env.items():
                if k in mine and str(mine[k]) != v:
                    _native.say(
                        f"{_SCHEDULE_VARS[k]}={v} (from the environment, e.g. a cuprof run option) is used, not {mine[k]}"
                    )
            try:
                counts = {k: int(v) for k, v in from_env.items()}
                base = {"wait": 0, "warmup": 0, "active": 1, "repeat": 1, "skip_first": 0}
                if sched is not None:
                    base = {k: getattr(sched, k) for k in _SCHEDULE_VARS}
                base.update(counts)
                sched = Schedule(**base)
            except (ValueError, TypeError, AssertionError):
                pass  # the library says what is wrong with the variable and falls back
        parts = [] if sched is None else [sched.spec()]
        options = []
        for key, value in (("cpu", self._wants("CPU")), ("gpu", self._wants("GPU"))):
            if value is not None:
                options.append(f"{key}={int(value)}")
        for key, var, value in (
            ("stack", "CUPROF_WITH_STACK", self.with_stack),
            ("shapes", "CUPROF_RECORD_SHAPES", self.record_shapes or (True if self.with_flops else None)),
            ("flops", None, self.with_flops),
            ("modules", "CUPROF_WITH_MODULES", self._modules()),
        ):
            if value is not None and not (var and env.get(var)):
                options.append(f"{key}={int(value)}")
        if options:
            parts.append("options=" + ",".join(options))
        return " ".join(parts)

    def _modules(self):
        """Module calls: `with_modules`, else as `with_stack` (torch 2.x's `with_stack` writes
        each nn.Module call; its `with_modules` no longer does anything in eager mode)."""
        if self.with_modules is not None:
            return self.with_modules
        return True if self.with_stack else None

    def _wants(self, activity):
        if self.activities is None or _native.ENV_AT_START.get("CUPROF_ACTIVITIES"):
            return None
        return activity in self.activities

    def _env(self):
        """The variables that set what tracing starts with (read once, when CUDA initialises)."""
        acts = self.activities
        if self.profile_memory and (acts is None or "MEM" not in acts):
            acts = (acts or ["CPU", "GPU"]) + ["MEM"]
        env = {
            "CUPROF_DIR": self.dir,
            "CUPROF_NAME": self.name,
            "CUPROF_ACTIVITIES": None if acts is None else ",".join(acts),
            "CUPROF_RECORD_SHAPES": None if self.record_shapes is None else str(int(self.record_shapes)),
            "CUPROF_WITH_STACK": None if self.with_stack is None else str(int(self.with_stack)),
            "CUPROF_WITH_MODULES": None if self._modules() is None else str(int(self._modules())),
        }
        return {k: v for k, v in env.items() if v is not None}

    # --- torch.profiler.profile's methods -------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        """Begins the block (torch.profiler's `start()`)."""
        global _active
        if _active is not None:
            self._nested = True
            _native.say(
                "cuprof.profile() entered while another is active (nested, or entered twice): this one does nothing, the outer one goes on",
                key="nested",
            )
            return
        _active = self
        self._live = True
        self.step_num = 0
        self._windowed = False
        self._lib = self._attach()
        self._seen = _native.trace_files()
        self._files = []
        self._last = []
        lib = self._lib
        if lib is None:
            return
        if not hasattr(lib, "cuprof_begin_window"):
            _native.say(
                "the libcuprof.so in this process predates cuprof.profile()'s window (an older build?): the block only marks steps; run the program with this package's `cuprof run`",
                key="old",
            )
            return
        spec = self._window()
        if spec is None:
            _native.say(
                "the window is the command line's (cuprof run --capture-range/--delay/--duration/--step-nvtx/--on-demand): profile() only marks steps",
                key="window-from-env",
            )
            return
        running = lib.cuprof_state() in (_native.STARTING, _native.RUNNING)
        rc = lib.cuprof_begin_window(spec.encode())
        self._windowed = rc in (1, 2, 3)
        if rc == 3:
            # The earlier window's recording ended here: its file is not this block's.
            lib.cuprof_wait_files(_WRITE_TIMEOUT_MS)
            now = _native.trace_files()
            earlier = [f for f in now if f not in self._seen]
            self._seen = now
            _native.say(
                "this profile() block ended the recording cuprof run started at CUDA initialisation"
                + (f" (written as {', '.join(earlier)})" if earlier else "")
                + ": run with `cuprof run --capture-range cuprof` (or --as-torch-profiler) to record only the program's blocks",
                key="ended-whole-run",
            )
        if rc == -2:
            _native.say(
                "this process is traced on demand (cuprof run --on-demand): `cuprof capture` chooses what is recorded, not profile()",
                key="on-demand",
            )
        elif rc == 0:
            _native.say(
                "cuprof does not trace this process (CUPROF_ENABLED=0, CUPROF_RANKS, or its tracing has ended): the block is not recorded",
                key="not-traced-process",
            )
        elif rc in (1, 3) and running:
            self._say_late_settings()

    def _say_late_settings(self):
        """Tracing ran before this block: what is set when it starts cannot change now."""
        env = self._env()
        late = [f"{k}={env[k]}" for k in ("CUPROF_DIR", "CUPROF_NAME") if k in env and os.environ.get(k) != env[k]]
        if "MEM" in env.get("CUPROF_ACTIVITIES", "") and "MEM" not in os.environ.get("CUPROF_ACTIVITIES", ""):
            late.append("profile_memory=True" if self.profile_memory else "activities MEM")
        if late:
            _native.say(
                "tracing started before this block, so "
                + ", ".join(late)
                + " cannot apply to it (the files' place and MEM are set when tracing starts: give them to cuprof run, or to the first profile()); export_chrome_trace(path) or on_trace_ready place this block's files",
                key="late:" + ",".join(late),
            )

    def _attach(self):
        """The library, armed or running, with this block's settings; else None (said why)."""
        lib = _native.in_process()
        if lib is None:
            if _native.cuda_initialised():
                _native.say(
                    "CUDA was initialised before cuprof could start in this process, so it is not traced: run it as `cuprof run -- python ...`, or enter cuprof.profile() before the first CUDA call",
                    key="late",
                )
                return None
            return _native.arm(self._env())
        if lib.cuprof_state() == _native.ARMED:
            _native.set_env(self._env())
            lib.cuprof_reload_env()
        elif lib.cuprof_state() not in (_native.STARTING, _native.RUNNING):
            return lib if hasattr(lib, "cuprof_begin_window") else None
        return lib

    def stop(self):
        """Ends the block (torch.profiler's `stop()`): recording stops, and the block's files
        are complete (on disk, listed by `trace_files()`) when this returns."""
        global _active
        if self._nested:
            self._nested = False
            return
        if not self._live:
            return
        self._live = False
        _active = None
        lib = self._lib
        if lib is None or not self._windowed:
            return
        _synchronize()
        rc = lib.cuprof_end_window(_WRITE_TIMEOUT_MS)
        self._collect(call=True)
        if rc == -1:
            _native.say(
                "nothing recorded in this profile() block: CUDA was never initialised in this process (cuprof starts at the first CUDA call; a CPU-only program is traced by torch.profiler)",
                key="no-cuda",
            )
        elif rc == -2:
            _native.say(
                f"the block's trace was not complete after {_WRITE_TIMEOUT_MS // 1000} s (a slow disk?): it is finished at exit",
                key="slow-writer",
            )
        elif rc == 0 and not self._files and self.schedule is not None:
            _native.say(
                f"nothing recorded in this profile() block: its schedule ({self.schedule.spec()}) reached no recorded step in {self.step_num} step(s)",
                key="no-record-step",
            )

    def step(self, tokens=None, **figures):
        """Ends the running step and begins the next (torch.profiler's `prof.step()`); `tokens`
        and named numbers (`kv_len=1024`) are attached to the step it ends (`cuprof.step`)."""
        tokens, pairs = _figures.check(tokens, figures)
        if self._nested:
            _native.say(
                "profile.step() of a profile() nested in another: ignored (the outer one's steps count)",
                key="step-nested",
            )
            return
        if not self._live:
            _native.say(
                "profile.step() called outside its `with cuprof.profile(...)` block: ignored",
                key="step-outside",
            )
            return
        saved = self.schedule is not None and self.schedule.action(self.step_num) == "RECORD_AND_SAVE"
        if self._lib is not None:
            _figures.attach(self._lib, tokens, pairs)
            self._lib.cuprof_step()
        self.step_num += 1
        if saved and self.on_trace_ready is not None and self._windowed:
            _synchronize()
            self._lib.cuprof_wait_files(_WRITE_TIMEOUT_MS)
            self._collect(call=True)

    def _collect(self, call):
        """Takes the files written since last looked; calls on_trace_ready once if any."""
        now = _native.trace_files()
        new = [f for f in now if f not in self._seen]
        self._seen = now
        self._files.extend(new)
        self._last = new or self._last
        if new and call and self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def trace_files(self):
        """This profile's trace files (each cycle's, in order), complete."""
        return list(self._files)

    def export_chrome_trace(self, path, use_python_export=False):  # noqa: ARG002 (torch's)
        """Writes the last cycle's trace to `path` (gzip when it ends in `.gz`, as torch):
        atomically, so a reader never sees half a file. `use_python_export` is torch's
        choice of exporter, meaningless here."""
        path = os.fspath(path)
        traces = [f for f in self._last_files() if f.endswith((".json.gz", ".json"))]
        if not traces:
            _native.say(
                f"export_chrome_trace({path!r}): this profile recorded no trace, so nothing is written",
                key="export-empty",
            )
            return
        source = traces[-1]
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".cuprof-export-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as out:
                opener = gzip.open if (source.endswith(".gz") and not path.endswith(".gz")) else open
                with opener(source, "rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def _last_files(self):
        return list(self._last)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        """torch's `key_averages()` (cuprof.averages), computed from the last cycle's trace:
        `.table(sort_by=, row_limit=)` prints torch's table."""
        from . import averages

        return averages.key_averages(
            self._last_files(),
            group_by_input_shape=group_by_input_shape,
            group_by_stack_n=group_by_stack_n,
            group_by_overload_name=group_by_overload_name,
        )


def _synchronize():
    """Waits for the GPU work the block launched, as torch.profiler's stop does."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 (a torch without CUDA support; the trace still closes)
        pass
