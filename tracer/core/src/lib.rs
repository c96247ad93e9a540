//! cuprof's core: everything that can be tested without a GPU or an injected process.
//!
//! Data path: raw CUPTI record bytes --[`decode`]--> [`event::Event`] --> (channel, in the
//! preload crate) --> [`window`] decides what is kept --> [`trace_writer`] streams gzip JSON,
//! [`memory`] builds the device-memory timeline and snapshot pickles.

pub mod config;
pub mod decode;
pub mod event;
pub mod json;
pub mod memory;
pub mod reader;
pub mod session;
pub mod trace_writer;
pub mod window;

/// The CUPTI external-correlation kind cuprof pushes NVTX range ids under
/// (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2; Kineto uses CUSTOM0 and CUSTOM1).
pub const EXTERNAL_KIND_CUPROF: u32 = 5;
pub mod repair;
