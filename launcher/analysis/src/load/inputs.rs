//! The trace files a command reads: files as given, directories listed.

use std::path::PathBuf;

use crate::escape::terminal::Shown;
use anyhow::{bail, Context, Result};

/// The trace files named by `paths`: files as given, directories listed (not recursively) for
/// `*.trace.json.gz` / `*.trace.json`, or failing that any `*.json.gz` / `*.json`.
pub fn trace_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let md = std::fs::metadata(p).with_context(|| {
            format!(
                "{}: cannot read it; pass trace files or the directory cuprof wrote them to",
                p.shown()
            )
        })?;
        if !md.is_dir() {
            out.push(p.clone());
            continue;
        }
        let mut traces = Vec::new();
        let mut json = Vec::new();
        for e in std::fs::read_dir(p).with_context(|| format!("{}: cannot list it", p.shown()))? {
            let e = e.with_context(|| format!("{}: cannot list it", p.shown()))?;
            let path = e.path();
            if !path.is_file() {
                continue;
            }
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".trace.json.gz") || name.ends_with(".trace.json") {
                traces.push(path);
            } else if name.ends_with(".json.gz") || name.ends_with(".json") {
                json.push(path);
            }
        }
        let mut found = if traces.is_empty() { json } else { traces };
        if found.is_empty() {
            bail!(
                "{}: no trace files in it (*.trace.json.gz, *.json); pass the directory cuprof \
                 wrote (CUPROF_DIR / --profile-dir) or the files themselves",
                p.shown()
            );
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}
