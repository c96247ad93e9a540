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
//! A thread records into a batch only it touches (`staged`), with no lock: a lock's two locked
//! instructions per operator drained the stores of the range just written, about 0.3 µs per
//! operator on the diffusers transformer (BENCHMARKS.md). It hands what it staged over to the
//! batch flushes take (`shared`, behind a lock) when its outermost operator ends, when the
//! staged batch is full, before it flushes, and when it exits.
//!
//! Order matters across threads in one place: a backward operator's `Fwd thread id` is found
//! from its forward operator, recorded on another thread, so the forward one must reach the
//! writer first. Every flush therefore sends every thread's shared batch, in one critical
//! section: what a thread handed over before a flush reaches the writer before what the
//! flushing thread records after it. A thread has handed over every operator it finished
//! whenever none is open on it, as when it starts a backward pass. Flushes also happen at each
//! window transition (so a cycle's operators precede its end), when the writer is idle for a
//! second, at a thread's exit and at shutdown.

use crate::tracer::{running, Tracer};
use cuprof_core::range_batch::{FinishedOp, RangeBatch};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};

/// Every live thread's batch, in the order the threads first recorded an operator.
static BATCHES: Mutex<Vec<Weak<Mutex<RangeBatch>>>> = Mutex::new(Vec::new());
/// Held while batches are taken and sent, so that flushes never interleave.
static FLUSHING: Mutex<()> = Mutex::new(());
/// Batches the writer drained, given back to be filled again, so that the writer does not free
/// what a program thread allocated: glibc frees such a chunk under the lock of the program
/// thread's arena, and the program's own allocations (every tensor's) waited on it, a futex
/// call each time (measured: the process's futex calls fell from 3,600 to 1,400 over 800 flux
/// steps).
static SPARES: Mutex<Vec<RangeBatch>> = Mutex::new(Vec::new());
/// The most spare batches kept (each up to about 160 KiB).
const MAX_SPARES: usize = 16;
/// Window transitions so far: a thread that sees this change hands over and flushes at its
/// next operator's end, so that what it finished inside an operator still open at the
/// transition reaches the writer while the cycle drains.
static TRANSITIONS: AtomicU64 = AtomicU64::new(0);

/// This thread's batches: what it recorded since its last hand-over (`staged`, this thread's
/// alone) and what flushes take (`shared`). Handed over and flushed when the thread exits.
struct Mine {
    shared: Arc<Mutex<RangeBatch>>,
    staged: RefCell<RangeBatch>,
    /// [`TRANSITIONS`] when this thread last handed over.
    seen: Cell<u64>,
}

impl Mine {
    /// Moves the staged ranges into the shared batch; says whether that is now full.
    fn hand_over(&self) -> bool {
        let Ok(mut staged) = self.staged.try_borrow_mut() else {
            return false;
        };
        if staged.is_empty() {
            return false;
        }
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        shared.append(&mut staged);
        shared.is_full()
    }

    /// Hands over if a window transition happened since this thread last looked; says
    /// whether it did (the caller then flushes).
    fn caught_up(&self) -> bool {
        let transitions = TRANSITIONS.load(Relaxed);
        if transitions == self.seen.get() {
            return false;
        }
        self.seen.set(transitions);
        self.hand_over();
        true
    }
}

impl Drop for Mine {
    fn drop(&mut self) {
        self.hand_over();
        if let Some(t) = running() {
            flush(t);
        }
    }
}

thread_local! {
    static MINE: Mine = {
        let shared = Arc::new(Mutex::new(RangeBatch::default()));
        if let Ok(mut all) = BATCHES.lock() {
            all.retain(|b| b.strong_count() > 0);
            all.push(Arc::downgrade(&shared));
        }
        Mine {
            shared,
            staged: RefCell::new(RangeBatch::default()),
            seen: Cell::new(TRANSITIONS.load(Relaxed)),
        }
    };
}

/// Adds a finished operator range to this thread's staged batch, handing it over when the
/// range is the thread's `outermost` open operator or the staged batch is full; sends every
/// batch when the shared one is full or a window transition happened since this thread last
/// handed over.
pub fn record(t: &Tracer, r: FinishedOp<'_>, outermost: bool) {
    let send = MINE
        .try_with(|m| {
            let hand_over = match m.staged.try_borrow_mut() {
                Ok(mut staged) => {
                    staged.push(r);
                    outermost || staged.is_full()
                }
                Err(_) => {
                    t.counters.dropped_channel.fetch_add(1, Relaxed);
                    false
                }
            };
            m.caught_up() || (hand_over && m.hand_over())
        })
        // The thread is exiting: its batch has gone; the range goes with it, counted.
        .unwrap_or_else(|_| {
            t.counters.dropped_channel.fetch_add(1, Relaxed);
            false
        });
    if send {
        flush(t);
    }
}

/// For an operator's end that is not recorded (the window stopped): what this thread staged
/// before a window transition is handed over and flushed all the same.
pub fn catch_up(t: &Tracer) {
    if MINE.try_with(Mine::caught_up).unwrap_or(false) {
        flush(t);
    }
}

/// Sends every thread's batch to the writer (the channel drops, and counts, what it cannot
/// take). Never blocks on the writer; called from any thread but the writer's.
pub fn flush(t: &Tracer) {
    // What this thread finished before the flush goes with it.
    let _ = MINE.try_with(|m| m.hand_over());
    let _order = FLUSHING.lock().unwrap_or_else(|e| e.into_inner());
    for batch in take_live() {
        t.channel.send_op_batch(batch);
    }
}

/// [`flush`] at a window transition: threads with operators still open hand over what they
/// finished at their next operator's end, and flush it.
pub fn flush_at_transition(t: &Tracer) {
    let now = TRANSITIONS.fetch_add(1, Relaxed) + 1;
    let _ = MINE.try_with(|m| m.seen.set(now));
    flush(t);
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
            (!b.is_empty()).then(|| b.take(spare()))
        })
        .collect()
}

/// A batch the writer gave back, if one waits.
fn spare() -> Option<RangeBatch> {
    SPARES.lock().ok()?.pop()
}

/// For the writer: `batch`, drained, to be filled again (kept while fewer than [`MAX_SPARES`]
/// wait).
pub fn give_back(batch: RangeBatch) {
    if let Ok(mut spares) = SPARES.lock() {
        if spares.len() < MAX_SPARES {
            spares.push(batch);
        }
    }
}
