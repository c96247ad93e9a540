#!/usr/bin/env python3
"""Check `cuprof report`'s `short_kernels` finding against HolisticTraceAnalysis.

    python3 tests/hta/short_kernels_with_hta.py TRACE_DIR SUMMARY_JSON

TRACE_DIR holds one rank's trace (HTA reads every *.json / *.gz in it); SUMMARY_JSON is what
`cuprof report TRACE_DIR -o OUT` wrote. HTA's `get_cuda_kernel_launch_stats` (kernel launches
only: `include_memory_events=False`) joins each `cudaLaunchKernel` to its kernel by
correlation id; its "short GPU kernels" are those with `cpu_duration <= runtime_cutoff` (50 us,
its default) and `gpu_duration < cpu_duration`. cuprof's finding must count the same kernels
and sum the same launch and kernel times, to the nanosecond (HTA is run with
HTA_DISABLE_NS_ROUNDING=1, so that it keeps the trace's nanoseconds).

Prints both sides; exit status 0 when they agree, 1 if not, 2 when HTA cannot run.
"""

import json
import logging
import os
import sys
import warnings

RUNTIME_CUTOFF_US = 50


def main():
    trace_dir, summary_json = sys.argv[1:3]
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    warnings.filterwarnings("ignore")
    try:
        logging.disable(logging.WARNING)
        from hta.trace_analysis import TraceAnalysis
    except Exception as e:  # pragma: no cover - depends on the environment
        print(f"HTA is not installed ({e}); run `bash scripts/test.sh`", file=sys.stderr)
        return 2

    analyzer = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
    ranks = list(analyzer.t.traces.keys())
    stats = analyzer.get_cuda_kernel_launch_stats(
        ranks=ranks,
        runtime_cutoff=RUNTIME_CUTOFF_US,
        include_memory_events=False,
        visualize=False,
    )
    count, cpu_ns, gpu_ns = 0, 0, 0
    for df in stats.values():
        short = df[
            (df["cpu_duration"] <= RUNTIME_CUTOFF_US)
            & (df["gpu_duration"] < df["cpu_duration"])
        ]
        count += len(short)
        # Durations in microseconds with nanosecond fractions: summed as whole nanoseconds.
        cpu_ns += int(sum(round(x * 1000) for x in short["cpu_duration"]))
        gpu_ns += int(sum(round(x * 1000) for x in short["gpu_duration"]))
    hta = {"count": count, "time_ns": cpu_ns, "gpu_ns": gpu_ns}

    with open(summary_json) as f:
        summary = json.load(f)
    found = [x for x in summary.get("findings", []) if x["rule"] == "short_kernels"]
    ours = (
        {k: found[0][k] for k in ("count", "time_ns", "gpu_ns")}
        if found
        else {"count": 0, "time_ns": 0, "gpu_ns": 0}
    )
    print(f"HTA:    {hta}")
    print(f"cuprof: {ours}")
    if hta != ours:
        print("cuprof and HTA disagree on short kernels")
        return 1
    print("cuprof and HTA agree on short kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
