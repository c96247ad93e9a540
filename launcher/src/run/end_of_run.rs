//! After the program: what the library wrote, told through the report file
//! (`cuprof_core::config::report`), then the short analysis of the traces.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use cuprof_analysis::escape::terminal::Shown;
use cuprof_core::config::report::{self, ReportLine};

/// An empty, new report file in the temporary directory.
pub(crate) fn create_report_file() -> io::Result<PathBuf> {
    let dir = std::env::temp_dir();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for i in 0..100u32 {
        let p = dir.join(format!(
            "cuprof-report-{}-{nanos}-{i}.tsv",
            std::process::id()
        ));
        match OpenOptions::new().write(true).create_new(true).open(&p) {
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free report file name")))
}

fn human_size(bytes: u64) -> String {
    cuprof_core::byte_size::format(i64::try_from(bytes).unwrap_or(i64::MAX), 1)
}

/// `1 event`, `5000 events`.
fn events(n: u64) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{n} event{s}")
}

const NOTHING_TRACED: &str = "cuprof: nothing traced: the program never initialised CUDA (or no step matched / libcupti missing: see messages above)";

const NOTHING_REPORTED: &str =
    "cuprof: no process reported a trace of this capture (killed before it wrote one?)";

/// How the program ended, as far as the summary cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It exited (whatever its code): the library reported on the way out.
    Exited,
    /// Killed by this signal: the library may have reported nothing.
    Killed(i32),
}

/// The summary lines printed after the program ends.
fn summary(lines: &[ReportLine], ended: Ended) -> Vec<String> {
    let mut out = report_lines(lines);
    let why = match ended {
        Ended::Killed(sig) => format!("not reported (the program was killed by signal {sig})"),
        // A file that failed was said when it did.
        Ended::Exited => "not closed (see the messages above)".to_owned(),
    };
    for (_, path) in unfinished(lines) {
        out.push(format!("cuprof: {why}: {}", file_state(&path)));
    }
    let opened = lines.iter().any(|l| matches!(l, ReportLine::Opened { .. }));
    if !lines.iter().any(|l| matches!(l, ReportLine::File { .. })) && !opened {
        out.push(match ended {
            Ended::Exited => NOTHING_TRACED.to_owned(),
            // It opened no trace (each is told as it opens): whatever killed it, nothing was lost.
            Ended::Killed(sig) => format!("{NOTHING_TRACED}; it was killed by signal {sig}"),
        });
    }
    out
}

/// The trace files a process told it opened and never reported closed: `(pid, path)`, in the
/// order opened. Such a process died with the file open (SIGKILL, a crash).
pub(crate) fn unfinished(lines: &[ReportLine]) -> Vec<(u32, PathBuf)> {
    let closed: BTreeSet<&Path> = lines
        .iter()
        .filter_map(|l| match l {
            ReportLine::File { path, .. } => Some(path.as_path()),
            _ => None,
        })
        .collect();
    lines
        .iter()
        .filter_map(|l| match l {
            ReportLine::Opened { pid, path } if !closed.contains(path.as_path()) => {
                Some((*pid, path.clone()))
            }
            _ => None,
        })
        .collect()
}

/// What is on disk of a trace its process never reported closed: complete (closed before the
/// process died), or unfinished with the events readable up to its last flush.
pub(crate) fn file_state(path: &Path) -> String {
    let size = std::fs::metadata(path).map_or(0, |m| m.len());
    let surveyed = cuprof_core::reader::TraceReader::open(path)
        .map_err(|e| e.to_string())
        .and_then(|mut r| cuprof_core::repair::survey(&mut r).map_err(|e| e.to_string()));
    match surveyed {
        Ok(s) if s.is_complete() => format!(
            "{} is complete ({}, {})",
            path.shown(),
            events(s.events),
            human_size(size)
        ),
        Ok(s) => format!(
            "{} is unfinished: {} readable up to its last flush ({}); cuprof repair {} closes it",
            path.shown(),
            events(s.events),
            human_size(size),
            path.shown()
        ),
        Err(e) => format!("{} cannot be read: {e}", path.shown()),
    }
}

/// Each report line as printed: the files written, and the notes.
fn report_lines(lines: &[ReportLine]) -> Vec<String> {
    let mut out = Vec::new();
    for l in lines {
        match l {
            ReportLine::File {
                path,
                events,
                bytes,
            } => {
                out.push(format!(
                    "cuprof: wrote {} ({}, {})",
                    path.shown(),
                    self::events(*events),
                    human_size(*bytes)
                ));
            }
            ReportLine::Note(text) => out.push(format!("cuprof: {text}")),
            // Said by the caller, once it knows which file stayed unfinished.
            ReportLine::Opened { .. } => {}
        }
    }
    out
}

/// The trace files the library reported writing (not the memory snapshots).
fn traces_written(lines: &[ReportLine]) -> Vec<PathBuf> {
    lines
        .iter()
        .filter_map(|l| match l {
            ReportLine::File { path, .. } if path.to_string_lossy().contains(".trace.json") => {
                Some(path.clone())
            }
            _ => None,
        })
        .collect()
}

/// Prints, on stderr, the files the library reported in `report_file` (which is removed), then
/// unless `analyse` is false, the summary of the traces.
pub(crate) fn print(report_file: &Path, analyse: bool, ended: Ended) {
    let lines = take(report_file);
    let analyse = analyse.then_some(cuprof_analysis::ReportOf::Run);
    print_lines(&lines, summary(&lines, ended), analyse)
}

/// The report lines in `report_file`, which is removed.
pub(crate) fn take(report_file: &Path) -> Vec<ReportLine> {
    let lines = report::read(report_file).unwrap_or_default();
    let _ = std::fs::remove_file(report_file);
    lines
}

/// [`print`] for `cuprof capture`, of the lines [`take`]n from its report file, followed by
/// `more` (what the capture says of processes that died): each process reports why it wrote
/// nothing (no GPU work, the capture cancelled), so no "nothing traced" line is added.
pub(crate) fn print_capture(lines: &[ReportLine], more: Vec<String>, analyse: bool) {
    let mut summary = capture_summary(lines);
    if !more.is_empty() && lines.is_empty() {
        summary.clear();
    }
    summary.extend(more);
    let analyse = analyse.then_some(cuprof_analysis::ReportOf::Capture);
    print_lines(lines, summary, analyse)
}

fn capture_summary(lines: &[ReportLine]) -> Vec<String> {
    if lines.is_empty() {
        return vec![NOTHING_REPORTED.to_owned()];
    }
    report_lines(lines)
}

fn print_lines(
    lines: &[ReportLine],
    summary: Vec<String>,
    analyse: Option<cuprof_analysis::ReportOf>,
) {
    for line in summary {
        cuprof_analysis::io::console::eprint_line(&line);
    }
    if let Some(of) = analyse {
        let (lines, _) = cuprof_analysis::after_run(&traces_written(lines), of);
        for line in lines {
            cuprof_analysis::io::console::eprint_line(&line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lines() {
        let lines = report::parse_all(
            "file\t/d/r-rank0.trace.json.gz\t1\t100\nnote\tsomething\nfile\t/d/r-rank1.trace.json.gz\t5000\t3145728\n",
        );
        assert_eq!(
            summary(&lines, Ended::Exited),
            [
                "cuprof: wrote /d/r-rank0.trace.json.gz (1 event, 100 B)",
                "cuprof: something",
                "cuprof: wrote /d/r-rank1.trace.json.gz (5000 events, 3.0 MiB)",
            ]
        );
        assert_eq!(summary(&[], Ended::Exited), [NOTHING_TRACED]);
        assert_eq!(
            summary(&[], Ended::Killed(9)),
            [format!("{NOTHING_TRACED}; it was killed by signal 9")]
        );
        assert_eq!(
            summary(&[ReportLine::Note("why".into())], Ended::Exited),
            ["cuprof: why", NOTHING_TRACED]
        );
        assert_eq!(
            capture_summary(&[ReportLine::Note("why".into())]),
            ["cuprof: why"]
        );
        assert_eq!(capture_summary(&[]), [NOTHING_REPORTED]);
        assert_eq!(human_size(1536), "1.5 KiB");
    }

    #[test]
    fn a_file_opened_and_never_reported_closed_is_unfinished_and_surveyed() {
        let dir = std::env::temp_dir().join(format!("cuprof-unfinished-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let done = dir.join("j-rank0-cycle1.trace.json");
        let cut = dir.join("j-rank0-cycle2.trace.json");
        std::fs::write(&done, "{\"traceEvents\": [{\"ph\": \"i\"}]}").unwrap();
        std::fs::write(
            &cut,
            "{\"traceEvents\": [{\"ph\": \"i\"}, {\"ph\": \"i\"}, {\"ph\"",
        )
        .unwrap();
        let lines = [
            ReportLine::Opened {
                pid: 7,
                path: done.clone(),
            },
            ReportLine::File {
                path: done.clone(),
                events: 1,
                bytes: 30,
            },
            ReportLine::Opened {
                pid: 7,
                path: cut.clone(),
            },
        ];
        assert_eq!(unfinished(&lines), [(7, cut.clone())]);
        assert_eq!(
            summary(&lines, Ended::Killed(9))[1],
            format!(
                "cuprof: not reported (the program was killed by signal 9): {} is unfinished: 2 events readable up to its last flush (48 B); cuprof repair {} closes it",
                cut.shown(),
                cut.shown()
            )
        );
        assert_eq!(
            file_state(&done),
            format!("{} is complete (1 event, 30 B)", done.shown())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
