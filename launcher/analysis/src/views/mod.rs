//! A summary as something to read: text and Markdown tables ([`render`]), the HTML page
//! ([`html`]), flame graphs ([`flame`]), the files of a report ([`files`]), and a
//! time window of one rank's timeline at a screen's resolution ([`window`]).

pub mod files;
pub mod flame;
pub mod html;
pub mod render;
pub mod window;
