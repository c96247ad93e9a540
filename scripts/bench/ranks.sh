# Sourced by the offline benchmarks (bench-offline.sh, bench-export.sh) after they set `ranks`,
# `events` and `dir`: builds the release `cuprof` ($bin), generates the ranks' traces once
# ($traces, reused; rank 0 is $rank0, $raw0 bytes of JSON) and defines `best CMD...`, the best
# wall seconds of 3 runs.
cargo build --release -p cuprof-launcher >&2
bin="${CARGO_TARGET_DIR:-target}/release/cuprof"
traces="$dir/traces-$ranks-$events"
if [ ! -f "$traces/done" ]; then
    mkdir -p "$traces"
    python3 scripts/bench/gen_ranks.py "$traces" "$ranks" "$events"
    touch "$traces/done"
fi
rank0="$traces/bench-rank0.trace.json.gz"
raw0=$(gzip -dc "$rank0" | wc -c)
# shellcheck source=scripts/bench/best.sh
source scripts/bench/best.sh
