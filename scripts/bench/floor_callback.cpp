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

// ops/observer.cpp's CuprofHooks, version 3.
struct Hooks {
  uint32_t version;
  void (*op_begin)(const char*, size_t);
  void (*op_end)();
  uint64_t (*label_begin)(const char*, size_t);
  void (*label_end)(uint64_t);
  void (*memory)(uint64_t, int64_t, int64_t, int64_t, int8_t, int8_t);
};

void op_begin(const char*, size_t n) { g_seen = g_seen + n; }
void op_end() {}
uint64_t label_begin(const char*, size_t) { return 0; }
void label_end(uint64_t) {}
void memory(uint64_t, int64_t, int64_t, int64_t, int8_t, int8_t) {}
const Hooks g_noop_hooks{3, op_begin, op_end, label_begin, label_end, memory};

extern "C" __attribute__((visibility("default"))) const void* noop_hooks() {
  return &g_noop_hooks;
}

extern "C" __attribute__((visibility("default"))) uint64_t floor_start() {
  return at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end).needsInputs(true));
}

extern "C" __attribute__((visibility("default"))) void floor_stop(uint64_t handle) {
  at::removeCallback(handle);
}
