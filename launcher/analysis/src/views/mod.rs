//! A summary as something to read: text and Markdown tables ([`render`]), the HTML page
//! ([`html`]), flame graphs ([`flame`]), and the files of a report ([`files`]).

pub mod files;
pub mod flame;
pub mod html;
pub mod render;
