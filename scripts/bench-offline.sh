#!/usr/bin/env bash
# The offline commands' speed (BENCHMARKS.md, "Offline commands"): MB/s of uncompressed JSON per
# core of `report` and `merge` on one rank, the speed-up of `report`/`merge` over 8 ranks with
# 1 worker and with N (`-j`), and `repair`'s MB/s and peak RSS on a large trace cut short.
#   scripts/bench-offline.sh             # CUPROF_BENCH_RANKS=8 CUPROF_BENCH_EVENTS=1000000
#   CUPROF_BENCH_JOBS=8 scripts/bench-offline.sh   # the N of the speed-up (default: every core)
# Traces are generated into ${CUPROF_BENCH_DIR:-/tmp/cuprof-bench-offline} and reused.
set -euo pipefail
cd "$(dirname "$0")/.."
ranks="${CUPROF_BENCH_RANKS:-8}"
events="${CUPROF_BENCH_EVENTS:-1000000}"
jobs="${CUPROF_BENCH_JOBS:-$(nproc)}"
dir="${CUPROF_BENCH_DIR:-/tmp/cuprof-bench-offline}"
# shellcheck source=scripts/bench/ranks.sh
source scripts/bench/ranks.sh
rawall=$(cat "$traces"/*.trace.json.gz | gzip -dc | wc -c)
out="$dir/out"
mkdir -p "$out"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
report1=$(best taskset -c 0 "$bin" report "$rank0" -j 1)
merge1=$(best taskset -c 0 "$bin" merge "$rank0" -o "$out/m1.trace.json.gz" -j 1)
mergeN=$(best "$bin" merge "$rank0" -o "$out/mN.trace.json.gz" -j "$jobs")
all1=$(best "$bin" report "$traces" -j 1)
allN=$(best "$bin" report "$traces" -j "$jobs")
mall1=$(best "$bin" merge "$traces" -o "$out/all1.trace.json.gz" -j 1)
mallN=$(best "$bin" merge "$traces" -o "$out/allN.trace.json.gz" -j "$jobs")
# repair: rank 0 cut at 70% of its compressed bytes (what SIGKILL leaves, less the flush point).
cut="$out/cut.trace.json.gz"
size=$(stat -c %s "$rank0")
head -c $((size * 7 / 10)) "$rank0" > "$cut"
rawcut=$(gzip -dc "$cut" 2>/dev/null | wc -c || true)
rm -f "$out/cut.repaired.trace.json.gz"
/usr/bin/time -v "$bin" repair "$cut" -o "$out/cut.repaired.trace.json.gz" 2> "$out/repair.time" >/dev/null
repair_s=$(python3 - "$out/repair.time" <<'PY'
import sys
for l in open(sys.argv[1]):
    if "Elapsed (wall clock)" in l:
        t = l.rsplit(" ", 1)[1].strip().split(":")
        print(sum(float(x) * 60 ** i for i, x in enumerate(reversed(t))))
PY
)
repair_kb=$(grep "Maximum resident" "$out/repair.time" | awk '{print $NF}')
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$raw0" "$rawall" "$rawcut" "$report1" "$merge1" "$mergeN" "$all1" "$allN" "$mall1" "$mallN" "$repair_s" "$repair_kb" "$ranks" "$jobs" <<'PY'
import sys
raw0, rawall, rawcut, rep1, m1, mN, a1, aN, ma1, maN, rs, rkb, ranks, jobs = map(float, sys.argv[1:])
mb = lambda b, s: b / 1e6 / s
print(f"one rank: {raw0/1e6:.0f} MB of JSON; {int(ranks)} ranks: {rawall/1e6:.0f} MB")
print(f"report, one rank, one core:  {rep1:.2f} s, {mb(raw0, rep1):.1f} MB/s")
print(f"merge, one rank, one core:   {m1:.2f} s, {mb(raw0, m1):.1f} MB/s ({rep1/m1:.2f}x report)")
print(f"merge, one rank, -j {int(jobs)}:      {mN:.2f} s, {mb(raw0, mN):.1f} MB/s ({rep1/mN:.2f}x report on one core)")
print(f"report, {int(ranks)} ranks: -j 1 {a1:.2f} s ({mb(rawall, a1):.1f} MB/s), -j {int(jobs)} {aN:.2f} s ({mb(rawall, aN):.1f} MB/s): {a1/aN:.2f}x")
print(f"merge, {int(ranks)} ranks:  -j 1 {ma1:.2f} s ({mb(rawall, ma1):.1f} MB/s), -j {int(jobs)} {maN:.2f} s ({mb(rawall, maN):.1f} MB/s): {ma1/maN:.2f}x")
print(f"repair of rank 0 cut at 70%: {rawcut/1e6:.0f} MB of JSON in {rs:.2f} s, {mb(rawcut, rs):.1f} MB/s, max RSS {rkb/1024:.1f} MiB")
PY
