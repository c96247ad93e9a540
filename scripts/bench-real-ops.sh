#!/usr/bin/env bash
# Program-thread CPU per PyTorch operator inside recorded steps, on real models (issue 25): a
# diffusers transformer's inference and a Hugging Face causal LM's training step
# (scripts/bench/real_ops.py), in one process where idle and recording steps alternate, for
# cuprof's native observer (with and without Python stacks), its NVTX fallback,
# torch.profiler (record_shapes), and the floor under both (an empty RecordFunction callback
# that asks for inputs: scripts/bench/floor_callback.cpp). ROUNDS rounds, the modes interleaved in each; prints per
# model and mode the medians over rounds of: idle and recording step CPU, their ratio, the µs
# added per operator (operators per step counted by torch.profiler's run), and what the step
# boundary ending each cycle cost the program thread, per operator recorded in the cycle's
# active step (torch.profiler stops and exports there). Each mode's idle steps are not the
# same as an untraced run's (torch.profiler's idle steps run slower than untraced ones), so
# the µs added per operator are taken over the untraced run (mode `none`) of the same round.
# Then, per model in one process (scripts/bench/observer_parts.py), the floor and the observer's
# own formatting (into hooks that do nothing) over steps with no callback.
#
# Processes differ from each other by as much as the costs measured (on a shared VM the same
# untraced step took from 3.9 to 6.8 ms between processes of one run), so each row also gives
# the µs per operator inside each process (its recording step against its own idle step),
# which that spread does not reach; torch.profiler's idle steps are slower than untraced ones,
# so that figure understates its cost. BENCH_RAW=FILE keeps every run's line (JSON).
#
# Usage: scripts/bench-real-ops.sh [STEPS] [ROUNDS]   (defaults 60, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
steps=${1:-60}
rounds=${2:-3}
target=${CARGO_TARGET_DIR:-$root/target}
python=${PYTHON:-$(bash scripts/python-env.sh)/python3}
cargo build --release -q -p cuprof-preload -p cupti-double
lib=$target/release/libcuprof.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cuprof() { # env assignments
  env "$@" CUPROF_LIB="$lib" "$python" scripts/bench/real_ops.py cuprof "$model" "$steps" 2>/dev/null | tail -1
}
results=$out/results.jsonl
for model in flux llama; do
  for r in $(seq "$rounds"); do
    OMP_NUM_THREADS=1 PYTHONPATH="$root/tests/apps" "$python" scripts/bench/real_ops.py none "$model" "$steps" 2>/dev/null | tail -1 | sed "s/}\$/, \"round\": $r}/" >> "$results"
    t=$(OMP_NUM_THREADS=1 PYTHONPATH="$root/tests/apps" "$python" scripts/bench/real_ops.py torch "$model" "$steps" 2>/dev/null | tail -1)
    tag() { sed "s/\"mode\": \"$1\"/\"mode\": \"$2\"/; s/}\$/, \"round\": $r}/"; }
    echo "$t" | tag torch torch.profiler >> "$results"
    OMP_NUM_THREADS=1 PYTHONPATH="$root/tests/apps" "$python" scripts/bench/real_ops.py floor "$model" "$steps" 2>/dev/null | tail -1 | tag floor torch-callback-floor >> "$results"
    cuprof CUPROF_RECORD_SHAPES=1 | tag cuprof cuprof-native >> "$results"
    cuprof CUPROF_RECORD_SHAPES=1 CUPROF_WITH_STACK=1 | tag cuprof cuprof-native+stack >> "$results"
    cuprof CUPROF_RECORD_SHAPES=1 CXX=false CUPROF_CACHE="$out/nocache" | tag cuprof cuprof-nvtx-fallback >> "$results"
  done
done
if [ -n "${BENCH_RAW:-}" ]; then cp "$results" "$BENCH_RAW"; fi
"$python" - "$results" <<'PY'
import collections, json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ops = {r["model"]: r["ops_per_step"] for r in rows if r["ops_per_step"]}
untraced = {(r["model"], r["round"]): r["idle_ms"] for r in rows if r["mode"] == "none"}
by = collections.defaultdict(list)
for r in rows:
    if r["mode"] != "none":
        by[(r["model"], r["mode"])].append(r)
for model in sorted(ops):
    print("%-6s untraced step %.2f ms, %d operators per step" % (
        model, statistics.median(v for (m, _), v in untraced.items() if m == model), ops[model]))
for (model, mode), rs in by.items():
    n = ops[model]
    med = lambda f: statistics.median(f(r) for r in rs)
    base = lambda r: untraced[(r["model"], r["round"])]
    print("%-6s %-21s idle %6.2f ms  recording %6.2f ms  %.2fx untraced  %+.2f us/op in steps  (%+.2f in process)  cycle end %+.2f us/op  (%d rounds)" % (
        model, mode, med(lambda r: r["idle_ms"]), med(lambda r: r["recording_ms"]),
        med(lambda r: r["recording_ms"] / base(r)),
        med(lambda r: (r["recording_ms"] - base(r)) * 1e3 / n),
        med(lambda r: (r["recording_ms"] - r["idle_ms"]) * 1e3 / n),
        med(lambda r: r["cycle_end_ms"] * 1e3 / n), len(rs)))
PY
# Where the native observer's cost goes, measured in one process per model (parts interleaved).
for model in flux llama; do
  OMP_NUM_THREADS=1 "$python" scripts/bench/observer_parts.py "$model" 20 "$((rounds + 2))" 2>/dev/null
done
