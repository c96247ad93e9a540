"""TensorBoard's profiler plugin (torch-tb-profiler) on one trace's PyTorch allocations: its
views, and its memory view's statistics per operator (allocations, bytes, by device), as its
server would compute them. Prints one JSON line.

    python3 tb_memory.py TRACE
"""
import json
import sys
import tempfile

import tb_plugin

data, profile = tb_plugin.load(sys.argv[1], tempfile.mkdtemp())
stats = {}
if profile.memory_snapshot is not None:
    stats = profile.memory_snapshot.get_memory_statistics(profile.tid2tree)
print(json.dumps({"views": [v.display_name for v in profile.views], "stats": stats}, sort_keys=True))
