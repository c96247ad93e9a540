"""What TensorBoard's profiler plugin (torch-tb-profiler) shows for a trace in its Overview, Kernel
and Trace views, through its own parser and run generator (what its RunLoader runs for each
worker file, no server). Prints one JSON line:

{"views": [...], "steps": [[name, us], ...], "avg_step_us": us,
 "gpu_utilization": {device: fraction}, "kernels": {name: calls}, "trace_file": bool,
 "recommendations": html, "complaints": [the errors the plugin logged about the input]}
"""
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings

import tb_plugin

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

trace = sys.argv[1]
work = tempfile.mkdtemp()
try:
    from torch_tb_profiler.profiler.event_parser import ProfileRole

    complaints = tb_plugin.complaints()
    data, profile = tb_plugin.load(trace, work)
    steps = [
        [name, costs.costs[ProfileRole.Total]]
        for name, costs in zip(data.steps_names, data.steps_costs)
    ]
    metrics = data.gpu_metrics_parser
    utilization = {str(g): metrics.gpu_utilization[g] for g in sorted(metrics.gpu_ids)}
    kernels = {}
    if profile.kernel_table is not None:
        for row in profile.kernel_table["data"]["rows"]:
            kernels[row[0]] = row[2]
    out = {
        "views": [v.display_name for v in profile.views],
        "steps": steps,
        "avg_step_us": data.avg_costs.costs[ProfileRole.Total],
        "gpu_utilization": utilization,
        "kernels": kernels,
        "trace_file": os.path.exists(profile.trace_file_path),
        "recommendations": profile.overview["recommendations"],
        "complaints": complaints,
    }
finally:
    shutil.rmtree(work, ignore_errors=True)
print(json.dumps(out))
