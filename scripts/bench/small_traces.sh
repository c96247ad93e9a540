# Sourced by scripts/bench-merge-small.sh and scripts/bench/merge-small-interleaved.sh (from the
# repository root): sets `dir`, `plain` and `host`, the two traces of CUPROF_BENCH_KERNELS small
# kernels (without and with cuprof's header) in CUPROF_BENCH_DIR, generated if absent.
kernels="${CUPROF_BENCH_KERNELS:-400000}"
dir="${CUPROF_BENCH_DIR:-/tmp/cuprof-bench-small}"
mkdir -p "$dir/out"
plain="$dir/small-$kernels-plain.trace.json.gz"
host="$dir/small-$kernels-host.trace.json.gz"
[ -f "$plain" ] || python3 scripts/bench/gen_small.py "$plain" "$kernels"
[ -f "$host" ] || python3 scripts/bench/gen_small.py "$host" "$kernels" bench
