// Callgrind's client requests, for ops_instructions.py: counting on around the steps it
// measures and off after, each part written to its own dump. (Naming a function to
// --toggle-collect does not work for one called through ctypes: valgrind 3.19 files the
// callee under libffi's closure mappings and never matches its name.)
#include <valgrind/callgrind.h>

void cuprof_bench_begin(void) {
  CALLGRIND_ZERO_STATS;
  CALLGRIND_TOGGLE_COLLECT;
}

void cuprof_bench_end(const char* part) {
  CALLGRIND_TOGGLE_COLLECT;
  CALLGRIND_DUMP_STATS_AT(part);
}
