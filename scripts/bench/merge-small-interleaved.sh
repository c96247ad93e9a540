#!/usr/bin/env bash
# Two or more `cuprof` builds compared on scripts/bench-merge-small.sh's traces, on a machine
# that others share: the builds run in turn, round after round, so that a change in load hits
# them alike, and the figures are medians of wall and CPU (user + sys) time (BENCHMARKS.md,
# "merge on many small events").
#   scripts/bench/merge-small-interleaved.sh /tmp/before/cuprof target/release/cuprof
#   CUPROF_BENCH_ROUNDS=7 scripts/bench/merge-small-interleaved.sh OLD NEW
# Each round runs, per build and trace: `report -j 1` and `merge -j 1` pinned to core 0, and
# `merge -j 2`. The ratio to report is against the median of every build's `report` runs
# (report's path is the same in all of them); its own line says if that is not so.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] || { echo "usage: $0 CUPROF [CUPROF...]" >&2; exit 2; }
rounds="${CUPROF_BENCH_ROUNDS:-5}"
# shellcheck source=scripts/bench/small_traces.sh
source scripts/bench/small_traces.sh
log=$(mktemp)
trap 'rm -f "$log" "$log.t"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
    for trace in "$plain" "$host"; do
        for i in $(seq $#); do
            bin="${!i}"
            out="$dir/out/interleaved-$i.trace.json.gz"
            for what in report merge1 merge2; do
                case $what in
                    report) cmd=(taskset -c 0 "$bin" report "$trace" -j 1) ;;
                    merge1) cmd=(taskset -c 0 "$bin" merge "$trace" -o "$out" -j 1) ;;
                    merge2) cmd=("$bin" merge "$trace" -o "$out" -j 2) ;;
                esac
                /usr/bin/time -o "$log.t" -f "%e %U %S" "${cmd[@]}" >/dev/null 2>&1
                echo "$round $i $what $(basename "$trace") $(cat "$log.t")" >>"$log"
            done
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$log" "$plain" "$host" "$@" <<'PY'
import collections, gzip, statistics, sys

log, traces, bins = sys.argv[1], sys.argv[2:4], sys.argv[4:]
runs = collections.defaultdict(list)
for line in open(log):
    _, i, what, trace, wall, user, sys_ = line.split()
    runs[(trace, int(i), what)].append((float(wall), float(user) + float(sys_)))
med = lambda xs, k: statistics.median(x[k] for x in xs)
# Runs too short for /usr/bin/time's resolution give 0 s: no ratio then.
ratio = lambda a, b: a / b if b else float("nan")
for path in traces:
    trace = path.rsplit("/", 1)[-1]
    with gzip.open(path) as f:
        mb = sum(len(b) for b in iter(lambda: f.read(1 << 20), b"")) / 1e6
    reports = [x for i in range(1, len(bins) + 1) for x in runs[(trace, i, "report")]]
    rw, rc = med(reports, 0), med(reports, 1)
    print(f"{trace}: {mb:.0f} MB of JSON, {len(reports) // len(bins)} rounds")
    print(f"  report, one core (all builds): wall {rw:.2f} s ({ratio(mb, rw):.1f} MB/s), CPU {rc:.2f} s")
    for i, b in enumerate(bins, 1):
        own = runs[(trace, i, "report")]
        print(f"  [{i}] {b}: its report wall {med(own, 0):.2f} s, CPU {med(own, 1):.2f} s")
        for what, name in (("merge1", "merge, one core"), ("merge2", "merge, -j 2    ")):
            xs = runs[(trace, i, what)]
            w, c = med(xs, 0), med(xs, 1)
            walls = " ".join(f"{x[0]:.2f}" for x in xs)
            print(f"      {name}: wall {w:.2f} s ({ratio(mb, w):.1f} MB/s, {ratio(rw, w):.2f}x "
                  f"report), CPU {c:.2f} s ({ratio(rc, c):.2f}x report's); walls {walls}")
PY
