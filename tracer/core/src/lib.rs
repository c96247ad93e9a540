//! cuprof's core: everything that can be tested without a GPU or an injected process.
//!
//! Data path: raw CUPTI record bytes --[`decode`]--> [`event::Event`] --> (channel, in the
//! preload crate) --> [`window`] decides what is kept --> [`trace_writer`] streams gzip JSON,
//! [`memory`] builds the device-memory timeline and snapshot pickles.

pub mod config;
pub mod decode;
pub mod event;
pub mod gpu_work;
pub mod json;
pub mod memory;
pub mod reader;
pub mod session;
pub mod torch_op;
pub mod trace_writer;
pub mod window;

/// The CUPTI external-correlation kind cuprof pushes NVTX range ids under
/// (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2; Kineto uses CUSTOM0 and CUSTOM1).
pub const EXTERNAL_KIND_CUPROF: u32 = 5;
/// The kind cuprof pushes PyTorch operator ids under (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
/// as Kineto does for its operators): a stack of its own, so an operator inside an NVTX range
/// leaves the range's id in place for the range's GPU projection.
pub const EXTERNAL_KIND_TORCH_OP: u32 = 3;
pub mod repair;
