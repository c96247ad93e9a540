"""One model run eager and torch.compile'd under torch.profiler (CPU), given deterministic
kernels, and the regions both runs have recounted from the raw events, for compare's test.

    python3 eager_compiled.py OUT_DIR

Writes OUT_DIR/eager.json and OUT_DIR/compiled.json: 3 recorded steps (ProfilerStep#N), each a
`forward` label around the model's call and a `loss` label around eager code after it. The
compiled run's inductor kernels are recorded as operators (`cpp.enable_kernel_profile`: one
`graph_0_cpp_fused_*` operator per fused kernel), so that each operator that does work (`works`)
gets one launch and one kernel (fixture_kernels.py), as
it would on a GPU. Then, from the files alone: per region (`steps`, each label's outermost
calls on a thread), its calls, host time, and the kernels launched inside it (their count, GPU
time and distinct operators: in any thread for steps, the label's own thread for labels); and
compare's rows from them. One JSON line on stdout.
"""

import json
import os
import sys

import torch
import torch._inductor.config

from fixture_kernels import add_kernels, load_events, ns, span

# Operators that launch nothing on a GPU: views, allocations, dtype queries, and the profiler
# labels torch.compile opens (Torch-Compiled Region, TorchDynamo Cache Lookup, ...).
NO_WORK = frozenset({
    "aten::as_strided", "aten::view", "aten::t", "aten::transpose", "aten::expand",
    "aten::empty", "aten::empty_strided", "aten::resolve_conj", "aten::result_type",
    "aten::to", "aten::detach", "aten::alias", "aten::reshape", "aten::_unsafe_view",
})


def works(name):
    return name not in NO_WORK and name.startswith(("aten::", "graph_"))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(32)
        self.up = torch.nn.Linear(32, 64)
        self.down = torch.nn.Linear(64, 32)

    def forward(self, x):
        h = self.down(torch.nn.functional.gelu(self.up(self.norm(x))) * 0.5 + 1.0)
        return (x + h).relu()


def profile(model, x, path):
    with torch.no_grad():
        model(x)  # compiles the compiled one, outside the recorded steps
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU],
            schedule=torch.profiler.schedule(wait=0, warmup=1, active=3),
            on_trace_ready=lambda p: p.export_chrome_trace(path),
        ) as prof:
            for _ in range(4):
                with torch.profiler.record_function("forward"):
                    y = model(x)
                with torch.profiler.record_function("loss"):
                    y.square().mean()
                prof.step()


def regions(path):
    events = load_events(path)

    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    kernels = []  # (thread, launch time, GPU ns, External id of the launching operator)
    for k in events:
        if k.get("cat") == "kernel":
            a = launches[k["args"]["correlation"]]
            thread, ext = (a["pid"], a["tid"]), a["args"]["External id"]
            kernels.append((thread, ns(a["ts"]), ns(k["dur"]), ext))
    out = {}

    def add(key, thread, s, e):
        r = out.setdefault(key, {"calls": 0, "wall_ns": 0, "kernels": 0, "gpu_ns": 0, "ops": 0})
        r["calls"] += 1
        r["wall_ns"] += e - s
        inside = [k for k in kernels if (thread is None or k[0] == thread) and s <= k[1] < e]
        r["kernels"] += len(inside)
        r["gpu_ns"] += sum(k[2] for k in inside)
        r["ops"] += len({k[3] for k in inside})

    labels = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation":
            s, t = span(e)
            if e["name"].startswith("ProfilerStep#"):
                add(("step", "steps"), None, s, t)
            else:
                labels.append(((e["pid"], e["tid"]), e["name"], s, t))
    for thread, name, s, t in labels:
        outer = any(o != (thread, name, s, t) and o[0] == thread and o[1] == name
                    and o[2] <= s and t <= o[3] for o in labels)
        if not outer:
            add(("label", name), thread, s, t)
    return out


def rows(a, b):
    def ratio(x, y):
        return x / y if x > 0 and y > 0 else None

    out = []
    for key in sorted(set(a) & set(b)):
        x, y = a[key], b[key]
        pa = {f: x[f] / x["calls"] for f in ("wall_ns", "kernels", "gpu_ns", "ops")}
        pb = {f: y[f] / y["calls"] for f in ("wall_ns", "kernels", "gpu_ns", "ops")}
        out.append({
            "kind": key[0], "name": key[1], "a_calls": x["calls"], "b_calls": y["calls"],
            "a_ns_per_call": pa["wall_ns"], "b_ns_per_call": pb["wall_ns"],
            "speedup": ratio(pa["wall_ns"], pb["wall_ns"]),
            "a_gpu_ns_per_call": pa["gpu_ns"], "b_gpu_ns_per_call": pb["gpu_ns"],
            "gpu_speedup": ratio(pa["gpu_ns"], pb["gpu_ns"]),
            "a_kernels_per_call": pa["kernels"], "b_kernels_per_call": pb["kernels"],
            "a_operators_per_call": pa["ops"], "b_operators_per_call": pb["ops"],
            "fusion_ratio": ratio(pa["ops"], pb["kernels"]),
        })
    return out


def main():
    out_dir = sys.argv[1]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    torch._inductor.config.cpp.enable_kernel_profile = True
    block, x = Block().eval(), torch.randn(8, 32)
    found = {}
    for name, model in (("eager", block), ("compiled", torch.compile(block))):
        path = os.path.join(out_dir, f"{name}.json")
        profile(model, x, path)
        add_kernels(path, works)
        found[name] = regions(path)
    print(json.dumps({"rows": rows(found["eager"], found["compiled"])}), flush=True)


main()
