//! libcuprof.so: injected into CUDA programs (LD_PRELOAD or CUDA_INJECTION64_PATH).
//!
//! The data path, top to bottom, one module per stage (declared below in this order):
//!
//! ```text
//! CUPTI buffer completed ── buffers (decode: cuprof_core::decode) ──┐
//! NVTX range pop/end ────── nvtx ───────────────────────────────────┤ channel (bounded; each
//! allocation stack ──────── stacks ─────────────────────────────────┤  message's send policy,
//! allocation stream ─────── callbacks ──────────────────────────────┤
//! step / start / stop ───── window (cuprof_core::window) ───────────┘  drops counted)
//!                                                                      │
//!                    writer thread: writer → cuprof_core::session (route into cycles, via
//!                    output's files) → cuprof_core::trace_writer (gzip JSON); report at the end
//! ```
//!
//! Around it:
//! - `lifecycle` owns the library's one state (`Phase`) and every transition: start at CUDA
//!   initialisation, shutdown on the exit paths and fatal signals (`signals` catches them),
//!   step-aside for a second profiler, fork. `entry` holds the C entry points that drive it.
//!   `error` says, in one line each, why tracing could not start.
//! - `tracer` is what the running tracer holds, and where callbacks find it (`running()`).
//! - `cupti` is the only module that calls CUPTI (a safe wrapper on cupti-sys's types; the
//!   native operator observer `ops` loads is handed CUPTI's correlation push and pop from it);
//!   `setup` brings CUPTI up in order, `callbacks` acts on its subscriber callbacks, `api`
//!   chooses the API calls it records, `resolve` names records, `pool`/`pages`/`reclaim` bound
//!   its buffers' memory.
//! - `python` talks to the program's CPython (it runs `ops`' recorder there), `devices` to the
//!   CUDA driver, `process` to the OS.
//!
//! Wake-up: the constructor only reads CUPROF_ENABLED and points CUDA_INJECTION64_PATH and
//! NVTX_INJECTION64_PATH at this library. CUPTI, threads and files start in
//! `InitializeInjection` (libcuda calls it inside cuInit), so a process that never initialises
//! CUDA loads no CUPTI, starts no thread and writes nothing.

// The C entry points: the loader's, CUDA's, NVTX's and the program's way in.
mod entry;

// The library's life: its state's transitions, CUPTI's set-up, signals, the control socket.
mod life;

// 4. The writer thread and the session's files: the end of the data path.
mod writer;

// 1. The producers: CUPTI buffers and callbacks, NVTX, the range stack, allocation stacks,
// PyTorch operators.
mod sources;

// 2. The profiling window: what is recorded, and when cycles begin and end.
mod window;

// 3. The pipe to the writer: the running tracer, the operator batches, the channel.
mod pipe;

// The cross-thread stores every stage reads: the phase, the asked captures, the live figures.
mod state;

// CUPTI and what surrounds it: the only code that calls CUPTI.
mod cupti;

// The host process: Python, symbols, names, devices, the OS.
mod host;
