//! Replays a raw buffer dump (written by the tracer's debug switch from real GPU runs)
//! through the registered buffer callbacks.
//!
//! Format, little-endian: magic `CUPROFB1` (8 bytes); u32 cupti_version; u32 n_patches;
//! u64 data_len; data_len bytes of buffer data with pointer fields zeroed; then n_patches
//! entries of { u64 offset_in_data; u32 string_len; string bytes (no NUL) }. Replay
//! writes a pointer to a NUL-terminated copy of each string at data[offset..offset+8].

use crate::layout;
use crate::state;

pub const MAGIC: &[u8; 8] = b"CUPROFB1";

/// Why a replay failed (negative return values of `double_replay`).
#[derive(Debug, PartialEq, Eq)]
pub enum ReplayError {
    /// -1: unreadable or malformed file.
    Malformed,
    /// -2: the dump's CUPTI version is not the one the double plays.
    Version { dump: u32, double: u32 },
    /// -3: no buffer callbacks, or the client declined a buffer / gave one too small.
    NoBuffer,
    /// -4: the data holds a record kind the double cannot step over.
    UnknownRecord { offset: usize },
}

impl ReplayError {
    pub fn code(&self) -> i32 {
        match self {
            ReplayError::Malformed => -1,
            ReplayError::Version { .. } => -2,
            ReplayError::NoBuffer => -3,
            ReplayError::UnknownRecord { .. } => -4,
        }
    }
}

pub struct Dump {
    pub version: u32,
    pub data: Vec<u8>,
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], ReplayError> {
    if b.len() < n {
        return Err(ReplayError::Malformed);
    }
    let (head, tail) = b.split_at(n);
    *b = tail;
    Ok(head)
}

fn take_u32(b: &mut &[u8]) -> Result<u32, ReplayError> {
    Ok(layout::rd_u32(take(b, 4)?, 0))
}

fn take_u64(b: &mut &[u8]) -> Result<u64, ReplayError> {
    Ok(layout::rd_u64(take(b, 8)?, 0))
}

/// Parses a dump and applies its pointer patches (strings interned for the process).
pub fn parse(bytes: &[u8]) -> Result<Dump, ReplayError> {
    let mut b = bytes;
    if take(&mut b, 8)? != MAGIC {
        return Err(ReplayError::Malformed);
    }
    let version = take_u32(&mut b)?;
    let n_patches = take_u32(&mut b)?;
    let data_len = usize::try_from(take_u64(&mut b)?).map_err(|_| ReplayError::Malformed)?;
    let mut data = take(&mut b, data_len)?.to_vec();
    for _ in 0..n_patches {
        let offset = usize::try_from(take_u64(&mut b)?).map_err(|_| ReplayError::Malformed)?;
        let len = take_u32(&mut b)? as usize;
        let s = take(&mut b, len)?;
        match offset.checked_add(8) {
            Some(end) if end <= data.len() => {}
            _ => return Err(ReplayError::Malformed),
        }
        let p = state::intern(s) as usize as u64;
        data[offset..offset + 8].copy_from_slice(&p.to_le_bytes());
    }
    Ok(Dump { version, data })
}

/// Delivers the dump's records through `requested`/`completed`, splitting at record
/// boundaries when a buffer is smaller than the data. Returns the number of records.
pub fn replay_bytes(bytes: &[u8]) -> Result<u64, ReplayError> {
    let dump = parse(bytes)?;
    let v = state::version();
    if dump.version != v {
        return Err(ReplayError::Version {
            dump: dump.version,
            double: v,
        });
    }
    let records: Vec<(usize, u32, usize)> = layout::walk(v, &dump.data).collect();
    let covered = records.last().map_or(0, |&(at, _, size)| at + size);
    if covered != dump.data.len() {
        return Err(ReplayError::UnknownRecord { offset: covered });
    }
    let mut i = 0;
    while i < records.len() {
        let Some((ptr, size)) = state::request_for_replay() else {
            return Err(ReplayError::NoBuffer);
        };
        let first = records[i].0;
        let mut used = 0;
        let mut n = 0;
        while i < records.len() && used + records[i].2 <= size {
            used += records[i].2;
            state::count_produced(records[i].1);
            i += 1;
            n += 1;
        }
        // SAFETY: the client gave `size` writable bytes at `ptr`; used <= size; the source
        // range first..first+used lies inside dump.data.
        unsafe { std::ptr::copy_nonoverlapping(dump.data.as_ptr().add(first), ptr, used) };
        state::deliver_filled(ptr, size, used, n);
        if n == 0 {
            return Err(ReplayError::NoBuffer);
        }
    }
    Ok(records.len() as u64)
}

/// Writes a dump (tests, and a reference for the tracer's writer).
pub fn encode(version: u32, data: &[u8], patches: &[(u64, &[u8])]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(patches.len() as u32).to_le_bytes());
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(data);
    for (offset, s) in patches {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s);
    }
    out
}
