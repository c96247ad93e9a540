"""HTA as the check scripts beside this file run it: on one directory of traces, keeping the
traces' nanoseconds (HTA_DISABLE_NS_ROUNDING=1; by default HTA rounds every event to whole
microseconds) and the last ProfilerStep's GPU work (which cuprof counts)."""

import json
import logging
import os
import sys
import warnings


def analyzer(trace_dir):
    """HTA's TraceAnalysis of `trace_dir`, or None (after saying why on stderr) when HTA cannot
    be imported."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    warnings.filterwarnings("ignore")
    try:
        logging.disable(logging.WARNING)
        from hta.trace_analysis import TraceAnalysis
    except Exception as e:  # pragma: no cover - depends on the environment
        print(f"HTA is not installed ({e}); run `bash scripts/test.sh`", file=sys.stderr)
        return None
    return TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)


def inputs(argv):
    """What a check script is given, `TRACE_DIR SUMMARY_JSON`: HTA's analyzer of the traces, its
    ranks and cuprof's summary; None when HTA cannot be imported (the script exits 2)."""
    trace_dir, summary_json = argv[1:3]
    a = analyzer(trace_dir)
    if a is None:
        return None
    with open(summary_json) as f:
        summary = json.load(f)
    return a, list(a.t.traces.keys()), summary


def agree(what, hta, ours):
    """Prints both sides and whether they agree on `what`; True when they do."""
    print(f"HTA {what}:    {hta}")
    print(f"cuprof {what}: {ours}")
    same = hta == ours
    print(f"cuprof and HTA {'agree' if same else 'disagree'} on {what}")
    return same
