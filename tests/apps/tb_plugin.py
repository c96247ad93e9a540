"""TensorBoard's profiler plugin (torch-tb-profiler) reading one trace as its server would,
without the server: its own parser and run generator."""
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
    """The plugin's (RunProfileData, RunProfile) for `trace`, copied into the folder `work`."""
    # The plugin only discovers WORKER.pt.trace.json[.gz].
    tb_file = os.path.join(work, "worker0.pt.trace.json" + (".gz" if trace.endswith(".gz") else ""))
    shutil.copy(trace, tb_file)
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    data = RunProfileData.parse("worker0", None, tb_file, work)
    return data, RunGenerator("worker0", None, data).generate_run_profile()


def complaints():
    """Starts collecting the plugin's logged errors; returns the list they go into."""
    from torch_tb_profiler import utils

    handler = Complaints()
    utils.get_logger().addHandler(handler)
    return handler.messages
