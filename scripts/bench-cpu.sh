#!/usr/bin/env bash
# CPU-side overhead figures of cuprof (issue 8), on any machine (no GPU needed):
#
#  1. `cargo bench -p cuprof-core --bench pipeline` (criterion): decode of real-layout CUPTI 13.0
#     record buffers, the channel hand-off, the gzip JSON writer, end to end on one core; plus
#     the per-stage figures on the thread's CPU clock, bytes on disk per kernel per gzip level,
#     and the event model's sizes. Prints one table at the end.
#  2. A preloaded process: python3 + ctypes driving the libcupti test double at RATE records/s
#     (default 1,000,000: `double_burst` = one runtime API record + one kernel record per
#     launch) for SECONDS (default 2) under the release libcuprof.so; reports records produced
#     by the double versus kernels in the trace, cuprofStats' drop counters, and the peak RSS
#     the tracer adds (the same run with CUPROF_ENABLED=0 as the baseline).
#  3. NVTX ranges under the preload (part of --preload-only): the real NVTX3 loader (the `nvtx`
#     package) calling cuprof's NVTX injection; ns added per push+pop on the application
#     thread, against the same loop untraced (NVTX calls are no-ops without an injection), and
#     every range checked in the trace.
#  4. A ready on-demand process (CUPROF_ON_DEMAND=1, never captured) against the same launch
#     loop untraced (part of --preload-only; scripts/bench/on_demand_ready.sh runs it alone).
#
# Usage: scripts/bench-cpu.sh [--quick] [--no-criterion] [--no-preload]
#   --quick         criterion with short measurement times (about 1 minute instead of ~4)
#   --no-criterion  only the summary figures of the bench binary (no criterion groups)
#   --no-preload    skip parts 2 and 3
#   --preload-only  only parts 2 and 3
# Environment: BENCH_CHUNKED=0 (skip the one-big-trace read), CHUNKED_MB, RATE, BENCH_SECONDS, BENCH_NVTX=1 (part 2: launches inside NVTX ranges), BENCH_REPS (medians over this many passes, default 5),
#   CARGO_TARGET_DIR (default target/). Benchmarks are noisy while other builds run on the
#   machine: the CPU-clock figures are steadier than the wall-clock ones; repeat and compare
#   medians.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target=${CARGO_TARGET_DIR:-$root/target}
quick=0 criterion=1 preload=1 cargo_bench=1
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    --no-criterion) criterion=0 ;;
    --no-preload) preload=0 ;;
    --preload-only) cargo_bench=0 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "unknown argument: $a" >&2; exit 2 ;;
  esac
done
rate=${RATE:-1000000}
seconds=${BENCH_SECONDS:-2}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------------------------ 1b. one big trace, every core
# Issue 53: a 5 GiB trace read by `load` and `report` on 1 and on every core (at most 4).
if [ $cargo_bench = 1 ] && [ "${BENCH_CHUNKED:-1}" = 1 ]; then
  workers=$(nproc); [ "$workers" -gt 4 ] && workers=4; [ "$workers" -lt 2 ] && workers=2
  CHUNKED_MB="${CHUNKED_MB:-5120}" BENCH_WORKERS="$workers" scripts/bench/chunked_read.sh
fi

# ------------------------------------------------------------------ 1. cargo bench
summary="$log/summary.json"
if [ $cargo_bench = 1 ]; then
args=()
if [ $criterion = 0 ]; then
  export CUPROF_BENCH_NO_CRITERION=1   # the bench binary prints its summary and stops
elif [ $quick = 1 ]; then
  args=(--warm-up-time 0.5 --measurement-time 1.5)
fi
echo "== cargo bench -p cuprof-core --bench pipeline -- ${args[*]:-}"
CUPROF_BENCH_SUMMARY="$summary" CUPROF_BENCH_REPS="${BENCH_REPS:-5}" \
  cargo bench -p cuprof-core --bench pipeline -- ${args[@]+"${args[@]}"} 2>&1 | tee "$log/bench.txt" \
  | grep -E "^(==|size_of|one |1,000,000|mix|kernels_only|decode|callback|writer|gzip|end to end|[a-z_]+/)" || true

python3 - "$summary" "$target/criterion" "$criterion" <<'PY'
import json, os, sys
s = json.load(open(sys.argv[1]))
crit = sys.argv[2] if sys.argv[3] == "1" else "/nonexistent"
print()
print("== summary (per-stage medians on the thread's CPU clock; wall clock in brackets)")
rows = [
    ("decode, mix (callback thread)", "decode_mix"),
    ("decode, kernels only", "decode_kernels_only"),
    ("decode + try_send, mix (callback total)", "callback_mix"),
    ("writer: session + gzip 1, mix", "writer_mix"),
    ("writer: session + gzip 1, kernels only", "writer_kernels_only"),
    ("gzip 1 alone on the writer's JSON, mix", "gzip1_alone_mix"),
    ("end to end on one core, mix", "e2e_mix"),
    ("end to end on one core, kernels only", "e2e_kernels_only"),
]
print(f"{'stage':44} {'ns/record':>10} {'M records/s':>12} {'(wall)':>8}")
for label, k in rows:
    if f"{k}_ns_per_record_cpu" in s:
        print(f"{label:44} {s[k + '_ns_per_record_cpu']:10.1f} {s[k + '_per_s_cpu'] / 1e6:12.2f} {s[k + '_per_s_wall'] / 1e6:8.2f}")
print()
print(f"{'gzip level':12} {'B/kernel mix':>13} {'B/event mix':>12} {'B/kernel GPU-only':>18} {'writer M rec/s (mix)':>21}")
for lv in range(10):
    k = f"bytes_per_kernel_mix_gzip{lv}"
    if k in s:
        print(f"{lv:<12} {s[k]:13.1f} {s[f'bytes_per_event_mix_gzip{lv}']:12.1f} "
              f"{s.get(f'bytes_per_kernel_kernels_only_gzip{lv}', float('nan')):18.1f} "
              f"{s[f'writer_mix_gzip{lv}_per_s_cpu'] / 1e6:21.2f}")
print()
if "rss_added_mib_1m_kernels" in s:
    print(f"peak RSS added by decode + channel + session + writer for a 1,000,000-kernel window (one thread): "
          f"{s['rss_added_mib_1m_kernels']:.0f} MiB")
print(f"size_of::<Event>() = {s['size_of_Event']} B; records per 8 MiB buffer (mix) = {s['records_per_buffer']}; "
      f"JSON per record: mix {s.get('json_bytes_per_record_mix', 0):.0f} B, kernels only {s.get('json_bytes_per_record_kernels_only', 0):.0f} B")
# criterion's own estimates (wall clock), when it ran
out = []
for group in ["decode", "channel", "callback", "writer", "end_to_end"]:
    gdir = os.path.join(crit, group)
    if not os.path.isdir(gdir):
        continue
    for root, dirs, files in os.walk(gdir):
        if root.endswith("/new") and "estimates.json" in files and "benchmark.json" in files:
            est = json.load(open(os.path.join(root, "estimates.json")))
            b = json.load(open(os.path.join(root, "benchmark.json")))
            tp = (b.get("throughput") or {}).get("Elements")
            med = est["median"]["point_estimate"]
            out.append((b["full_id"], med, tp))
if out:
    print()
    print("== criterion (wall clock, median of its samples; latest run of each)")
    print(f"{'benchmark':55} {'time/iter':>12} {'ns/element':>11} {'M elem/s':>9}")
    for fid, med, tp in sorted(out):
        per = med / tp if tp else float("nan")
        print(f"{fid:55} {med / 1e6:10.2f}ms {per:11.1f} {1e3 / per if tp else float('nan'):9.2f}")
PY
fi

[ $preload = 1 ] || exit 0

# ------------------------------------------------------------------ 2. preloaded process
echo
echo "== cargo build --release -p cuprof-preload -p cupti-double"
cargo build --release -p cuprof-preload -p cupti-double 2>&1 | tail -1
lib=$target/release/libcuprof.so
dbl=$target/release/libcupti_double.so
for f in "$lib" "$dbl"; do [ -f "$f" ] || { echo "missing $f" >&2; exit 1; }; done

driver=$log/burst.py
cat >"$driver" <<'PY'
"""Drives the libcupti double at RATE records/s for SECONDS: double_burst(n) = n launches, each
one runtime API record + one kernel record (subscriber callbacks off, as in a hot loop)."""
import contextlib, json, os, resource, sys, time
import double as dbl
rate, seconds = float(sys.argv[1]), float(sys.argv[2])
# BENCH_NVTX=1: each chunk of launches inside an NVTX range (every launch then carries an
# external correlation record linking it to the range, as in a program with step ranges).
if os.environ.get("BENCH_NVTX") == "1":
    import nvtx
    in_range = lambda: nvtx.annotate("chunk")
else:
    in_range = contextlib.nullcontext
d = dbl.load()
assert d.cuInit(0) == 0
chunk = 500                       # launches per call: 1,000 records when tracing
launches = int(rate * seconds / 2)
done, made, late = 0, 0, 0.0
t0 = time.perf_counter()
while done < launches:
    target = t0 + 2 * done / rate
    now = time.perf_counter()
    if now < target:
        time.sleep(target - now)
    else:
        late = max(late, now - target)
    with in_range():
        made += d.double_burst(chunk, 7)  # records made: 0 when no tool enabled any kind
    done += chunk
elapsed = time.perf_counter() - t0
d.cuptiActivityFlushAll(1)
print(json.dumps({
    "records_made": made, "seconds": round(elapsed, 3), "rate": round(2 * done / elapsed),
    "max_lag_s": round(late, 4),
    "produced": d.double_records_produced(0),
    "produced_kernels": d.double_records_produced(dbl.KIND_CONCURRENT_KERNEL),
    "delivered": d.double_records_delivered(0),
    "dropped_by_double": d.double_records_dropped(),
    "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
}), flush=True)
PY

run_burst() { # enabled outdir
  env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH \
    PYTHONPATH="$root/tests/apps" CUPTI_DOUBLE_LIB="$dbl" LD_PRELOAD="$lib" \
    CUPROF_ENABLED="$1" CUPROF_CUPTI_PATH="$dbl" CUPROF_DIR="$2" CUPROF_NAME=burst \
    python3 "$driver" "$rate" "$seconds"
}
echo "== preloaded: python3 + libcupti double at $rate records/s for $seconds s (launch + kernel records)"
mkdir -p "$log/off" "$log/on"
base=$(run_burst 0 "$log/off" 2>"$log/off.err" | tail -1)
t_start=$(date +%s.%N)
traced=$(run_burst 1 "$log/on" 2>"$log/on.err" | tail -1)
t_end=$(date +%s.%N)
python3 - "$base" "$traced" "$log/on" "$t_start" "$t_end" "$log/on.err" <<'PY'
import glob, gzip, json, re, sys, zlib
base, traced, outdir = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
wall = float(sys.argv[5]) - float(sys.argv[4])
files = glob.glob(outdir + "/*.trace.json.gz")
if not files:
    sys.exit("no trace written; stderr:\n" + open(sys.argv[6]).read())
path = files[0]
# Stream the file: count kernel events without loading a multi-GB JSON document.
kernels, tail, size = 0, b"", 0
needle = b'"cat": "kernel"'
with gzip.open(path, "rb") as f:
    while True:
        chunk = f.read(1 << 22)
        if not chunk:
            break
        buf = tail + chunk
        kernels += buf.count(needle)
        tail = buf[-(len(needle) - 1):]
        size += len(chunk)
        last = buf[-4096:]
stats = json.loads(re.search(rb'"cuprofStats": (\{[^}]*\})', last).group(1))
import os
lost = stats["dropped_channel"] + stats["dropped_cupti"] + stats["dropped_buffers"]
print(f"records produced by the double : {traced['produced']:,} ({traced['produced_kernels']:,} kernel records) "
      f"at {traced['rate']:,} records/s (target met within {traced['max_lag_s'] * 1e3:.1f} ms)")
print(f"kernels in the trace           : {kernels:,} "
      f"({'all of them' if kernels == traced['produced_kernels'] else 'MISSING ' + str(traced['produced_kernels'] - kernels)})")
print(f"cuprofStats                    : events={stats['events']:,} dropped_channel={stats['dropped_channel']} "
      f"dropped_cupti={stats['dropped_cupti']} dropped_buffers={stats['dropped_buffers']} "
      f"kernels_without_timestamps={stats['kernels_without_timestamps']} (lost: {lost})")
print(f"trace file                     : {os.path.getsize(path) / 1e6:.1f} MB gz, {size / 1e6:.0f} MB JSON, "
      f"{os.path.getsize(path) / max(kernels, 1):.1f} B/kernel on disk")
print(f"peak RSS                       : {traced['maxrss_kb'] / 1024:.0f} MiB traced vs {base['maxrss_kb'] / 1024:.0f} MiB untraced "
      f"(+{(traced['maxrss_kb'] - base['maxrss_kb']) / 1024:.0f} MiB for {traced['produced_kernels']:,} kernels)")
print(f"process wall time              : {wall:.2f} s traced (driving {traced['seconds']:.2f} s; the rest is the writer draining at exit)")
print(json.dumps({"preload": {"produced": traced["produced"], "kernels_produced": traced["produced_kernels"],
                             "kernels_in_trace": kernels, "stats": stats, "rate": traced["rate"],
                             "rss_added_mib": round((traced["maxrss_kb"] - base["maxrss_kb"]) / 1024, 1),
                             "wall_s": round(wall, 2), "gz_bytes": os.path.getsize(path)}}))
PY

# ------------------------------------------------------------------ 3. NVTX ranges
ranges=$log/ranges.py
cat >"$ranges" <<'PY'
"""BATCHES x 1,000 NVTX push/pop pairs through the `nvtx` package; only the loops are timed,
with a 2 ms pause between batches so that the writer keeps up (the cost measured is the
application thread's, not a full channel's). Prints JSON: median ns per push+pop over batches."""
import json, os, statistics, sys, time
import nvtx
if os.environ.get("CUPROF_ENABLED") == "1":
    import double as dbl
    assert dbl.load().cuInit(0) == 0   # tracing starts with CUDA
dom = nvtx.get_domain("bench")
attr = dom.get_event_attributes(message="range")
per = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter_ns()
    for _ in range(1000):
        dom.push_range(attr)
        dom.pop_range()
    per.append((time.perf_counter_ns() - t) / 1000)
    time.sleep(0.002)
print(json.dumps({"ns_per_range": statistics.median(per), "ranges": 1000 * len(per)}))
PY
run_ranges() { # enabled outdir
  env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH OPENBLAS_NUM_THREADS=1 \
    PYTHONPATH="$root/tests/apps" CUPTI_DOUBLE_LIB="$dbl" LD_PRELOAD="$lib" \
    CUPROF_ENABLED="$1" CUPROF_CUPTI_PATH="$dbl" CUPROF_DIR="$2" CUPROF_NAME=ranges \
    python3 "$ranges" 100
}
if python3 -c "import nvtx" 2>/dev/null; then
  echo "== NVTX ranges: 100 x 1,000 push/pop pairs, untraced and traced, 3 alternating rounds"
  for r in 1 2 3; do
    mkdir -p "$log/r$r-off" "$log/r$r-on"
    run_ranges 0 "$log/r$r-off" 2>/dev/null | tail -1 >"$log/r$r-off.json"
    run_ranges 1 "$log/r$r-on" 2>"$log/r$r-on.err" | tail -1 >"$log/r$r-on.json"
  done
  python3 - "$log" <<'PY'
import glob, gzip, json, statistics, sys
log = sys.argv[1]
off = [json.load(open(f"{log}/r{r}-off.json"))["ns_per_range"] for r in (1, 2, 3)]
on = [json.load(open(f"{log}/r{r}-on.json"))["ns_per_range"] for r in (1, 2, 3)]
kept = []
for r in (1, 2, 3):
    files = glob.glob(f"{log}/r{r}-on/*.trace.json.gz")
    t = json.load(gzip.open(files[0])) if files else {"traceEvents": []}
    n = sum(1 for e in t["traceEvents"] if e.get("cat") == "user_annotation" and e.get("name") == "range")
    kept.append((n, t.get("cuprofStats", {}).get("dropped_channel")))
print(f"untraced            : {statistics.median(off):.0f} ns per push+pop (rounds: {', '.join(f'{x:.0f}' for x in off)})")
print(f"traced              : {statistics.median(on):.0f} ns per push+pop (rounds: {', '.join(f'{x:.0f}' for x in on)})")
print(f"added by cuprof     : {statistics.median(on) - statistics.median(off):.0f} ns per range")
print(f"ranges in the trace : {', '.join(f'{n:,} (dropped {d})' for n, d in kept)} of 100,000 per round")
print(json.dumps({"nvtx": {"untraced_ns": off, "traced_ns": on, "kept": kept}}))
PY
else
  echo "== NVTX ranges: skipped (pip install nvtx)"
fi

# ------------------------------------------------------------------ 4. on-demand, ready
echo
"$root/scripts/bench/on_demand_ready.sh" "$target/release"
