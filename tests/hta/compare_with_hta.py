#!/usr/bin/env python3
"""Check that `cuprof report` agrees with HolisticTraceAnalysis on the same traces.

    python3 tests/hta/compare_with_hta.py TRACE_DIR SUMMARY_JSON [--tolerance 0.01]

TRACE_DIR holds only the rank traces (HTA reads every *.json / *.gz in it); SUMMARY_JSON is
what `cuprof report TRACE_DIR -o OUT` wrote. Compared, per the definitions of both tools:

* kernel-type breakdown (HTA `get_gpu_kernel_breakdown(include_memory_kernels=True)`, all
  ranks): HTA splits busy time into bit-mask classes ("COMPUTATION", "COMMUNICATION overlapping
  COMPUTATION", "MEMORY", ...). cuprof counts each instant once with priority compute >
  communication > memory, so: compute = every class with COMPUTATION; communication = classes
  with COMMUNICATION but not COMPUTATION; memory (memcpy + memset) = classes of MEMORY alone.
* idle time per rank (HTA `get_temporal_breakdown`): HTA's span is first GPU event start to
  last end of the rank, idle = span - union of GPU events; cuprof's per device, summed over the
  rank's devices (identical with one device per rank), and the span (`kernel_time`) too.

HTA is run with HTA_DISABLE_NS_ROUNDING=1 (unless --hta-rounding): by default HTA rounds every
event to whole microseconds (start up, end down), which on short kernels moves the figures by
far more than 1%; cuprof keeps nanoseconds.

Even so, HTA's kernel-type breakdown truncates each overlap segment to whole microseconds
(`astype(int)`): on traces whose GPU events start or end between microseconds it falls short by
up to 1 us per segment, which the script points out when it sees such times. With
--untruncated the kernel-type figures are recomputed from HTA's own parsed events, kernel types
(`get_kernel_type`) and `merge_kernel_intervals`, without that final truncation.

HTA is run with include_last_profiler_step=True: by default it drops the GPU work of the last
ProfilerStep, which cuprof counts (cuprof's window already chose the steps). HTA also counts
`cuda_sync` events that carry a stream as GPU busy time where cuprof counts them as idle (sync
wait); traces compared here should have no such events, and the script says so if they do.

Exit status 0 when every figure agrees within the tolerance (relative, default 1%), 1 if not,
2 when HTA cannot run.
"""

import argparse
import bisect
import json
import logging
import os
import sys
import warnings


def close(a, b, tol):
    if a == b:
        return True
    scale = max(abs(a), abs(b))
    return abs(a - b) <= tol * scale


def untruncated_kernel_types(analyzer):
    """HTA's kernel-type classes (compute first, then communication, then memory), summed over
    ranks, from HTA's parsed GPU events and its interval merge, in float microseconds."""
    from hta.utils.utils import get_kernel_type, merge_kernel_intervals

    sym = analyzer.t.symbol_table.get_sym_table()
    out = {"compute": 0.0, "communication": 0.0, "memory": 0.0}
    order = (("COMPUTATION", "compute"), ("COMMUNICATION", "communication"), ("MEMORY", "memory"))
    for df in analyzer.t.traces.values():
        gpu = df[df["stream"].ne(-1)].copy()
        gpu["kernel_type"] = gpu["name"].apply(lambda x: get_kernel_type(sym[x]))
        merged = {}
        for kt, _ in order:
            m = merge_kernel_intervals(gpu[gpu["kernel_type"].eq(kt)].copy())
            merged[kt] = list(zip(m["ts"].tolist(), m["end"].tolist()))
        starts = {kt: [s for s, _ in iv] for kt, iv in merged.items()}

        def inside(kt, t):
            i = bisect.bisect_right(starts[kt], t) - 1
            return i >= 0 and t < merged[kt][i][1]

        edges = sorted({t for iv in merged.values() for s, e in iv for t in (s, e)})
        for a, b in zip(edges, edges[1:]):
            mid = (a + b) / 2
            for kt, key in order:
                if inside(kt, mid):
                    out[key] += b - a
                    break
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace_dir")
    ap.add_argument("summary_json")
    ap.add_argument("--tolerance", type=float, default=0.01)
    ap.add_argument(
        "--untruncated",
        action="store_true",
        help="kernel-type figures from HTA's intervals without its whole-microsecond truncation",
    )
    ap.add_argument(
        "--hta-rounding",
        action="store_true",
        help="keep HTA's rounding of event times to whole microseconds",
    )
    args = ap.parse_args()
    if not args.hta_rounding:
        os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    warnings.filterwarnings("ignore", category=FutureWarning)

    try:
        logging.disable(logging.WARNING)
        from hta.trace_analysis import TraceAnalysis
    except Exception as e:  # pragma: no cover - depends on the environment
        print(
            f"HTA is not installed ({e}); install it with: python3 -m pip install "
            "HolisticTraceAnalysis 'pandas<3' psutil pyyaml",
            file=sys.stderr,
        )
        return 2

    with open(args.summary_json) as f:
        summary = json.load(f)

    analyzer = TraceAnalysis(trace_dir=args.trace_dir, include_last_profiler_step=True)

    # cuda_sync events with a stream: HTA counts them as GPU time, cuprof as idle.
    sync_with_stream = 0
    for rank, df in analyzer.t.traces.items():
        sym = analyzer.t.symbol_table.get_sym_id_map()
        ids = [sym[n] for n in ("Stream Sync", "Event Sync", "Stream Wait Event", "Context Sync") if n in sym]
        if ids:
            sync_with_stream += int(((df["name"].isin(ids)) & (df["stream"].ne(-1))).sum())
    if sync_with_stream:
        print(
            f"note: {sync_with_stream} cuda_sync events carry a stream: HTA counts them as busy, "
            "cuprof as idle; idle figures will differ by their duration"
        )

    fractional = 0
    for df in analyzer.t.traces.values():
        gpu_df = df[df["stream"].ne(-1)]
        fractional += int(((gpu_df["ts"] % 1 != 0) | (gpu_df["dur"] % 1 != 0)).sum())
    if args.untruncated:
        hta = untruncated_kernel_types(analyzer)
    else:
        kt = analyzer.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
        hta = {"compute": 0.0, "communication": 0.0, "memory": 0.0}
        for _, row in kt[0].iterrows():
            name, us = str(row["kernel_type"]), float(row["sum"])
            if "COMPUTATION" in name:
                hta["compute"] += us
            elif "COMMUNICATION" in name:
                hta["communication"] += us
            elif "MEMORY" in name:
                hta["memory"] += us
    gpu = summary["gpu"]
    mine = {
        "compute": gpu["compute_ns"] / 1000.0,
        "communication": gpu["communication_ns"] / 1000.0,
        "memory": (gpu["memcpy_ns"] + gpu["memset_ns"]) / 1000.0,
    }

    failures = []
    rows = []
    for k in ("compute", "communication", "memory"):
        ok = close(mine[k], hta[k], args.tolerance)
        rows.append((f"{k} (all ranks)", mine[k], hta[k], ok))
        if not ok:
            failures.append(k)

    temporal = analyzer.get_temporal_breakdown(visualize=False)
    ranks = {r["rank"]: r for r in summary["ranks"]}
    for _, row in temporal.iterrows():
        rank = int(row["rank"])
        r = ranks.get(rank)
        if r is None:
            failures.append(f"rank {rank} missing from cuprof's summary")
            continue
        for label, mine_us, hta_us in (
            (f"idle rank {rank}", r["gpu"]["idle_ns"] / 1000.0, float(row["idle_time(us)"])),
            (f"span rank {rank}", r["gpu"]["wall_ns"] / 1000.0, float(row["kernel_time(us)"])),
        ):
            ok = close(mine_us, hta_us, args.tolerance)
            rows.append((label, mine_us, hta_us, ok))
            if not ok:
                failures.append(label)
    if set(ranks) != {int(r) for r in temporal["rank"]}:
        failures.append(f"ranks differ: cuprof {sorted(ranks)}, HTA {sorted(temporal['rank'])}")

    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}}  {'cuprof (us)':>14}  {'HTA (us)':>14}  agree")
    for label, a, b, ok in rows:
        print(f"{label:<{width}}  {a:>14.3f}  {b:>14.3f}  {'yes' if ok else 'NO'}")
    if failures:
        print(f"disagreement beyond {args.tolerance:.1%}: {', '.join(failures)}")
        if fractional:
            print(
                f"note: {fractional} GPU events start or last a fractional microsecond; HTA's "
                "kernel-type breakdown truncates each segment to whole microseconds"
            )
        return 1
    print(f"cuprof and HTA agree within {args.tolerance:.1%} on {len(rows)} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
