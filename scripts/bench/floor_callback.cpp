// The floor under every operator observer that records shapes: a RecordFunction callback that
// asks torch for each operator's inputs and does nothing with them. What it costs is torch's
// own (the callback machinery and boxing the inputs), paid by torch.profiler and cuprof alike;
// scripts/bench-real-ops.sh reports it beside them. Built with the observer's flags (build.py).
// Also hooks that do nothing, for cuprof's observer to format its records into with none of
// libcuprof.so's work after it (scripts/bench/observer_parts.py).
#include <ATen/record_function.h>

#include <cstddef>
#include <cstdint>

namespace {
volatile size_t g_seen = 0;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  g_seen = g_seen + fn.inputs().size();
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {}
}  // namespace

// ops/observer.cpp's CuprofHooks, version 8: the window collecting CPU activity, without
// stacks, no CUPTI (so no correlation pushes), and the finished operators handed to a hook
// that only reads their records' length.
struct Correlation {
  void* push;
  void* pop;
  uint32_t kind;
};
struct Hooks {
  uint32_t version;
  const uint8_t* collecting;
  const uint8_t* cpu;
  const uint8_t* stacks;
  const uint64_t* (*thread)(uint32_t*);
  uint64_t (*take_ids)(uint64_t*);
  void (*correlation)(Correlation*);
  uint64_t (*python_stack)();
  void (*release_stack)(uint64_t);
  void (*ops_done)(const void*, size_t, const char*, size_t, uint32_t);
  uint64_t (*label_begin)(const char*, size_t, uint64_t, uint64_t);
  void (*label_end)(uint64_t);
  void (*memory)(const void*);
  void (*attach)(void*);
  void (*module)(const void*);
};

const uint8_t g_on = 1;
const uint8_t g_off = 0;
const uint64_t g_no_range = 0;
uint64_t g_next_id = 1;
const uint64_t* thread(uint32_t* tid) {
  *tid = 1;
  return &g_no_range;
}
uint64_t take_ids(uint64_t* end) {
  uint64_t first = __atomic_fetch_add(&g_next_id, 1024, __ATOMIC_RELAXED);
  *end = first + 1024;
  return first;
}
void correlation(Correlation* out) {
  *out = Correlation{nullptr, nullptr, 0};
}
uint64_t python_stack() { return 0; }
void release_stack(uint64_t) {}
void ops_done(const void*, size_t, const char*, size_t len, uint32_t) { g_seen = g_seen + len; }
uint64_t label_begin(const char*, size_t, uint64_t, uint64_t) { return 0; }
void label_end(uint64_t) {}
void memory(const void*) {}
void attach(void*) {}
void module(const void*) {}
const Hooks g_noop_hooks{8,           &g_on,        &g_on,     &g_off,    thread,
                         take_ids,    correlation,  python_stack,          release_stack,
                         ops_done,    label_begin,  label_end, memory,    attach,
                         module};

extern "C" __attribute__((visibility("default"))) const void* noop_hooks() {
  return &g_noop_hooks;
}

extern "C" __attribute__((visibility("default"))) size_t noop_hooks_size() {
  return sizeof g_noop_hooks;
}

extern "C" __attribute__((visibility("default"))) uint64_t floor_start() {
  return at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end).needsInputs(true));
}

extern "C" __attribute__((visibility("default"))) void floor_stop(uint64_t handle) {
  at::removeCallback(handle);
}
