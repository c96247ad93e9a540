//! The pool CUPTI's activity buffers come from, bounded in bytes of recorded data.
//!
//! A buffer costs only the pages CUPTI wrote ([`crate::cupti::pages`]), and with CUPTI 13 every thread
//! that launched once holds one until it fills or a flush brings it back. So the pool does not
//! bound buffers handed out (untouched ones are free) but what they hold: [`Pool::scan`] measures
//! the pages written in the buffers out, the writer flushes partly filled buffers back when that
//! reaches half the bound ([`crate::writer::reclaim`]), and only while it is at the bound does a request
//! get an overflow buffer, whose records are dropped and counted.
//!
//! Buffers out are also capped in number, because a flush from the writer thread sends every
//! partly filled buffer through the writer's own channel. Buffers a flush is handing back still
//! count as out while their threads ask for new ones, so the cap is set well above the threads
//! it is meant for.
//!
//! CUPTI before 12.9 crashes on a declined (NULL) buffer, hence overflow buffers instead.

use crate::cupti::pages;
use std::alloc::{alloc, dealloc, Layout};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// What a request gets when the pool is at its bound: enough for CUPTI to make progress, cheap
/// to throw away.
pub const OVERFLOW_SIZE: usize = 64 * 1024;
const ALIGN: usize = 8;
/// Buffers out at once per buffer of bound: threads that launched a little each hold one.
const OUT_PER_BUFFER: usize = 64;

/// What a request got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// From the pool: its records are kept.
    Pooled(*mut u8),
    /// `OVERFLOW_SIZE` bytes outside the pool: its records are dropped and counted.
    Overflow(*mut u8),
}

struct Lists {
    /// Buffers CUPTI has (addresses).
    out: HashSet<usize>,
    /// Mapped buffers with no pages, ready to hand out again.
    free: Vec<usize>,
}

pub struct Pool {
    size: usize,
    /// Bytes of recorded data the pool may hold.
    bound: usize,
    max_out: usize,
    /// Bytes written in the buffers out: at the last scan, less what came back since.
    held: AtomicUsize,
    lists: Mutex<Lists>,
}

impl Pool {
    /// Buffers of `size` bytes holding at most `buffers * size` bytes of records in all.
    pub fn new(size: usize, buffers: usize) -> Self {
        Pool {
            size,
            bound: size.saturating_mul(buffers),
            max_out: buffers.saturating_mul(OUT_PER_BUFFER),
            held: AtomicUsize::new(0),
            lists: Mutex::new(Lists {
                out: HashSet::new(),
                free: Vec::new(),
            }),
        }
    }

    pub fn buffer_size(&self) -> usize {
        self.size
    }

    /// The most buffers out at once.
    pub fn max_out(&self) -> usize {
        self.max_out
    }

    /// Held bytes from which the writer brings partly filled buffers back: half the bound, so
    /// that what threads write between two scans still fits.
    pub fn reclaim_at(&self) -> usize {
        self.bound / 2
    }

    /// A buffer for CUPTI: pooled unless the pool holds its bound or has its most buffers out.
    pub fn take(&self) -> Option<Buffer> {
        if self.held.load(Relaxed) < self.bound {
            if let Some(p) = self.take_pooled() {
                return Some(Buffer::Pooled(p));
            }
        }
        // SAFETY: OVERFLOW_SIZE is non-zero and ALIGN a power of two.
        let p = unsafe { alloc(Layout::from_size_align(OVERFLOW_SIZE, ALIGN).ok()?) };
        (!p.is_null()).then_some(Buffer::Overflow(p))
    }

    fn take_pooled(&self) -> Option<*mut u8> {
        let mut lists = self.lists.lock().ok()?;
        if lists.out.len() >= self.max_out {
            return None;
        }
        let p = match lists.free.pop() {
            Some(p) => p as *mut u8,
            None => pages::map(self.size)?,
        };
        lists.out.insert(p as usize);
        Some(p)
    }

    /// Whether a buffer of `size` bytes came from the pool (overflow buffers are smaller than
    /// any pool buffer).
    pub fn is_pooled(&self, size: usize) -> bool {
        size == self.size
    }

    /// CUPTI is done with a buffer it filled `valid` bytes of: its pages go back to the system
    /// and it waits, empty, for the next request.
    pub fn give_back(&self, p: *mut u8, size: usize, valid: usize) {
        if !self.is_pooled(size) {
            if let Ok(layout) = Layout::from_size_align(size, ALIGN) {
                // SAFETY: p was allocated by `take` with this exact layout.
                unsafe { dealloc(p, layout) };
            }
            return;
        }
        // SAFETY: a pool buffer (a mapping of `size` bytes) that CUPTI has handed back.
        unsafe { pages::release(p, size) };
        let written = pages::whole_pages(valid);
        let _ = self
            .held
            .fetch_update(Relaxed, Relaxed, |h| Some(h.saturating_sub(written)));
        if let Ok(mut lists) = self.lists.lock() {
            lists.out.remove(&(p as usize));
            lists.free.push(p as usize);
        }
    }

    /// Measures the bytes written in the buffers out (pages made resident), remembers and
    /// returns it. Costs one mincore per buffer out; the lock is held only to copy the list.
    pub fn scan(&self) -> usize {
        let out: Vec<usize> = match self.lists.lock() {
            Ok(lists) => lists.out.iter().copied().collect(),
            Err(_) => return self.held.load(Relaxed),
        };
        let held = out
            .into_iter()
            .map(|p| pages::resident(p as *mut u8, self.size))
            .sum();
        self.held.store(held, Relaxed);
        held
    }

    /// Buffers out now.
    #[cfg(test)]
    fn out(&self) -> usize {
        self.lists.lock().map(|l| l.out.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pooled(b: Option<Buffer>) -> *mut u8 {
        match b {
            Some(Buffer::Pooled(p)) => p,
            other => panic!("expected a pooled buffer, got {other:?}"),
        }
    }

    fn overflow(pool: &Pool, b: Option<Buffer>) {
        match b {
            Some(Buffer::Overflow(p)) => pool.give_back(p, OVERFLOW_SIZE, 0),
            other => panic!("expected an overflow buffer, got {other:?}"),
        }
    }

    /// Writes `bytes` into a buffer as CUPTI would.
    fn write(p: *mut u8, bytes: usize) {
        // SAFETY: p is a pool buffer of at least `bytes` bytes that the test owns.
        unsafe { std::ptr::write_bytes(p, 0xab, bytes) };
    }

    #[test]
    fn untouched_buffers_cost_nothing_so_many_threads_each_get_one() {
        let page = pages::page_size();
        let size = 256 * page;
        let pool = Pool::new(size, 2);
        assert_eq!(pool.max_out(), 128);
        assert_eq!(pool.reclaim_at(), size);
        let bufs: Vec<*mut u8> = (0..128).map(|_| pooled(pool.take())).collect();
        for &p in &bufs {
            write(p, 100);
        }
        assert_eq!(pool.scan(), 128 * page, "one page written in each");
        // The 129th thread: the count cap, not the bound.
        overflow(&pool, pool.take());
        pool.give_back(bufs[0], size, 100);
        assert_eq!(pool.out(), 127);
        assert_eq!(pool.scan(), 127 * page, "given back: its page is gone");
        let again = pooled(pool.take());
        assert_eq!(again, bufs[0], "recycled, and empty");
        assert_eq!(pages::resident(again, size), 0);
    }

    #[test]
    fn the_bound_is_on_bytes_written_and_what_comes_back_frees_it() {
        let page = pages::page_size();
        let size = 64 * page;
        let pool = Pool::new(size, 2);
        let a = pooled(pool.take());
        let b = pooled(pool.take());
        write(a, size);
        write(b, size - page);
        assert_eq!(pool.scan(), 2 * size - page, "under the bound");
        let c = pooled(pool.take());
        write(c, page);
        assert_eq!(pool.scan(), 2 * size, "at the bound");
        overflow(&pool, pool.take());
        // A full buffer comes back: its bytes are freed without waiting for a scan.
        pool.give_back(a, size, size);
        let d = pooled(pool.take());
        assert_eq!(pool.scan(), size, "b and c");
        for p in [b, c, d] {
            pool.give_back(p, size, size);
        }
        assert_eq!(pool.scan(), 0);
        assert_eq!(pool.out(), 0);
    }
}
