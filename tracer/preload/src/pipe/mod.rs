//! The way to the writer thread: the running tracer, the operators' per-thread batches and the
//! channel. Imports state/, cupti/, host/.

pub mod channel;
pub mod op_batch;
pub mod tracer;
