//! When and what is recorded: the profiling window and what it collects. Imports pipe/, state/,
//! cupti/, host/.

pub mod boundaries;
pub mod collect;
