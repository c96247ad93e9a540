//! PyTorch operator ranges, batched per thread on their way to the writer.
//!
//! The NVTX observer makes every operator a range: hundreds of thousands a second on the
//! program's thread. Sent one by one, each cost a `Name` allocated on the program thread and
//! freed on the writer's (glibc's slow path every time: the program thread's cache of freed
//! chunks never refills) and a channel send that often woke the writer: about 0.5 µs per
//! operator (BENCHMARKS.md, `scripts/bench-torch-ops.sh`). Here a thread appends the name's
//! bytes and the range's numbers to a batch of its own and sends the batch when it is full;
//! the writer makes the `Name`s.
//!
//! Order matters across threads in one place: a backward operator's `Fwd thread id` is found
//! from its forward operator, recorded on another thread, so the forward one must reach the
//! writer first. Every flush therefore sends every thread's batch, in one critical section:
//! what ended before a flush on any thread reaches the writer before what the flushing thread
//! records after it. Flushes also happen at each window transition (so a cycle's operators
//! precede its end), when the writer is idle for a second, at a thread's exit and at shutdown.

use crate::tracer::{running, Tracer};
use cuprof_core::event::{Name, PyStack, Range, RangeKind};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, Weak};

/// Ranges per batch: one channel message per this many operators.
const MAX_RANGES: usize = 512;
/// Name bytes per batch (names with shapes run to a few hundred bytes).
const MAX_NAME_BYTES: usize = 64 << 10;

/// One operator range; its name is a span of the batch's name bytes.
struct OpRange {
    name: (u32, u32),
    start: u64,
    end: u64,
    pid: u32,
    tid: u32,
    id: u64,
    parent: u64,
    stack: Option<PyStack>,
}

/// A thread's operator ranges not yet sent.
#[derive(Default)]
pub struct Batch {
    names: Vec<u8>,
    ranges: Vec<OpRange>,
}

/// An operator range as the NVTX callbacks hand it over.
pub struct Finished<'a> {
    pub name: &'a [u8],
    pub start: u64,
    pub end: u64,
    pub pid: u32,
    pub tid: u32,
    pub id: u64,
    pub parent: u64,
    pub stack: Option<PyStack>,
}

impl Batch {
    fn push(&mut self, r: Finished<'_>) {
        let at = self.names.len() as u32;
        self.names.extend_from_slice(r.name);
        self.ranges.push(OpRange {
            name: (at, r.name.len() as u32),
            start: r.start,
            end: r.end,
            pid: r.pid,
            tid: r.tid,
            id: r.id,
            parent: r.parent,
            stack: r.stack,
        });
    }

    fn is_full(&self) -> bool {
        self.ranges.len() >= MAX_RANGES || self.names.len() >= MAX_NAME_BYTES
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// The batch's ranges as the session takes them.
    pub fn into_ranges(self) -> impl Iterator<Item = Range> {
        let Batch { names, ranges } = self;
        ranges.into_iter().map(move |r| {
            let (at, len) = (r.name.0 as usize, r.name.1 as usize);
            Range {
                name: Name::from(String::from_utf8_lossy(&names[at..at + len]).as_ref()),
                domain: None,
                start: r.start,
                end: r.end,
                pid: r.pid,
                tid: r.tid,
                id: r.id,
                parent: r.parent,
                payload: None,
                kind: RangeKind::PushPop,
                stack: r.stack,
            }
        })
    }
}

/// Every live thread's batch, in the order the threads first recorded an operator.
static BATCHES: Mutex<Vec<Weak<Mutex<Batch>>>> = Mutex::new(Vec::new());
/// Held while batches are taken and sent, so that flushes never interleave.
static FLUSHING: Mutex<()> = Mutex::new(());

/// This thread's batch; flushed when the thread exits.
struct Mine(Arc<Mutex<Batch>>);

impl Drop for Mine {
    fn drop(&mut self) {
        if let Some(t) = running() {
            flush(t);
        }
    }
}

thread_local! {
    static MINE: Mine = {
        let batch = Arc::new(Mutex::new(Batch::default()));
        if let Ok(mut all) = BATCHES.lock() {
            all.retain(|b| b.strong_count() > 0);
            all.push(Arc::downgrade(&batch));
        }
        Mine(batch)
    };
}

/// Adds a finished operator range to this thread's batch; sends every batch when it is full.
pub fn record(t: &Tracer, r: Finished<'_>) {
    let full = MINE
        .try_with(|m| {
            let mut b = m.0.lock().unwrap_or_else(|e| e.into_inner());
            b.push(r);
            b.is_full()
        })
        // The thread is exiting: its batch has gone; the range goes with it, counted.
        .unwrap_or_else(|_| {
            t.counters.dropped_channel.fetch_add(1, Relaxed);
            false
        });
    if full {
        flush(t);
    }
}

/// Sends every thread's batch to the writer (the channel drops, and counts, what it cannot
/// take). Never blocks on the writer; called from any thread but the writer's.
pub fn flush(t: &Tracer) {
    let _order = FLUSHING.lock().unwrap_or_else(|e| e.into_inner());
    let batches: Vec<_> = match BATCHES.lock() {
        Ok(all) => all.iter().filter_map(Weak::upgrade).collect(),
        Err(_) => return,
    };
    for batch in batches {
        let taken = {
            let mut b = batch.lock().unwrap_or_else(|e| e.into_inner());
            if b.ranges.is_empty() {
                continue;
            }
            std::mem::take(&mut *b)
        };
        t.channel.send_op_batch(taken);
    }
}

/// Takes every thread's batch, for the writer itself, when `quiet()` says it has nothing
/// queued (checked inside the flush's critical section: nothing sent before can be behind).
pub fn take_all_if(quiet: impl FnOnce() -> bool) -> Vec<Batch> {
    let _order = FLUSHING.lock().unwrap_or_else(|e| e.into_inner());
    if !quiet() {
        return Vec::new();
    }
    let batches: Vec<_> = match BATCHES.lock() {
        Ok(all) => all.iter().filter_map(Weak::upgrade).collect(),
        Err(_) => return Vec::new(),
    };
    batches
        .iter()
        .map(|b| std::mem::take(&mut *b.lock().unwrap_or_else(|e| e.into_inner())))
        .filter(|b| !b.ranges.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(name: &[u8], id: u64) -> Finished<'_> {
        Finished {
            name,
            start: 10 * id,
            end: 10 * id + 5,
            pid: 7,
            tid: 8,
            id,
            parent: id - 1,
            stack: None,
        }
    }

    #[test]
    fn a_batch_gives_back_its_ranges_in_order_with_their_names() {
        let mut b = Batch::default();
        b.push(finished(b"aten::add, op_id = 1", 1));
        b.push(finished(b"bad \xff, op_id = 2", 2));
        let ranges: Vec<Range> = b.into_ranges().collect();
        assert_eq!(ranges.len(), 2);
        assert_eq!(&*ranges[0].name, "aten::add, op_id = 1");
        assert_eq!(&*ranges[1].name, "bad \u{fffd}, op_id = 2");
        assert_eq!(
            (ranges[1].start, ranges[1].end, ranges[1].pid, ranges[1].tid),
            (20, 25, 7, 8)
        );
        assert_eq!((ranges[1].id, ranges[1].parent), (2, 1));
        assert_eq!(ranges[1].kind, RangeKind::PushPop);
    }

    #[test]
    fn a_batch_is_full_at_its_range_count_or_its_name_bytes() {
        let mut b = Batch::default();
        for id in 1..MAX_RANGES as u64 {
            b.push(finished(b"aten::add, op_id = 1", id));
        }
        assert!(!b.is_full());
        b.push(finished(b"aten::add, op_id = 1", 9));
        assert!(b.is_full());
        let mut b = Batch::default();
        let long = vec![b'x'; MAX_NAME_BYTES];
        b.push(finished(&long, 1));
        assert!(b.is_full());
    }
}
