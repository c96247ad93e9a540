// The floor under every operator observer that records shapes: a RecordFunction callback that
// asks torch for each operator's inputs and does nothing with them. What it costs is torch's
// own (the callback machinery and boxing the inputs), paid by torch.profiler and cuprof alike;
// scripts/bench-real-ops.sh reports it beside them. Built with the observer's flags (build.py).
#include <ATen/record_function.h>

#include <cstdint>

namespace {
volatile size_t g_seen = 0;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  g_seen = g_seen + fn.inputs().size();
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {}
}  // namespace

extern "C" __attribute__((visibility("default"))) uint64_t floor_start() {
  return at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end).needsInputs(true));
}

extern "C" __attribute__((visibility("default"))) void floor_stop(uint64_t handle) {
  at::removeCallback(handle);
}
