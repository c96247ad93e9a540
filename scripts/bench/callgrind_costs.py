"""Reads what scripts/bench-ops-instructions.sh left: per model and mode, callgrind's dumps of
the program thread (thread 1) for the counted steps (cg.out.1-01) and for the stop
(cg.out.2-01), and the run's result.json. Prints instructions per operator over the untraced steps
of the same model, split by library, and the stop's instructions per operator recorded.

    python3 callgrind_costs.py OUT "MODELS" "MODES"
"""
import collections
import gzip
import json
import os
import re
import sys


def self_cost_by_object(path):
    """Self instructions per object file (callgrind's `ob=`): cost lines that follow a
    `calls=` line are a callee's inclusive cost and are skipped, so nothing counts twice."""
    names, by_object = {}, collections.Counter()
    current, after_call = "?", False
    # bench-results keeps the dumps gzipped.
    opener = (lambda: gzip.open(path + ".gz", "rt")) if not os.path.exists(path) else (lambda: open(path))
    with opener() as f:
        for line in f:
            if line.startswith(("ob=", "cob=")):
                # A compressed name is defined once, by whichever of the two comes first.
                key, _, rest = line.strip().partition("=")
                m = re.match(r"\((\d+)\)(?: (.*))?", rest)
                if m and m.group(2):
                    names[m.group(1)] = m.group(2)
                if key == "ob":
                    current = names.get(m.group(1), "?") if m else rest
            elif line.startswith("calls="):
                after_call = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_call:
                    after_call = False
                    continue
                parts = line.split()
                if len(parts) >= 2:
                    by_object[current] += int(parts[1])
    return by_object


def short(obj):
    base = os.path.basename(obj)
    for prefix in ("libpython", "libtorch_cpu", "libtorch_python", "libc10", "libc.so",
                   "libstdc++", "ld-linux", "libcuprof_observer", "libcuprof.so",
                   "libcupti_double", "libm.so"):
        if base.startswith(prefix):
            return prefix.removesuffix(".so")
    return "other"


def main():
    out, models, modes = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
    for model in models:
        rows = {}
        for mode in modes:
            d = os.path.join(out, "%s-%s" % (model, mode))
            try:
                result = json.load(open(os.path.join(d, "result.json")))
                steps = self_cost_by_object(os.path.join(d, "cg.out.1-01"))
                stop = self_cost_by_object(os.path.join(d, "cg.out.2-01"))
            except (OSError, ValueError) as e:
                print("%s %s: no result (%s)" % (model, mode, e))
                continue
            parts = collections.Counter()
            for obj, n in steps.items():
                parts[short(obj)] += n
            # Operators as torch.profiler counts them in one step, times the steps counted.
            rows[mode] = (result["ops_per_step"], result["ops_per_step"] * result["steps"],
                          parts, sum(stop.values()))
        if "none" not in rows:
            print("%s: no untraced run to compare with" % model)
            continue
        per_step, ops, base, _ = rows["none"]
        base_per_op = {k: v / ops for k, v in base.items()}
        untraced = sum(base_per_op.values())
        print("%s: %d operators per step; untraced, %.0f instructions per operator" % (
            model, per_step, untraced))
        print("  %-22s %9s %7s %10s   %s" % (
            "mode", "added/op", "x step", "at stop/op", "added per operator, by library"))
        for mode, (_, n, parts, stop) in rows.items():
            if mode == "none":
                continue
            by_lib = {k: parts.get(k, 0) / n - base_per_op.get(k, 0) for k in set(parts) | set(base)}
            added = sum(by_lib.values())
            text = ", ".join("%s %+.0f" % (k, v) for k, v in
                             sorted(by_lib.items(), key=lambda kv: -kv[1]) if abs(v) >= 5)
            print("  %-22s %9.0f %6.2fx %10.0f   %s" % (
                mode, added, (untraced + added) / untraced, stop / n, text))


main()
