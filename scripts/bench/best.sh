# Sourced by the offline benchmarks (through ranks.sh, and by bench-merge-small.sh): defines
# `best CMD...`, the best wall seconds of 3 runs of CMD (its stdout discarded).
best() {
    local b=999999
    for _ in 1 2 3; do
        local t0 t1
        t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
        b=$(python3 -c "print(min($b, $t1 - $t0))")
    done
    echo "$b"
}
