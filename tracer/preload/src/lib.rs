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

// The data path, in order (a paragraph per stage: rustfmt sorts a block of `mod`s).
// 1. CUPTI hands back a buffer: decoded into events.
mod buffers;

// 2. Other producers: NVTX ranges, PyTorch operators (through `ops`' hooks or the NVTX
// observer), allocation stacks.
mod nvtx;
mod op_batch;
mod ops;
mod stacks;

// 3. The channel to the writer thread.
mod channel;

// 4. The profiling window: what is recorded, and when cycles begin and end.
mod window;

// What the window collects while recording (the process's options, or a capture's).
mod collect;

// 5. The writer thread: drains the channel into the session, and feeds the live figures.
mod live;
mod writer;

// 6. The session's files.
mod output;

// 7. What the user is told when the session ends.
mod report;

// The library's life and its entry points.
mod control;
mod entry;
mod error;
mod lifecycle;
mod signals;
mod tracer;

// CUPTI and what surrounds it.
mod api;
mod callbacks;
mod cupti;
mod pages;
mod pool;
mod rawdump;
mod reclaim;
mod resolve;
mod setup;

// The host process.
mod devices;
mod process;
mod py_stacks;
mod python;
mod symbols;
