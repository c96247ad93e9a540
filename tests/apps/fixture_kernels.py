"""Deterministic kernels for a CPU trace of torch.profiler: the module view's and compare's
region tests give each operator that does work one launch and one kernel, as a GPU run would.

A CPU trace has no kernels, so each operator that does work (`works(name)`, with no other
such operator inside it on its thread) gets one `cudaLaunchKernel` (cuda_runtime) and one `kernel`
event, both carrying the operator's External id and a correlation id of their own, the kernel
lasting a deterministic number of nanoseconds.
"""

import decimal
import json


def ns(x):
    """A trace time (microseconds, as written) in nanoseconds, rounded half away from zero."""
    return int((decimal.Decimal(x) * 1000).quantize(decimal.Decimal(1), decimal.ROUND_HALF_UP))


def load_events(path):
    """The trace's events, their times as written (Decimal: `ns` converts them exactly)."""
    with open(path) as f:
        events = json.load(f, parse_float=decimal.Decimal)["traceEvents"]
    return events


def span(e):
    """An event's start and end in nanoseconds."""
    s = ns(e["ts"])
    return s, s + ns(e["dur"])


def add_kernels(path, works=lambda name: True):
    """Adds the kernels to the trace at `path` (rewritten in place); returns their count."""
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
           and works(e["name"])]
    spans = [(ns(repr(o["ts"])), ns(repr(o["ts"])) + ns(repr(o["dur"]))) for o in ops]
    leaves = []
    for i, o in enumerate(ops):
        s, e = spans[i]
        inner = any(
            j != i and ops[j]["tid"] == o["tid"] and s <= spans[j][0] and spans[j][1] <= e
            and spans[j] != (s, e)
            for j in range(len(ops))
        )
        if not inner:
            leaves.append(o)
    ext_ids = [o["args"]["External id"] for o in ops]
    assert len(set(ext_ids)) == len(ext_ids), "External ids repeat"
    for i, o in enumerate(leaves):
        corr = 10_000_000 + i
        ext = o["args"]["External id"]
        events.append({
            "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
            "pid": o["pid"], "tid": o["tid"], "ts": o["ts"], "dur": 0,
            "args": {"correlation": corr, "External id": ext},
        })
        dur_ns = 1000 + (37 * i) % 5000
        events.append({
            "ph": "X", "cat": "kernel", "name": f"fixture_kernel_{i % 5}",
            "pid": 0, "tid": 7, "ts": o["ts"], "dur": dur_ns / 1000,
            "args": {"device": 0, "stream": 7, "correlation": corr, "External id": ext},
        })
    with open(path, "w") as f:
        json.dump(trace, f)
    return len(leaves)
