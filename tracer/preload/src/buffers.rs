//! CUPTI's activity buffers: handed out from the pool ([`crate::pool`]), decoded in the
//! completion callback (names copied out), and sent to the writer as one batch per buffer.
//!
//! Nothing here blocks: a full channel drops the batch and counts its records, and so does an
//! overflow buffer (what the pool hands out at its bound).

use crate::cupti::SUCCESS;
use crate::pool::Buffer;
use crate::{guard, tracer};
use cuprof_core::session::Input;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// CUPTI asks for a buffer (on its own thread or, in CUPTI 13's per-thread mode, on the
/// application thread that needs one).
pub unsafe extern "C" fn requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    guard((), || {
        let (p, n) = match tracer().and_then(|t| Some((t.pool.take()?, t))) {
            Some((Buffer::Pooled(p), t)) => (p, t.pool.buffer_size()),
            Some((Buffer::Overflow(p), _)) => (p, crate::pool::OVERFLOW_SIZE),
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: CUPTI passes valid out-pointers.
        unsafe {
            *buffer = p;
            *size = n;
            *max_records = 0;
        }
    })
}

/// CUPTI hands back a filled buffer: decode it, send the batch, recycle the buffer.
pub unsafe extern "C" fn completed(
    ctx: *mut std::ffi::c_void,
    stream_id: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    guard((), || {
        let Some(t) = tracer() else { return };
        if buffer.is_null() {
            return;
        }
        let mut dropped: usize = 0;
        // SAFETY: CUPTI's own drop counter for this context/stream; writes one usize.
        if unsafe { (t.cupti.cuptiActivityGetNumDroppedRecords)(ctx, stream_id, &mut dropped) }
            == SUCCESS
            && dropped > 0
        {
            t.counters.dropped_cupti.fetch_add(dropped as u64, Relaxed);
        }
        if valid > 0 {
            // SAFETY: CUPTI wrote `valid` bytes into the buffer we handed out.
            let bytes = unsafe { std::slice::from_raw_parts(buffer, valid) };
            let is_overflow = !t.pool.is_pooled(size);
            let (events, offsets) = decode_all(t, buffer, valid, bytes);
            if let Some(dir) = &t.dump_dir {
                crate::rawdump::dump(dir, t.cupti_version, bytes, &offsets);
            }
            let n = events.len() as u64;
            t.counters.records.fetch_add(n, Relaxed);
            if is_overflow {
                t.counters.dropped_buffers.fetch_add(n, Relaxed);
            } else if n > 0 && !send(t, events) {
                t.counters.dropped_channel.fetch_add(n, Relaxed);
            }
        }
        t.pool.give_back(buffer, size, valid);
    })
}

/// At exit the writer is draining the channel while CUPTI hands back its last buffers: wait
/// (bounded) instead of dropping them. Otherwise never block the thread CUPTI called us on.
pub static DRAINING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Decoded events waiting for the writer, across all batches in the channel.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// The most events allowed to wait (136 bytes each: about 270 MB): past it, batches are
/// dropped and counted, so a writer that falls behind (a slow disk) costs records, never the
/// program's memory.
const MAX_IN_FLIGHT: usize = 2_000_000;

/// The writer took `n` events off the channel.
pub fn taken(n: usize) {
    IN_FLIGHT.fetch_sub(n, Relaxed);
}

fn send(t: &crate::Tracer, events: Vec<cuprof_core::event::Event>) -> bool {
    let n = events.len();
    if IN_FLIGHT.fetch_add(n, Relaxed) + n > MAX_IN_FLIGHT && !DRAINING.load(Relaxed) {
        IN_FLIGHT.fetch_sub(n, Relaxed);
        return false;
    }
    let msg = crate::Msg::Input(Input::Events(events));
    let sent = if DRAINING.load(Relaxed) {
        t.tx.send_timeout(msg, std::time::Duration::from_secs(2))
            .is_ok()
    } else {
        t.tx.try_send(msg).is_ok()
    };
    if !sent {
        IN_FLIGHT.fetch_sub(n, Relaxed);
    }
    sent
}

/// Decodes every record of a buffer; also returns the record offsets (for raw dumps).
fn decode_all(
    t: &crate::Tracer,
    buffer: *mut u8,
    valid: usize,
    bytes: &[u8],
) -> (Vec<cuprof_core::event::Event>, Vec<usize>) {
    let mut events = Vec::with_capacity(valid / 128);
    let mut offsets = Vec::new();
    let Ok(mut names) = t.names.lock() else {
        return (events, offsets);
    };
    let Ok(mut decoder) = t.decoder.lock() else {
        return (events, offsets);
    };
    let mut record: *mut u8 = std::ptr::null_mut();
    loop {
        // SAFETY: buffer/valid are what CUPTI filled; CUPTI advances `record` within it.
        let r = unsafe { (t.cupti.cuptiActivityGetNextRecord)(buffer, valid, &mut record) };
        if r != SUCCESS || record.is_null() {
            break;
        }
        let offset = record as usize - buffer as usize;
        if offset >= valid {
            break;
        }
        if t.dump_dir.is_some() {
            offsets.push(offset);
        }
        if let Some(e) = decoder.decode(&bytes[offset..], &mut *names) {
            events.push(e);
        }
    }
    let lost = std::mem::take(&mut decoder.stats.kernels_without_timestamps);
    if lost > 0 {
        t.counters
            .kernels_without_timestamps
            .fetch_add(lost, Relaxed);
    }
    (events, offsets)
}
