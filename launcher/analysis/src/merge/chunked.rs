//! One rank's trace copied chunk by chunk on every worker, when cuprof's writer indexed it: each
//! chunk read, rewritten and deflated on a worker of its own, the chunks spliced in file order.
//!
//! The chunks are taken a window at a time (two per worker), so memory holds a few chunks'
//! output whatever the size of the trace. Anything unexpected (no index, one the file
//! contradicts, a chunk whose length or CRC-32 differs, one that does not end where the next
//! starts, an event that is not an object) gives `None` before anything is committed, and the
//! caller copies the file front to back, which also says what is wrong with it.

use std::io::Write;
use std::path::Path;

use cuprof_core::reader::chunks::{follows, Chunks};
use cuprof_core::reader::{Boundary, Detail};
use flate2::Compression;
use rayon::prelude::*;

use super::rank::{RankCopy, RankWritten};
use crate::io::gzip_out::{deflate_block, ParGzWriter};

/// One chunk's events, rewritten and deflated.
struct CopiedChunk {
    copy: RankCopy,
    /// Raw deflate ending in a sync flush, its input's CRC-32 and length.
    deflated: Vec<u8>,
    crc: crc32fast::Hasher,
    len: u64,
    events: u64,
    /// Where the chunk starts and ends (`None` for the first's start and the last's end).
    start: Option<Boundary>,
    end: Option<Boundary>,
}

fn copy_chunk(
    chunks: &Chunks,
    i: usize,
    path: &Path,
    rank: i64,
    shift: i64,
    level: Compression,
) -> Option<CopiedChunk> {
    let mut copy = RankCopy::new(rank, shift);
    // About the chunk's own length (the writer's are 4 MiB), whatever its index entry says.
    let len = chunks.index.chunks.get(i)?.len;
    let mut text: Vec<u8> = Vec::with_capacity(len.min(8 << 20) as usize);
    let done = chunks.read_chunk(i, path, Detail::Lean, |e| {
        matches!(copy.event(e, &mut text), Ok(true))
    })?;
    let (deflated, crc) = deflate_block(&text, level).ok()?;
    Some(CopiedChunk {
        copy,
        deflated,
        crc,
        len: text.len() as u64,
        events: done.events,
        start: done.start,
        end: done.end,
    })
}

/// Rank `rank`'s events from `path`, moved by `shift` ns, written to `w` chunk by chunk on the
/// current pool's workers; `Ok(None)` when the file is not read by chunks (see the module's
/// doc), and then `w` holds part of the copy: the caller starts again on a new one.
pub(super) fn write_rank<W: Write>(
    rank: i64,
    shift: i64,
    path: &Path,
    w: &mut ParGzWriter<W>,
    level: Compression,
) -> std::io::Result<Option<RankWritten>> {
    let Some(chunks) = Chunks::open(path) else {
        return Ok(None);
    };
    let n = chunks.index.chunks.len();
    let window = 2 * rayon::current_num_threads().max(1);
    let mut copy = RankCopy::new(rank, shift);
    let mut events = 0u64;
    let mut end_before: Option<Boundary> = None;
    for first in (0..n).step_by(window) {
        let copied: Vec<Option<CopiedChunk>> = (first..n.min(first + window))
            .into_par_iter()
            .map(|i| copy_chunk(&chunks, i, path, rank, shift, level))
            .collect();
        for (i, c) in (first..).zip(copied) {
            let Some(c) = c else {
                return Ok(None);
            };
            // Each chunk was read from the state the one before it ends in.
            if i > 0 && !follows(end_before, c.start) {
                return Ok(None);
            }
            end_before = c.end;
            if c.copy.wrote {
                if copy.wrote {
                    w.write_all(b",\n")?;
                }
                w.append_segment(&mut &c.deflated[..], &c.crc, c.len)?;
            }
            events += c.events;
            copy.absorb(c.copy);
        }
    }
    copy.finish(w)?;
    Ok(Some(RankWritten {
        summary: chunks.summary(events),
        wrote: copy.wrote,
        not_utf8: copy.not_utf8,
    }))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use cuprof_core::chunked_gzip::ChunkedGz;

    use super::*;

    /// A trace with named and unnamed processes, flows with integer and string ids, and
    /// enough kernels for many chunks.
    fn trace() -> (String, Vec<String>) {
        let head = "{\"schemaVersion\": 1, \"traceEvents\": [\n".to_string();
        let mut events = vec![
            r#"{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "python"}}"#
                .to_string(),
            r#"{"ph": "M", "name": "process_sort_index", "pid": 0, "tid": 0, "args": {"sort_index": 3}}"#
                .to_string(),
        ];
        for i in 0..60 {
            events.push(format!(
                r#"{{"ph": "X", "cat": "kernel", "name": "gemm_{}", "pid": 0, "tid": 7, "ts": {}.250, "dur": 2.000, "args": {{"correlation": {i}}}}}"#,
                i % 3,
                1000 + i * 10
            ));
            events.push(format!(
                r#"{{"ph": "s", "cat": "ac2g", "name": "launch", "pid": 9, "tid": 9, "ts": {}.000, "id": {i}}}"#,
                990 + i * 10
            ));
        }
        events.push(
            r#"{"ph": "f", "cat": "ac2g", "name": "launch", "pid": 7, "tid": 7, "ts": 5.000, "id": "a-1", "bp": "e"}"#
                .to_string(),
        );
        (head, events)
    }

    /// `trace()` as plain JSON and as a gzip file indexed in chunks of about `target` bytes.
    fn write(dir: &Path, target: u64) -> (std::path::PathBuf, std::path::PathBuf) {
        let (head, events) = trace();
        let plain = dir.join("plain.json");
        let indexed = dir.join("indexed-rank0.trace.json.gz");
        let body = events.join(",\n");
        std::fs::write(&plain, format!("{head}{body}\n]}}\n")).unwrap();
        let mut gz = ChunkedGz::new(Vec::new(), 1).unwrap().with_target(target);
        gz.write_at_boundary(head.as_bytes()).unwrap();
        for (i, e) in events.iter().enumerate() {
            let sep = if i == 0 { "" } else { ",\n" };
            gz.write_at_boundary(format!("{sep}{e}").as_bytes())
                .unwrap();
        }
        gz.write_at_boundary(b"\n]}\n").unwrap();
        std::fs::write(&indexed, gz.finish().unwrap()).unwrap();
        (plain, indexed)
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!(
            "cuprof-merge-chunked-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// What the chunked copy of `path` writes (as text), on `workers` workers; `None` when it
    /// declined.
    fn by_chunks(path: &Path, workers: usize) -> Option<(String, RankWritten)> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .build()
            .unwrap();
        pool.install(|| {
            let mut w = ParGzWriter::new(Vec::new(), Compression::new(2)).unwrap();
            let written = write_rank(3, 5_000, path, &mut w, Compression::new(2)).unwrap()?;
            let mut text = String::new();
            flate2::read::GzDecoder::new(&w.finish().unwrap()[..])
                .read_to_string(&mut text)
                .unwrap();
            Some((text, written))
        })
    }

    #[test]
    fn chunks_copied_on_any_number_of_workers_equal_one_stream() {
        let d = scratch("equal");
        let (plain, indexed) = write(&d, 400);
        let chunks = Chunks::open(&indexed).unwrap().index.chunks.len();
        assert!(chunks >= 20, "{chunks}");
        let mut one_stream = Vec::new();
        let wr = |e: std::io::Error| anyhow::anyhow!(e);
        let streamed =
            super::super::rank::write_rank(3, 5_000, &plain, &mut one_stream, &wr).unwrap();
        let one_stream = String::from_utf8(one_stream).unwrap();
        // Rank 3's pids, flow ids and times; pid 9 had no metadata of its own.
        assert!(one_stream.starts_with(
            "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 30000007, \"tid\": 0, \"args\": {\"name\": \"rank 3 python\"}},\n"
        ));
        assert!(
            one_stream.contains(r#""pid": 30000009, "tid": 9, "ts": 995.000, "id": 12884901888}"#)
        );
        assert!(one_stream.contains(r#""id": "r3:a-1""#));
        assert!(one_stream.ends_with(
            r#"{"ph": "M", "name": "process_sort_index", "pid": 30000009, "tid": 0, "ts": 0.000, "args": {"sort_index": 30000009}}"#
        ));
        assert_eq!(streamed.summary.events, 123);
        for workers in [1, 2, 3] {
            let (text, written) = by_chunks(&indexed, workers).expect("read by chunks");
            assert_eq!(text, one_stream, "{workers} workers");
            assert_eq!(written.summary.events, 123);
            assert!(written.wrote);
            assert_eq!(written.not_utf8, 0);
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_index_or_chunk_that_lies_is_declined() {
        let d = scratch("lies");
        let (_, indexed) = write(&d, 400);
        let good = std::fs::read(&indexed).unwrap();
        // A byte of the first chunk's deflate data changed: the index still agrees with the
        // trailer, the chunk's own CRC-32 or stream does not.
        let mut bad = good.clone();
        bad[20] ^= 0x55;
        std::fs::write(&indexed, &bad).unwrap();
        assert!(Chunks::open(&indexed).is_some());
        assert!(by_chunks(&indexed, 2).is_none());
        // A byte of the index's first entry changed: not an index the file agrees with.
        let at = Chunks::open(&indexed).unwrap().index.member_end() as usize + 30;
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        std::fs::write(&indexed, &bad).unwrap();
        assert!(Chunks::open(&indexed).is_none());
        assert!(by_chunks(&indexed, 2).is_none());
        // A plain file has no index.
        assert!(by_chunks(&d.join("plain.json"), 2).is_none());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
