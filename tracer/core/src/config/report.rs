//! The report file: how the library tells the launcher what it wrote.
//!
//! One line per record, UTF-8, fields separated by one tab, ending in `\n`:
//!
//! ```text
//! file<TAB>PATH<TAB>EVENTS<TAB>BYTES
//! note<TAB>TEXT
//! open<TAB>PID<TAB>PATH
//! ```
//!
//! `open` is appended when a trace file is opened, by the process `PID` (its pid in its own
//! PID namespace: its control socket's name), so that a reader whose `file` line for `PATH`
//! never comes knows the process died with that file unfinished.
//!
//! `PATH` is the absolute path of a file written (it may itself contain tabs: the last two
//! fields are split off from the right); `EVENTS` the number of trace events in it (records,
//! for a memory snapshot), `BYTES` its size. `TEXT` is a message for the user (why nothing
//! was traced, a renamed file); tabs and newlines in it become spaces. Each line is appended
//! with one `write` on an `O_APPEND` file, so lines from several processes (ranks) never
//! interleave. Lines that do not parse are ignored by the reader.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportLine {
    File {
        path: PathBuf,
        events: u64,
        bytes: u64,
    },
    Note(String),
    /// Process `pid` opened the trace file `path` (its `File` line comes once it is closed).
    Opened {
        pid: u32,
        path: PathBuf,
    },
}

impl ReportLine {
    /// The line, with its `\n`.
    pub fn to_line(&self) -> String {
        let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        match self {
            ReportLine::File {
                path,
                events,
                bytes,
            } => {
                let path = path.to_string_lossy().replace(['\n', '\r'], "?");
                format!("file\t{path}\t{events}\t{bytes}\n")
            }
            ReportLine::Note(text) => format!("note\t{}\n", clean(text)),
            ReportLine::Opened { pid, path } => {
                let path = path.to_string_lossy().replace(['\n', '\r'], "?");
                format!("open\t{pid}\t{path}\n")
            }
        }
    }

    /// One line (with or without its `\n`); `None` if it is not a report line.
    pub fn parse(line: &str) -> Option<ReportLine> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        if let Some(text) = line.strip_prefix("note\t") {
            return Some(ReportLine::Note(text.to_owned()));
        }
        if let Some(rest) = line.strip_prefix("open\t") {
            let (pid, path) = rest.split_once('\t')?;
            if path.is_empty() {
                return None;
            }
            return Some(ReportLine::Opened {
                pid: pid.parse().ok()?,
                path: PathBuf::from(path),
            });
        }
        let rest = line.strip_prefix("file\t")?;
        let mut it = rest.rsplitn(3, '\t');
        let bytes = it.next()?.parse().ok()?;
        let events = it.next()?.parse().ok()?;
        let path = it.next().filter(|p| !p.is_empty())?;
        Some(ReportLine::File {
            path: PathBuf::from(path),
            events,
            bytes,
        })
    }
}

/// Append one line to the report file (created if missing).
pub fn append(report_file: &Path, line: &ReportLine) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(report_file)?;
    f.write_all(line.to_line().as_bytes())
}

/// Every report line of `text`, in order, skipping what does not parse.
pub fn parse_all(text: &str) -> Vec<ReportLine> {
    text.lines().filter_map(ReportLine::parse).collect()
}

/// Read and parse a report file.
pub fn read(report_file: &Path) -> io::Result<Vec<ReportLine>> {
    let bytes = std::fs::read(report_file)?;
    Ok(parse_all(&String::from_utf8_lossy(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_dir::test_dir as temp_dir;

    #[test]
    fn report_lines_round_trip() {
        let lines = [
            ReportLine::File {
                path: "/tmp/a b/run-rank0.trace.json.gz".into(),
                events: 12,
                bytes: 3456,
            },
            ReportLine::File {
                path: "/tmp/odd\tname.gz".into(),
                events: 0,
                bytes: 1,
            },
            ReportLine::Note("nothing traced:\tno CUDA\nat all".into()),
            ReportLine::Opened {
                pid: 42,
                path: "/tmp/a\tb/run-rank1-cycle2.trace.json.gz".into(),
            },
        ];
        assert_eq!(
            lines[0].to_line(),
            "file\t/tmp/a b/run-rank0.trace.json.gz\t12\t3456\n"
        );
        assert_eq!(lines[2].to_line(), "note\tnothing traced: no CUDA at all\n");
        assert_eq!(
            lines[3].to_line(),
            "open\t42\t/tmp/a\tb/run-rank1-cycle2.trace.json.gz\n"
        );
        let text: String = lines.iter().map(ReportLine::to_line).collect::<String>()
            + "garbage\nfile\tx\ty\t1\nopen\tx\t/p\nopen\t7\t\n";
        let back = parse_all(&text);
        assert_eq!(back[..2], lines[..2]);
        assert_eq!(
            back[2],
            ReportLine::Note("nothing traced: no CUDA at all".into())
        );
        assert_eq!(back[3], lines[3]);
        assert_eq!(back.len(), 4);

        let dir = temp_dir("report");
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("report");
        for l in &lines {
            append(&f, l).unwrap();
        }
        assert_eq!(read(&f).unwrap().len(), 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
