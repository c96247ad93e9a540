//! Closing a trace cut short (SIGKILL, OOM kill, power loss): the writer sync-flushes the gzip
//! stream at least once a second, always at an event boundary, so the decompressible prefix
//! holds the header and whole events up to the last flush (plus, possibly, part of one more).
//! Repair keeps every complete event and writes the footer the writer would have written.

use std::io::Read;

#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    #[error("not a cuprof trace: no `\"traceEvents\": [` in the first {0} bytes that decompress")]
    NotATrace(usize),
    #[error("reading the trace failed: {0}")]
    Io(#[from] std::io::Error),
}

/// What repair found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// The complete, valid JSON trace.
    pub json: String,
    /// Events kept.
    pub events: u64,
    /// The input was already a complete trace (nothing to do).
    pub was_complete: bool,
    /// Bytes of decompressed text dropped after the last complete event.
    pub dropped_bytes: usize,
}

/// Decompresses as much of a (possibly truncated) gzip stream as can be read.
pub fn decompress_prefix(bytes: &[u8]) -> Vec<u8> {
    if bytes.len() < 2 || bytes[0] != 0x1f || bytes[1] != 0x8b {
        return bytes.to_vec(); // plain JSON
    }
    let mut out = Vec::new();
    let mut d = flate2::read::MultiGzDecoder::new(bytes);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match d.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(_) => break, // the cut: keep what came before it
        }
    }
    out
}

fn parses(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// Repairs the trace in `bytes` (gzip or plain).
pub fn repair(bytes: &[u8]) -> Result<Repaired, RepairError> {
    let raw = decompress_prefix(bytes);
    let text = String::from_utf8_lossy(&raw).into_owned();
    if parses(&text) {
        let events = count_events(&text);
        return Ok(Repaired {
            json: text,
            events,
            was_complete: true,
            dropped_bytes: 0,
        });
    }
    const OPEN: &str = "\"traceEvents\": [\n";
    let start = text.find(OPEN).ok_or(RepairError::NotATrace(raw.len()))? + OPEN.len();
    let footer = "\n],\n \"cuprofStats\": {\"complete\": false, \"repaired\": true},\n \"traceName\": \"repaired\"}\n";
    // Candidate ends: after each complete event, from the last one back.
    let body = &text[start..];
    let mut ends: Vec<usize> = body.match_indices(",\n{").map(|(i, _)| i).collect();
    ends.push(body.len());
    for &end in ends.iter().rev().take(64) {
        let candidate = format!("{}{}{}", &text[..start], body[..end].trim_end(), footer);
        if parses(&candidate) {
            let events = count_events(&candidate);
            return Ok(Repaired {
                json: candidate,
                events,
                was_complete: false,
                dropped_bytes: body.len() - end,
            });
        }
    }
    let candidate = format!("{}{}", &text[..start], footer.trim_start_matches('\n'));
    let ok = parses(&candidate);
    if !ok {
        return Err(RepairError::NotATrace(raw.len()));
    }
    Ok(Repaired {
        json: candidate,
        events: 0,
        was_complete: false,
        dropped_bytes: body.len(),
    })
}

fn count_events(text: &str) -> u64 {
    #[derive(serde::Deserialize)]
    struct Trace {
        #[serde(rename = "traceEvents")]
        trace_events: Vec<serde::de::IgnoredAny>,
    }
    serde_json::from_str::<Trace>(text)
        .map(|t| t.trace_events.len() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::*;
    use crate::trace_writer::{TraceMeta, TraceStats, TraceWriter};

    fn kernel(i: u64) -> Kernel {
        Kernel::sample(&format!("k{i}"), i as u32, 1_000 + i * 100, 1_050 + i * 100)
    }

    /// A gzip trace with 10 events flushed, 5 more written but not flushed, then cut.
    fn truncated() -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new(), TraceMeta::default(), 1).unwrap();
        for i in 0..10 {
            w.kernel(&kernel(i), None);
        }
        w.sync_flush().unwrap();
        let flushed = w_len(&mut w);
        for i in 10..15 {
            w.kernel(&kernel(i), None);
        }
        let full = w.finish(5_000, &TraceStats::default()).unwrap();
        full[..flushed].to_vec()
    }

    fn w_len(w: &mut TraceWriter<Vec<u8>>) -> usize {
        w.output_len()
    }

    #[test]
    fn a_cut_file_keeps_every_flushed_event() {
        let r = repair(&truncated()).unwrap();
        assert!(!r.was_complete);
        assert_eq!(r.events, 10);
        let v: serde_json::Value = serde_json::from_str(&r.json).unwrap();
        let names: Vec<&str> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, (0..10).map(|i| format!("k{i}")).collect::<Vec<_>>());
        assert_eq!(v["cuprofStats"]["complete"], false);
    }

    #[test]
    fn a_complete_file_is_left_as_it_is() {
        let mut w = TraceWriter::new(Vec::new(), TraceMeta::default(), 1).unwrap();
        w.kernel(&kernel(1), None);
        let full = w.finish(5_000, &TraceStats::default()).unwrap();
        let r = repair(&full).unwrap();
        assert!(r.was_complete);
        // the kernel, process metadata (2), GPU 0 metadata (3), stream metadata (2), window end
        assert_eq!(r.events, 9);
    }

    #[test]
    fn a_file_cut_inside_the_header_is_not_a_trace() {
        let mut w = TraceWriter::new(Vec::new(), TraceMeta::default(), 1).unwrap();
        w.sync_flush().unwrap();
        let n = w.output_len();
        let full = w.finish(0, &TraceStats::default()).unwrap();
        // Cut after the header: repair gives an empty, valid trace.
        let r = repair(&full[..n]).unwrap();
        assert_eq!(r.events, 0);
        assert!(matches!(
            repair(&full[..12]),
            Err(RepairError::NotATrace(_))
        ));
    }
}
