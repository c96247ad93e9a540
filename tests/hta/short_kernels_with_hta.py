#!/usr/bin/env python3
"""Check `cuprof report`'s `short_kernels` finding and its kernel launch statistics
(`launches`) against HolisticTraceAnalysis.

    python3 tests/hta/short_kernels_with_hta.py TRACE_DIR SUMMARY_JSON

TRACE_DIR holds one rank's trace (HTA reads every *.json / *.gz in it); SUMMARY_JSON is what
`cuprof report TRACE_DIR -o OUT` wrote. HTA's `get_cuda_kernel_launch_stats` (kernel launches
only: `include_memory_events=False`) joins each `cudaLaunchKernel` to its kernel by
correlation id; its "short GPU kernels" are those with `cpu_duration <= runtime_cutoff` (50 us,
its default) and `gpu_duration < cpu_duration`. cuprof's finding must count the same kernels
and sum the same launch and kernel times, to the nanosecond (HTA is run with
HTA_DISABLE_NS_ROUNDING=1, so that it keeps the trace's nanoseconds). The same launches'
count, their calls over the cutoff and delays over HTA's `launch_delay_cutoff` (100 us), and
the median and extremes of the call times and delays must equal `launches`'.

Prints both sides; exit status 0 when they agree, 1 if not, 2 when HTA cannot run.
"""

import sys

import hta_runner

RUNTIME_CUTOFF_US = 50
LAUNCH_DELAY_CUTOFF_US = 100


def median(values):
    """numpy's median of integers, as cuprof computes it (the mean of the two middle ones)."""
    v = sorted(values)
    n = len(v)
    return float(v[n // 2]) if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def main():
    given = hta_runner.inputs(sys.argv)
    if given is None:
        return 2
    analyzer, ranks, summary = given
    stats = analyzer.get_cuda_kernel_launch_stats(
        ranks=ranks,
        runtime_cutoff=RUNTIME_CUTOFF_US,
        include_memory_events=False,
        visualize=False,
    )
    count, cpu_ns, gpu_ns = 0, 0, 0
    calls, delays = [], []
    for df in stats.values():
        calls += [round(x * 1000) for x in df["cpu_duration"]]
        delays += [round(x * 1000) for x in df["launch_delay"]]
        short = df[
            (df["cpu_duration"] <= RUNTIME_CUTOFF_US)
            & (df["gpu_duration"] < df["cpu_duration"])
        ]
        count += len(short)
        # Durations in microseconds with nanosecond fractions: summed as whole nanoseconds.
        cpu_ns += int(sum(round(x * 1000) for x in short["cpu_duration"]))
        gpu_ns += int(sum(round(x * 1000) for x in short["gpu_duration"]))
    hta = {"count": count, "time_ns": cpu_ns, "gpu_ns": gpu_ns}

    found = [x for x in summary.get("findings", []) if x["rule"] == "short_kernels"]
    ours = (
        {k: found[0][k] for k in ("count", "time_ns", "gpu_ns")}
        if found
        else {"count": 0, "time_ns": 0, "gpu_ns": 0}
    )
    if not hta_runner.agree("short kernels", hta, ours):
        return 1

    spread = lambda v: {"median_ns": median(v), "min_ns": min(v), "max_ns": max(v)}
    hta_launches = {
        "kernels": len(calls),
        "slow_calls": sum(c > RUNTIME_CUTOFF_US * 1000 for c in calls),
        "late_starts": sum(d > LAUNCH_DELAY_CUTOFF_US * 1000 for d in delays),
        "call": spread(calls) if calls else None,
        "delay": spread(delays) if delays else None,
    }
    l = summary.get("launches")
    ours_launches = {
        "kernels": l["kernels"],
        "slow_calls": l["slow_calls"],
        "late_starts": l["late_starts"],
        "call": {k: l["call"][k] for k in ("median_ns", "min_ns", "max_ns")},
        "delay": {k: l["delay"][k] for k in ("median_ns", "min_ns", "max_ns")},
    } if l else {"kernels": 0, "slow_calls": 0, "late_starts": 0, "call": None, "delay": None}
    return 0 if hta_runner.agree("kernel launches", hta_launches, ours_launches) else 1


if __name__ == "__main__":
    sys.exit(main())
