"""TensorBoard's profiler plugin (torch-tb-profiler) reading one trace as its server would,
without the server: its own parser and run generator; and what the plugin itself lists for a
log directory (`logdir`)."""
import logging
import os
import shutil


class Complaints(logging.Handler):
    """The errors the plugin logs about its input (it carries on past them, dropping what it
    could not place): `ranges on the same thread should not intersect`, for one."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def load(trace, work):
    """The plugin's (RunProfileData, RunProfile) for `trace`, its cache in the folder `work`.
    A file the plugin lists (WORKER[.SPAN].pt.trace.json[.gz]: `cuprof run --tensorboard`'s)
    is read where it is, as that worker; another (torch.profiler's `export_chrome_trace`, cuprof's
    default name) is copied into `work` as worker0's."""
    from torch_tb_profiler import consts
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    match = consts.WORKER_PATTERN.match(os.path.basename(trace))
    if match:
        worker, span, tb_file = match.group(1), match.group(2), trace
    else:
        worker, span = "worker0", None
        tb_file = os.path.join(work, "worker0.pt.trace.json" + (".gz" if trace.endswith(".gz") else ""))
        shutil.copy(trace, tb_file)
    data = RunProfileData.parse(worker, span, tb_file, work)
    return data, RunGenerator(worker, span, data).generate_run_profile()


def logdir(path, timeout_s=300):
    """What TensorBoard's profiler plugin lists for `tensorboard --logdir PATH`: its own
    TorchProfilerPlugin finding and loading the runs, asked through its HTTP routes. Returns
    {"runs": [...], "workers": {run: [...]}, "spans": {run: {worker: [...]}}} (the Overview's
    workers; `spans` only for workers with several)."""
    import json
    import time

    from tensorboard.plugins import base_plugin
    from torch_tb_profiler.plugin import TorchProfilerPlugin
    from werkzeug.test import Client

    plugin = TorchProfilerPlugin(base_plugin.TBContext(logdir=path))
    routes = plugin.get_plugin_apps()
    if not list(plugin._get_run_dirs()):
        # The plugin's own scan finds no file it lists: it would never list a run.
        return {"runs": [], "workers": {}, "spans": {}}

    def get(route, **args):
        response = Client(routes[route]).get("/", query_string=args)
        assert response.status_code == 200, (route, args, response.status_code)
        return json.loads(response.get_data(as_text=True))

    deadline = time.monotonic() + timeout_s
    while True:
        runs = get("/runs")
        if runs["runs"] and not runs["loading"]:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the plugin listed no run of {path} in {timeout_s} s: {runs}")
        time.sleep(0.2)
    out = {"runs": runs["runs"], "workers": {}, "spans": {}}
    for run in runs["runs"]:
        workers = get("/workers", run=run, view="Overview")
        out["workers"][run] = workers
        for worker in workers:
            spans = get("/spans", run=run, worker=worker)
            if spans:
                out["spans"].setdefault(run, {})[worker] = spans
    return out


def complaints():
    """Starts collecting the plugin's logged errors; returns the list they go into."""
    from torch_tb_profiler import utils

    handler = Complaints()
    utils.get_logger().addHandler(handler)
    return handler.messages
