// cuprof's native PyTorch operator observer: PyTorch's own RecordFunction callbacks (the API
// Kineto uses), compiled against the torch the traced program imported (build.py) and loaded
// into it (recorder.py). libcuprof.so never links libtorch: this library does, and only in a
// process that has already loaded it.
//
// Each operator's start becomes one record, written at the end of the thread's record buffer,
// where it stays, never copied here: its end adds its times, id, parent and the record's place
// to the thread's finished operators, which go to libcuprof.so through the hooks it passes in
// (`ops_done`, ops/native.rs) in one call, with the buffer, when the outermost operator ends
// (or 64 have finished inside it): about four operators a call on real models. The buffer is
// then emptied (or, inside an operator still open, keeps only the open operators' records), so
// it stays a few KiB, warm in the program thread's cache. An operator's start
// makes no call into libcuprof.so: this library keeps the thread's open operators, reads the
// clock (CLOCK_REALTIME, CUPTI's), gives ids from blocks libcuprof.so hands out, and pushes and
// pops CUPTI's external correlation id itself (with CUPTI's own functions), as Kineto does.
// The record holds every field torch.profiler has, in the form cheapest to write on the
// program thread: the name, then numbers and tensor sizes as raw integers, copied as torch
// holds them. libcuprof.so's writer thread turns it into Kineto's JSON (`native_record.rs` in
// its core crate, which documents the layout; keep the two in step), as Kineto itself formats
// its records away from the program thread. Ints and int lists are raw too; only the other
// scalars and scalar lists (Concrete Inputs: doubles, bools, strings...) are printed here, as
// IValue prints them.
//
// record_function scopes (USER_SCOPE) are labels, Kineto's user_annotation, with the same
// record as an operator's (Kineto writes the same fields for both): they may end inside another
// operator than the one they began in (`_record_function_enter_new` / `_record_function_exit`),
// so they are closed by id, carried in their observer context. They open on libcuprof.so's
// range stack (where NVTX ranges and steps are), which this library reads for parents: an
// operator's parent is the innermost range open on its thread, whichever side keeps it.
//
// Build flags that must match torch's own build: -std=c++20 (its headers use
// std::strong_ordering), -DNDEBUG (RecordFunction's layout differs without it) and
// -D_GLIBCXX_USE_CXX11_ABI=torch._C._GLIBCXX_USE_CXX11_ABI.

#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/ScalarTypeToTypeMeta.h>

#include <charconv>
#include <cmath>
#include <ctime>
#include <limits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <mutex>
#include <new>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include <torch/csrc/profiler/orchestration/observer.h>

#if defined(CUPROF_WITH_FLOPS) || defined(CUPROF_WITH_COMMS_META) || defined(CUPROF_WITH_KWINPUTS)
#include <torch/csrc/profiler/util.h>
#endif

extern "C" {
// A finished operator (ops/native.rs, `OpDone`); its record is the `record_len` bytes at
// `record_at` of the records handed over with it.
struct CuprofDone {
  uint64_t start;
  uint64_t end;
  uint64_t id;
  uint64_t parent;
  uint64_t stack;  // a python_stack handle, shared by the operators nested in its taker
  uint32_t record_len;
  uint32_t record_at;
  uint8_t owns_stack;  // this operator took `stack`: the handle ends with it
};

// A PyTorch allocation or free (ops/native.rs, `Memory`).
struct CuprofMemory {
  uint64_t addr;
  int64_t bytes;
  int64_t total_allocated;
  int64_t total_reserved;
  uint64_t parent;  // the innermost operator open on the thread, 0 for none
  uint32_t tid;
  int8_t device_type;
  int8_t device_index;
};

// CUPTI's external correlation functions (null while no tracer runs) and the kind operators
// are pushed on (ops/native.rs, `Correlation`).
struct CuprofCorrelation {
  int (*push)(uint32_t kind, uint64_t id);
  int (*pop)(uint32_t kind, uint64_t* last);
  uint32_t kind;
};

// An nn.Module forward call that ended (--with-modules; ops/native.rs, `ModuleCall`): torch's
// event name (`nn.Module: Linear_0`), the module's path, the call's id and its enclosing
// call's.
struct CuprofModule {
  uint64_t start;
  uint64_t end;
  uint64_t id;
  uint64_t parent;
  const char* name;
  size_t name_len;
  const char* path;
  size_t path_len;
};

typedef void (*CuprofEachOpenOp)(void* ctx, const char* record, size_t len);
typedef uint64_t (*CuprofOpenOps)(CuprofEachOpenOp each, void* ctx);

// What libcuprof.so gives the observer (ops/mod.rs, `Hooks`): keep the two in step.
struct CuprofHooks {
  uint32_t version;
  // The window collects; CPU activity is collected; Python stacks are wanted (atomics, read
  // relaxed).
  const uint8_t* collecting;
  const uint8_t* cpu;
  const uint8_t* stacks;
  // Once per thread: its OS id (into `tid`) and the cell holding the id of the innermost range
  // libcuprof.so has open on it.
  const uint64_t* (*thread)(uint32_t* tid);
  // A block of range ids: the first, one past the last into `end`.
  uint64_t (*take_ids)(uint64_t* end);
  void (*correlation)(CuprofCorrelation* out);
  // The Python stack now, as a handle (0: none or not wanted); one no operator's end took.
  uint64_t (*python_stack)();
  void (*release_stack)(uint64_t handle);
  // Operators finished on the thread `tid`, in the order they ended, and the thread's records
  // (each operator's at its `record_at`).
  void (*ops_done)(const CuprofDone* ops, size_t n, const char* records, size_t len, uint32_t tid);
  uint64_t (*label_begin)(const char* record, size_t len, uint64_t parent, uint64_t stack);
  void (*label_end)(uint64_t id);
  void (*memory)(const CuprofMemory* report);
  // Registers this library's walk over a thread's open operators (allocation stacks).
  void (*attach)(CuprofOpenOps walk);
  // An nn.Module call recorder.py timed (--with-modules), passed through cuprof_observer_module.
  void (*module)(const CuprofModule* call);
};
}

namespace {

constexpr uint32_t kHooksVersion = 8;
// Finished operators kept before they are handed over inside an outermost one still open (a
// compiled region, a custom operator running a model), and the records' bytes held.
constexpr uint32_t kMaxDone = 64;
constexpr size_t kMaxDoneBytes = 16 << 10;
// Kineto's limit on the scalar lists it keeps as concrete inputs.
constexpr size_t kScalarListLimit = 30;

// The record's flags byte (native_record.rs: `FLOPS_COUNTED`, `MEMBERS`).
constexpr char kFlopsCounted = 1;
// More args follow as key/value pairs: a collective's metadata, keyword inputs.
constexpr char kMembers = 2;

const CuprofHooks* g_hooks = nullptr;
CuprofCorrelation g_correlation{};
bool g_shapes = false;
bool g_flops = false;

inline bool flag(const uint8_t* f) {
  return __atomic_load_n(f, __ATOMIC_RELAXED) != 0;
}

// CUPTI's clock on Linux: operators nest exactly with the runtime calls they make.
inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}
constexpr char kSep = '\x1f';

// What each input is, in the record (native_record.rs: `Tag`).
enum Tag : char {
  kTensor = 1,
  kOpaqueTensor = 2,  // undefined, nested or symbolic: no sizes
  kTensorList = 3,
  kScalar = 4,
  kScalarList = 5,
  kOther = 6,
  kInt = 7,      // raw: the writer prints it
  kIntList = 8,  // raw: the writer prints it
};

// A number as the record holds it, its bytes in native order, at `w`; returns the end.
template <typename T>
inline char* put_raw_at(char* w, T v) {
  std::memcpy(w, &v, sizeof v);
  return w + sizeof v;
}

// A byte buffer whose appends inline to a bounds check and a copy (std::string's went through
// libstdc++ calls on every byte: measured on the hot path). It only grows.
class Buf {
 public:
  ~Buf() { std::free(data_); }
  void clear() { len_ = 0; }
  // Drops what was written past `n`.
  void truncate(size_t n) {
    if (n < len_) len_ = n;
  }
  const char* data() const { return data_; }
  char* mutable_data() { return data_; }
  size_t size() const { return len_; }
  void push_back(char c) {
    if (len_ == cap_) grow(1);
    data_[len_++] = c;
  }
  Buf& append(const char* p, size_t n) {
    std::memcpy(reserve(n), p, n);
    len_ += n;
    return *this;
  }
  Buf& append(const char* p) { return append(p, std::strlen(p)); }
  template <typename T>
  void put_raw(T v) {
    commit(put_raw_at(reserve(sizeof v), v));
  }
  // Overwrites what `put_raw` wrote at `at` (a length known only once what follows is written).
  template <typename T>
  void patch_raw(size_t at, T v) {
    std::memcpy(data_ + at, &v, sizeof v);
  }
  // Room for `n` more bytes: where they go. The caller writes through the pointer it gets and
  // hands the end of what it wrote to `commit`. Through a local pointer the compiler keeps the
  // write position in a register; through the members, a store of a char may alias them, so
  // each append reloaded the length and capacity (measured: the bounds checks cost more than
  // the copies).
  char* reserve(size_t n) {
    if (cap_ - len_ < n) grow(n);
    return data_ + len_;
  }
  void commit(const char* end) { len_ = static_cast<size_t>(end - data_); }

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

// A dtype's name as the record holds it, copied whole (a fixed-size copy the compiler inlines);
// only `len` bytes count.
struct DtypeName {
  uint8_t len = 0;
  bool known = false;
  char bytes[46];
};
constexpr size_t kScalarTypes = static_cast<size_t>(c10::ScalarType::NumOptions);

// A range open on this thread: an operator, or a label (which libcuprof.so keeps too, for
// its parents and projection; here for the operators' parents).
struct OpenRange {
  uint64_t id;
  uint64_t parent;
  uint64_t start;
  // What libcuprof.so's innermost range was while this one is innermost: an operator leaves it
  // as it found it, a label makes it itself. Another value means libcuprof.so opened a range
  // (an NVTX one) inside this one since.
  uint64_t ranges_mark;
  // Where its record waits in the thread's `record` (operators only).
  uint32_t record_at;
  uint32_t record_len;
  bool label;
  bool pushed_correlation;
  bool owns_stack;
};

static_assert(std::is_trivially_copyable_v<OpenRange>);

// The ranges open on a thread, innermost last: a plain array whose push and pop inline (a
// std::vector's emplace_back was a call on every operator: 27 instructions, measured).
class OpenStack {
 public:
  ~OpenStack() { std::free(data_); }
  bool empty() const { return len_ == 0; }
  size_t size() const { return len_; }
  OpenRange& operator[](size_t i) { return data_[i]; }
  const OpenRange& operator[](size_t i) const { return data_[i]; }
  const OpenRange& back() const { return data_[len_ - 1]; }
  // Room for one more, on top: the caller fills it.
  OpenRange& push() {
    if (__builtin_expect(len_ == cap_, 0)) grow();
    return data_[len_++];
  }
  void pop() { --len_; }
  void erase(size_t i) {
    std::memmove(data_ + i, data_ + i + 1, (len_ - i - 1) * sizeof(OpenRange));
    --len_;
  }

 private:
  __attribute__((noinline)) void grow() {
    size_t cap = cap_ ? cap_ * 2 : 64;
    auto* p = static_cast<OpenRange*>(std::realloc(data_, cap * sizeof(OpenRange)));
    if (!p) throw std::bad_alloc();
    data_ = p;
    cap_ = cap;
  }
  OpenRange* data_ = nullptr;
  size_t len_ = 0;
  size_t cap_ = 0;
};

// Everything a thread's callbacks write into, in one thread-local.
struct ThreadBufs {
  // The records of the operators open on this thread and of those finished since the last
  // hand-over, in the order they started; a label's record, only while it is handed over.
  Buf record;
  OpenStack open;
  uint32_t ops_open = 0;
  // The Python stack handle the outermost open operator took (0: none).
  uint64_t stack = 0;
  uint64_t next_id = 0;
  uint64_t id_end = 0;
  // libcuprof.so's innermost range id on this thread (ops/native.rs, `thread`; kNoCell when
  // it gave none).
  const uint64_t* ranges_innermost = nullptr;
  uint32_t tid = 0;
  // Operators finished since the last hand-over (their records are in `record`).
  uint32_t n_done = 0;
  CuprofDone done[kMaxDone];
  std::ostringstream text;
  // The names of the dtypes this thread has met, by scalar type.
  DtypeName dtypes[kScalarTypes];

  // The name of `type` from the table, filled on first sight; null for a name too long for
  // it (written the slow way).
  const DtypeName* dtype(c10::ScalarType type) {
    auto i = static_cast<size_t>(type);
    if (i >= kScalarTypes) return nullptr;
    DtypeName& d = dtypes[i];
    if (!d.known) {
      auto name = c10::scalarTypeToTypeMeta(type).name();
      if (name.size() > sizeof d.bytes) return nullptr;
      d.len = static_cast<uint8_t>(name.size());
      std::memcpy(d.bytes, name.data(), name.size());
      d.known = true;
    }
    return &d;
  }

  uint64_t take_id() {
    if (__builtin_expect(next_id == id_end, 0)) next_id = g_hooks->take_ids(&id_end);
    return next_id++;
  }

  // The parent of a range opening now: the innermost one open on this thread, this library's
  // or libcuprof.so's.
  uint64_t parent() const {
    uint64_t theirs = *ranges_innermost;
    if (open.empty()) return theirs;
    const OpenRange& mine = open.back();
    return theirs == mine.ranges_mark ? mine.id : theirs;
  }

  // Where the innermost operator is in `open`, or -1.
  ptrdiff_t innermost_op() const {
    for (size_t i = open.size(); i > 0; --i) {
      if (!open[i - 1].label) return static_cast<ptrdiff_t>(i - 1);
    }
    return -1;
  }
};

// Keeps only the open operators' records in the thread's record buffer, in order, and where
// they now are: what finished has been handed over.
void compact(ThreadBufs& b) {
  size_t w = 0;
  char* data = b.record.mutable_data();
  for (size_t i = 0; i < b.open.size(); ++i) {
    OpenRange& o = b.open[i];
    if (o.label) continue;
    if (o.record_at != w) std::memmove(data + w, data + o.record_at, o.record_len);
    o.record_at = static_cast<uint32_t>(w);
    w += o.record_len;
  }
  b.record.truncate(w);
}

// Hands the thread's finished operators to libcuprof.so, with the record buffer they are in.
__attribute__((noinline)) void hand_over(ThreadBufs& b) {
  if (b.n_done == 0) return;
  g_hooks->ops_done(b.done, b.n_done, b.record.data(), b.record.size(), b.tid);
  b.n_done = 0;
  compact(b);
}

const uint64_t kNoCell = 0;

// The calling thread's buffers: one TLS read per callback. This library is dlopen'ed, so a
// thread_local of the default (global-dynamic) model is a __tls_get_addr call at each access:
// about 14 instructions a time, twice per operator. This one is initial-exec, two moves: its 8
// bytes come from the static TLS glibc keeps spare for libraries loaded later (about 1.6 KiB;
// `rtld.optional_static_tls`). Where the process's libraries took all of that, dlopen fails,
// and recorder.py loads the build with CUPROF_DYNAMIC_TLS instead (build.py, `_dynamic_tls`).
// GCC, seeing that every helper is passed the same thread_local, clones them with it as a
// constant (IPA constant propagation) and reads it again at each use; noipa keeps the address
// an opaque pointer. The thread-local is a plain pointer, freed through a pthread key at the
// thread's exit: a thread_local object with a destructor costs a guard as well.
#ifdef CUPROF_DYNAMIC_TLS
thread_local ThreadBufs* t_bufs = nullptr;
#else
__attribute__((tls_model("initial-exec"))) thread_local ThreadBufs* t_bufs = nullptr;
#endif
pthread_key_t g_bufs_key;
std::once_flag g_bufs_key_once;

void free_thread_bufs(void* p) {
  t_bufs = nullptr;  // a callback after this (another key's destructor) makes new ones
  auto* b = static_cast<ThreadBufs*>(p);
  if (g_hooks) hand_over(*b);
  // A stack handle whose operator never ended.
  if (b->stack && g_hooks) g_hooks->release_stack(b->stack);
  delete b;
}

__attribute__((noinline)) ThreadBufs* new_thread_bufs() {
  std::call_once(g_bufs_key_once, [] { pthread_key_create(&g_bufs_key, free_thread_bufs); });
  auto* b = new ThreadBufs();
  b->ranges_innermost = g_hooks->thread(&b->tid);
  if (!b->ranges_innermost) b->ranges_innermost = &kNoCell;
  pthread_setspecific(g_bufs_key, b);
  t_bufs = b;
  return b;
}

__attribute__((noipa)) ThreadBufs& thread_bufs() {
  ThreadBufs* b = t_bufs;
  if (__builtin_expect(b == nullptr, 0)) b = new_thread_bufs();
  return *b;
}

// Sizes or strides, raw, at `w`; returns the end. The common ranks are fixed-size copies the
// compiler inlines (a loop would be turned back into a memcpy call).
inline char* put_i64s(char* w, const int64_t* v, size_t n) {
  switch (n) {
    case 4:
      std::memcpy(w + 24, v + 3, 8);
      [[fallthrough]];
    case 3:
      std::memcpy(w + 16, v + 2, 8);
      [[fallthrough]];
    case 2:
      std::memcpy(w + 8, v + 1, 8);
      [[fallthrough]];
    case 1:
      std::memcpy(w, v, 8);
      [[fallthrough]];
    case 0:
      break;
    default:
      std::memcpy(w, v, n * 8);
  }
  return w + n * 8;
}

void put_int(Buf& s, int64_t v) {
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  s.append(tmp, r.ptr - tmp);
}

// A JSON string of `text`, whatever JSON needs escaped; `kineto_quotes`: with Kineto's one
// change to the scalars it prints (double quotes become single ones).
void put_json_string(Buf& s, std::string_view text, bool kineto_quotes = true) {
  s.push_back('"');
  for (unsigned char c : text) {
    if (c == '"') {
      s.append(kineto_quotes ? "'" : "\\\"");
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

// A scalar or scalar list that is not an int or an int list (put_inputs writes those raw) as
// IValue prints it (what Kineto writes): doubles, bools and double lists without a stream,
// which would cost more than the rest of the record.
void put_printed(ThreadBufs& b, Buf& s, const c10::IValue& v) {
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
  b.text.str("");
  b.text.clear();
  b.text << v;
  put_json_string(s, b.text.str());
}

// A tensor: its dtype's name, whether it has strides (Kineto writes none for a layout that is
// not strided), its sizes and strides; an undefined, nested or symbolic tensor has none.
void put_tensor(ThreadBufs& b, const at::Tensor& t) {
  Buf& r = b.record;
  if (!plain_tensor(t)) {
    r.push_back(kOpaqueTensor);
    return;
  }
  const DtypeName* dtype = b.dtype(t.scalar_type());
  bool strided = t.layout() == at::kStrided;
  auto sizes = t.sizes();
  c10::IntArrayRef strides;
  if (strided) strides = t.strides();
  // The dtype's name is at most 255 bytes, and the table's whole entry is copied.
  char* w = r.reserve(2 + 255 + 1 + 4 + (sizes.size() + strides.size()) * 8);
  *w++ = kTensor;
  if (dtype) {
    *w++ = static_cast<char>(dtype->len);
    std::memcpy(w, dtype->bytes, sizeof dtype->bytes);
    w += dtype->len;
  } else {
    auto name = c10::scalarTypeToTypeMeta(t.scalar_type()).name();
    auto name_len = static_cast<uint8_t>(std::min<size_t>(name.size(), 255));
    *w++ = static_cast<char>(name_len);
    std::memcpy(w, name.data(), name_len);
    w += name_len;
  }
  *w++ = strided ? 1 : 0;
  w = put_raw_at(w, static_cast<uint32_t>(sizes.size()));
  w = put_i64s(w, sizes.data(), sizes.size());
  if (strided) w = put_i64s(w, strides.data(), strides.size());
  r.commit(w);
}

// A scalar or scalar list, printed: its length, then its text.
void put_printed_input(ThreadBufs& b, char tag, const c10::IValue& v) {
  Buf& r = b.record;
  r.push_back(tag);
  size_t at = r.size();
  r.put_raw(uint32_t{0});
  put_printed(b, r, v);
  r.patch_raw(at, static_cast<uint32_t>(r.size() - at - sizeof(uint32_t)));
}

// Kineto's four input arrays (Input Dims, Input type, Input Strides, Concrete Inputs), as
// the inputs they are made from.
// Lists are told apart only after the inline tag check says the input is one: isIntList and
// isTensorList are calls into libtorch, and every None, string or device input paid both.
void put_inputs(ThreadBufs& b, c10::ArrayRef<const c10::IValue> inputs) {
  Buf& r = b.record;
  r.put_raw(static_cast<uint32_t>(inputs.size()));
  for (const c10::IValue& v : inputs) {
    if (v.isTensor()) {
      put_tensor(b, v.toTensor());
    } else if (v.isInt()) {
      char* w = r.reserve(1 + 8);
      *w++ = kInt;
      r.commit(put_raw_at(w, static_cast<int64_t>(v.toInt())));
    } else if (v.isScalar()) {
      put_printed_input(b, kScalar, v);
    } else if (!v.isList()) {
      r.push_back(kOther);
    } else if (v.isIntList() && scalar_list(v)) {
      auto list = v.toListRef();
      char* w = r.reserve(1 + 4 + list.size() * 8);
      *w++ = kIntList;
      w = put_raw_at(w, static_cast<uint32_t>(list.size()));
      for (const c10::IValue& e : list) {
        w = put_raw_at(w, static_cast<int64_t>(e.toInt()));
      }
      r.commit(w);
    } else if (v.isTensorList()) {
      r.push_back(kTensorList);
      auto list = v.toTensorList();
      r.put_raw(static_cast<uint32_t>(list.size()));
      for (const at::Tensor& t : list) {
        put_tensor(b, t);
      }
    } else if (scalar_list(v)) {
      put_printed_input(b, kScalarList, v);
    } else {
      r.push_back(kOther);
    }
  }
}

// One more arg of the record's: count:u32 (written once, before the first), then key_len:u32
// key value_len:u32 value, the value JSON as torch.profiler writes it.
void put_member(Buf& r, std::string_view key, std::string_view value) {
  r.put_raw(static_cast<uint32_t>(key.size()));
  r.append(key.data(), key.size());
  r.put_raw(static_cast<uint32_t>(value.size()));
  r.append(value.data(), value.size());
}

#ifdef CUPROF_WITH_COMMS_META
// A collective's metadata (`record_param_comms`, which ProcessGroupNCCL and its kin open around
// each collective with the collective's description in the thread's debug info): what
// torch.profiler adds to the operator, read by torch's own code with the configuration
// torch.profiler passes (its defaults): Collective name, dtype, In/Out msg nelems, Group size,
// Process Group Name/Description/Ranks, split sizes, Seq, Comms Id... Only collectives pay for
// it; a failure records the operator without it.
//
// torch 2.15 keeps the values typed (saveNcclMetaTyped) and torch.profiler writes them as they
// are: strings inside quotes, unescaped (a quote in a process group's description makes its
// file invalid JSON), numbers and bools bare. Its string map (ncclMetaToStringMap) writes "None"
// for such a string instead, so it is used only for a type torch.profiler's export would print
// itself. Older torch has only the string map (saveNcclMeta): its values as torch formats them,
// which native_record.rs checks.
// Returns how many fields it wrote whole.
__attribute__((noinline)) uint32_t put_comms_meta(ThreadBufs& b, const at::RecordFunction& fn) {
  Buf& r = b.record;
  uint32_t n = 0;
  size_t whole = r.size();  // the end of the last field written whole
  try {
#ifdef CUPROF_WITH_TYPED_COMMS_META
    auto typed = torch::profiler::impl::saveNcclMetaTyped(fn);
    std::unordered_map<std::string, std::string> printed;
    Buf value;
    for (const auto& [key, v] : typed) {
      value.clear();
      if (v.isString()) {
        put_json_string(value, v.toStringRef(), /*kineto_quotes=*/false);
      } else if (v.isInt()) {
        put_int(value, v.toInt());
      } else if (v.isBool()) {
        value.append(v.toBool() ? "true" : "false");
      } else {
        if (printed.empty()) printed = torch::profiler::impl::ncclMetaToStringMap(typed);
        auto it = printed.find(key);
        if (it == printed.end()) continue;
        value.append(it->second.data(), it->second.size());
      }
      put_member(r, key, std::string_view(value.data(), value.size()));
      ++n;
      whole = r.size();
    }
#else
    for (const auto& [key, value] : torch::profiler::impl::saveNcclMeta(fn)) {
      put_member(r, key, value);
      ++n;
      whole = r.size();
    }
#endif
  } catch (...) {
    // The fields written whole stay; the count says how many.
    r.truncate(whole);
  }
  return n;
}
#endif

#ifdef CUPROF_WITH_KWINPUTS
#ifdef CUPROF_WITH_TYPED_KWINPUTS
// A double as torch 2.15's profiler writes a typed value: the shortest text that reads back as
// the same double, fixed-point for exponents -4 to 15 ("100000", "0.0001", "-0"), else
// scientific ("1e+16", "1e-05"); NaN and infinities as strings ("nan", "-inf").
void put_shortest_double(Buf& s, double d) {
  if (std::isnan(d)) {
    s.append("\"nan\"");
    return;
  }
  if (std::isinf(d)) {
    s.append(d < 0 ? "\"-inf\"" : "\"inf\"");
    return;
  }
  char sci[40];
  auto r = std::to_chars(sci, sci + sizeof sci, d, std::chars_format::scientific);
  std::string_view text(sci, r.ptr - sci);
  // "d[.ddd]e±XX": the text is not NUL-terminated, so the exponent is read within it.
  size_t e = text.find('e');
  int exp = 0;
  std::from_chars(text.data() + e + 2, text.data() + text.size(), exp);
  if (text[e + 1] == '-') exp = -exp;
  if (exp < -4 || exp >= 16) {
    s.append(text.data(), text.size());
    return;
  }
  bool negative = text[0] == '-';
  char digits[24];
  size_t n = 0;
  for (char c : text.substr(negative, e - negative)) {
    if (c != '.') digits[n++] = c;
  }
  if (negative) s.push_back('-');
  if (exp >= 0) {
    size_t whole = static_cast<size_t>(exp) + 1;
    for (size_t i = 0; i < whole; ++i) s.push_back(i < n ? digits[i] : '0');
    if (n > whole) {
      s.push_back('.');
      s.append(digits + whole, n - whole);
    }
  } else {
    s.append("0.");
    for (int i = 0; i < -exp - 1; ++i) s.push_back('0');
    s.append(digits, n);
  }
}

// A string as torch 2.15's profiler writes one: backslashes become slashes and newlines are
// dropped (Kineto's cleaning for JSON); `whole_value`: a string holding a double quote is "None",
// as torch writes it for a keyword input. What torch leaves that JSON does not allow (a quote
// inside a string list, other control characters) is escaped here, where torch's file would not
// be JSON.
void put_profiler_string(Buf& s, std::string_view text, bool whole_value) {
  if (whole_value && text.find('"') != std::string_view::npos) {
    s.append("\"None\"");
    return;
  }
  s.push_back('"');
  for (unsigned char c : text) {
    if (c == '\\') {
      s.push_back('/');
    } else if (c == '"') {
      s.append("\\\"");
    } else if (c >= 0x20) {
      s.push_back(static_cast<char>(c));
    } else if (c != '\n') {
      char tmp[8];
      std::snprintf(tmp, sizeof tmp, "\\u%04x", c);
      s.append(tmp);
    }
  }
  s.push_back('"');
}
#endif

using KwInputs = std::unordered_map<std::string, c10::IValue>;

#ifdef CUPROF_WITH_KWINPUTS_MEMBER
// A RecordFunction's keyword inputs, read in place. torch hands them out only by copy
// (kwinputs()), which every operator would pay to learn it has none (measured: 64-85
// instructions per operator copying and destroying the empty map). The member is named through
// the one rule that lets a name be used without access checks, an explicit instantiation; it
// is found by name in the headers of the torch being built against, so its layout is theirs.
const KwInputs& kwinputs_of(const at::RecordFunction& fn);
template <KwInputs at::RecordFunction::*Member>
struct KwInputsMember {
  friend const KwInputs& kwinputs_of(const at::RecordFunction& fn) { return fn.*Member; }
};
template struct KwInputsMember<&at::RecordFunction::kwinputs_>;
#else
// Where the member is not as expected: torch's copy, kept alive per thread so the reference
// stays valid for the record's writing.
const KwInputs& kwinputs_of(const at::RecordFunction& fn) {
  thread_local KwInputs copy;
  copy = fn.kwinputs();
  return copy;
}
#endif

// Whether torch.profiler writes a keyword input: ints, doubles, strings, bools and lists of
// strings; a stream only as an int.
bool written_kwinput(const std::string& key, const c10::IValue& v) {
  if (v.isInt() || v.isDouble() || v.isString() || v.isBool()) {
    return key != "stream" || v.isInt();
  }
  if (key == "stream" || !v.isList()) return false;
  for (const c10::IValue& e : v.toListRef()) {
    if (!e.isString()) return false;
  }
  return true;
}

// The keyword inputs of a RecordFunction (`_RecordFunctionFast`'s: torch.compile's Triton
// launches carry their kernel's file, hash, stream, warps; `## Call CompiledFxGraph ##` its
// scope), each as torch.profiler writes it with record_shapes. Returns how many it wrote whole.
__attribute__((noinline)) uint32_t put_kwinputs(ThreadBufs& b, const KwInputs& kwinputs) {
  Buf& r = b.record;
  uint32_t n = 0;
  size_t whole = r.size();
  try {
    Buf value;
    for (const auto& [key, v] : kwinputs) {
      if (!written_kwinput(key, v)) continue;
      value.clear();
#ifdef CUPROF_WITH_TYPED_KWINPUTS
      if (v.isInt()) {
        put_int(value, v.toInt());
      } else if (v.isDouble()) {
        put_shortest_double(value, v.toDouble());
      } else if (v.isBool()) {
        value.append(v.toBool() ? "true" : "false");
      } else if (v.isString()) {
        put_profiler_string(value, v.toStringRef(), /*whole_value=*/true);
      } else {
        value.push_back('[');
        bool first = true;
        for (const c10::IValue& e : v.toListRef()) {
          if (!first) value.append(", ");
          first = false;
          put_profiler_string(value, e.toStringRef(), /*whole_value=*/false);
        }
        value.push_back(']');
      }
#else
      std::string printed;
      if (v.isList()) {
        auto list = v.toListRef();
        printed = torch::profiler::impl::ivalueListToStr(std::vector<c10::IValue>(list.begin(), list.end()));
      } else {
        printed = torch::profiler::impl::ivalueToStr(v, v.isString());
      }
      value.append(printed.data(), printed.size());
#endif
      put_member(r, key, std::string_view(value.data(), value.size()));
      ++n;
      whole = r.size();
    }
  } catch (...) {
    r.truncate(whole);
  }
  return n;
}
#endif

struct Label : at::ObserverContext {
  explicit Label(uint64_t id) : id(id) {}
  uint64_t id;
};

// The record of `fn` at the end of the thread's record buffer (native_record.rs reads it): an
// operator's or a label's, which Kineto writes with the same fields.
void put_record(ThreadBufs& b, const at::RecordFunction& fn, bool label) {
  Buf& r = b.record;
  const char* name = fn.name();
  size_t name_len = std::strlen(name);
  char* w = r.reserve(name_len + 1 + 3 * 8);
  std::memcpy(w, name, name_len);
  w += name_len;
  *w++ = kSep;
  w = put_raw_at(w, static_cast<int64_t>(fn.seqNr()));
  w = put_raw_at(w, static_cast<uint64_t>(fn.forwardThreadId()));
  r.commit(put_raw_at(w, static_cast<uint64_t>(fn.handle())));
  uint64_t flops = 0;
  bool counted = false;
#ifdef CUPROF_WITH_FLOPS
  if (g_flops && !label) {
    auto args = torch::profiler::impl::saveExtraArgs(fn);
    if (!args.empty()) {
      flops = static_cast<uint64_t>(torch::profiler::impl::computeFlops(fn.name(), args));
      counted = true;
    }
  }
#endif
  bool comms = false;
#ifdef CUPROF_WITH_COMMS_META
  comms = fn.isNcclMeta();
#endif
  bool kwargs = false;
#ifdef CUPROF_WITH_KWINPUTS
  const KwInputs* kwinputs = nullptr;
  if (g_shapes) {
    kwinputs = &kwinputs_of(fn);
    kwargs = !kwinputs->empty();
  }
#endif
  bool members = comms || kwargs;
  r.push_back(static_cast<char>((counted ? kFlopsCounted : 0) | (members ? kMembers : 0)));
  r.put_raw(flops);
  if (members) {
    size_t count_at = r.size();
    r.put_raw(uint32_t{0});
    uint32_t n = 0;
#ifdef CUPROF_WITH_COMMS_META
    if (comms) n += put_comms_meta(b, fn);
#endif
#ifdef CUPROF_WITH_KWINPUTS
    if (kwargs) n += put_kwinputs(b, *kwinputs);
#endif
    r.patch_raw(count_at, n);
  }
  // Kineto writes no input arrays for an operator without inputs.
  bool shapes = g_shapes && !fn.inputs().empty();
  r.push_back(shapes ? 1 : 0);
  if (shapes) put_inputs(b, fn.inputs());
}

// A label: opened on libcuprof.so's range stack (and here, for the operators inside it).
__attribute__((noinline)) std::unique_ptr<at::ObserverContext> open_label(ThreadBufs& b,
                                                                          size_t at) {
  Buf& r = b.record;
  uint64_t stack = b.ops_open ? b.stack : 0;
  uint64_t id = g_hooks->label_begin(r.data() + at, r.size() - at, b.parent(), stack);
  r.truncate(at);
  if (!id) return nullptr;
  b.open.push() = OpenRange{id, 0, 0, id, 0, 0, true, false, false};
  return std::make_unique<Label>(id);
}

// The outermost operator's Python stack (--with-stack), which those nested in it share.
__attribute__((noinline)) void take_stack(ThreadBufs& b, OpenRange& op) {
  b.stack = g_hooks->python_stack();
  op.owns_stack = b.stack != 0;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  ThreadBufs* bufs = nullptr;
  size_t at = 0;
  try {
    ThreadBufs& b = thread_bufs();
    bufs = &b;
    at = b.record.size();
    // One call, which the compiler inlines (two, one per kind, cost every operator 87 more
    // instructions: measured).
    bool label = fn.scope() == at::RecordScope::USER_SCOPE;
    put_record(b, fn, label);
    if (label) return open_label(b, at);
    uint64_t start = now_ns();
    uint64_t id = b.take_id();
    bool collecting = flag(g_hooks->collecting);
    bool pushed = collecting && g_correlation.push && flag(g_hooks->cpu) &&
        g_correlation.push(g_correlation.kind, id) == 0;
    uint64_t parent = b.parent();
    OpenRange& op = b.open.push();
    op = OpenRange{id, parent, start, *b.ranges_innermost, static_cast<uint32_t>(at),
                   static_cast<uint32_t>(b.record.size() - at), false, pushed, false};
    if (b.ops_open++ == 0 && collecting && flag(g_hooks->stacks)) take_stack(b, op);
  } catch (...) {
    // Never into the program: the operator runs unrecorded (nothing throws once it is open),
    // and what its record had written goes.
    if (bufs) bufs->record.truncate(at);
  }
  return nullptr;
}

// A label's end, wherever it is among the open ranges (`_record_function_exit` may end it
// inside another operator than the one it began in).
__attribute__((noinline)) void close_label(ThreadBufs& b, uint64_t id) {
  for (size_t i = b.open.size(); i > 0; --i) {
    if (b.open[i - 1].label && b.open[i - 1].id == id) {
      b.open.erase(i - 1);
      break;
    }
  }
  g_hooks->label_end(id);
}

// A stack handle whose operator is not recorded: the finished operators nested in it that
// share it go first.
__attribute__((noinline)) void drop_stack(ThreadBufs& b, uint64_t stack) {
  hand_over(b);
  g_hooks->release_stack(stack);
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  try {
    if (fn.scope() == at::RecordScope::USER_SCOPE) {
      if (ctx) close_label(thread_bufs(), static_cast<Label*>(ctx)->id);
      return;
    }
    uint64_t end = now_ns();
    ThreadBufs& b = thread_bufs();
    // Operators nest; the labels that may be open above the innermost one do not.
    ptrdiff_t innermost = b.innermost_op();
    if (innermost < 0) return;
    auto at = static_cast<size_t>(innermost);
    const OpenRange& op = b.open[at];
    if (op.pushed_correlation) {
      uint64_t last = 0;
      g_correlation.pop(g_correlation.kind, &last);
    }
    uint32_t record_at = op.record_at;
    CuprofDone done{op.start, end,          op.id,         op.parent,
                    b.stack,  op.record_len, op.record_at, op.owns_stack};
    b.ops_open--;
    if (op.owns_stack) b.stack = 0;
    if (at + 1 == b.open.size()) {
      b.open.pop();
    } else {
      b.open.erase(at);
    }
    if (flag(g_hooks->collecting) && flag(g_hooks->cpu)) {
      // Its record stays where it is, handed over with the buffer.
      b.done[b.n_done++] = done;
    } else {
      if (done.owns_stack && done.stack) drop_stack(b, done.stack);
      // What follows its record is its nested operators': kept only if one of them was.
      if (b.n_done == 0) b.record.truncate(record_at);
    }
    if (b.ops_open == 0) {
      hand_over(b);
      b.record.clear();
    } else if (b.n_done == kMaxDone || b.record.size() >= kMaxDoneBytes) {
      hand_over(b);
    }
  } catch (...) {
  }
}

// The operators open on the calling thread, innermost first, for an allocation made inside
// them (ops/native.rs, `open_operators`): the outermost one's stack handle.
uint64_t walk_open_ops(CuprofEachOpenOp each, void* ctx) {
  ThreadBufs* b = t_bufs;
  if (!b || !b->ops_open) return 0;
  for (size_t i = b->open.size(); i > 0; --i) {
    const OpenRange& o = b->open[i - 1];
    if (!o.label) each(ctx, b->record.data() + o.record_at, o.record_len);
  }
  return b->stack;
}

// What torch sees of cuprof on the thread that records: a profiler state, as torch.profiler's
// and emit_nvtx's, so that what torch records only under a profiler (torch.compile's
// `_RecordFunctionFast` regions: `## Call CompiledFxGraph ##`, `Pregraph bytecode`,
// `AOTDispatcher Runtime Wrapper Prologue`) reaches the callbacks. It registers no callback
// of its own; its type is NONE, so no torch code takes it for its own profilers' state. With
// `memory` (the MEM activity) it is also what torch's allocators report each allocation and
// free to, as they report to torch.profiler's state with `profile_memory`: the thread-local
// debug info is where they look, and the threads that inherit this thread's state (autograd's)
// report to it too. With `shapes` it says so, as torch.profiler's record_shapes: the
// `_RecordFunctionFast` regions pass their inputs and keyword inputs only then, and read the
// scope they are given among them (torch.compile's `## Call CompiledFxGraph ##` is a
// user_annotation only then, under torch.profiler as under cuprof).
struct MarkerState : torch::profiler::impl::ProfilerStateBase {
  MarkerState(bool memory, bool shapes)
      : ProfilerStateBase(torch::profiler::impl::ProfilerConfig(
            torch::profiler::impl::ProfilerState::NVTX, /*report_input_shapes=*/shapes,
            /*profile_memory=*/memory)) {}
  torch::profiler::impl::ActiveProfilerType profilerType() override {
    return torch::profiler::impl::ActiveProfilerType::NONE;
  }
  void reportMemoryUsage(void* ptr, int64_t bytes, size_t total_allocated, size_t total_reserved,
                         c10::Device device) override {
    if (!config().profile_memory || g_hooks == nullptr) return;
    try {
      ThreadBufs& b = thread_bufs();
      ptrdiff_t op = b.innermost_op();
      CuprofMemory report{reinterpret_cast<uint64_t>(ptr),
                          bytes,
                          static_cast<int64_t>(total_allocated),
                          static_cast<int64_t>(total_reserved),
                          op < 0 ? 0 : b.open[static_cast<size_t>(op)].id,
                          b.tid,
                          static_cast<int8_t>(device.type()),
                          static_cast<int8_t>(device.index())};
      // What finished before it goes before it.
      hand_over(b);
      g_hooks->memory(&report);
    } catch (...) {
    }
  }
};

thread_local torch::profiler::impl::ProfilerStateBase* t_marker = nullptr;

// The thread's profiler state. torch 2.11 and older name its accessor get(/*global=*/false);
// later torch renamed it getTLS() and dropped get(bool). Both are found at compile time, so one
// source builds against either (a torch without getTLS stopped the build on the H100's 2.11).
template <typename State, typename = void>
struct HasGetTLS : std::false_type {};
template <typename State>
struct HasGetTLS<State, std::void_t<decltype(State::getTLS())>> : std::true_type {};

template <typename State = torch::profiler::impl::ProfilerStateBase>
State* thread_profiler_state() {
  if constexpr (HasGetTLS<State>::value) {
    return State::getTLS();
  } else {
    return State::get(/*global=*/false);
  }
}

void push_marker(bool memory, bool shapes) {
  using torch::profiler::impl::ProfilerStateBase;
  if (thread_profiler_state() != nullptr) return;
  auto state = std::make_shared<MarkerState>(memory, shapes);
  t_marker = state.get();
  ProfilerStateBase::push(std::move(state));
}

void pop_marker() {
  using torch::profiler::impl::ProfilerStateBase;
  if (t_marker != nullptr && thread_profiler_state() == t_marker) {
    ProfilerStateBase::pop(/*global=*/false);
  }
  t_marker = nullptr;
}

}  // namespace

extern "C" {

// Flags of cuprof_observer_start: recorder.py passes its level (ops/mod.rs, `Options::level`)
// shifted down by its "operators" bit, so the two keep their options in the same order.
enum : uint32_t {
  kShapes = 1,
  kAllThreads = 2,
  kFlops = 4,
  kMemory = 8,
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
    // Set once, before any callback of this library's is registered: the callbacks of every
    // thread read it unlocked (a later start finds the same functions, CUPTI's).
    if (!g_correlation.push) {
      CuprofCorrelation correlation{};
      hooks->correlation(&correlation);
      g_correlation = correlation;
    }
    hooks->attach(walk_open_ops);
    g_shapes = flags & kShapes;
    g_flops = flags & kFlops;
    auto cb = at::RecordFunctionCallback(on_start, on_end)
                  .needsInputs(g_shapes || g_flops);
    uint64_t handle = (flags & kAllThreads) ? at::addGlobalCallback(cb)
                                            : at::addThreadLocalCallback(cb);
    push_marker(flags & kMemory, g_shapes);
    return handle;
  } catch (...) {
    return 0;
  }
}

// An nn.Module forward call that ended, timed by recorder.py's module hooks (--with-modules;
// flag 16 of the level, which the callbacks above do not read): to libcuprof.so, which keeps
// it while the window records.
__attribute__((visibility("default"))) void cuprof_observer_module(
    uint64_t start,
    uint64_t end,
    uint64_t id,
    uint64_t parent,
    const char* name,
    size_t name_len,
    const char* path,
    size_t path_len) {
  if (!g_hooks) return;
  CuprofModule call{start, end, id, parent, name, name_len, path, path_len};
  g_hooks->module(&call);
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
