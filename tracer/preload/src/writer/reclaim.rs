//! Brings partly filled buffers back before the pool reaches its bound, from the writer thread.
//!
//! With CUPTI 13 each thread keeps its buffer until it is full or flushed, so many threads that
//! each launched a little hold much between two periodic flushes. Every `EVERY` the writer
//! measures what the buffers out hold ([`crate::cupti::pool::Pool::scan`]); from half the bound it asks
//! CUPTI for them with a default flush (cuptiActivityFlushAll(0): every buffer whose records are
//! complete, full or not), which decodes them and returns them empty.
//!
//! The writer holds no lock the buffer callbacks take, so flushing from it is safe: the
//! callbacks run on this thread during the flush, or on CUPTI's and the program's threads.

use crate::pipe::tracer::Tracer;
use std::time::{Duration, Instant};

/// How often the buffers out are measured: short enough that what threads write in between
/// fits in the other half of the bound, long enough that a scan (one mincore per buffer out,
/// about 2 ms for 1,024 buffers) costs little.
pub const EVERY: Duration = Duration::from_millis(50);

pub struct Reclaim {
    next: Instant,
}

impl Reclaim {
    pub fn new(now: Instant) -> Self {
        Reclaim { next: now + EVERY }
    }

    /// When the writer must look again.
    pub fn deadline(&self) -> Instant {
        self.next
    }

    pub fn tick(&mut self, t: &Tracer, now: Instant) {
        if now < self.next {
            return;
        }
        self.next = now + EVERY;
        let held = t.pool.scan();
        if held >= t.pool.reclaim_at() {
            tracing::debug!(held, "reclaiming partly filled CUPTI buffers");
            t.flush_cupti(false);
            t.pool.scan();
        }
    }
}
