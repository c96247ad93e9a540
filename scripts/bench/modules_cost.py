"""What `--with-modules` costs the program thread, next to `--with-stack` (issue 50).

    python3 scripts/bench/modules_cost.py MODEL STEPS ROUNDS

MODEL: flux or llama (tests/apps/real_models_lib.py). Each round runs scripts/bench/real_ops.py
under cuprof three times, interleaved: operators only, with CUPROF_WITH_MODULES=1 and with
CUPROF_WITH_STACK=1. Each run's figure is taken inside one process, as real_ops.py takes it:
the median recording step's program-thread CPU minus the median idle step's (idle and
recording steps alternate), so that how fast one process happens to run cancels out. Prints
each run, then per variant the median over rounds, and the µs that modules and stacks add per
step over operators alone: per module call (module calls per step counted here, with a
forward pre-hook, in a process of its own) and per operator. Libraries: as real_ops.py finds
them (CUPROF_LIB, else $CARGO_TARGET_DIR/release's).
"""
import json
import os
import statistics
import subprocess
import sys

model, steps, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
apps = os.path.join(root, "tests", "apps")
count = subprocess.run([sys.executable, "-c", f"""
import sys, torch
sys.path.insert(0, {apps!r})
torch.manual_seed(0); torch.set_num_threads(1)
import real_models_lib
step = real_models_lib.MODELS[{model!r}]()
step()
calls = [0]
def pre(m, a):
    calls[0] += 1
torch.nn.modules.module.register_module_forward_pre_hook(pre)
step()
print(calls[0])
"""], capture_output=True, text=True, check=True).stdout.split()[-1]
modules, ops = int(count), {"flux": 1125, "llama": 2362}[model]
variants = [("operators", {}), ("modules", {"CUPROF_WITH_MODULES": "1"}),
            ("stack", {"CUPROF_WITH_STACK": "1"})]
added = {name: [] for name, _ in variants}
for _ in range(rounds):
    for name, extra in variants:
        env = dict(os.environ, CUPROF_RECORD_SHAPES="1", **extra)
        line = subprocess.run(
            [sys.executable, os.path.join(root, "scripts", "bench", "real_ops.py"), "cuprof",
             model, steps], env=env, capture_output=True, text=True,
            check=True).stdout.splitlines()[-1]
        r = json.loads(line)
        added[name].append((r["recording_ms"] - r["idle_ms"]) * 1e3)
        print("%-10s recording - idle: %+.1f us/step (idle %.2f ms)" % (
            name, added[name][-1], r["idle_ms"]), flush=True)
med = {name: statistics.median(v) for name, v in added.items()}
print(json.dumps({"model": model, "module_calls_per_step": modules, "ops_per_step": ops,
                  "median_added_us_per_step": med,
                  "modules_us_per_module_call": (med["modules"] - med["operators"]) / modules,
                  "stack_us_per_operator": (med["stack"] - med["operators"]) / ops}))
