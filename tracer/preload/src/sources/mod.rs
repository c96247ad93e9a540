//! The producers, one event kind each: CUPTI's buffers and callbacks, NVTX, the per-thread
//! range stack, allocation stacks and PyTorch operators. Imports window/, pipe/, state/, cupti/,
//! host/.

pub mod buffers;
pub mod callbacks;
pub mod nvtx;
pub mod ops;
pub mod ranges;
pub mod stacks;
