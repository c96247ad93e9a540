//! The trace's gzip layout: one member cut into independently inflatable chunks, then an empty member whose header indexes them.
//!
//! [`ChunkedGz`] compresses like `flate2::write::GzEncoder` but ends a chunk with a deflate
//! *full flush* (the stream byte-aligned, no back-reference across it) once a chunk holds
//! [`CHUNK_TARGET`] uncompressed bytes; its caller hands it data that starts at an event
//! boundary, so every chunk does. [`ChunkedGz::finish`] closes the member (CRC-32, ISIZE) and
//! appends a second, empty gzip member (0 bytes of data) whose FEXTRA field holds the index
//! (subfield `CI`, [`ChunkIndex::encode`]). A reader that stops after the first member
//! (Perfetto) has every byte; one that reads on (zcat, Python's gzip, flate2's MultiGzDecoder)
//! reads zero more; `cuprof report` inflates and parses the chunks on every core
//! (docs/trace-format.md, "The gzip layout").

use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};

/// Uncompressed bytes after which the writer ends a chunk at the next event boundary
/// (BENCHMARKS.md: what a full flush costs in size at 1, 4 and 16 MiB).
pub const CHUNK_TARGET: u64 = 4 << 20;
/// The gzip header of the data member: deflate, no flags, no time, unknown OS.
pub const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
/// The index member's FEXTRA subfield id.
pub const SUBFIELD_ID: [u8; 2] = *b"CI";
/// Last bytes of the index's data: what says "a cuprof chunk index" reading from the end.
const MAGIC: [u8; 8] = *b"cuprofCI";
const VERSION: u8 = 1;
/// Bytes of one chunk's entry: compressed length, uncompressed length, CRC-32 (u32 LE each).
const ENTRY: usize = 12;
/// Bytes of the index's data after its entries: count (u32), version (u8), magic.
const INDEX_TAIL: usize = 4 + 1 + MAGIC.len();
/// An empty deflate stream (one final fixed-Huffman block) and its member's CRC-32 and ISIZE.
const EMPTY_DEFLATE_AND_TRAILER: [u8; 10] = [3, 0, 0, 0, 0, 0, 0, 0, 0, 0];
/// The most entries one FEXTRA field holds (XLEN and the subfield's LEN are 16-bit).
pub const MAX_CHUNKS: usize = (u16::MAX as usize - 4 - INDEX_TAIL) / ENTRY;

/// One chunk of the data member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Where its deflate bytes start in the file and how many there are.
    pub compressed_offset: u64,
    pub compressed_len: u64,
    /// Where its bytes start in the uncompressed stream and how many there are.
    pub offset: u64,
    pub len: u64,
    /// CRC-32 of its uncompressed bytes.
    pub crc: u32,
}

/// The chunks of a file's data member, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkIndex {
    pub chunks: Vec<Chunk>,
}

impl ChunkIndex {
    /// The index member: a gzip header with FEXTRA holding the entries, an empty deflate stream
    /// and a zero trailer.
    pub fn encode(&self) -> Vec<u8> {
        let data_len = self.chunks.len() * ENTRY + INDEX_TAIL;
        assert!(self.chunks.len() <= MAX_CHUNKS, "coalesced before");
        let mut m = Vec::with_capacity(12 + 4 + data_len + 10);
        m.extend_from_slice(&[0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff]);
        m.extend_from_slice(&((data_len + 4) as u16).to_le_bytes());
        m.extend_from_slice(&SUBFIELD_ID);
        m.extend_from_slice(&(data_len as u16).to_le_bytes());
        for c in &self.chunks {
            m.extend_from_slice(&(c.compressed_len as u32).to_le_bytes());
            m.extend_from_slice(&(c.len as u32).to_le_bytes());
            m.extend_from_slice(&c.crc.to_le_bytes());
        }
        m.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        m.push(VERSION);
        m.extend_from_slice(&MAGIC);
        m.extend_from_slice(&EMPTY_DEFLATE_AND_TRAILER);
        m
    }

    /// The index at the end of `tail`, the last bytes of a file of `file_len` bytes (at least
    /// the index member's); its member's length. `None` when the bytes are not one cuprof wrote.
    /// The offsets are derived from the lengths, the first chunk starting after
    /// [`GZIP_HEADER`]; [`Self::member_end`] says where the data member's trailer ends, which
    /// must be where the index member starts.
    pub fn decode(tail: &[u8]) -> Option<(ChunkIndex, usize)> {
        let body = tail.strip_suffix(&EMPTY_DEFLATE_AND_TRAILER)?;
        let body = body.strip_suffix(&MAGIC)?;
        let (version, body) = body.split_last()?;
        if *version != VERSION {
            return None;
        }
        let (body, count) = body.split_at_checked(body.len().checked_sub(4)?)?;
        let count = u32::from_le_bytes(count.try_into().ok()?) as usize;
        if count > MAX_CHUNKS {
            return None;
        }
        let entries_at = body.len().checked_sub(count * ENTRY)?;
        let entries = &body[entries_at..];
        let head = &body[..entries_at];
        let data_len = count * ENTRY + INDEX_TAIL;
        // The 10-byte header, XLEN, the subfield's id and LEN, right before the entries.
        let header = head.get(head.len().checked_sub(16)?..)?;
        let mut want = vec![0x1f, 0x8b, 8, 4, 0, 0, 0, 0, 0, 0xff];
        want.extend_from_slice(&((data_len + 4) as u16).to_le_bytes());
        want.extend_from_slice(&SUBFIELD_ID);
        want.extend_from_slice(&(data_len as u16).to_le_bytes());
        if header != want {
            return None;
        }
        let (mut compressed_offset, mut offset) = (GZIP_HEADER.len() as u64, 0u64);
        let chunks = entries
            .chunks_exact(ENTRY)
            .map(|e| {
                let word = |i: usize| u32::from_le_bytes(e[i..i + 4].try_into().expect("4 bytes"));
                let c = Chunk {
                    compressed_offset,
                    compressed_len: word(0) as u64,
                    offset,
                    len: word(4) as u64,
                    crc: word(8),
                };
                compressed_offset += c.compressed_len;
                offset += c.len;
                c
            })
            .collect();
        Some((ChunkIndex { chunks }, 16 + data_len + 10))
    }

    /// Where the data member ends (its deflate stream, then 8 bytes of CRC-32 and ISIZE).
    pub fn member_end(&self) -> u64 {
        self.chunks.last().map_or(GZIP_HEADER.len() as u64, |c| {
            c.compressed_offset + c.compressed_len
        }) + 8
    }

    /// Uncompressed bytes of the whole stream.
    pub fn total_len(&self) -> u64 {
        self.chunks.last().map_or(0, |c| c.offset + c.len)
    }

    /// The CRC-32 of the whole stream, combined from the chunks'.
    pub fn total_crc(&self) -> u32 {
        let mut h = crc32fast::Hasher::new();
        for c in &self.chunks {
            h.combine(&crc32fast::Hasher::new_with_initial_len(c.crc, c.len));
        }
        h.finalize()
    }
}

/// A gzip writer whose stream is cut into chunks at the points its caller allows (see the
/// module's doc).
pub struct ChunkedGz<W: Write> {
    out: W,
    z: Compress,
    /// Deflate output not yet handed to `out`.
    pending: Vec<u8>,
    /// CRC-32 of the whole stream and of the current chunk.
    crc: crc32fast::Hasher,
    chunk_crc: crc32fast::Hasher,
    chunk_len: u64,
    /// Compressed bytes at the current chunk's start (`Compress::total_out`).
    chunk_start: u64,
    done: Vec<(u64, u64, crc32fast::Hasher)>,
    /// A chunk is ended at the first boundary once it holds this many bytes; doubled each time
    /// the index fills and neighbours are merged.
    target: u64,
}

impl<W: Write> ChunkedGz<W> {
    pub fn new(mut out: W, level: u32) -> io::Result<Self> {
        out.write_all(&GZIP_HEADER)?;
        Ok(ChunkedGz {
            out,
            z: Compress::new(Compression::new(level.min(9)), false),
            pending: Vec::with_capacity(1 << 16),
            crc: crc32fast::Hasher::new(),
            chunk_crc: crc32fast::Hasher::new(),
            chunk_len: 0,
            chunk_start: 0,
            done: Vec::new(),
            target: CHUNK_TARGET,
        })
    }

    /// Sets the chunk size (tests, benchmarks).
    pub fn with_target(mut self, target: u64) -> Self {
        self.target = target.max(1);
        self
    }

    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Compresses `data`, which must start where a chunk may start (an event boundary, or the
    /// very beginning); the current chunk is ended first if it is full.
    pub fn write_at_boundary(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        if self.chunk_len >= self.target {
            self.deflate(&[], FlushCompress::Full)?;
            self.end_chunk();
        }
        self.crc.update(data);
        self.chunk_crc.update(data);
        self.chunk_len += data.len() as u64;
        self.deflate(data, FlushCompress::None)
    }

    /// Ends a deflate block byte-aligned (a sync flush) and flushes `out`: a file cut after
    /// this decompresses up to here.
    pub fn sync_flush(&mut self) -> io::Result<()> {
        self.deflate(&[], FlushCompress::Sync)?;
        self.out.flush()
    }

    /// Closes the data member and writes the index member; returns `out`.
    pub fn finish(mut self) -> io::Result<W> {
        self.deflate(&[], FlushCompress::Finish)?;
        self.end_chunk();
        let mut trailer = [0u8; 8];
        trailer[..4].copy_from_slice(&self.crc.clone().finalize().to_le_bytes());
        let isize = self.z.total_in() as u32;
        trailer[4..].copy_from_slice(&isize.to_le_bytes());
        self.out.write_all(&trailer)?;
        let (mut compressed_offset, mut offset) = (GZIP_HEADER.len() as u64, 0u64);
        let chunks = self
            .done
            .iter()
            .map(|(compressed_len, len, crc)| {
                let c = Chunk {
                    compressed_offset,
                    compressed_len: *compressed_len,
                    offset,
                    len: *len,
                    crc: crc.clone().finalize(),
                };
                compressed_offset += compressed_len;
                offset += len;
                c
            })
            .collect();
        self.out.write_all(&ChunkIndex { chunks }.encode())?;
        self.out.flush()?;
        Ok(self.out)
    }

    /// Records the chunk that ends at the deflate output so far; merges neighbours when the
    /// index is full (or a merged chunk would not fit its 32-bit lengths, never in practice).
    fn end_chunk(&mut self) {
        let end = self.z.total_out();
        let crc = std::mem::replace(&mut self.chunk_crc, crc32fast::Hasher::new());
        self.done
            .push((end - self.chunk_start, self.chunk_len, crc));
        self.chunk_start = end;
        self.chunk_len = 0;
        if self.done.len() == MAX_CHUNKS {
            self.done = self
                .done
                .chunks(2)
                .map(|pair| {
                    let mut merged = pair[0].clone();
                    if let Some(next) = pair.get(1) {
                        merged.0 += next.0;
                        merged.1 += next.1;
                        merged.2.combine(&next.2);
                    }
                    merged
                })
                .collect();
            self.target = self.target.saturating_mul(2);
        }
    }

    fn deflate(&mut self, mut data: &[u8], flush: FlushCompress) -> io::Result<()> {
        loop {
            self.pending.clear();
            let room = self.pending.capacity();
            let before = self.z.total_in();
            let status = self
                .z
                .compress_vec(data, &mut self.pending, flush)
                .map_err(io::Error::other)?;
            data = &data[(self.z.total_in() - before) as usize..];
            self.out.write_all(&self.pending)?;
            let full = self.pending.len() == room;
            match (flush, status) {
                (FlushCompress::Finish, Status::StreamEnd) => return Ok(()),
                (FlushCompress::Finish, _) => {}
                _ if data.is_empty() && !full => return Ok(()),
                _ => {}
            }
        }
    }
}
