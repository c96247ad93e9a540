"""torch.profiler's `key_averages()` and its `table()`, from Chrome traces (cuprof's, torch's)."""

import gzip
import json
import warnings
from decimal import Decimal

__all__ = ["EventList", "FunctionEventAvg", "key_averages"]

# Host events, as torch's parser takes them (DeviceType.CPU): each one a row but
# python_function's, which only nest (torch's `include_python_functions`).
_CPU_CATS = frozenset(
    {"cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function"}
)
_LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})
# Device events (DeviceType.CUDA): each a row with its duration as device time. cuda_sync is
# left out: torch.profiler records none by default (Kineto's enable_cuda_sync_events).
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"})
# torch/autograd/profiler_util.py's _filter_name: events torch drops before anything else.
_FILTERED = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)
# torch's _filter_stack_entry: frames left out of an event's stack.
_FILTERED_FRAMES = (
    ("autograd/__init__", "_make_grads"),
    ("autograd/__init__", "backward"),
    ("torch/tensor", "backward"),
    ("_internal/common_utils", "prof_callable"),
    ("_internal/common_utils", "prof_func_call"),
    ("_internal/common_utils", "prof_meth_call"),
)


def _ns(v):
    """A trace time in microseconds (JSON int, or a float kept as its text) as integer ns."""
    if v is None:
        return 0
    if isinstance(v, str):
        return int((Decimal(v) * 1000).to_integral_value())
    return int(round(v * 1000))


def _shapes(dims):
    """torch's `input_shapes` from a trace's `Input Dims`: a tensor list's entry is []."""
    if not isinstance(dims, list):
        return []
    return [d if isinstance(d, list) and all(isinstance(x, int) for x in d) else [] for d in dims]


def _stack(args):
    chain = args.get("Call stack")
    if not isinstance(chain, str) or not chain:
        return []
    frames = [f for f in chain.split(";") if f]
    return [f for f in frames if all(not (a in f and b in f) for a, b in _FILTERED_FRAMES)]


class _Event:
    """One trace event as torch's FunctionEvent: times in ns, its kernels' durations."""

    __slots__ = (
        "name", "start", "end", "thread", "cat", "ext", "corr", "shapes", "stack", "device",
        "user", "python", "kernels", "children", "parent", "base", "_device_total",
    )

    def __init__(self, e, cat, thread):
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        name = str(e.get("name", ""))
        self.name = "ProfilerStep*" if name.startswith("ProfilerStep#") else name
        self.start = _ns(e.get("ts"))
        self.end = self.start + max(_ns(e.get("dur")), 0)
        self.thread = thread
        self.cat = cat
        ext = args.get("External id")
        self.ext = ext if isinstance(ext, int) else 0
        corr = args.get("correlation")
        self.corr = corr if isinstance(corr, int) else None
        self.shapes = _shapes(args.get("Input Dims"))
        self.stack = _stack(args)
        self.device = cat in _DEVICE_CATS
        self.user = cat in ("user_annotation", "gpu_user_annotation")
        self.python = cat == "python_function"
        self.kernels = []
        self.children = []
        self.parent = None
        self.base = 0
        self._device_total = None

    def elapsed(self):
        # torch's float arithmetic on its times relative to the trace's start, so that its
        # table's last digits come out the same.
        return (self.end - self.base) / 1000 - (self.start - self.base) / 1000

    def cpu_total(self):
        return 0 if self.device else self.elapsed()

    def self_cpu(self):
        if self.device:
            return 0
        return self.cpu_total() - sum(c.cpu_total() for c in self.children)

    def device_total(self):
        # Asked once the tree is final (after _remove_dup_nodes), so kept.
        if self._device_total is None:
            if self.device:
                self._device_total = self.elapsed()
            else:
                own = sum(self.kernels)
                self._device_total = own + sum(c.device_total() for c in self.children)
        return self._device_total

    def self_device(self):
        if self.device:
            return self.device_total()
        return self.device_total() - sum(c.device_total() for c in self.children)


def _load(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data, parse_float=str)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise ValueError(
            f"{path}: not a Chrome trace (no traceEvents list): pass a .trace.json(.gz) file"
        )
    return events


def _file_events(path, index):
    """One trace file's events, in torch's order: the trace's (Ev Idx) where it says it, else
    operators and labels by start, then Python functions, then launches and device work."""
    out = []
    events = _load(path)
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat not in _CPU_CATS and cat not in _DEVICE_CATS:
            continue
        if str(e.get("name", "")) in _FILTERED:
            continue
        thread = (index, str(e.get("pid")), str(e.get("tid")))
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        idx = args.get("Ev Idx")
        out.append((_Event(e, cat, thread), idx if isinstance(idx, int) else None))
    # torch's times are relative to its trace's start (Kineto's "Trace" span), else the first event.
    spans = [_ns(e.get("ts")) for e in events if isinstance(e, dict) and e.get("cat") == "Trace"]
    base = min(spans) if spans else min((ev.start for ev, _ in out), default=0)
    for ev, _ in out:
        ev.base = base
    if all(idx is not None for _, idx in out):
        out.sort(key=lambda p: p[1])
    else:
        group = {"python_function": 1, "cuda_runtime": 2, "cuda_driver": 2}
        rank = lambda e: 3 if e.device else group.get(e.cat, 0)  # noqa: E731
        out.sort(key=lambda p: (rank(p[0]), p[0].start, -p[0].end))
    return [e for e, _ in out]


def _link_device_work(events):
    """Gives each launching operator its device work's durations, as torch's parser does; the
    tree is built. A kernel/copy/memset names its operator by `External id` (its own, or its
    launch's, found by `correlation`); where a trace's launches carry their own correlation id
    as `External id` (older torch.profiler), its operator is the innermost one around the launch.
    """
    launches = {}
    own = carried = 0
    for e in events:
        if e.cat in _LAUNCH_CATS and e.corr is not None:
            launches.setdefault(e.corr, e)
            if e.ext:
                carried += 1
                own += e.ext == e.corr
    nesting = carried > 0 and own * 2 > carried
    ops = {}
    for e in events:
        if not e.device and e.cat not in _LAUNCH_CATS and not e.python and e.ext:
            ops.setdefault(e.ext, []).append(e)
    for e in events:
        if not e.device or e.cat == "gpu_user_annotation":
            continue
        launch = launches.get(e.corr) if e.corr is not None else None
        if nesting:
            op = launch.parent if launch is not None else None
            while op is not None and op.python:
                op = op.parent
            targets = () if op is None else (op,)
        else:
            targets = ops.get(e.ext or (launch.ext if launch is not None else 0), ())
        for op in targets:
            op.kernels.append(e.elapsed())


def _build_tree(events):
    """torch's EventList._populate_cpu_children: direct parents by nesting, per thread."""
    by_thread = {}
    for e in events:
        if not e.device:
            by_thread.setdefault(e.thread, []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.start, -e.end))
        stack = []
        for e in evs:
            while stack:
                parent = stack[-1]
                if e.start >= parent.end or e.end > parent.end:
                    stack.pop()
                else:
                    parent.children.append(e)
                    e.parent = parent
                    break
            stack.append(e)


def _remove_dup_nodes(events):
    """torch's EventList._remove_dup_nodes: an only child named as its parent merges into it."""
    while True:
        gone = set()
        for e in events:
            p = e.parent
            if p is not None and p.name == e.name and len(p.children) == 1:
                p.children = e.children
                p.kernels = e.kernels
                for c in e.children:
                    c.parent = p
                gone.add(id(e))
        if not gone:
            return events
        events = [e for e in events if id(e) not in gone]


class FunctionEventAvg:
    """One row of key_averages(): torch's FunctionEventAvg fields, times in microseconds."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.node_id = -1
        self.is_async = False
        self.is_remote = False
        self.use_device = "cuda"
        self.cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.self_device_time_total = 0.0
        self.input_shapes = None
        self.overload_name = ""
        self.stack = None
        self.scope = 0
        self.cpu_memory_usage = 0
        self.device_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.self_device_memory_usage = 0
        self.cpu_children = None
        self.cpu_parent = None
        self.device_type = "CPU"
        self.is_legacy = False
        self.flops = 0
        self.is_user_annotation = False

    def _add(self, e):
        if self.key is None:
            self.key = e.name
            self.cpu_parent = e.parent
            self.cpu_children = e.children
            self.input_shapes = e.shapes
            self.stack = e.stack
            self.device_type = "CUDA" if e.device else "CPU"
            self.is_user_annotation = e.user
        self.cpu_time_total += e.cpu_total()
        self.device_time_total += e.device_total()
        self.self_cpu_time_total += e.self_cpu()
        self.self_device_time_total += e.self_device()
        self.count += 1

    @property
    def cpu_time(self):
        return 0.0 if self.count == 0 else 1.0 * self.cpu_time_total / self.count

    @property
    def device_time(self):
        return 0.0 if self.count == 0 else 1.0 * self.device_time_total / self.count

    @property
    def cuda_time(self):
        warnings.warn(
            "`cuda_time` is deprecated, please use `device_time` instead.",
            FutureWarning,
            stacklevel=2,
        )
        return self.device_time

    cpu_time_str = property(lambda self: _format_time(self.cpu_time))
    device_time_str = property(lambda self: _format_time(self.device_time))
    cpu_time_total_str = property(lambda self: _format_time(self.cpu_time_total))
    device_time_total_str = property(lambda self: _format_time(self.device_time_total))
    self_cpu_time_total_str = property(lambda self: _format_time(self.self_cpu_time_total))
    self_device_time_total_str = property(lambda self: _format_time(self.self_device_time_total))

    def __repr__(self):
        return (
            f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
            f"cpu_time={self.cpu_time_str}  self_cuda_time={self.self_device_time_total_str} "
            f"cuda_time={self.device_time_str} input_shapes={self.input_shapes} "
            f"cpu_memory_usage={self.cpu_memory_usage} "
            f"cuda_memory_usage={self.device_memory_usage}>"
        )


class EventList(list):
    """key_averages()'s rows (FunctionEventAvg), with torch's `table()`."""

    def __str__(self):
        return self.table()

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def total_average(self):
        total = FunctionEventAvg()
        for e in self:
            total.count += e.count
            total.cpu_time_total += e.cpu_time_total
            total.device_time_total += e.device_time_total
            total.self_cpu_time_total += e.self_cpu_time_total
            total.self_device_time_total += e.self_device_time_total
        total.key = "Total"
        return total

    def table(
        self,
        sort_by=None,
        row_limit=100,
        max_src_column_width=75,
        max_name_column_width=55,
        max_shapes_column_width=80,
        header=None,
        top_level_events_only=False,
        time_unit=None,
    ):
        """torch's EventList.table(): the same columns, wording, formats and footer."""
        return _build_table(
            self,
            sort_by=sort_by,
            row_limit=row_limit,
            max_src_column_width=max_src_column_width,
            max_name_column_width=max_name_column_width,
            max_shapes_column_width=max_shapes_column_width,
            header=header,
            top_level_events_only=top_level_events_only,
            time_unit=time_unit,
        )


def key_averages(
    trace_paths,
    group_by_input_shape=False,
    group_by_stack_n=0,
    group_by_overload_name=False,
    include_python_functions=False,
):
    """torch.profiler's `prof.key_averages(...)` over one trace file or several (one per rank)."""
    if isinstance(trace_paths, (str, bytes)) or hasattr(trace_paths, "__fspath__"):
        trace_paths = [trace_paths]
    events = []
    for i, path in enumerate(trace_paths):
        evs = _file_events(path, i)
        _build_tree(evs)
        _link_device_work(evs)
        events.extend(_remove_dup_nodes(evs))
    stats = {}
    for e in events:
        if e.python and not include_python_functions:
            continue
        key = (e.name, e.device, e.user)
        if group_by_input_shape:
            key += (str(e.shapes),)
        if group_by_stack_n > 0:
            key += tuple(e.stack[:group_by_stack_n])
        row = stats.get(key)
        if row is None:
            row = stats[key] = FunctionEventAvg()
        row._add(e)
    out = EventList(stats.values())
    for row in out:
        row.stack = row.stack[:group_by_stack_n]
        if not group_by_input_shape:
            row.input_shapes = ""
    return out


def _format_time(time_us):
    if time_us >= 1000.0 * 1000.0:
        return f"{time_us / (1000.0 * 1000.0):.3f}s"
    if time_us >= 1000.0:
        return f"{time_us / 1000.0:.3f}ms"
    return f"{time_us:.3f}us"


def _format_time_share(time_us, total_time_us):
    if total_time_us == 0:
        if time_us != 0:
            raise AssertionError(f"Expected time_us == 0 but got {time_us}")
        return "NaN"
    return f"{time_us * 100.0 / total_time_us:.2f}%"


def _unit(time_us, default, time_unit):
    if time_unit == "s":
        return f"{time_us / (1000.0 * 1000.0):.3f}s"
    if time_unit == "ms":
        return f"{time_us / 1000.0:.3f}ms"
    if time_unit == "us":
        return f"{time_us:.3f}us"
    return default


def _build_table(
    events,
    sort_by=None,
    header=None,
    row_limit=100,
    max_src_column_width=75,
    max_name_column_width=55,
    max_shapes_column_width=80,
    top_level_events_only=False,
    time_unit=None,
):
    """torch's _build_table (profiler_util.py) without its memory and FLOPs columns."""
    if len(events) == 0:
        return ""
    has_device_time = any(e.self_device_time_total > 0 for e in events)
    use_device = events[0].use_device
    has_input_shapes = any(e.input_shapes is not None and len(e.input_shapes) > 0 for e in events)
    if sort_by is not None:
        attr = sort_by.replace("cuda", "device").replace("xpu", "device")
        attr = attr.replace("privateuse1", "device")
        events = sorted(events, key=lambda e: getattr(e, attr), reverse=True)

    name_column_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_column_width = min(name_column_width, max_name_column_width)
    shapes_column_width = max(len(str(e.input_shapes)) for e in events) + 4
    if max_shapes_column_width is not None:
        shapes_column_width = min(shapes_column_width, max_shapes_column_width)
    default_width = 12
    stacks = [e.stack for e in events if e.stack is not None and len(e.stack) > 0]
    has_stack = len(stacks) > 0
    src_column_width = None
    if has_stack:
        src_column_width = max(max(len(entry) for entry in s) for s in stacks) + 4
        if max_src_column_width is not None:
            src_column_width = min(src_column_width, max_src_column_width)

    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    device_name = use_device.upper() if use_device is not None else "None"
    if has_device_time:
        headers += [
            f"Self {device_name}",
            f"Self {device_name} %",
            f"{device_name} total",
            f"{device_name} time avg",
        ]
    headers.append("# of Calls")

    spacing = 2
    row_format, header_sep, line_length = "", "", -spacing

    def column(padding, text_dir=">"):
        nonlocal row_format, header_sep, line_length
        row_format += "{: " + text_dir + str(padding) + "}" + " " * spacing
        header_sep += "-" * padding + " " * spacing
        line_length += padding + spacing

    column(name_column_width)
    for _ in headers[1:]:
        column(default_width)
    if has_input_shapes:
        headers.append("Input Shapes")
        column(shapes_column_width)
    if has_stack:
        headers.append("Source Location")
        column(src_column_width, text_dir="<")

    result = []

    def append(s):
        result.append(s)
        result.append("\n")

    sum_self_cpu = 0
    sum_self_device = 0
    for e in events:
        sum_self_cpu += e.self_cpu_time_total
        if e.device_type == "CUDA" and not e.is_user_annotation:
            sum_self_device += e.self_device_time_total

    if header is not None:
        append("=" * line_length)
        append(header)
    if top_level_events_only:
        append("=" * line_length)
        append("This report only display top-level ops statistics")
    append(header_sep)
    append(row_format.format(*headers))
    append(header_sep)

    def trim_path(path, width):
        if len(path) > width:
            path = path[len(path) - width :]
            if len(path) > 3:
                path = "..." + path[3:]
        return path

    shown = 0
    for e in events:
        if shown == row_limit:
            break
        if top_level_events_only and e.cpu_parent is not None:
            continue
        shown += 1
        name = e.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[: (max_name_column_width - 3)] + "..."
        row = [
            name,
            _format_time_share(e.self_cpu_time_total, sum_self_cpu),
            _unit(e.self_cpu_time_total, e.self_cpu_time_total_str, time_unit),
            _format_time_share(e.cpu_time_total, sum_self_cpu) if not e.is_async else 0,
            _unit(e.cpu_time_total, e.cpu_time_total_str, time_unit),
            _unit(e.cpu_time, e.cpu_time_str, time_unit),
        ]
        if has_device_time:
            row += [
                _unit(e.self_device_time_total, e.self_device_time_total_str, time_unit),
                _format_time_share(e.self_device_time_total, sum_self_device),
                _unit(e.device_time_total, e.device_time_total_str, time_unit),
                _unit(e.device_time, e.device_time_str, time_unit),
            ]
        row.append(e.count)
        if has_input_shapes:
            row.append(str(e.input_shapes)[:shapes_column_width])
        if has_stack:
            row.append(trim_path(e.stack[0], src_column_width) if len(e.stack) > 0 else "")
        append(row_format.format(*row))
        if has_stack:
            empty = [""] * (len(headers) - 1)
            for entry in e.stack[1:]:
                append(row_format.format(*(empty + [trim_path(entry, src_column_width)])))
            empty.append("")
            append(row_format.format(*empty))

    append(header_sep)
    append(f"Self CPU time total: {_unit(sum_self_cpu, _format_time(sum_self_cpu), time_unit)}")
    if has_device_time:
        total = _unit(sum_self_device, _format_time(sum_self_device), time_unit)
        append(f"Self {device_name} time total: {total}")
    return "".join(result)
