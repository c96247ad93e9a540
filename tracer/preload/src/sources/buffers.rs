//! CUPTI's activity buffers, the start of the data path: handed out from the pool
//! ([`crate::cupti::pool`]), decoded in the completion callback (names copied out), and sent to the
//! writer as one batch per buffer ([`crate::pipe::channel`]).
//!
//! Nothing here blocks: a full channel drops the batch and counts its records, and so does an
//! overflow buffer (what the pool hands out at its bound).

use crate::cupti::pool::Buffer;
use crate::host::process::guard;
use crate::pipe::tracer::{running, Tracer};
use cuprof_core::event::Event;
use std::sync::atomic::Ordering::Relaxed;

/// CUPTI asks for a buffer (on its own thread or, in CUPTI 13's per-thread mode, on the
/// application thread that needs one).
pub unsafe extern "C" fn requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    guard((), || {
        let (p, n) = match running().and_then(|t| Some((t.pool.take()?, t))) {
            Some((Buffer::Pooled(p), t)) => (p, t.pool.buffer_size()),
            Some((Buffer::Overflow(p), _)) => (p, crate::cupti::pool::OVERFLOW_SIZE),
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
    context: cupti_sys::CUcontext,
    stream_id: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    guard((), || {
        let Some(t) = running() else { return };
        if buffer.is_null() {
            return;
        }
        let dropped = t.cupti.dropped_records(context, stream_id);
        if dropped > 0 {
            t.counters.dropped_cupti.fetch_add(dropped as u64, Relaxed);
        }
        if valid > 0 {
            // SAFETY: CUPTI wrote `valid` bytes into the buffer we handed out.
            let bytes = unsafe { std::slice::from_raw_parts(buffer, valid) };
            let is_overflow = !t.pool.is_pooled(size);
            let (events, offsets) = decode_all(t, bytes);
            if let Some(dir) = &t.dump_dir {
                crate::cupti::rawdump::dump(dir, t.cupti_version, bytes, &offsets);
            }
            let n = events.len() as u64;
            t.counters.records.fetch_add(n, Relaxed);
            if is_overflow {
                t.counters.dropped_buffers.fetch_add(n, Relaxed);
            } else {
                t.channel.send_events(events);
            }
        }
        t.pool.give_back(buffer, size, valid);
    })
}

/// Decodes every record of a buffer; also returns the record offsets (for raw dumps).
fn decode_all(t: &Tracer, bytes: &[u8]) -> (Vec<Event>, Vec<usize>) {
    let mut events = Vec::with_capacity(bytes.len() / 128);
    let mut offsets = Vec::new();
    let Ok(mut names) = t.names.lock() else {
        return (events, offsets);
    };
    let Ok(mut decoder) = t.decoder.lock() else {
        return (events, offsets);
    };
    // SAFETY: `bytes` is the valid part of the buffer CUPTI just handed back.
    for offset in unsafe { t.cupti.records(bytes) } {
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
