"""Real models on the CPU, traced two ways for the operator tests (random weights, built from
small configs: nothing is downloaded).

    python3 real_models.py cuprof MODEL          # under libcuprof.so + the libcupti double
    python3 real_models.py torch MODEL OUT.json  # under torch.profiler (record_shapes)

MODEL: `flux` (a diffusers FluxTransformer2DModel's inference passes), `llama` (a Hugging
Face LlamaForCausalLM's training step with AdamW) or `gpt2` (a GPT2LMHeadModel's inference
pass). Each runs 4 steps with the schedule wait=1,
warmup=1, active=2. CUPROF_TEST_FLOPS=1 asks torch.profiler for with_flops too and prints its
FLOP count per operator and input shapes in the JSON line. CUPROF_TEST_ALL_THREADS=1 runs each
step's model on a second thread as well (torch.profiler: profile_all_threads).
CUPROF_TEST_MEMORY=1 asks torch.profiler for profile_memory (cuprof: the MEM activity) and
prints key_averages' CPU memory per operator name ([CPU Mem, Self CPU Mem]) in the JSON line.
CUPROF_TEST_STACK=1 asks torch.profiler for with_stack (torch 2.x: Python function events).
"""

import ctypes
import json
import os
import sys
import threading

import torch

mode, model_name = sys.argv[1], sys.argv[2]
if mode == "cuprof":
    import double

    d = double.load()
    d.cuInit(0)
    step_boundary = ctypes.CDLL(None).cuprof_step
torch.manual_seed(0)
torch.set_num_threads(1)

from real_models_lib import MODELS  # noqa: E402

step = MODELS[model_name]()
all_threads = os.environ.get("CUPROF_TEST_ALL_THREADS") == "1"


def run_step():
    step()
    if all_threads:
        t = threading.Thread(target=step, name="second")
        t.start()
        t.join()


result = {"mode": mode, "model": model_name}
if mode == "cuprof":
    for _ in range(4):
        run_step()
        step_boundary()
    d.flush()
else:
    out = sys.argv[3]
    flops = os.environ.get("CUPROF_TEST_FLOPS") == "1"
    kwargs = {}
    if all_threads:
        kwargs["experimental_config"] = torch._C._profiler._ExperimentalConfig(
            profile_all_threads=True
        )
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        record_shapes=True,
        with_flops=flops,
        profile_memory=os.environ.get("CUPROF_TEST_MEMORY") == "1",
        with_stack=os.environ.get("CUPROF_TEST_STACK") == "1",
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=lambda p: p.export_chrome_trace(out),
        **kwargs,
    ) as prof:
        for _ in range(4):
            run_step()
            prof.step()
    if os.environ.get("CUPROF_TEST_MEMORY") == "1":
        result["memory"] = {
            e.key: [e.cpu_memory_usage, e.self_cpu_memory_usage]
            for e in prof.key_averages()
        }
    if flops:
        # Per operator and input shapes (what torch's count depends on): key_averages' totals
        # differ from the trace's events, as it drops an operator nested in one of its name.
        result["flops"] = {
            e.name + " " + json.dumps(e.input_shapes, separators=(",", ":")): e.flops
            for e in prof.events()
            if e.flops
        }
print(json.dumps(result))
