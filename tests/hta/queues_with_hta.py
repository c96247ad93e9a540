#!/usr/bin/env python3
"""Check `cuprof report`'s launch queues (`launch_queues`) against HolisticTraceAnalysis.

    python3 tests/hta/queues_with_hta.py TRACE_DIR SUMMARY_JSON

TRACE_DIR holds one rank's trace (HTA reads every *.json / *.gz in it); SUMMARY_JSON is what
`cuprof report TRACE_DIR -o OUT` wrote. HTA's `get_queue_length_time_series` gives, per
stream, the queue's length after each change (+1 at a launch call's start, -1 at its GPU
operation's start); `get_queue_length_summary` counts those changes and takes their maximum.
Per stream, cuprof's `launches` must be half HTA's count of changes, its `max` HTA's maximum,
its `full_ns` what HTA's `get_time_spent_blocked_on_full_queue` sums (0 when HTA finds no time
at a full queue), and its `mean` the time-weighted mean of HTA's series, from the stream's
first change to its last (HTA is run with HTA_DISABLE_NS_ROUNDING=1, so that it keeps the
trace's nanoseconds).

Prints both sides; exit status 0 when they agree, 1 if not, 2 when HTA cannot run.
"""

import sys

import hta_runner


def main():
    given = hta_runner.inputs(sys.argv)
    if given is None:
        return 2
    analyzer, ranks, summary = given
    series = analyzer.get_queue_length_time_series(ranks=ranks)
    full = analyzer.get_time_spent_blocked_on_full_queue(series)
    full_ns = {}
    if full is not None:
        for _, row in full.iterrows():
            full_ns[(int(row["rank"]), int(row["stream"]))] = round(
                row["duration_at_max_queue_length"] * 1000
            )
    hta = {}
    for rank, df in series.items():
        for stream, s in df.groupby("stream"):
            s = s.sort_values(by="ts", kind="stable")
            ts = [round(t * 1000) for t in s["ts"]]
            lengths = [int(x) for x in s["queue_length"]]
            area = sum(lengths[i] * (ts[i + 1] - ts[i]) for i in range(len(ts) - 1))
            span = ts[-1] - ts[0]
            hta[(int(rank), int(stream))] = {
                "launches": len(lengths) // 2,
                "max": max(lengths),
                "mean": round(area / span, 6) if span > 0 else 0.0,
                "full_ns": full_ns.get((int(rank), int(stream)), 0),
            }

    ours = {
        (r["rank"], r["stream"]): {
            "launches": r["launches"],
            "max": r["max"],
            "mean": round(r["mean"], 6),
            "full_ns": r["full_ns"],
        }
        for r in summary.get("launch_queues", [])
    }
    return 0 if hta_runner.agree("launch queues", sorted(hta.items()), sorted(ours.items())) else 1


if __name__ == "__main__":
    sys.exit(main())
