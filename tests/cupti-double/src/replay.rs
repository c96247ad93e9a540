//! Replays a raw buffer dump (written by the tracer's debug switch from real GPU runs)
//! through the registered buffer callbacks.
//!
//! Format, little-endian: magic `CUPROFB1` (8 bytes); u32 cupti_version; u32 n_patches;
//! u64 data_len; data_len bytes of buffer data with pointer fields zeroed; then n_patches
//! entries of { u64 offset_in_data; u32 string_len; string bytes (no NUL) }. Replay
//! writes a pointer to a NUL-terminated copy of each string at data[offset..offset+8].
//!
//! Rebasing: a dump's timestamps are CLOCK_REALTIME of the recording day, and a tracer only
//! keeps records that start after CUDA initialisation in its own process. So replay shifts
//! every timestamp field of every record by one delta, chosen so that the earliest non-zero
//! timestamp in the dump becomes now (CLOCK_REALTIME) + 1 ms; relative timing within the
//! dump is kept to the nanosecond. The fields ([`time_fields`], offsets from [`layout::off`],
//! the same in every version the double plays): kernel start/end/completed/queued/submitted,
//! memcpy (and peer-to-peer memcpy) and memset start/end, driver/runtime API start/end,
//! synchronization start/end, memory (MEMORY2) and memory-pool timestamp, marker timestamp,
//! overhead start/end. A field holding 0 (`CUPTI_TIMESTAMP_UNKNOWN`, e.g. a kernel's
//! queued/submitted without latency timestamps) stays 0. processId of API, memory and
//! memory-pool records becomes the replaying process's pid; thread ids stay as recorded.
//! Records of other kinds are delivered unchanged.

use crate::layout::{self, kind};
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

/// Offsets of the u64 timestamp fields (ns) of a record of kind `k`, in every version the
/// double plays (checked against the 12.9 and 13.0 headers; Overhead/Overhead2/Overhead3,
/// Memcpy5/Memcpy6, Synchronization/Synchronization2, Memory3/Memory4, MemoryPool2/3 and
/// Kernel9/Kernel10 agree on them).
pub fn time_fields(k: u32) -> &'static [usize] {
    use layout::off;
    match k {
        kind::KERNEL | kind::CONCURRENT_KERNEL => &[
            off::kernel::START,
            off::kernel::END,
            off::kernel::COMPLETED,
            off::kernel::QUEUED,
            off::kernel::SUBMITTED,
        ],
        kind::MEMCPY | kind::MEMCPY2 => &[off::memcpy::START, off::memcpy::END],
        kind::MEMSET => &[off::memset::START, off::memset::END],
        kind::DRIVER | kind::RUNTIME | kind::INTERNAL_LAUNCH_API => {
            &[off::api::START, off::api::END]
        }
        kind::SYNCHRONIZATION => &[off::sync::START, off::sync::END],
        kind::MEMORY2 => &[off::memory::TIMESTAMP],
        kind::MEMORY_POOL => &[off::memory_pool::TIMESTAMP],
        kind::MARKER => &[off::marker::TIMESTAMP],
        kind::OVERHEAD => &[off::overhead::START, off::overhead::END],
        _ => &[],
    }
}

/// Offsets of the u32 processId fields of a record of kind `k`.
pub fn pid_fields(k: u32) -> &'static [usize] {
    use layout::off;
    match k {
        kind::DRIVER | kind::RUNTIME | kind::INTERNAL_LAUNCH_API => &[off::api::PROCESS_ID],
        kind::MEMORY2 => &[off::memory::PROCESS_ID],
        kind::MEMORY_POOL => &[off::memory_pool::PROCESS_ID],
        _ => &[],
    }
}

/// Shifts every non-zero timestamp field of `records` (as [`layout::walk`] yields them over
/// `data`) by one delta so the earliest becomes `target`, and writes `pid` into every
/// processId field. Returns the delta applied (target - earliest, wrapping), 0 if the data
/// holds no timestamp.
pub fn rebase(data: &mut [u8], records: &[(usize, u32, usize)], target: u64, pid: u32) -> u64 {
    let stamps = || {
        records.iter().flat_map(|&(at, k, size)| {
            time_fields(k)
                .iter()
                .filter(move |&&f| f + 8 <= size)
                .map(move |&f| at + f)
        })
    };
    let earliest = stamps()
        .map(|at| layout::rd_u64(data, at))
        .filter(|&t| t != 0)
        .min();
    let delta = earliest.map_or(0, |e| target.wrapping_sub(e));
    if earliest.is_some() {
        for at in stamps().collect::<Vec<_>>() {
            let t = layout::rd_u64(data, at);
            if t != 0 {
                layout::W(data).u64(at, t.wrapping_add(delta));
            }
        }
    }
    for &(at, k, size) in records {
        for &f in pid_fields(k).iter().filter(|&&f| f + 4 <= size) {
            layout::W(data).u32(at + f, pid);
        }
    }
    delta
}

/// Delivers the dump's records through `requested`/`completed`, rebased to now (see the
/// module docs), splitting at record boundaries when a buffer is smaller than the data.
/// Returns the number of records.
pub fn replay_bytes(bytes: &[u8]) -> Result<u64, ReplayError> {
    let mut dump = parse(bytes)?;
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
    rebase(
        &mut dump.data,
        &records,
        state::now_ns() + 1_000_000,
        state::process_id(),
    );
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
