//! Reading a trace cuprof's writer indexed ([`crate::chunked_gzip`]) one chunk at a time, each on its own worker.
//!
//! [`Chunks::open`] finds the index and checks it against the file: its member right at the
//! end, the chunks contiguous from the data member's header to its trailer, their lengths and
//! CRC-32s adding up to the trailer's. [`Chunks::inflate`] inflates one chunk on its own and
//! checks its length and CRC-32; [`TraceReader::chunk`] reads its events in the state one
//! front-to-back read is in at that byte. A caller that meets any `None` or a chunk that does not
//! end where the next one starts ([`TraceReader::chunk_end`]) reads the file front to back
//! instead: the chunks are a shortcut, never a second opinion.

use std::fs::File;
use std::io::BufRead;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::Path;

use flate2::{Decompress, FlushDecompress, Status};

use super::{counted, Boundary, Detail, Event, ReadSummary, Source, State, TraceMeta, TraceReader};
use crate::chunked_gzip::{Chunk, ChunkIndex, GZIP_HEADER, MAX_CHUNKS};

/// A trace file and its checked chunk index.
pub struct Chunks {
    file: File,
    /// The file's length when opened.
    pub file_len: u64,
    pub index: ChunkIndex,
}

/// Reads exactly `buf.len()` bytes at `at`; `None` on any error or short file.
fn read_at(file: &File, at: u64, buf: &mut [u8]) -> Option<()> {
    file.read_exact_at(buf, at).ok()
}

impl Chunks {
    /// The file's index when it has one that agrees with the file; `None` otherwise (no
    /// index: an older trace, another tool's, a cut file; or an index that lies).
    pub fn open(path: &Path) -> Option<Chunks> {
        let (file, md) = super::open_regular(path).ok()?;
        let file_len = md.len();
        let mut head = [0u8; GZIP_HEADER.len()];
        read_at(&file, 0, &mut head)?;
        if head != GZIP_HEADER {
            return None;
        }
        let most = (16 + MAX_CHUNKS * 12 + 13 + 10) as u64;
        let tail_len = file_len.min(most);
        let mut tail = vec![0u8; tail_len as usize];
        read_at(&file, file_len - tail_len, &mut tail)?;
        let (index, member_len) = ChunkIndex::decode(&tail)?;
        let member_end = index.member_end();
        if index.chunks.len() < 2 || member_end.checked_add(member_len as u64)? != file_len {
            return None;
        }
        let mut trailer = [0u8; 8];
        read_at(&file, member_end - 8, &mut trailer)?;
        let crc = u32::from_le_bytes(trailer[..4].try_into().ok()?);
        let isize = u32::from_le_bytes(trailer[4..].try_into().ok()?);
        if crc != index.total_crc() || isize != index.total_len() as u32 {
            return None;
        }
        Some(Chunks {
            file,
            file_len,
            index,
        })
    }

    /// Chunk `i`'s uncompressed bytes, when they inflate on their own to exactly its length
    /// and CRC-32 (the last chunk ending the deflate stream, the others not).
    pub fn inflate(&self, i: usize) -> Option<Vec<u8>> {
        let c: &Chunk = self.index.chunks.get(i)?;
        let last = i + 1 == self.index.chunks.len();
        let mut input = vec![0u8; usize::try_from(c.compressed_len).ok()?];
        read_at(&self.file, c.compressed_offset, &mut input)?;
        let len = usize::try_from(c.len).ok()?;
        // One byte of room more than the chunk holds: a chunk that inflates to more is seen.
        let mut out = Vec::with_capacity(len + 1);
        let mut z = Decompress::new(false);
        loop {
            let (before_in, before_out) = (z.total_in(), z.total_out());
            let rest = &input[z.total_in() as usize..];
            let status = z
                .decompress_vec(rest, &mut out, FlushDecompress::None)
                .ok()?;
            let all_in = z.total_in() as usize == input.len();
            if status == Status::StreamEnd {
                // Only the last chunk ends the stream, and exactly at its end.
                if !last || !all_in {
                    return None;
                }
                break;
            }
            if out.len() > len {
                return None;
            }
            if all_in {
                // Every input byte taken, with room left for output: a middle chunk is
                // complete; the last must have ended the stream.
                if last {
                    return None;
                }
                break;
            }
            if z.total_in() == before_in && z.total_out() == before_out {
                return None;
            }
        }
        if out.len() != len || crc32fast::hash(&out) != c.crc {
            return None;
        }
        Some(out)
    }
}

/// Chunk `i` of a [`Chunks`] inflated as it is read (a step at a time, so the bytes are parsed
/// while still in the cache); [`ChunkCheck::passed`] says, once the read reached its end,
/// whether it had exactly the chunk's length and CRC-32 and ended the deflate stream only if
/// it is the last chunk.
pub struct ChunkRead {
    input: Vec<u8>,
    z: Decompress,
    crc: crc32fast::Hasher,
    chunk: Chunk,
    last: bool,
    ended: bool,
    verdict: ChunkCheck,
}

/// What a [`ChunkRead`] found, shared with whoever holds it.
#[derive(Clone, Default)]
pub struct ChunkCheck(std::rc::Rc<std::cell::Cell<Option<bool>>>);

impl ChunkCheck {
    /// `true` once the whole chunk was read and matched its entry.
    pub fn passed(&self) -> bool {
        self.0.get() == Some(true)
    }
}

impl Chunks {
    /// Chunk `i`, inflated as it is read, and the check of it (see [`ChunkRead`]).
    pub fn reader(&self, i: usize) -> Option<(ChunkRead, ChunkCheck)> {
        let chunk = *self.index.chunks.get(i)?;
        let mut input = vec![0u8; usize::try_from(chunk.compressed_len).ok()?];
        read_at(&self.file, chunk.compressed_offset, &mut input)?;
        let verdict = ChunkCheck::default();
        Some((
            ChunkRead {
                input,
                z: Decompress::new(false),
                crc: crc32fast::Hasher::new(),
                chunk,
                last: i + 1 == self.index.chunks.len(),
                ended: false,
                verdict: verdict.clone(),
            },
            verdict,
        ))
    }
}

impl ChunkRead {
    /// Judges the chunk once its read is over.
    fn judge(&self) {
        if self.verdict.0.get().is_none() {
            let ok = self.z.total_out() == self.chunk.len
                && self.crc.clone().finalize() == self.chunk.crc
                && self.ended == self.last
                && self.z.total_in() as usize == self.input.len();
            self.verdict.0.set(Some(ok));
        }
    }
}

impl std::io::Read for ChunkRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let bad = || std::io::Error::other("the chunk does not match its index entry");
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.verdict.0.get().is_some() {
                return Ok(0);
            }
            if self.ended {
                self.judge();
                return Ok(0);
            }
            let (at, before) = (self.z.total_in() as usize, self.z.total_out());
            let status = self
                .z
                .decompress(&self.input[at..], buf, FlushDecompress::None)
                .map_err(|_| bad())?;
            let n = (self.z.total_out() - before) as usize;
            self.crc.update(&buf[..n]);
            self.ended = status == Status::StreamEnd;
            if self.z.total_out() > self.chunk.len {
                return Err(bad());
            }
            if n > 0 {
                return Ok(n);
            }
            // Nothing came out: the end of the chunk once all its input is taken.
            if self.z.total_in() as usize == self.input.len() {
                self.judge();
                return Ok(0);
            }
            if self.z.total_in() as usize == at && !self.ended {
                return Err(bad());
            }
        }
    }
}

/// One chunk read whole ([`Chunks::read_chunk`]): what it held, and where it starts and ends.
pub struct ChunkDone {
    pub events: u64,
    pub meta: TraceMeta,
    /// Where it starts (`None` for the first chunk) and ends (`None` for the last, which closed
    /// the trace cleanly): each must start where the one before ends.
    pub start: Option<Boundary>,
    pub end: Option<Boundary>,
}

/// Whether a chunk that starts at `start` was read from the state the chunk before it ended in
/// (`end_before`; `None` when that one ended the trace, or was not between events).
pub fn follows(end_before: Option<Boundary>, start: Option<Boundary>) -> bool {
    end_before.is_some() && end_before == start
}

impl Chunks {
    /// Reads chunk `i`, handing each event to `event` (which returns `false` to give up);
    /// `None` unless the chunk was read to its end and matched its index entry, began with
    /// `traceEvents` open, and ended between events (the last: with the trace closed).
    pub fn read_chunk(
        &self,
        i: usize,
        path: &Path,
        detail: Detail,
        mut event: impl FnMut(&Event<'_>) -> bool,
    ) -> Option<ChunkDone> {
        let chunk = *self.index.chunks.get(i)?;
        // Inflated as it is parsed, a step at a time; its length and CRC-32 are checked at its
        // end.
        let (bytes, check) = self.reader(i)?;
        let mut reader = TraceReader::chunk(bytes, chunk.offset, path, detail);
        let mut whole = true;
        let read = reader
            .read_events(|e| {
                if event(e) {
                    ControlFlow::Continue(())
                } else {
                    whole = false;
                    ControlFlow::Break(())
                }
            })
            .ok()?;
        let end = if i + 1 == self.index.chunks.len() {
            reader.ended_cleanly().then_some(())?;
            None
        } else {
            Some(reader.chunk_end()?)
        };
        if !whole || !reader.has_events_array() || !check.passed() {
            return None;
        }
        Some(ChunkDone {
            events: read.events,
            meta: reader.meta().clone(),
            start: reader.chunk_start(),
            end,
        })
    }

    /// What a read of every chunk, `events` events in all, found: what a read front to back
    /// says of the same file.
    pub fn summary(&self, events: u64) -> ReadSummary {
        ReadSummary {
            events,
            uncompressed_bytes: self.index.total_len(),
            compressed_bytes: self.file_len,
            gzip: true,
            truncated: None,
            stopped: false,
        }
    }
}

impl TraceReader<'static> {
    /// A reader of one chunk's bytes, `offset` into the uncompressed stream: the first chunk
    /// (`offset` 0) is read as a file's start, any other as the inside of `traceEvents` at a
    /// boundary between events ([`Self::chunk_start`]), where the writer cuts chunks.
    pub fn chunk(
        bytes: impl std::io::Read + 'static,
        offset: u64,
        path: &Path,
        detail: Detail,
    ) -> TraceReader<'static> {
        let mut input = counted(bytes).0;
        // The first bytes decide where the chunk starts; an unreadable start is found by the
        // read itself.
        let start = match input
            .fill_buf()
            .ok()
            .and_then(|b| b.iter().find(|c| !c.is_ascii_whitespace()))
        {
            Some(b'{') => Boundary::BeforeEvent,
            _ => Boundary::AfterEvent,
        };
        let mut r = TraceReader::from_source(Source::Plain(input), path);
        r.detail = detail;
        r.discarded = offset;
        if offset > 0 {
            r.chunk_start = Some(start);
            r.state = match start {
                Boundary::BeforeEvent => State::Event,
                Boundary::AfterEvent => State::AfterEvent,
            };
            r.seen_events = true;
        }
        r
    }

    /// The boundary a chunk other than the first starts at (what [`Self::chunk`] read it as):
    /// the chunk before must end there ([`Self::chunk_end`]).
    pub fn chunk_start(&self) -> Option<Boundary> {
        self.chunk_start
    }

    /// After [`Self::read_events`] on a chunk other than the last: the boundary between events
    /// its data ended at, or `None` when it ended elsewhere (inside an event, the header).
    pub fn chunk_end(&self) -> Option<Boundary> {
        let clean = !self.stopped
            && self
                .truncated
                .as_ref()
                .is_some_and(|t| t.partial == 0 && t.stream_error.is_none());
        match self.state {
            State::AfterEvent if clean => Some(Boundary::AfterEvent),
            State::Event if clean => Some(Boundary::BeforeEvent),
            _ => None,
        }
    }

    /// After [`Self::read_events`] on the last chunk: the trace's top-level value closed, with
    /// nothing but whitespace after it.
    pub fn ended_cleanly(&mut self) -> bool {
        self.truncated.is_none()
            && !self.stopped
            && !self.bare
            && self.read_rest().is_ok_and(|r| r.is_clean())
    }
}
