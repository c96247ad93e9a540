//! The files of a report: `summary.json` and `report.md` (and the name of `report.html`).

use std::path::Path;

use anyhow::{Context, Result};

use crate::escape::terminal::Shown;
use crate::summary::schema::Summary;

pub const SUMMARY_JSON: &str = "summary.json";
pub const REPORT_MD: &str = "report.md";
pub const REPORT_HTML: &str = "report.html";

/// Writes `summary.json` and `report.md` into `dir`, each through a temporary file and a
/// rename (a symlink at either name is replaced, not followed).
pub fn write_report(dir: &Path, s: &Summary, top: usize) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "{}: cannot create the output directory; pick a writable -o DIR",
            dir.shown()
        )
    })?;
    let json = crate::escape::json::to_string_pretty(s)? + "\n";
    crate::io::output::write(&dir.join(SUMMARY_JSON), json.as_bytes())?;
    let md = crate::views::render::markdown(s, top);
    let md = crate::escape::terminal::printable_text(&md);
    crate::io::output::write(&dir.join(REPORT_MD), md.as_bytes())?;
    Ok(())
}
