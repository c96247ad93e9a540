"""Two or more builds of libcuprof.so compared on the program thread's cost per operator.

    python3 scripts/bench/ops_ab.py MODEL STEPS ROUNDS NAME=LIB.so NAME=LIB.so... [-- VAR=VALUE...]

Runs scripts/bench/real_ops.py (MODEL: flux or llama) under each build in turn, ROUNDS
rounds, the builds interleaved in each, shapes recorded. Each run's figure is taken inside one
process: (recording step - idle step) program-thread CPU / operators per step, so that how
fast one process happens to run on a shared machine cancels out; and, from the same process's
idle steps run with torch's floor on (REAL_OPS_FLOOR), cuprof's own part above the floor,
(recording step - floor step) / operators, and the floor itself. Prints each run, then the
medians per build. VAR=VALUE pairs after `--` are added to every run's environment (for
example CUPROF_WITH_STACK=1). Run from the repository root after `cargo build --release`
(the libcupti double comes from target/release).
"""
import json
import os
import statistics
import subprocess
import sys

model, steps, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = sys.argv[4:]
extra = {}
if "--" in args:
    at = args.index("--")
    extra = dict(a.split("=", 1) for a in args[at + 1:])
    args = args[:at]
builds = [a.split("=", 1) for a in args]
root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Operators per step as torch.profiler counts them (scripts/bench/observer_parts.py prints it).
ops = {"flux": 1125, "llama": 2362, "gpt2": 335}[model]
runs = {name: [] for name, _ in builds}
for _ in range(rounds):
    for name, lib in builds:
        # real_ops.py sets cuprof up around itself, with the build given.
        env = dict(os.environ, CUPROF_LIB=os.path.abspath(lib), CUPROF_RECORD_SHAPES="1",
                   REAL_OPS_FLOOR="1", **extra)
        line = subprocess.run(
            [sys.executable, os.path.join(root, "scripts", "bench", "real_ops.py"), "cuprof", model,
             steps], env=env, capture_output=True, text=True, check=True).stdout.splitlines()[-1]
        r = json.loads(line)
        per_op = (r["recording_ms"] - r["idle_ms"]) * 1e3 / ops
        own = (r["recording_ms"] - r["floor_ms"]) * 1e3 / ops
        floor = (r["floor_ms"] - r["idle_ms"]) * 1e3 / ops
        runs[name].append((per_op, r["idle_ms"], r["recording_ms"], own, floor))
        print("%-10s %+.3f us/op  own %+.3f  floor %+.3f  idle %.2f ms  recording %.2f ms" % (
            name, per_op, own, floor, r["idle_ms"], r["recording_ms"]), flush=True)
for name, rs in runs.items():
    med = lambda i: statistics.median(x[i] for x in rs)
    print("median %-10s %+.3f us/op  own %+.3f  floor %+.3f  idle %.2f ms  recording %.2f ms"
          "  (%s, %d rounds)" % (name, med(0), med(3), med(4), med(1), med(2), model, len(rs)))
