"""A Hugging Face GPT-2 (tiny config, random weights: nothing is downloaded) run for 4 steps,
traced two ways for the module tests, and what TensorBoard's Module View reads from a trace.

    python3 modules.py cuprof             # under libcuprof.so + the libcupti double
    python3 modules.py torch OUT.json     # under torch.profiler (with_stack: module events)
    python3 modules.py view TRACE...      # TensorBoard's Module View of each TRACE, as JSON

The first two use the schedule wait=1, warmup=1, active=2 (cuprof's from the environment). The
model's forward runs once per step, plus one call of a module outside any model (a root of its
own) and one module called from a thread that records no operators. `view` prints one JSON
line: per trace, the plugin's module tree as [name, occurrences, operators, [children...]] and
the errors it logged reading it.
"""

import ctypes
import json
import logging
import sys
import tempfile
import threading
import warnings

mode = sys.argv[1]
if mode == "view":
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import tb_plugin

    def tree(rows):
        return [[r["name"], r["occurences"], r["operators"], tree(r["children"])] for r in rows]

    views = []
    for trace in sys.argv[2:]:
        complaints = tb_plugin.complaints()
        _, profile = tb_plugin.load(trace, tempfile.mkdtemp())
        view = profile.get_module_view()
        views.append({"modules": tree(view["data"]) if view else None,
                      "complaints": list(complaints)})
    print(json.dumps(views))
    sys.exit(0)

import torch  # noqa: E402

if mode == "cuprof":
    import double

    d = double.load()
    d.cuInit(0)
    step_boundary = ctypes.CDLL(None).cuprof_step
torch.manual_seed(0)
torch.set_num_threads(1)

from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
                    bos_token_id=0, eos_token_id=0, attn_implementation="eager")
model = GPT2LMHeadModel(config).eval()
norm = torch.nn.LayerNorm(32)
ids = torch.randint(0, 64, (1, 8))


def step():
    with torch.no_grad():
        model(ids)
        norm(torch.ones(2, 32))
    t = threading.Thread(target=lambda: norm(torch.ones(2, 32)))
    t.start()
    t.join()


if mode == "cuprof":
    for _ in range(4):
        step()
        step_boundary()
    d.flush()
else:
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        with_stack=True,
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=2),
        on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[2]),
    ) as prof:
        for _ in range(4):
            step()
            prof.step()
