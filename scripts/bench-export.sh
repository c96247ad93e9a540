#!/usr/bin/env bash
# `cuprof export` against `cuprof report` (BENCHMARKS.md, "Export"): MB/s of uncompressed JSON on
# one core (taskset), the dataset's size against the traces', and a DuckDB top-kernels query
# over every rank.
#   scripts/bench-export.sh            # CUPROF_BENCH_RANKS=8 CUPROF_BENCH_EVENTS=250000
# Traces are generated into ${CUPROF_BENCH_DIR:-/tmp/cuprof-bench-export} and reused.
set -euo pipefail
cd "$(dirname "$0")/.."
ranks="${CUPROF_BENCH_RANKS:-8}"
events="${CUPROF_BENCH_EVENTS:-250000}"
dir="${CUPROF_BENCH_DIR:-/tmp/cuprof-bench-export}"
venv_bin="$(bash scripts/python-env.sh)"
export PATH="$venv_bin:$PATH"
# shellcheck source=scripts/bench/ranks.sh
source scripts/bench/ranks.sh
rm -rf "$dir/ds1" "$dir/ds"
report_s=$(best taskset -c 0 "$bin" report "$rank0")
export_s=$(best taskset -c 0 "$bin" export "$rank0" -o "$dir/ds1" -j 1)
all_s=$(best "$bin" export "$traces" -o "$dir/ds")
gz=$(du -cb "$traces"/*.trace.json.gz | tail -1 | cut -f1)
ds=$(du -sb "$dir/ds" | cut -f1)
python3 - "$raw0" "$report_s" "$export_s" "$all_s" "$gz" "$ds" "$ranks" "$events" <<'PY'
import sys
raw, rep, exp, alls, gz, ds, ranks, events = map(float, sys.argv[1:])
print(f"one rank: {raw/1e6:.0f} MB of JSON, {int(events)} events or more")
print(f"report, one core: {rep:.2f} s, {raw/1e6/rep:.1f} MB/s")
print(f"export, one core: {exp:.2f} s, {raw/1e6/exp:.1f} MB/s ({rep/exp:.2f}x report)")
print(f"export of {int(ranks)} ranks, every core: {alls:.2f} s, {ranks*raw/1e6/alls:.1f} MB/s")
print(f"dataset {ds/1e6:.1f} MB vs traces {gz/1e6:.1f} MB (.trace.json.gz): {ds/gz:.2f}x")
PY
python3 - "$dir/ds" <<'PY'
import sys, time, duckdb
d = sys.argv[1]
q = f"""SELECT name, count(*) AS n, sum(end_ns - start_ns) AS total_ns
FROM read_parquet('{d}/kernels/**/*.parquet', hive_partitioning = true)
GROUP BY name ORDER BY total_ns DESC LIMIT 15"""
con = duckdb.connect()
n = con.execute(f"SELECT count(*) FROM read_parquet('{d}/kernels/**/*.parquet')").fetchone()[0]
times = []
for _ in range(5):
    t0 = time.perf_counter()
    con.execute(q).fetchall()
    times.append(time.perf_counter() - t0)
print(f"DuckDB top kernels over {n} kernels: best {min(times)*1000:.0f} ms, median {sorted(times)[2]*1000:.0f} ms (5 runs, duckdb {duckdb.__version__}, {con.execute('select current_setting(' + chr(39) + 'threads' + chr(39) + ')').fetchone()[0]} threads)")
PY
