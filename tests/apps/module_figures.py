"""Real models' module events under torch.profiler, given deterministic kernels, and their
module figures recounted from the raw events, for the module view's test.

    python3 module_figures.py OUT_DIR MODEL...

For each MODEL of real_models_lib (random weights; nothing is downloaded): one warm-up call,
then one call under torch.profiler(with_stack=True) on the CPU, whose trace has an
`nn.Module: CLASS_N` python_function event per module call; each leaf operator (no operator
inside it on its thread) gets one launch and one kernel (fixture_kernels.py).
Written to OUT_DIR/MODEL.json. Then, from that file alone and with its own nesting code, the
figures per module path (paths from the nesting of module events, names without
`nn.Module: ` joined by `.`): calls, CPU self and inclusive, GPU self and inclusive (ns), and
the kernel time outside every module call. One JSON line per model on stdout.
"""

import json
import os
import sys

import torch

from fixture_kernels import add_kernels, load_events, ns, span

PREFIX = "nn.Module: "


def profile(model, path):
    from real_models_lib import MODELS

    torch.manual_seed(0)
    step = MODELS[model]()
    step()
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True
    ) as prof:
        step()
    prof.export_chrome_trace(path)


def recount(path):
    events = load_events(path)

    mods = []
    for idx, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") == "python_function" and e["name"].startswith(PREFIX):
            s, t = span(e)
            mods.append({"i": idx, "tid": (e["pid"], e["tid"]), "s": s, "e": t,
                         "name": e["name"][len(PREFIX):],
                         "path": e.get("args", {}).get("Module path")})

    def order(m):
        return (m["s"], -m["e"], m["i"])

    def innermost(tid, s, e, before=None):
        best = None
        for m in mods:
            if m["tid"] != tid or not (m["s"] <= s and e <= m["e"]):
                continue
            if before is not None and not order(m) < order(before):
                continue
            if best is None or order(m) > order(best):
                best = m
        return best

    for m in sorted(mods, key=order):
        m["parent"] = innermost(m["tid"], m["s"], m["e"], before=m)
        if not m["path"]:
            p = m["parent"]
            m["path"] = m["name"] if p is None else p["path"] + "." + m["name"]

    rows = {}

    def row(path):
        return rows.setdefault(path, {"calls": 0, "cpu_self_ns": 0, "cpu_inclusive_ns": 0,
                                      "gpu_self_ns": 0, "gpu_inclusive_ns": 0})

    def chain(m):
        while m is not None:
            yield m
            m = m["parent"]

    for m in mods:
        r = row(m["path"])
        d = m["e"] - m["s"]
        children = sum(c["e"] - c["s"] for c in mods if c["parent"] is m)
        r["cpu_self_ns"] += d - children
        if all(a["path"] != m["path"] for a in chain(m["parent"])):
            r["calls"] += 1
            r["cpu_inclusive_ns"] += d

    ops = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ops.setdefault(e["args"]["External id"], e)
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    outside = 0
    for k in events:
        if k.get("cat") != "kernel":
            continue
        d = ns(k["dur"])
        op = ops[launches[k["args"]["correlation"]]["args"]["External id"]]
        s, t = span(op)
        m = innermost((op["pid"], op["tid"]), s, t)
        if m is None:
            outside += d
            continue
        row(m["path"])["gpu_self_ns"] += d
        for p in {a["path"] for a in chain(m)}:
            row(p)["gpu_inclusive_ns"] += d
    return {"rows": rows, "outside_gpu_ns": outside, "module_calls": len(mods)}


def main():
    out_dir, models = sys.argv[1], sys.argv[2:]
    torch.set_num_threads(1)
    for model in models:
        path = os.path.join(out_dir, f"{model}.json")
        profile(model, path)
        leaves = add_kernels(path)
        result = recount(path)
        result.update(model=model, kernels=leaves)
        print(json.dumps(result), flush=True)


main()
