//! One escaping layer per output syntax: a name or a path from a trace (or a folder's listing)
//! becomes output text only through the module of that output's syntax.
//!
//! - [`terminal`], for stdout, stderr and plain text files (`Console` prints only through it;
//!   paths in messages are written `path.shown()`);
//! - [`markdown`], for report.md;
//! - [`xml`], for the HTML page and every SVG (report.html's figures, `flame`'s graph);
//! - [`json`], for summary.json, `compare --json`, merged and repaired traces (core's, which the
//!   tracer writes its traces with too);
//! - [`plain`], for folded stacks.
//!
//! Parquet columns hold the exact names: a typed data format, whose reader escapes what it
//! shows.

pub mod markdown;
pub mod plain;
pub mod terminal;
pub mod xml;

pub use cuprof_core::json;
