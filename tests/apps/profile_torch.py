"""`cuprof.profile` used as `torch.profiler.profile` (tests/e2e/python_api.rs):

    python3 profile_torch.py dropin DIR   # two blocks, work between and after them, bad arguments
    python3 profile_torch.py nocuda DIR   # a block in which CUDA never initialises

dropin, under the preloaded library (the libcupti double as CUDA, $CUPTI_DOUBLE_LIB):
1. `with cuprof.profile(activities=[CPU, CUDA], record_shapes=True) as p:` (no schedule):
   CUDA initialises inside (the double's cuInit), two steps run, each an `inside` range with a
   Linear forward and one `_Z6insidev` kernel, `p.step()` after the first. Right after the
   block the program lists `p.trace_files()` and exports the trace twice
   (`export_chrome_trace` to `.json` and to `.json.gz`).
2. Between the blocks: an `outside` range and a `_Z7outsidev` kernel, which no file may hold.
3. `with cuprof.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=1, repeat=2),
   on_trace_ready=torch.profiler.tensorboard_trace_handler(DIR/tb, worker_name="w0"),
   with_modules=True)`: six steps (`inside`), so two cycles are saved, each handed to torch's
   own TensorBoard handler as it is saved (which calls `export_chrome_trace`); each Linear
   call is a module call.
4. After it, `outside` again; then each bad argument, with the exception it raised.
Prints one JSON line with what the program saw.
"""

import json
import os
import sys

import cuprof
import double
import torch
from torch.profiler import ProfilerActivity

mode, out_dir = sys.argv[1:3]
d = double.load()
torch.manual_seed(0)
model = torch.nn.Linear(16, 8)
x = torch.randn(4, 16)


def inside():
    with torch.autograd.profiler.record_function("inside"):
        model(x)
        d.launch(b"_Z6insidev", stream=7)


def outside():
    with torch.autograd.profiler.record_function("outside"):
        model(x)
        d.launch(b"_Z7outsidev", stream=7)


def raised(make):
    try:
        make()
    except Exception as e:  # noqa: BLE001 (what it raised is the answer)
        return f"{type(e).__name__}: {e}"
    return None


if mode == "nocuda":
    with cuprof.profile() as p:
        model(x)
    print(json.dumps({"files": p.trace_files(), "all": cuprof.trace_files()}))
    sys.exit(0)

out = {}
with cuprof.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as p:
    d.cuInit(0)
    inside()
    p.step()
    inside()
out["block1"] = p.trace_files()
out["block1_steps"] = p.step_num
p.export_chrome_trace(os.path.join(out_dir, "exported.json"))
p.export_chrome_trace(os.path.join(out_dir, "exported.json.gz"))
averages = p.key_averages()
out["averages"] = {e.key: e.count for e in averages if e.key in ("inside", "aten::linear", "inside()")}
out["table_rows"] = len(averages.table(sort_by="cpu_time_total", row_limit=3).splitlines())

outside()

ready = []


def on_ready(prof):
    ready.append(prof.step_num)
    torch.profiler.tensorboard_trace_handler(os.path.join(out_dir, "tb"), worker_name="w0")(prof)


sched = torch.profiler.schedule(wait=1, warmup=1, active=1, repeat=2)
with cuprof.profile(schedule=sched, on_trace_ready=on_ready, with_modules=True) as p2:
    for _ in range(6):
        inside()
        p2.step()
out["block2"] = p2.trace_files()
out["ready_at"] = ready
out["block2_steps"] = p2.step_num

outside()

out["errors"] = {
    "wait=1.7": raised(lambda: cuprof.schedule(wait=1.7, warmup=1, active=1)),
    "wait=-1": raised(lambda: cuprof.schedule(wait=-1, warmup=1, active=1)),
    "active=0": raised(lambda: cuprof.profile(active=0)),
    "activities=[]": raised(lambda: cuprof.profile(activities=[])),
    "activities=5": raised(lambda: cuprof.profile(activities=5)),
    "schedule=5": raised(lambda: cuprof.profile(schedule=5)),
    "schedule+wait": raised(lambda: cuprof.profile(schedule=sched, wait=1)),
    "record_shapes=1": raised(lambda: cuprof.profile(record_shapes=1)),
    "on_trace_ready=1": raised(lambda: cuprof.profile(on_trace_ready=1)),
}
out["activities"] = cuprof.profile(activities="CPU,CUDA").activities
d.flush()
out["all"] = cuprof.trace_files()
print(json.dumps(out))
