//! After the program: what the library wrote, told through the report file
//! (`cuprof_core::config::report`), then the short analysis of the traces.

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

const NOTHING_TRACED: &str = "cuprof: nothing traced: the program never initialised CUDA (or no step matched / libcupti missing: see messages above)";

const NOTHING_REPORTED: &str =
    "cuprof: no process reported a trace of this capture (killed before it wrote one?)";

/// The summary lines printed after the program ends.
fn summary(lines: &[ReportLine]) -> Vec<String> {
    let mut out = report_lines(lines);
    if !lines.iter().any(|l| matches!(l, ReportLine::File { .. })) {
        out.push(NOTHING_TRACED.to_owned());
    }
    out
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
                let s = if *events == 1 { "" } else { "s" };
                out.push(format!(
                    "cuprof: wrote {} ({events} event{s}, {})",
                    path.shown(),
                    human_size(*bytes)
                ));
            }
            ReportLine::Note(text) => out.push(format!("cuprof: {text}")),
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
pub(crate) fn print(report_file: &Path, analyse: bool) {
    print_lines(report_file, analyse, summary)
}

/// [`print`] for `cuprof capture`: each process reports why it wrote nothing (no GPU work, the
/// capture cancelled), so no "nothing traced" line is added.
pub(crate) fn print_capture(report_file: &Path, analyse: bool) {
    print_lines(report_file, analyse, capture_summary)
}

fn capture_summary(lines: &[ReportLine]) -> Vec<String> {
    if lines.is_empty() {
        return vec![NOTHING_REPORTED.to_owned()];
    }
    report_lines(lines)
}

fn print_lines(report_file: &Path, analyse: bool, summary: fn(&[ReportLine]) -> Vec<String>) {
    let lines = report::read(report_file).unwrap_or_default();
    let _ = std::fs::remove_file(report_file);
    for line in summary(&lines) {
        cuprof_analysis::io::console::eprint_line(&line);
    }
    if analyse {
        let (lines, _) = cuprof_analysis::after_run(&traces_written(&lines), true);
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
            summary(&lines),
            [
                "cuprof: wrote /d/r-rank0.trace.json.gz (1 event, 100 B)",
                "cuprof: something",
                "cuprof: wrote /d/r-rank1.trace.json.gz (5000 events, 3.0 MiB)",
            ]
        );
        assert_eq!(summary(&[]), [NOTHING_TRACED]);
        assert_eq!(
            summary(&[ReportLine::Note("why".into())]),
            ["cuprof: why", NOTHING_TRACED]
        );
        assert_eq!(
            capture_summary(&[ReportLine::Note("why".into())]),
            ["cuprof: why"]
        );
        assert_eq!(capture_summary(&[]), [NOTHING_REPORTED]);
        assert_eq!(human_size(1536), "1.5 KiB");
    }
}
