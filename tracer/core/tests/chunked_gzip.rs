//! The trace's gzip layout (chunked_gzip.rs) read by every kind of reader, and by chunks
//! (reader/chunks.rs) exactly as front to back; an index the file contradicts is not used.

use cuprof_core::chunked_gzip::ChunkedGz;
use cuprof_core::event::Kernel;
use cuprof_core::reader::chunks::Chunks;
use cuprof_core::reader::{Detail, TraceReader};
use cuprof_core::trace_writer::{TraceMeta, TraceStats, TraceWriter};
use std::io::{Cursor, Read};
use std::ops::ControlFlow;
use std::path::Path;

fn event(i: usize) -> String {
    format!(
        r#"{{"ph": "X", "cat": "kernel", "name": "k{i}", "pid": 0, "tid": 7, "ts": {i}.250, "dur": 1.000, "args": {{"correlation": {i}}}}}"#
    )
}

/// A trace's text, as pieces that each start at an event boundary, and the file
/// `ChunkedGz` makes of them with chunks of about `target` bytes.
fn written(events: usize, target: u64) -> (String, Vec<u8>) {
    let mut pieces = vec!["{\"schemaVersion\": 1,\n \"traceEvents\": [\n".to_string()];
    for i in 0..events {
        let sep = if i == 0 { "" } else { ",\n" };
        pieces.push(format!("{sep}{}", event(i)));
    }
    pieces.push("\n],\n \"traceName\": \"t\"}\n".to_string());
    let mut gz = ChunkedGz::new(Vec::new(), 1).unwrap().with_target(target);
    for p in &pieces {
        gz.write_at_boundary(p.as_bytes()).unwrap();
    }
    (pieces.concat(), gz.finish().unwrap())
}

fn scratch(tag: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!(
        "cuprof-chunks-{tag}-{}.trace.json.gz",
        std::process::id()
    ));
    std::fs::write(&p, bytes).unwrap();
    p
}

/// (correlation, offset) of every event, read front to back.
fn serial(bytes: &[u8]) -> Vec<(i64, i64)> {
    let mut r = TraceReader::new(Cursor::new(bytes), Path::new("t")).unwrap();
    let mut got = Vec::new();
    r.read_events(|e| {
        got.push((e.args.correlation.unwrap_or(-1), e.ts.unwrap_or(-1)));
        ControlFlow::Continue(())
    })
    .unwrap();
    got
}

/// The same, chunk by chunk; `None` where a chunk is refused.
fn chunked(path: &Path) -> Option<Vec<(i64, i64)>> {
    let chunks = Chunks::open(path)?;
    let mut got = Vec::new();
    let n = chunks.index.chunks.len();
    let mut end = None;
    for (i, c) in chunks.index.chunks.iter().enumerate() {
        let (bytes, check) = chunks.reader(i)?;
        let mut r = TraceReader::chunk(bytes, c.offset, path, Detail::Full);
        r.read_events(|e| {
            got.push((e.args.correlation.unwrap_or(-1), e.ts.unwrap_or(-1)));
            ControlFlow::Continue(())
        })
        .ok()?;
        if r.chunk_start() != end {
            return None;
        }
        if i + 1 == n {
            if !r.ended_cleanly() {
                return None;
            }
        } else {
            end = Some(r.chunk_end()?);
        }
        // Streamed, the chunk passes the check the whole chunk's inflate makes.
        assert_eq!(check.passed(), chunks.inflate(i).is_some(), "chunk {i}");
        if !check.passed() {
            return None;
        }
    }
    Some(got)
}

/// Every reader gets the whole text unchanged: flate2's single-member and multi-member
/// decoders, `gzip -dc` (zcat) and Python's gzip module; the chunks inflate on their own to
/// exactly the text, each after the first starting at `,\n`.
#[test]
fn one_member_every_reader_reads_whole() {
    let (text, gz) = written(3000, 16 << 10);
    let mut single = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut single)
        .unwrap();
    assert_eq!(single, text);
    let mut multi = String::new();
    flate2::read::MultiGzDecoder::new(&gz[..])
        .read_to_string(&mut multi)
        .unwrap();
    assert_eq!(multi, text);
    let path = scratch("readers", &gz);
    let zcat = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(&path)
        .output()
        .unwrap();
    assert!(zcat.status.success(), "{zcat:?}");
    assert_eq!(String::from_utf8(zcat.stdout).unwrap(), text);
    let py = std::process::Command::new("python3")
        .args([
            "-c",
            "import gzip, sys; sys.stdout.buffer.write(gzip.open(sys.argv[1]).read())",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(py.status.success(), "{py:?}");
    assert_eq!(String::from_utf8(py.stdout).unwrap(), text);

    let chunks = Chunks::open(&path).unwrap();
    let n = chunks.index.chunks.len();
    // 3000 events of about 130 bytes: chunks of 16 KiB and up to one event more.
    assert_eq!(n, 24);
    for c in &chunks.index.chunks[..n - 1] {
        assert!((16 << 10..(16 << 10) + 140).contains(&c.len), "{c:?}");
    }
    let mut joined = Vec::new();
    for (i, c) in chunks.index.chunks.iter().enumerate() {
        let bytes = chunks.inflate(i).unwrap();
        assert_eq!(bytes.len() as u64, c.len);
        assert_eq!(c.offset, joined.len() as u64);
        if i > 0 {
            assert!(bytes.starts_with(b",\n{\"ph\""), "chunk {i}");
        }
        joined.extend_from_slice(&bytes);
    }
    assert_eq!(joined, text.as_bytes());
    let front_to_back = serial(&gz);
    assert_eq!(front_to_back.len(), 3000);
    assert_eq!(chunked(&path).unwrap(), front_to_back);
    std::fs::remove_file(path).unwrap();

    // A chunk per piece: the first chunk is the header alone, the second starts at the first
    // event's `{` (no comma before it).
    let (_, gz) = written(50, 1);
    let path = scratch("tiny", &gz);
    assert_eq!(Chunks::open(&path).unwrap().index.chunks.len(), 52);
    assert_eq!(chunked(&path).unwrap(), serial(&gz));
    std::fs::remove_file(path).unwrap();
}

/// A cut file, a file without its index and one whose index lies (a count, a length, a
/// CRC-32) are not read by chunks; a chunk whose deflate bytes are damaged is refused, while
/// the index still agrees with the trailer.
#[test]
fn an_index_the_file_contradicts_is_not_used() {
    let (_, gz) = written(2000, 8 << 10);
    let first = scratch("lie0", &gz);
    let index = Chunks::open(&first).unwrap().index;
    std::fs::remove_file(first).unwrap();
    let member_end = index.member_end() as usize;
    let tail = gz.len() - member_end;
    // The entries start 16 bytes into the index member; each is 12 bytes.
    let entry = |i: usize| member_end + 16 + 12 * i;
    let count_at = gz.len() - 10 - 8 - 1 - 4;
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("cut", gz[..gz.len() / 2].to_vec()),
        ("no-index", gz[..member_end].to_vec()),
        ("index-only-tail", gz[..gz.len() - 1].to_vec()),
    ];
    let mut lie = |name, f: &dyn Fn(&mut Vec<u8>)| {
        let mut g = gz.clone();
        f(&mut g);
        cases.push((name, g));
    };
    lie("count", &|g| g[count_at] -= 1);
    lie("crc", &|g| g[entry(3) + 8] ^= 1);
    lie("length", &|g| g[entry(3) + 4] ^= 1);
    lie("offset", &|g| {
        // Chunk 3 one byte longer, chunk 4 one shorter: still contiguous, wrong place.
        g[entry(3)] += 1;
        g[entry(4)] -= 1;
    });
    lie("damaged", &|g| {
        g[index.chunks[3].compressed_offset as usize + 40] ^= 0x55
    });
    assert!(tail > 16 + 12 * 5);
    for (name, bytes) in cases {
        let path = scratch(name, &bytes);
        let opened = Chunks::open(&path);
        match name {
            "offset" | "damaged" => {
                let c = opened.expect(name);
                // Chunk 3 may take the byte it was given (the start of a block that makes no
                // output); chunk 4 then starts in the middle of one.
                assert!(c.inflate(3).is_none() || c.inflate(4).is_none(), "{name}");
                assert!(chunked(&path).is_none(), "{name}");
            }
            _ => assert!(opened.is_none(), "{name}"),
        }
        std::fs::remove_file(path).unwrap();
    }
}

/// The trace writer cuts its stream only between events, whatever the mix of spills and
/// flushes: a file of 40,000 kernels (about 20 MB of JSON, several chunks) reads by chunks
/// exactly as front to back.
#[test]
fn the_trace_writer_cuts_between_events() {
    let mut w = TraceWriter::new(Vec::new(), TraceMeta::default(), 1).unwrap();
    for i in 0..40_000u64 {
        let k = Kernel::sample(&format!("k{i}"), i as u32, 1_000 + i * 100, 1_050 + i * 100);
        w.kernel(&k, None);
        if i % 5000 == 0 {
            w.sync_flush().unwrap();
        }
        w.pump().unwrap();
    }
    let gz = w.finish(5_000_000, &TraceStats::default()).unwrap();
    let path = scratch("writer", &gz);
    let chunks = Chunks::open(&path).unwrap();
    assert!(chunks.index.chunks.len() >= 3, "{:?}", chunks.index);
    let front_to_back = serial(&gz);
    assert_eq!(chunked(&path).unwrap(), front_to_back);
    std::fs::remove_file(path).unwrap();
}
