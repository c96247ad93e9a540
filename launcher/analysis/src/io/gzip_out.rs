//! A gzip writer that compresses on every worker of the current rayon pool, as pigz does: the
//! data is cut into blocks, each block is deflated on its own (raw deflate ending in a sync
//! flush, so it ends on a byte boundary and the blocks concatenate into one deflate stream),
//! and the blocks are written in order with one gzip header and a trailer whose CRC-32 is
//! combined from the blocks'. The file is one ordinary gzip member that any reader inflates.
//!
//! Memory stays bounded: at most two blocks per worker (16 in all) are in flight; the writer waits for the
//! oldest before cutting another. Blocks do not share a dictionary, which costs well under 1%
//! of size at 1 MiB per block.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::mpsc;

use flate2::{Compress, Compression, FlushCompress};

/// Uncompressed bytes per block.
const BLOCK: usize = 1 << 20;

/// Blocks in flight at most, whatever the number of workers: about 1.3 MiB each (input and
/// output), so that `repair` stays within its memory bound on a machine of many cores.
const MAX_IN_FLIGHT: usize = 16;

/// A block being compressed: (deflate bytes, CRC-32 and length of the input) when done.
type Pending = mpsc::Receiver<io::Result<(Vec<u8>, crc32fast::Hasher)>>;

pub struct ParGzWriter<W: Write> {
    out: W,
    level: Compression,
    block: Vec<u8>,
    pending: VecDeque<Pending>,
    crc: crc32fast::Hasher,
    /// Uncompressed bytes written.
    len: u64,
    /// Blocks in flight before the writer waits for the oldest.
    depth: usize,
}

/// Raw deflate blocks and what they hold: a piece of a gzip stream written apart (one rank of a
/// merge, by its own worker) and spliced in by [`ParGzWriter::append_segment`].
pub struct Segment<W> {
    pub out: W,
    pub crc: crc32fast::Hasher,
    pub len: u64,
}

impl<W: Write> ParGzWriter<W> {
    pub fn new(mut out: W, level: Compression) -> io::Result<Self> {
        // ID1 ID2 CM=deflate FLG=0 MTIME=0 XFL=0 OS=255 (unknown), as flate2 writes it.
        out.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff])?;
        Ok(Self::raw(out, level))
    }

    /// A writer of raw deflate blocks only (no gzip header): [`Self::finish_segment`] ends it.
    pub fn raw(out: W, level: Compression) -> Self {
        ParGzWriter {
            out,
            level,
            block: Vec::with_capacity(BLOCK),
            pending: VecDeque::new(),
            crc: crc32fast::Hasher::new(),
            len: 0,
            depth: (2 * rayon::current_num_threads()).clamp(2, MAX_IN_FLIGHT),
        }
    }

    /// Writes every block of a [`Self::raw`] writer; its blocks, their CRC-32 and length.
    pub fn finish_segment(mut self) -> io::Result<Segment<W>> {
        self.cut()?;
        while !self.pending.is_empty() {
            self.write_oldest()?;
        }
        self.out.flush()?;
        Ok(Segment {
            out: self.out,
            crc: self.crc,
            len: self.len,
        })
    }

    /// Writes what was written so far, then the blocks of a segment read from `blocks` as they
    /// are, with the segment's CRC-32 and length.
    pub fn append_segment(
        &mut self,
        blocks: &mut impl io::Read,
        crc: &crc32fast::Hasher,
        len: u64,
    ) -> io::Result<()> {
        self.cut()?;
        while !self.pending.is_empty() {
            self.write_oldest()?;
        }
        io::copy(blocks, &mut self.out)?;
        self.crc.combine(crc);
        self.len += len;
        Ok(())
    }

    /// Hands the current block to a worker.
    fn cut(&mut self) -> io::Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        while self.pending.len() >= self.depth {
            self.write_oldest()?;
        }
        let data = std::mem::replace(&mut self.block, Vec::with_capacity(BLOCK));
        self.len += data.len() as u64;
        let level = self.level;
        let (tx, rx) = mpsc::sync_channel(1);
        rayon::spawn(move || {
            let _ = tx.send(deflate_block(&data, level));
        });
        self.pending.push_back(rx);
        Ok(())
    }

    fn write_oldest(&mut self) -> io::Result<()> {
        let Some(rx) = self.pending.pop_front() else {
            return Ok(());
        };
        let (bytes, crc) = wait(&rx)?;
        self.crc.combine(&crc);
        self.out.write_all(&bytes)
    }

    /// Writes every block, the final empty deflate block and the gzip trailer; returns the
    /// inner writer.
    pub fn finish(self) -> io::Result<W> {
        let level = self.level;
        let Segment { mut out, crc, len } = self.finish_segment()?;
        let mut end = Vec::with_capacity(16);
        Compress::new(level, false)
            .compress_vec(&[], &mut end, FlushCompress::Finish)
            .map_err(io::Error::other)?;
        out.write_all(&end)?;
        out.write_all(&crc.finalize().to_le_bytes())?;
        // ISIZE: the length modulo 2^32.
        out.write_all(&(len as u32).to_le_bytes())?;
        out.flush()?;
        Ok(out)
    }
}

impl<W: Write> Write for ParGzWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(BLOCK - self.block.len());
        self.block.extend_from_slice(&buf[..n]);
        if self.block.len() == BLOCK {
            self.cut()?;
        }
        Ok(n)
    }

    /// Blocks are cut at [`BLOCK`] bytes, not on flush: a flush does not shorten them.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The block's result. On a worker of the pool, waiting must not block the worker while the
/// block may still be queued (with one worker, behind this very task), so it runs queued work
/// meanwhile. Once the pool has no queued work left, the block is being deflated by another
/// worker: then it blocks. Spinning there took CPU from that very worker when other programs
/// held the cores (`merge -j 2` slower than `-j 1` on a busy 2-core machine).
fn wait(rx: &Pending) -> io::Result<(Vec<u8>, crc32fast::Hasher)> {
    let stopped = || io::Error::other("a compression worker stopped");
    if rayon::current_thread_index().is_none() {
        return rx.recv().map_err(|_| stopped())?;
    }
    loop {
        match rx.try_recv() {
            Ok(r) => return r,
            Err(mpsc::TryRecvError::Disconnected) => return Err(stopped()),
            Err(mpsc::TryRecvError::Empty) => {
                if rayon::yield_now() != Some(rayon::Yield::Executed) {
                    return rx.recv().map_err(|_| stopped())?;
                }
            }
        }
    }
}

/// `data` as raw deflate ending in a sync flush (byte-aligned, not final), and its CRC-32: a
/// segment of its own for [`ParGzWriter::append_segment`].
pub fn deflate_block(data: &[u8], level: Compression) -> io::Result<(Vec<u8>, crc32fast::Hasher)> {
    let mut crc = crc32fast::Hasher::new();
    crc.update(data);
    let mut z = Compress::new(level, false);
    let mut out = Vec::with_capacity(data.len() / 4 + 64);
    let mut input = data;
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(1 << 16));
        }
        let before = z.total_in();
        z.compress_vec(input, &mut out, FlushCompress::Sync)
            .map_err(io::Error::other)?;
        input = &input[(z.total_in() - before) as usize..];
        // Done once all input is taken and the flush left room to spare in the output.
        if input.is_empty() && out.len() < out.capacity() {
            return Ok((out, crc));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gunzip(gz: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut out)
            .expect("one valid gzip member");
        out
    }

    #[test]
    fn one_gzip_member_whatever_the_workers() {
        // 3.5 blocks of text that compresses, and bytes that do not.
        let mut data = Vec::new();
        let mut x: u64 = 7;
        while data.len() < 3 * BLOCK + BLOCK / 2 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if x.is_multiple_of(3) {
                data.extend_from_slice(&x.to_le_bytes());
            } else {
                data.extend_from_slice(format!("{{\"ts\": {}}},\n", x % 1000).as_bytes());
            }
        }
        for threads in [1, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let gz = pool.install(|| {
                let mut w = ParGzWriter::new(Vec::new(), Compression::new(3)).unwrap();
                for chunk in data.chunks(100_003) {
                    w.write_all(chunk).unwrap();
                }
                w.finish().unwrap()
            });
            assert_eq!(gunzip(&gz), data, "{threads} threads");
        }
        // The same data with its middle written apart as a segment and spliced in.
        let (a, rest) = data.split_at(1000);
        let (b, c) = rest.split_at(2 * BLOCK + 17);
        let mut seg = ParGzWriter::raw(Vec::new(), Compression::new(3));
        seg.write_all(b).unwrap();
        let seg = seg.finish_segment().unwrap();
        let mut w = ParGzWriter::new(Vec::new(), Compression::new(3)).unwrap();
        w.write_all(a).unwrap();
        w.append_segment(&mut &seg.out[..], &seg.crc, seg.len)
            .unwrap();
        w.write_all(c).unwrap();
        assert_eq!(gunzip(&w.finish().unwrap()), data);
        let empty = ParGzWriter::new(Vec::new(), Compression::fast())
            .unwrap()
            .finish()
            .unwrap();
        assert_eq!(gunzip(&empty), b"");
    }
}
