//! What the commands share to read and write: standard output ([`console`]), output files
//! written without destroying one ([`output`]), gzip on every core ([`gzip_out`]) and the
//! workers reading files at once ([`jobs`]). Imports only [`crate::escape`] of the crate.

pub mod console;
pub mod gzip_out;
pub mod jobs;
pub mod output;
