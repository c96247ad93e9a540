// cuprof's native PyTorch operator observer: PyTorch's own RecordFunction callbacks (the API
// Kineto uses), compiled against the torch the traced program imported (build.py) and loaded
// into it (recorder.py). libcuprof.so never links libtorch: this library does, and only in a
// process that has already loaded it.
//
// Each operator's start becomes one record handed to libcuprof.so through the hooks it passes
// in (`op_begin`); its end, `op_end`. The record is the operator's fields as Kineto writes
// them, separated by 0x1f and pre-formatted as JSON where they are arrays, so that the
// program thread does the least work that keeps every field torch.profiler has:
//
//   name 0x1f seq 0x1f fwd_thread 0x1f handle 0x1f dims 0x1f types 0x1f strides 0x1f concrete 0x1f flops
//
// (the four arrays empty without shapes, flops empty unless asked). record_function scopes
// (USER_SCOPE) are labels, Kineto's user_annotation: they may end inside another operator than
// the one they began in (`_record_function_enter_new` / `_record_function_exit`), so they are
// closed by id, carried in their observer context.
//
// Build flags that must match torch's own build: -std=c++20 (its headers use
// std::strong_ordering), -DNDEBUG (RecordFunction's layout differs without it) and
// -D_GLIBCXX_USE_CXX11_ABI=torch._C._GLIBCXX_USE_CXX11_ABI.

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/ScalarTypeToTypeMeta.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <sstream>
#include <string>

#include <torch/csrc/profiler/orchestration/observer.h>

#ifdef CUPROF_WITH_FLOPS
#include <torch/csrc/profiler/util.h>
#endif

extern "C" {
// What libcuprof.so gives the observer (ops/mod.rs, `Hooks`): keep the two in step.
struct CuprofHooks {
  uint32_t version;
  void (*op_begin)(const char* record, size_t len);
  void (*op_end)();
  uint64_t (*label_begin)(const char* name, size_t len);
  void (*label_end)(uint64_t id);
};
}

namespace {

constexpr uint32_t kHooksVersion = 1;
// Kineto's limit on the scalar lists it keeps as concrete inputs.
constexpr size_t kScalarListLimit = 30;

const CuprofHooks* g_hooks = nullptr;
bool g_shapes = false;
bool g_flops = false;
constexpr char kSep = '\x1f';

// A byte buffer whose appends inline to a bounds check and a copy (std::string's went through
// libstdc++ calls on every byte: measured on the hot path). It only grows.
class Buf {
 public:
  ~Buf() { std::free(data_); }
  void clear() { len_ = 0; }
  const char* data() const { return data_; }
  size_t size() const { return len_; }
  void push_back(char c) {
    if (len_ == cap_) grow(1);
    data_[len_++] = c;
  }
  Buf& append(const char* p, size_t n) {
    if (cap_ - len_ < n) grow(n);
    std::memcpy(data_ + len_, p, n);
    len_ += n;
    return *this;
  }
  Buf& append(const char* p) { return append(p, std::strlen(p)); }
  Buf& append(const Buf& b) { return append(b.data_, b.len_); }
  void assign(char c) {
    len_ = 0;
    push_back(c);
  }

 private:
  void grow(size_t n) {
    size_t cap = cap_ ? cap_ : 256;
    while (cap - len_ < n) cap *= 2;
    char* p = static_cast<char*>(std::realloc(data_, cap));
    if (!p) throw std::bad_alloc();
    data_ = p;
    cap_ = cap;
  }
  char* data_ = nullptr;
  size_t len_ = 0;
  size_t cap_ = 0;
};

// Everything a thread's callbacks write into, in one thread-local.
struct ThreadBufs {
  Buf record, types, strides, concrete;
  std::ostringstream text;
};

// The calling thread's buffers: one TLS lookup per callback. This library is dlopen'ed, so
// each thread_local access is a __tls_get_addr call, and GCC, seeing that every helper is
// passed the same thread_local, clones them with it as a constant (IPA constant propagation)
// and looks it up again at each use: 145 calls in on_start and its helpers, measured as the
// largest part of the observer's cost. noipa keeps the address an opaque pointer.
__attribute__((noipa)) ThreadBufs& thread_bufs() {
  thread_local ThreadBufs bufs;
  return bufs;
}

void put_int(Buf& s, int64_t v) {
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  s.append(tmp, r.ptr - tmp);
}

void put_ints(Buf& s, c10::IntArrayRef a) {
  s.push_back('[');
  for (size_t i = 0; i < a.size(); ++i) {
    if (i) s.append(", ");
    put_int(s, a[i]);
  }
  s.push_back(']');
}

// A JSON string: the text as IValue prints it, with Kineto's one change (double quotes become
// single ones) and whatever JSON needs escaped.
void put_json_string(Buf& s, const std::string& text) {
  s.push_back('"');
  for (unsigned char c : text) {
    if (c == '"') {
      s.push_back('\'');
    } else if (c == '\\') {
      s.append("\\\\");
    } else if (c < 0x20 || c == 0x7f) {
      char tmp[8];
      std::snprintf(tmp, sizeof tmp, "\\u%04x", c);
      s.append(tmp);
    } else {
      s.push_back(static_cast<char>(c));
    }
  }
  s.push_back('"');
}

bool plain_tensor(const at::Tensor& t) {
  return t.defined() && !t.is_nested() &&
      !t.unsafeGetTensorImpl()->has_symbolic_sizes_strides();
}

bool scalar_list(const c10::IValue& v) {
  if (!v.isList()) return false;
  auto list = v.toListRef();
  if (list.empty()) return true;
  return list[0].isScalar() && list.size() <= kScalarListLimit;
}

// A double as IValue prints it (ivalue.cpp's operator<<): an integral value below 1e19 that
// an int64 holds as the integer and a dot ("2."), any other with max_digits10 significant
// digits in the stream's default format, which is printf's %.17g: std::to_chars with general
// format and that precision is specified to write the same. Checked equal to IValue's own
// printing on 400,000 doubles (random bit patterns, NaNs, infinities, subnormals, integers).
// A stream costs more than the rest of the record.
void put_double(Buf& s, double d) {
  int c = std::fpclassify(d);
  if ((c == FP_NORMAL || c == FP_ZERO) && std::abs(d) < 1e19 && d >= -0x1p63 && d < 0x1p63) {
    auto i = static_cast<int64_t>(d);
    if (static_cast<double>(i) == d) {
      put_int(s, i);
      s.push_back('.');
      return;
    }
  }
  char tmp[40];
  auto r = std::to_chars(
      tmp, tmp + sizeof tmp, d, std::chars_format::general,
      std::numeric_limits<double>::max_digits10);
  s.append(tmp, r.ptr - tmp);
}

// A list as IValue prints it ("[1, 2]"), as one JSON string, each element written by `put`.
template <typename Put>
void put_printed_list(Buf& s, const c10::IValue& v, Put put) {
  s.append("\"[");
  bool first = true;
  for (const c10::IValue& e : v.toListRef()) {
    if (!first) s.append(", ");
    first = false;
    put(e);
  }
  s.append("]\"");
}

// A scalar or scalar list as IValue prints it (what Kineto writes): ints, doubles, bools and
// their lists without a stream, which would cost more than the rest of the record.
void put_printed(ThreadBufs& b, Buf& s, const c10::IValue& v) {
  if (v.isInt()) {
    s.push_back('"');
    put_int(s, v.toInt());
    s.push_back('"');
    return;
  }
  if (v.isBool()) {
    s.append(v.toBool() ? "\"True\"" : "\"False\"");
    return;
  }
  if (v.isDouble()) {
    s.push_back('"');
    put_double(s, v.toDouble());
    s.push_back('"');
    return;
  }
  if (v.isDoubleList()) {
    put_printed_list(s, v, [&s](const c10::IValue& e) { put_double(s, e.toDouble()); });
    return;
  }
  if (v.isIntList()) {
    put_printed_list(s, v, [&s](const c10::IValue& e) { put_int(s, e.toInt()); });
    return;
  }
  b.text.str("");
  b.text.clear();
  b.text << v;
  put_json_string(s, b.text.str());
}

// A tensor's sizes and strides (Kineto's: none for a layout that is not strided, empty for an
// undefined, nested or symbolic tensor); whether it had them.
bool put_tensor(Buf& dims, Buf& strides, const at::Tensor& t) {
  if (!plain_tensor(t)) {
    dims.append("[]", 2);
    strides.append("[]", 2);
    return false;
  }
  put_ints(dims, t.sizes());
  if (t.layout() == at::kStrided) {
    put_ints(strides, t.strides());
  } else {
    strides.append("[]", 2);
  }
  return true;
}

// Kineto's four input arrays, in one pass over the inputs: Input Dims into the record, the
// other three beside it, then appended.
void put_inputs(ThreadBufs& b, c10::ArrayRef<const c10::IValue> inputs) {
  Buf& r = b.record;
  Buf& types = b.types;
  Buf& strides = b.strides;
  Buf& concrete = b.concrete;
  types.assign('[');
  strides.assign('[');
  concrete.assign('[');
  r.push_back('[');
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    if (i) {
      r.append(", ");
      types.append(", ");
      strides.append(", ");
      concrete.append(", ");
    }
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      types.push_back('"');
      if (put_tensor(r, strides, t)) {
        auto name = c10::scalarTypeToTypeMeta(t.scalar_type()).name();
        types.append(name.data(), name.size());
      }
      types.push_back('"');
      concrete.append("\"\"");
    } else if (v.isScalar()) {
      r.append("[]");
      types.append("\"Scalar\"");
      strides.append("[]");
      put_printed(b, concrete, v);
    } else if (v.isTensorList()) {
      r.push_back('[');
      strides.push_back('[');
      bool first = true;
      for (const at::Tensor& t : v.toTensorList()) {
        if (!first) {
          r.append(", ");
          strides.append(", ");
        }
        first = false;
        put_tensor(r, strides, t);
      }
      r.push_back(']');
      strides.push_back(']');
      types.append("\"TensorList\"");
      concrete.append("\"\"");
    } else if (scalar_list(v)) {
      r.append("[]");
      types.append("\"ScalarList\"");
      strides.append("[]");
      put_printed(b, concrete, v);
    } else {
      r.append("[]");
      types.append("\"\"");
      strides.append("[]");
      concrete.append("\"\"");
    }
  }
  r.push_back(']');
  r.push_back(kSep);
  r.append(types).push_back(']');
  r.push_back(kSep);
  r.append(strides).push_back(']');
  r.push_back(kSep);
  r.append(concrete).push_back(']');
}

struct Label : at::ObserverContext {
  explicit Label(uint64_t id) : id(id) {}
  uint64_t id;
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  try {
    if (fn.scope() == at::RecordScope::USER_SCOPE) {
      const char* name = fn.name();
      uint64_t id = g_hooks->label_begin(name, std::strlen(name));
      return id ? std::make_unique<Label>(id) : nullptr;
    }
    ThreadBufs& b = thread_bufs();
    Buf& r = b.record;
    r.clear();
    r.append(fn.name());
    r.push_back(kSep);
    put_int(r, fn.seqNr());
    r.push_back(kSep);
    put_int(r, static_cast<int64_t>(fn.forwardThreadId()));
    r.push_back(kSep);
    put_int(r, static_cast<int64_t>(fn.handle()));
    r.push_back(kSep);
    // Kineto writes no input arrays for an operator without inputs.
    if (g_shapes && !fn.inputs().empty()) {
      put_inputs(b, fn.inputs());
    } else {
      r.append("\x1f\x1f\x1f", 3);
    }
    r.push_back(kSep);
#ifdef CUPROF_WITH_FLOPS
    if (g_flops) {
      auto args = torch::profiler::impl::saveExtraArgs(fn);
      if (!args.empty()) {
        put_int(r, static_cast<int64_t>(torch::profiler::impl::computeFlops(fn.name(), args)));
      }
    }
#endif
    g_hooks->op_begin(r.data(), r.size());
  } catch (...) {
    // Never into the program: the operator runs unrecorded.
  }
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  try {
    if (fn.scope() == at::RecordScope::USER_SCOPE) {
      if (ctx) g_hooks->label_end(static_cast<Label*>(ctx)->id);
      return;
    }
    g_hooks->op_end();
  } catch (...) {
  }
}

// What torch sees of cuprof on the thread that records: a profiler state, as torch.profiler's
// and emit_nvtx's, so that what torch records only under a profiler (torch.compile's
// `_RecordFunctionFast` regions: `## Call CompiledFxGraph ##`, `Pregraph bytecode`,
// `AOTDispatcher Runtime Wrapper Prologue`) reaches the callbacks. It registers no callback
// of its own and reports no memory; its type is NONE, so no torch code takes it for its own
// profilers' state.
struct MarkerState : torch::profiler::impl::ProfilerStateBase {
  MarkerState()
      : ProfilerStateBase(torch::profiler::impl::ProfilerConfig(
            torch::profiler::impl::ProfilerState::NVTX)) {}
  torch::profiler::impl::ActiveProfilerType profilerType() override {
    return torch::profiler::impl::ActiveProfilerType::NONE;
  }
  void reportMemoryUsage(void*, int64_t, size_t, size_t, c10::Device) override {}
};

thread_local torch::profiler::impl::ProfilerStateBase* t_marker = nullptr;

void push_marker() {
  using torch::profiler::impl::ProfilerStateBase;
  if (ProfilerStateBase::getTLS() != nullptr) return;
  auto state = std::make_shared<MarkerState>();
  t_marker = state.get();
  ProfilerStateBase::push(std::move(state));
}

void pop_marker() {
  using torch::profiler::impl::ProfilerStateBase;
  if (t_marker != nullptr && ProfilerStateBase::getTLS() == t_marker) {
    ProfilerStateBase::pop(/*global=*/false);
  }
  t_marker = nullptr;
}

}  // namespace

extern "C" {

// Flags of cuprof_observer_start.
enum : uint32_t {
  kShapes = 1,
  kAllThreads = 2,
  kFlops = 4,
};

__attribute__((visibility("default"))) uint32_t cuprof_observer_abi() {
  return kHooksVersion;
}

// Whether this build counts FLOPs (torch's own counter was found in its headers).
__attribute__((visibility("default"))) int cuprof_observer_has_flops() {
#ifdef CUPROF_WITH_FLOPS
  return 1;
#else
  return 0;
#endif
}

// Registers the callbacks: on the calling thread (and the autograd threads that inherit its
// state), or on every thread. Returns torch's handle, 0 on failure.
__attribute__((visibility("default"))) uint64_t cuprof_observer_start(
    const CuprofHooks* hooks,
    uint32_t flags) {
  try {
    if (!hooks || hooks->version != kHooksVersion) return 0;
    g_hooks = hooks;
    g_shapes = flags & kShapes;
    g_flops = flags & kFlops;
    auto cb = at::RecordFunctionCallback(on_start, on_end)
                  .needsInputs(g_shapes || g_flops);
    uint64_t handle = (flags & kAllThreads) ? at::addGlobalCallback(cb)
                                            : at::addThreadLocalCallback(cb);
    push_marker();
    return handle;
  } catch (...) {
    return 0;
  }
}

// Removes what start registered, on the thread that started it.
__attribute__((visibility("default"))) void cuprof_observer_stop(uint64_t handle) {
  try {
    if (handle) at::removeCallback(handle);
    pop_marker();
  } catch (...) {
  }
}

}  // extern "C"
