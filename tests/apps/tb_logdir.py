"""What TensorBoard's profiler plugin (torch-tb-profiler) lists for `tensorboard --logdir DIR`:
the plugin itself finds the runs in DIR and loads them (tb_plugin.logdir). Prints one JSON line:

{"runs": [...], "workers": {run: [...]}, "spans": {run: {worker: [...]}}}
"""
import json
import logging
import sys
import warnings

import tb_plugin

if __name__ == "__main__":
    # The plugin loads each worker in a spawned process, which imports this file again.
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    print(json.dumps(tb_plugin.logdir(sys.argv[1])), flush=True)
