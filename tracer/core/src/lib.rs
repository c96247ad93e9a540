//! cuprof's core: everything that can be tested without a GPU or an injected process.
//!
//! Data path: raw CUPTI record bytes --[`decode`]--> [`event::Event`] --> (channel, in the
//! preload crate) --> [`window`] decides what is kept --> [`session`] routes it to
//! [`trace_writer`], which streams gzip JSON, and [`memory`], which builds the device-memory
//! timeline and snapshot pickles. [`torch_op`] names PyTorch operators from their NVTX ranges,
//! which [`range_batch`] carries from the program thread to the writer in batches.
//!
//! Around it: [`config`] (the `CUPROF_*` variables both ways, the file names, the report file
//! the launcher reads); [`trace_format`] (the trace's top level: header, stats, device types,
//! member names), shared by the writer, [`reader`] (the streaming reader the offline commands
//! use) and [`repair`] (closing a cut trace); [`json`] (the writer's number and string
//! formatting, and every JSON output's strings); [`text`] (which characters every output
//! escapes, and their escape in terminal text).

// Core reads foreign memory only through safe, bounds-checked views (decode.rs): any `unsafe`
// belongs in the preload, which owns the FFI.
#![forbid(unsafe_code)]

pub mod block;
pub mod byte_size;
pub mod capture_options;
pub mod chunked_gzip;
pub mod collect;
pub mod config;
pub mod control;
pub mod decode;
pub mod event;
pub mod figures;
pub mod gpu_work;
pub mod json;
pub mod live;
pub mod memory;
pub mod native_record;
pub mod on_demand;
pub mod range_batch;
pub mod reader;
pub mod repair;
pub mod session;
pub mod text;
pub mod torch_op;
pub mod trace_format;
pub mod trace_writer;
pub mod window;

/// The CUPTI external-correlation kind cuprof pushes NVTX range ids under
/// (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2; Kineto uses CUSTOM0 and CUSTOM1).
pub const EXTERNAL_KIND_CUPROF: u32 = 5;
/// The kind cuprof pushes PyTorch operator ids under (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
/// as Kineto does for its operators): a stack of its own, so an operator inside an NVTX range
/// leaves the range's id in place for the range's GPU projection.
pub const EXTERNAL_KIND_TORCH_OP: u32 = 3;
