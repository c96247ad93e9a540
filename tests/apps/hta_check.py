"""Runs Holistic Trace Analysis on a directory of traces and prints its breakdowns as JSON:
{"temporal": {...}, "kernels": {name: sum_us}, "kernel_types": {type: sum_us}, "idle": {stream: us}}.
Times are HTA's, in microseconds, with HTA's nanosecond rounding turned off (so they can be
held against the records exactly)."""
import json
import logging
import os
import sys
import warnings

os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

from hta.trace_analysis import TraceAnalysis  # noqa: E402

ta = TraceAnalysis(trace_dir=sys.argv[1])
tb = ta.get_temporal_breakdown(visualize=False).iloc[0]
kernel_types, kernels = ta.get_gpu_kernel_breakdown(visualize=False)
idle = ta.get_idle_time_breakdown(visualize=False)
idle_df = idle[0] if isinstance(idle, tuple) else idle
print(json.dumps({
    "temporal": {k: float(tb[k]) for k in ["idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)"]},
    "kernels": {str(r["name"]): float(r["sum (us)"]) for _, r in kernels.iterrows()},
    "kernel_types": {str(r["kernel_type"]): float(r["sum"]) for _, r in kernel_types.iterrows()},
    "idle": {str(int(s)): float(g["idle_time"].sum()) for s, g in idle_df.groupby("stream")},
}))
