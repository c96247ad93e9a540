"""What real consumers make of a trace's PyTorch operators. Prints one JSON line:
{"tensorboard": {name: calls}, "hta": {name: count}, "tensorboard_call_stacks": n,
 "tensorboard_complaints": [the errors the plugin logged about the input]}

- tensorboard: the Operator view of TensorBoard's profiler plugin (torch-tb-profiler's own
  parser and run generator, no server), one row per operator name with its number of calls;
- hta: Holistic Trace Analysis's parsed trace, cpu_op events counted by name.
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
os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"

trace = sys.argv[1]
work = tempfile.mkdtemp()
try:
    complaints = tb_plugin.complaints()
    data, profile = tb_plugin.load(trace, work)
    rows = profile.operation_table_by_name["data"]
    tensorboard = {r["name"]: r["calls"] for r in rows}
    stacks = sum(1 for r in rows if r.get("has_call_stack"))

    hta_dir = os.path.join(work, "hta")
    os.mkdir(hta_dir)
    shutil.copy(trace, hta_dir)
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_dir=hta_dir)
    df = ta.t.get_trace(0)
    sym = ta.t.symbol_table.get_sym_table()
    hta = {}
    for cat, name in zip(df["cat"], df["name"]):
        if sym[cat] == "cpu_op":
            hta[sym[name]] = hta.get(sym[name], 0) + 1
finally:
    shutil.rmtree(work, ignore_errors=True)
print(json.dumps({"tensorboard": tensorboard, "hta": hta, "tensorboard_call_stacks": stacks,
                  "tensorboard_complaints": complaints}))
