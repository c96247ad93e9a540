#!/usr/bin/env python3
"""Check `cuprof report`'s idle time by stream (`idle_by_stream`) against HolisticTraceAnalysis.

    python3 tests/hta/idle_with_hta.py TRACE_DIR SUMMARY_JSON

TRACE_DIR holds one rank's trace (HTA reads every *.json / *.gz in it); SUMMARY_JSON is what
`cuprof report TRACE_DIR -o OUT` wrote. HTA's `get_idle_time_breakdown` (its default
`consecutive_kernel_delay`, 30 in the trace's microseconds) sums, per stream, the gaps between
consecutive kernels, copies and sets as host wait, kernel wait and other. Per stream, cuprof's
`host_wait_ns`, `kernel_wait_ns` and `other_ns` must be those sums in nanoseconds (HTA is run
with HTA_DISABLE_NS_ROUNDING=1, so that it keeps the trace's nanoseconds; a kind HTA found no
gap of is 0).

Prints both sides; exit status 0 when they agree, 1 if not, 2 when HTA cannot run.
"""

import sys

import hta_runner

KINDS = {"host_wait": "host_wait_ns", "kernel_wait": "kernel_wait_ns", "other": "other_ns"}


def main():
    given = hta_runner.inputs(sys.argv)
    if given is None:
        return 2
    analyzer, ranks, summary = given
    df, _ = analyzer.get_idle_time_breakdown(ranks=ranks, visualize=False)
    hta = {}
    for _, row in df.iterrows():
        key = (int(row["rank"]), int(row["stream"]))
        kinds = hta.setdefault(key, {k: 0 for k in KINDS.values()})
        kinds[KINDS[row["idle_category"]]] = round(row["idle_time"] * 1000)

    ours = {
        (r["rank"], r["stream"]): {k: r[k] for k in KINDS.values()}
        for r in summary.get("idle_by_stream", [])
    }
    return 0 if hta_runner.agree("idle time by stream", sorted(hta.items()), sorted(ours.items())) else 1


if __name__ == "__main__":
    sys.exit(main())
