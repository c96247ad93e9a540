//! Closing a trace cut short (SIGKILL, OOM kill, power loss): the writer sync-flushes the gzip
//! stream at least once a second, always at an event boundary, so the decompressible prefix
//! holds the header and whole events up to the last flush (plus, possibly, part of one more).
//!
//! Repair streams through the tolerant [`crate::reader`] (the one `cuprof report` uses), so it
//! accepts what the reader accepts (cuprof's own layout, Kineto's indented one, a bare array)
//! and holds no more than the reader's buffer, whatever the file's size. It runs in two passes
//! over the input:
//!
//! 1. [`survey`]: is the file complete (the JSON closed, nothing but whitespace after it, the
//!    gzip stream ending cleanly)? How many events can be read?
//! 2. [`rewrite`]: the header members, every complete event exactly as written, then the footer
//!    members that were read; a cut trace gets `"cuprofStats": {"complete": false, "repaired":
//!    true}` unless its own stats were read.
//!
//! An event that is not valid JSON (a bare `NaN`) is an error in both passes: repair never
//! drops events silently to make a file parse. One is read as its writer meant it: a string
//! holding a raw control character (torch.profiler writes a keyword input's tab as it is),
//! which the reader escapes, and which repair writes escaped.

use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;

use crate::gpu_work::{span_events, GpuWorkWatch, SPAN_EVENTS};
use crate::reader::{ReadError, Rest, TraceReader, Truncation};
use crate::trace_format::{member, REPAIRED_STATS};

#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{path}: not a trace: {what}; there is nothing to repair")]
    NotATrace { path: PathBuf, what: &'static str },
    #[error("writing the repaired trace failed: {0}")]
    Write(#[source] io::Error),
}

/// What a read-only pass over the input found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survey {
    /// Complete events that can be read.
    pub events: u64,
    /// `Some` when the data stops before the trace's closing bracket.
    pub truncation: Option<Truncation>,
    /// What follows the closing bracket (when the trace has one).
    pub rest: Rest,
}

impl Survey {
    /// Nothing to repair: the trace is closed and nothing but whitespace follows it.
    pub fn is_complete(&self) -> bool {
        self.truncation.is_none() && self.rest.is_clean()
    }
}

/// What [`rewrite`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewritten {
    /// Events written (every complete event of the input).
    pub events: u64,
    /// Where the input stopped, when it was cut short.
    pub truncation: Option<Truncation>,
    /// Uncompressed bytes of a partial event (or footer member) at the cut, not kept; 0 for a
    /// trace cut between values or a closed one.
    pub dropped_bytes: u64,
    /// `cuprofStats` was missing and a `{"complete": false, "repaired": true}` was added.
    pub stats_added: bool,
}

fn not_a_trace(r: &TraceReader<'_>, what: &'static str) -> RepairError {
    RepairError::NotATrace {
        path: r.path().to_owned(),
        what,
    }
}

/// Reads the header; an error if the file has no `traceEvents` to keep.
fn header(r: &mut TraceReader<'_>) -> Result<(), RepairError> {
    r.read_header()?;
    if r.has_events_array() {
        return Ok(());
    }
    Err(match r.summary().truncated {
        Some(_) => not_a_trace(r, "the file ends before `traceEvents` starts"),
        None => not_a_trace(r, "it has no `traceEvents` array"),
    })
}

/// Reads the whole input without writing anything: the event count and how the file ends.
pub fn survey(r: &mut TraceReader<'_>) -> Result<Survey, RepairError> {
    header(r)?;
    let s = r.read_events(|_| ControlFlow::Continue(()))?;
    let rest = if s.truncated.is_none() {
        r.read_rest()?
    } else {
        Rest::default()
    };
    Ok(Survey {
        events: s.events,
        truncation: s.truncated,
        rest,
    })
}

fn json_key(k: &str) -> String {
    serde_json::to_string(k).expect("strings serialize")
}

/// Writes the repaired trace (plain JSON text) to `out`; the caller compresses it if it wants.
pub fn rewrite<W: Write>(r: &mut TraceReader<'_>, out: &mut W) -> Result<Rewritten, RepairError> {
    header(r)?;
    let bare = r.is_bare_array();
    let header_members = r.meta().members.len();
    let mut head = String::new();
    if bare {
        head.push_str("[\n");
    } else {
        head.push('{');
        for (k, v) in &r.meta().members {
            head.push_str(&json_key(k));
            head.push_str(": ");
            head.push_str(&crate::json::escape_raw_str(v.get()));
            head.push_str(",\n ");
        }
        head.push_str(&json_key(member::TRACE_EVENTS));
        head.push_str(": [\n");
    }
    out.write_all(head.as_bytes()).map_err(RepairError::Write)?;

    let mut failure: Option<io::Error> = None;
    let mut first = true;
    let mut gpu_work = GpuWorkWatch::default();
    let s = r.read_events(|e| {
        gpu_work.see(&e.ph, &e.cat, &e.name, e.ts, e.dur);
        let sep: &[u8] = if first { b"" } else { b",\n" };
        first = false;
        // A copied event holds nothing raw a viewer could act on (json::escape_raw).
        match out
            .write_all(sep)
            .and_then(|_| out.write_all(&crate::json::escape_raw(e.raw)))
        {
            Ok(()) => ControlFlow::Continue(()),
            Err(err) => {
                failure = Some(err);
                ControlFlow::Break(())
            }
        }
    })?;
    if let Some(err) = failure {
        return Err(RepairError::Write(err));
    }
    // The writer adds this span when it closes the trace; a cut trace never got it.
    let pid = r.meta().pid.and_then(|p| u64::try_from(p).ok());
    let mut added = 0;
    if let (Some(_), false, Some(pid), Some((start, end))) =
        (&s.truncated, first, pid, gpu_work.missing_span())
    {
        let span = span_events(pid, start, end);
        out.write_all(&span).map_err(RepairError::Write)?;
        added = SPAN_EVENTS;
    }

    let mut tail = String::from("\n]");
    let mut stats_added = false;
    if !bare {
        let footer = &r.meta().members[header_members..];
        for (k, v) in footer {
            tail.push_str(",\n ");
            tail.push_str(&json_key(k));
            tail.push_str(": ");
            tail.push_str(&crate::json::escape_raw_str(v.get()));
        }
        if s.truncated.is_some() && !footer.iter().any(|(k, _)| k == member::STATS) {
            tail.push_str(",\n ");
            tail.push_str(&json_key(member::STATS));
            tail.push_str(": ");
            tail.push_str(REPAIRED_STATS);
            stats_added = true;
        }
        tail.push('}');
    }
    tail.push('\n');
    out.write_all(tail.as_bytes()).map_err(RepairError::Write)?;
    let dropped_bytes = s.truncated.as_ref().map_or(0, |t| t.partial);
    Ok(Rewritten {
        events: s.events + added,
        truncation: s.truncated,
        dropped_bytes,
        stats_added,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::*;
    use crate::trace_format::{Header, TraceStats};
    use crate::trace_writer::TraceWriter;
    use std::io::Cursor;
    use std::path::Path;

    fn kernel(i: u64) -> Kernel {
        Kernel::sample(&format!("k{i}"), i as u32, 1_000 + i * 100, 1_050 + i * 100)
    }

    /// A gzip trace with 10 events flushed, 5 more written but not flushed, then cut.
    fn truncated() -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new(), Header::default(), 1).unwrap();
        for i in 0..10 {
            w.kernel(&kernel(i), None);
        }
        w.sync_flush().unwrap();
        let flushed = w.output_len();
        for i in 10..15 {
            w.kernel(&kernel(i), None);
        }
        let full = w.finish(5_000, &TraceStats::default()).unwrap();
        full[..flushed].to_vec()
    }

    fn reader(bytes: &[u8]) -> TraceReader<'_> {
        TraceReader::new(Cursor::new(bytes), Path::new("t.trace.json.gz")).unwrap()
    }

    fn repaired(bytes: &[u8]) -> Result<(Rewritten, serde_json::Value), RepairError> {
        let mut out = Vec::new();
        let r = rewrite(&mut reader(bytes), &mut out)?;
        Ok((r, serde_json::from_slice(&out).expect("valid JSON")))
    }

    #[test]
    fn a_cut_file_keeps_every_flushed_event() {
        let cut = truncated();
        let s = survey(&mut reader(&cut)).unwrap();
        assert!(!s.is_complete());
        // 10 kernels, and the names of their tracks, written as the tracks appeared: the
        // process (2), GPU 0 (3), its stream (2).
        assert_eq!(s.events, 17);
        let (r, v) = repaired(&cut).unwrap();
        // And the span of the GPU work the writer adds when it closes a trace without steps.
        assert_eq!(r.events, 20);
        assert!(r.stats_added);
        let events = v["traceEvents"].as_array().unwrap();
        let names = |ph: &str| -> Vec<&str> {
            events
                .iter()
                .filter(|e| e["ph"] == ph)
                .map(|e| e["name"].as_str().unwrap())
                .collect()
        };
        let mut kernels: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        kernels.push(crate::trace_writer::GPU_WORK.to_string());
        assert_eq!(names("X"), kernels);
        let span = events.iter().find(|e| e["cat"] == "python").unwrap();
        // k0 starts at 1,000 ns, k9 ends at 1,950 ns.
        assert_eq!(
            (span["ts"].to_string(), span["dur"].to_string()),
            ("1.0".into(), "0.95".into())
        );
        // A cut file names its tracks like a whole one.
        let stream_name = events
            .iter()
            .find(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .unwrap();
        assert_eq!(stream_name["args"]["name"], "stream 7 ");
        assert_eq!(
            names("M"),
            vec![
                "process_name",
                "process_sort_index",
                "process_name",
                "process_labels",
                "process_sort_index",
                "thread_name",
                "thread_sort_index",
                "thread_name",
                "thread_sort_index"
            ]
        );
        assert_eq!(v["cuprofStats"]["complete"], false);
        assert_eq!(v["cuprofStats"]["repaired"], true);
        assert_eq!(v["schemaVersion"], 1);
    }

    #[test]
    fn a_complete_file_needs_nothing() {
        let mut w = TraceWriter::new(Vec::new(), Header::default(), 1).unwrap();
        w.kernel(&kernel(1), None);
        let full = w.finish(5_000, &TraceStats::default()).unwrap();
        let s = survey(&mut reader(&full)).unwrap();
        assert!(s.is_complete());
        // the kernel, process metadata (2), GPU 0 metadata (3), stream metadata (2), window end
        assert_eq!(s.events, 9);
        // Rewritten anyway, it is the same trace: same events, its own stats kept.
        let (r, v) = repaired(&full).unwrap();
        assert_eq!(r.events, 9);
        assert_eq!(r.dropped_bytes, 0);
        assert!(!r.stats_added);
        let orig: serde_json::Value =
            serde_json::from_reader(flate2::read::GzDecoder::new(&full[..])).unwrap();
        assert_eq!(v, orig);
    }

    #[test]
    fn a_file_cut_inside_the_header_is_not_a_trace() {
        let mut w = TraceWriter::new(Vec::new(), Header::default(), 1).unwrap();
        w.sync_flush().unwrap();
        let n = w.output_len();
        let full = w.finish(0, &TraceStats::default()).unwrap();
        // Cut after the header: repair gives a valid trace holding the process's name only.
        let (r, v) = repaired(&full[..n]).unwrap();
        assert_eq!(r.events, 2);
        assert_eq!(v["traceEvents"].as_array().unwrap().len(), 2);
        assert!(matches!(
            survey(&mut reader(&full[..12])),
            Err(RepairError::NotATrace { .. })
        ));
        assert!(matches!(
            survey(&mut reader(b"{\"a\": 1}")),
            Err(RepairError::NotATrace { .. })
        ));
    }

    #[test]
    fn an_invalid_event_is_an_error_not_a_shorter_trace() {
        let text = "{\"traceEvents\": [\n{\"ph\": \"X\", \"ts\": 1},\n{\"ph\": \"X\", \"ts\": NaN},\n{\"ph\": \"X\", \"ts\": 3}\n]}\n";
        let e = survey(&mut reader(text.as_bytes())).unwrap_err();
        assert!(
            matches!(e, RepairError::Read(ReadError::Event { .. })),
            "{e}"
        );
        let e = repaired(text.as_bytes()).unwrap_err();
        assert!(
            matches!(e, RepairError::Read(ReadError::Event { .. })),
            "{e}"
        );
    }

    #[test]
    fn trailing_bytes_make_a_file_incomplete_and_are_dropped() {
        let text = "[{\"ph\": \"X\", \"ts\": 1},\n{\"ph\": \"i\", \"ts\": 2}]\n";
        let mut padded = text.as_bytes().to_vec();
        padded.extend_from_slice(&[0; 7]);
        let s = survey(&mut reader(&padded)).unwrap();
        assert_eq!(s.events, 2);
        assert_eq!(s.rest.bytes, 7);
        assert!(!s.is_complete());
        let mut out = Vec::new();
        let r = rewrite(&mut reader(&padded), &mut out).unwrap();
        assert_eq!(r.events, 2);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[\n{\"ph\": \"X\", \"ts\": 1},\n{\"ph\": \"i\", \"ts\": 2}\n]\n"
        );
    }
}
