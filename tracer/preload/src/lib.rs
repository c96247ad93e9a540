//! libcuprof.so: injected into CUDA programs (LD_PRELOAD or CUDA_INJECTION64_PATH).
//!
//! The folders follow the data path, and a folder imports only the folders below it in this
//! list (its own files import each other without a circle):
//!
//! ```text
//! entry.rs   the C entry points (loader, CUDA, NVTX, the program)      -> everything below
//! life/      the lifecycle (the phase's only writer), CUPTI's set-up,
//!            fatal signals, the on-demand control socket                -> everything below
//! writer/    the writer thread, the session's files, the closing report -> window .. host
//! sources/   the producers: CUPTI buffers and callbacks, NVTX (ABI),
//!            the per-thread range stack, allocation stacks, operators   -> window .. host
//! window/    when and what is recorded (cuprof_core::window)            -> pipe .. host
//! pipe/      the way to the writer: the running tracer, operator
//!            batches, the bounded channel                               -> state .. host
//! state/     cross-thread stores: the phase, asked captures, live
//!            figures; they call nothing above them                      -> host
//! cupti/     the only code that calls CUPTI, its API plan and buffers   -> host
//! host/      the host process: CPython, Python stacks, symbols, names,
//!            GPUs, the OS, why tracing could not start                  -> (the ground)
//! ```
//!
//! The data path, top to bottom:
//!
//! ```text
//! CUPTI buffer completed ── sources/buffers (decode: cuprof_core::decode) ──┐
//! NVTX range pop/end ────── sources/nvtx → sources/ranges ──────────────────┤ pipe/channel
//! PyTorch operators ─────── sources/ops → sources/ranges, pipe/op_batch ────┤ (bounded; each
//! allocation stack ──────── sources/stacks ─────────────────────────────────┤ message's send
//! allocation stream ─────── sources/callbacks ──────────────────────────────┤ policy, drops
//! step / start / stop ───── window (cuprof_core::window) ───────────────────┘ counted)
//!                                                                             │
//!          writer/thread → cuprof_core::session (route into cycles, via writer/output's
//!          files) → cuprof_core::trace_writer (gzip JSON); writer/report at the end
//! ```
//!
//! Plain data the stages share (what the window collects, `cuprof_core::collect`) lives in
//! core. The operator recorder's inputs reach `host/python` from `life/setup` once
//! (`python::Recorder`), so the Python bridge needs nothing above it.
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
