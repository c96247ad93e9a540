//! The ledger of the on-demand captures asked for and not yet written: the control socket
//! (`life::control`) notes each one, the writer thread's session reads where its trace goes and
//! tells its requester once it is written.

use crate::host::process::{pid, say};
use cuprof_core::config::report::{self, ReportLine};
use cuprof_core::session::Written;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Mutex;

/// A capture asked for and not yet written.
struct Asked {
    cycle: u32,
    dir: Option<PathBuf>,
    report: PathBuf,
}

static ASKED: Mutex<Vec<Asked>> = Mutex::new(Vec::new());
/// The last capture whose files are written.
static DONE: AtomicU32 = AtomicU32::new(0);
/// Notes capture `cycle`, just asked for: where its trace goes and whom to tell.
pub fn ask(cycle: u32, dir: Option<PathBuf>, report: PathBuf) {
    if let Ok(mut a) = ASKED.lock() {
        a.push(Asked { cycle, dir, report });
    }
}

/// The last capture whose files are written.
pub fn done() -> u32 {
    DONE.load(Relaxed)
}

/// The directory a capture asked its cycle's trace to go to.
pub fn capture_dir(cycle: u32) -> Option<PathBuf> {
    let a = ASKED.lock().ok()?;
    a.iter().find(|a| a.cycle == cycle)?.dir.clone()
}

/// The writer thread opened capture `cycle`'s trace (`opened`, a [`ReportLine::Opened`]): its
/// requester learns the path now, so that it can name the file if this process dies.
pub fn opened(cycle: u32, opened: &ReportLine) {
    let report = {
        let Ok(a) = ASKED.lock() else { return };
        let Some(a) = a.iter().find(|a| a.cycle == cycle) else {
            return;
        };
        a.report.clone()
    };
    append(&report, std::slice::from_ref(opened));
}

/// The writer thread has closed capture `cycle` (its file written, or none when it recorded
/// nothing): tell the requester, through its report file, and count it done.
pub fn finished(cycle: u32, written: &[Written]) {
    let asked = {
        let Ok(mut a) = ASKED.lock() else { return };
        let Some(i) = a.iter().position(|a| a.cycle == cycle) else {
            return;
        };
        a.remove(i)
    };
    let mut lines = Vec::new();
    for w in written.iter().filter(|w| w.cycle == cycle) {
        lines.push(ReportLine::File {
            path: w.path.clone(),
            events: w.events,
            bytes: std::fs::metadata(&w.path).map_or(0, |m| m.len()),
        });
    }
    if lines.is_empty() {
        lines.push(ReportLine::Note(format!(
            "process {} did no GPU work during capture {cycle}: no trace written",
            pid()
        )));
    }
    append(&asked.report, &lines);
    DONE.fetch_max(cycle, Relaxed);
}

/// Capture `cycle` was cancelled before its first step (`first_step`) began: tell its
/// requester that nothing was recorded, and count it done (its command stops waiting).
pub fn cancelled(cycle: u32, first_step: u64) {
    let asked = {
        let Ok(mut a) = ASKED.lock() else { return };
        let Some(i) = a.iter().position(|a| a.cycle == cycle) else {
            return;
        };
        a.remove(i)
    };
    let note = ReportLine::Note(format!(
        "process {}: capture {cycle} was cancelled before step {first_step} began: nothing recorded",
        pid()
    ));
    append(&asked.report, &[note]);
    DONE.fetch_max(cycle, Relaxed);
}

/// Appends to the requester's report file, which must exist: never creates a file and never
/// follows a symlink at its place.
fn append(report_file: &Path, lines: &[ReportLine]) {
    let text: String = lines.iter().map(report::ReportLine::to_line).collect();
    let opened = std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(report_file);
    match opened {
        Ok(mut f) => {
            let _ = f.write_all(text.as_bytes());
        }
        Err(e) => say(&format!(
            "cannot report the capture to {} ({e}); its files are in the trace directory",
            report_file.display()
        )),
    }
}
