"""cuprof.averages.key_averages() against torch.profiler's own (tests/e2e/python_api.rs):

    python3 key_averages.py torch DIR    # untraced: under torch.profiler
    python3 key_averages.py cuprof DIR   # under libcuprof.so + the libcupti double, after `torch`

`cuprof` runs with CUPROF_WAIT=1 CUPROF_WARMUP=1 CUPROF_ACTIVE=2 CUPROF_WITH_STACK=1 (shapes
are on by default). Both run the same 4 steps with the schedule wait=1, warmup=1, active=2
(steps 2 and 3 recorded).
Each step, in a `record_function("model_step")` label: a Linear -> ReLU -> Linear forward whose
output goes through a custom operator `cuproftest::launch` (under cuprof it launches
kernel_c, 5 us, through the double), then a `record_function("launch")` label launching
kernel_a (3 us) and kernel_b (4 us); then the backward pass.

`torch`: exports torch.profiler's Chrome trace to DIR/torch.json and asserts that
key_averages() read from it equals torch's prof.key_averages(): the same rows (name, and input
shapes when grouped by them), counts and self/total CPU times to the nanosecond, and the same
table text for several options (sort keys, row limits, time units, -1 rows), bad arguments
raising the same exception type. Writes torch's rows (DIR/torch_rows.json) for `cuprof`.

`cuprof`: reads the trace cuprof wrote (with shapes and stacks) and asserts the rows are
torch's (the same names and counts) plus cuprof's launches and device work, the device times
of the launching operator and the labels around it exact (the double's kernel durations), and
that the table text is torch's own _build_table's on the same rows (CUDA columns, Input
Shapes, Source Location). Each mode prints one JSON line: what it checked.
"""

import ctypes
import json
import os
import sys
import time

import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import EventList as TorchEventList
from torch.autograd.profiler_util import FunctionEventAvg as TorchAvg

import cuprof
from cuprof import averages

mode, out_dir = sys.argv[1:3]

d = None
if mode == "cuprof":
    import double

    d = double.load()
    d.cuInit(0)


@torch.library.custom_op("cuproftest::launch", mutates_args=())
def launch(x: torch.Tensor) -> torch.Tensor:
    if d is not None:
        d.launch(b"_Z8kernel_cv", stream=7, duration_ns=5_000)
    return x.clone()


launch.register_autograd(lambda ctx, grad: grad)

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
x = torch.randn(8, 64)


def step():
    with torch.autograd.profiler.record_function("model_step"):
        y = launch(model(x))
        with torch.autograd.profiler.record_function("launch"):
            if d is not None:
                d.launch(b"_Z8kernel_av", stream=7, duration_ns=3_000)
                d.launch(b"_Z8kernel_bv", stream=7, duration_ns=4_000)
    y.sum().backward()


def check(cond, what):
    if not cond:
        sys.stderr.write(f"key_averages check failed: {what}\n")
        sys.exit(1)


def rows(evs, shapes):
    """{(name, device row, label, shapes): row} of key_averages() results (torch's or ours)."""
    out = {}
    for e in evs:
        dev = str(e.device_type).split(".")[-1] == "CUDA"
        k = (e.key, dev, bool(e.is_user_annotation), str(e.input_shapes) if shapes else "")
        check(k not in out, f"one row per key: {k}")
        out[k] = e
    return out


def same_rows(theirs, ours, shapes):
    t, o = rows(theirs, shapes), rows(ours, shapes)
    check(set(t) == set(o), f"same rows (shapes {shapes}): {sorted(set(t) ^ set(o))}")
    for k in t:
        a, b = t[k], o[k]
        check(a.count == b.count, f"{k}: {a.count} calls, not {b.count}")
        for attr in ("self_cpu_time_total", "cpu_time_total"):
            # Times to the nanosecond (the trace's resolution).
            check(abs(getattr(a, attr) - getattr(b, attr)) < 1e-3, f"{k} {attr}")
    return len(t)


def raises(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001 (the type is what is compared)
        return type(e)
    return None


def header(table):
    """The column titles of a table, split on the runs of 2+ spaces between them."""
    line = table.splitlines()[1]
    return [c for c in (s.strip() for s in line.split("  ")) if c]


TABLES = [
    {},
    {"sort_by": "self_cpu_time_total", "row_limit": 10},
    {"sort_by": "cpu_time_total", "row_limit": 5, "time_unit": "ms"},
    {"sort_by": "count", "row_limit": -1},
    {"sort_by": "cpu_time", "row_limit": 0},
    {"sort_by": "self_cuda_time_total", "max_name_column_width": 20, "header": "T"},
    {"top_level_events_only": True, "time_unit": "us"},
]

if mode == "torch":
    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    trace = os.path.join(out_dir, "torch.json")
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True, schedule=sched
    ) as prof:
        for _ in range(4):
            step()
            prof.step()
    prof.export_chrome_trace(trace)
    n = same_rows(prof.key_averages(), averages.key_averages(trace), False)
    ns = same_rows(
        prof.key_averages(group_by_input_shape=True),
        averages.key_averages([trace], group_by_input_shape=True),
        True,
    )
    tables = 0
    for shapes in (False, True):
        theirs = prof.key_averages(group_by_input_shape=shapes)
        ours = averages.key_averages(trace, group_by_input_shape=shapes)
        for kw in TABLES:
            a, b = theirs.table(**kw), ours.table(**kw)
            check(a == b, f"table {kw}:\n{a}\n---\n{b}")
            tables += 1
        check(str(theirs) == str(ours), "str()")
        for bad in ("nope", "cuda_memory"):
            t = raises(lambda: theirs.table(sort_by=bad))
            o = raises(lambda: ours.table(sort_by=bad))
            check(t is not None and t == o, f"sort_by={bad!r}: {t} vs {o}")
    # torch's rows, for the `cuprof` mode.
    with open(os.path.join(out_dir, "torch_rows.json"), "w") as f:
        json.dump([[e.key, e.count] for e in prof.key_averages()], f)
    print(json.dumps({"mode": mode, "rows": n, "shape_rows": ns, "tables": tables}))
    sys.exit(0)

for _ in range(4):
    step()
    ctypes.CDLL(None).cuprof_step()
d.flush()
files = cuprof.trace_files()
# The window closed after the fourth step; the writer thread finishes its file meanwhile.
deadline = time.monotonic() + 60
while not files and time.monotonic() < deadline:
    time.sleep(0.05)
    files = cuprof.trace_files()
check(len(files) == 1, f"one trace file: {files}")

ka = averages.key_averages(files)
by = rows(ka, False)
with open(os.path.join(out_dir, "torch_rows.json")) as f:
    torch_rows = {k: n for k, n in json.load(f)}
host = {k[0]: e.count for k, e in by.items() if not k[1]}
# torch's rows, with the same counts, plus each recorded step's three launches.
check(host.pop("cudaLaunchKernel", None) == 6, "6 launches")
check(host == torch_rows, f"torch's rows: {sorted(set(host.items()) ^ set(torch_rows.items()))}")
# Device rows: the kernels, and the labels' projections onto the GPU.
device = {k[0]: (e.count, round(e.self_device_time_total, 3)) for k, e in by.items() if k[1]}
labels = {k: v[0] for k, v in device.items() if k in ("model_step", "launch")}
check(labels == {"model_step": 2, "launch": 2}, f"GPU labels: {device}")
kernels = {k: v for k, v in device.items() if k not in labels}
check(kernels == {"kernel_a()": (2, 6.0), "kernel_b()": (2, 8.0), "kernel_c()": (2, 10.0)}, kernels)


def cuda(name):
    e = by[(name, False, name in ("model_step", "launch", "ProfilerStep*"), "")]
    return (e.count, round(e.self_device_time_total, 3), round(e.device_time_total, 3))


# The launching operator owns its kernel; the labels around it hold it in total. Kernels
# launched straight from a label are no operator's (Kineto ties launches to operators only:
# a label's id goes to its GPU projection), so only their own rows have them.
OP = "GeneratedBackwardFor_cuproftest_launch_default"  # torch's name for the custom operator
got = {n: cuda(n) for n in ("launch", OP, "model_step", "ProfilerStep*")}
want = {
    "launch": (2, 0.0, 0.0),
    OP: (2, 10.0, 10.0),
    "model_step": (2, 0.0, 10.0),
    "ProfilerStep*": (2, 0.0, 10.0),
}
check(got == want, f"device times: {got}")
check(ka.table().splitlines()[-1] == "Self CUDA time total: 24.000us", ka.table())


def as_torch(evs):
    """Our rows as torch's FunctionEventAvg, in torch's EventList: its own table of them."""
    out = TorchEventList(use_device="cuda")
    for e in evs:
        t = TorchAvg()
        for k, v in vars(e).items():
            setattr(t, k, v)
        t.device_type = DeviceType.CUDA if e.device_type == "CUDA" else DeviceType.CPU
        out.append(t)
    return out


tables = 0
for kw in ({}, {"group_by_input_shape": True}, {"group_by_stack_n": 2}):
    ours = averages.key_averages(files[0], **kw)
    for tk in TABLES:
        a, b = as_torch(ours).table(**tk), ours.table(**tk)
        check(a == b, f"table {kw} {tk}:\n{a}\n---\n{b}")
        tables += 1
    cols = header(ours.table())
    want = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    want += ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg", "# of Calls"]
    want += ["Input Shapes"] * ("group_by_input_shape" in kw)
    want += ["Source Location"] * ("group_by_stack_n" in kw)
    check(cols == want, f"{kw}: columns {cols}")
stacked = averages.key_averages(files[0], group_by_stack_n=2)
check(any(len(e.stack) == 2 for e in stacked), "rows with 2 stack frames")
print(json.dumps({"mode": mode, "rows": len(by), "tables": tables}))
