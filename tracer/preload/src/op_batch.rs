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
use cuprof_core::range_batch::{FinishedOp, RangeBatch};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, Weak};

/// Every live thread's batch, in the order the threads first recorded an operator.
static BATCHES: Mutex<Vec<Weak<Mutex<RangeBatch>>>> = Mutex::new(Vec::new());
/// Held while batches are taken and sent, so that flushes never interleave.
static FLUSHING: Mutex<()> = Mutex::new(());

/// This thread's batch; flushed when the thread exits.
struct Mine(Arc<Mutex<RangeBatch>>);

impl Drop for Mine {
    fn drop(&mut self) {
        if let Some(t) = running() {
            flush(t);
        }
    }
}

thread_local! {
    static MINE: Mine = {
        let batch = Arc::new(Mutex::new(RangeBatch::default()));
        if let Ok(mut all) = BATCHES.lock() {
            all.retain(|b| b.strong_count() > 0);
            all.push(Arc::downgrade(&batch));
        }
        Mine(batch)
    };
}

/// Adds a finished operator range to this thread's batch; sends every batch when it is full.
pub fn record(t: &Tracer, r: FinishedOp<'_>) {
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
    for batch in take_live() {
        t.channel.send_op_batch(batch);
    }
}

/// Takes every thread's batch, for the writer itself, when `quiet()` says it has nothing
/// queued (checked inside the flush's critical section: nothing sent before can be behind).
pub fn take_all_if(quiet: impl FnOnce() -> bool) -> Vec<RangeBatch> {
    let _order = FLUSHING.lock().unwrap_or_else(|e| e.into_inner());
    if !quiet() {
        return Vec::new();
    }
    take_live()
}

/// Empties every live thread's batch, in the threads' order; the empty ones are left out.
/// Callers hold `FLUSHING`.
fn take_live() -> Vec<RangeBatch> {
    let live: Vec<_> = match BATCHES.lock() {
        Ok(all) => all.iter().filter_map(Weak::upgrade).collect(),
        Err(_) => return Vec::new(),
    };
    live.iter()
        .filter_map(|b| {
            let mut b = b.lock().unwrap_or_else(|e| e.into_inner());
            (!b.is_empty()).then(|| b.take())
        })
        .collect()
}
