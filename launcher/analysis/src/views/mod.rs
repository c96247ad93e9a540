//! A summary as something to read: text and Markdown tables ([`render`]), the HTML page
//! ([`html`]), flame graphs ([`flame`]), the files of a report ([`files`]), a time window of
//! one rank's timeline at a screen's resolution ([`window`]), and source paths as a shared
//! page shows them ([`source_paths`]).

pub mod files;
pub mod flame;
pub mod html;
pub mod render;
pub mod source_paths;
pub mod window;
