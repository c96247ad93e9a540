"""TensorBoard's profiler plugin (torch-tb-profiler) reading one trace as its server would,
without the server: its own parser and run generator."""
import os
import shutil


def load(trace, work):
    """The plugin's (RunProfileData, RunProfile) for `trace`, copied into the folder `work`."""
    # The plugin only discovers WORKER.pt.trace.json[.gz].
    tb_file = os.path.join(work, "worker0.pt.trace.json" + (".gz" if trace.endswith(".gz") else ""))
    shutil.copy(trace, tb_file)
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.run_generator import RunGenerator

    data = RunProfileData.parse("worker0", None, tb_file, work)
    return data, RunGenerator("worker0", None, data).generate_run_profile()
