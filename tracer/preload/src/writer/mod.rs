//! The writer thread, the end of the data path: it drains the pipe into the session, writes
//! its files and tells the user what was written. Imports window/, pipe/, state/, cupti/, host/.

pub mod output;
pub mod reclaim;
pub mod report;
pub mod thread;
