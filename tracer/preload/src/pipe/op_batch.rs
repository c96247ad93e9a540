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
//! A thread records into a batch of its own, which flushes on other threads may take. The
//! batch sits in a slot with a flag: whoever sets the flag has the batch to itself until it
//! clears it. The thread sets it at the first operator it records and keeps it until its
//! outermost operator ends (or it flushes), so that the operators inside one outermost
//! operator cost one locked instruction in all. A lock per operator drained the stores of the
//! range just written, about 0.3 µs per operator on the diffusers transformer; the staged
//! batch this design replaced was copied into a locked shared one at every outermost end
//! (BENCHMARKS.md). A flush skips a slot whose thread has an operator open; that thread's
//! ranges are taken by a later flush, once the operator ends. The native observer keeps the
//! operators that finish inside an outermost one itself and hands them over together
//! ([`record_native`]), so its thread holds the slot only for that call.
//!
//! Order matters across threads in one place: a backward operator's `Fwd thread id` is found
//! from its forward operator, recorded on another thread, so the forward one must reach the
//! writer first (NVTX fallback only: the native observer has it from PyTorch). Every flush
//! therefore sends every thread's batch, in one critical section: what a thread finished
//! before a flush reaches the writer before what the flushing thread records after it. A
//! thread's batch is free to take whenever no operator is open on it, as when it starts a
//! backward pass. Flushes also happen at each window transition (so a cycle's operators
//! precede its end), when the writer is idle for a second, at a thread's exit and at shutdown.

use crate::pipe::tracer::{running, Tracer};
use cuprof_core::event::PyStack;
use cuprof_core::range_batch::{FinishedOp, NativeOp, RangeBatch};
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::{Arc, Mutex, Weak};

/// Every live thread's batch, in the order the threads first recorded an operator.
static BATCHES: Mutex<Vec<Weak<Slot>>> = Mutex::new(Vec::new());
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
/// Window transitions so far: a thread that sees this change flushes at its next operator's
/// end, so that what it finished inside an operator still open at the transition reaches the
/// writer while the cycle drains.
static TRANSITIONS: AtomicU64 = AtomicU64::new(0);

/// A thread's batch and who has it: its thread between its first recorded operator and its
/// outermost operator's end, or a flush while it takes the batch, or no one.
struct Slot {
    held: AtomicBool,
    batch: UnsafeCell<RangeBatch>,
}

// SAFETY: `batch` is touched only by whoever set `held` (false to true, Acquire), until it
// clears it (Release): one thread at a time, each seeing the last one's writes.
unsafe impl Sync for Slot {}

impl Slot {
    /// Sets `held` if no one holds the slot.
    fn try_hold(&self) -> bool {
        self.held
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_ok()
    }

    fn release(&self) {
        self.held.store(false, Release);
    }

    /// The batch, for a flush on any thread: taken if no one holds the slot and it has ranges.
    fn take_if_free(&self) -> Option<RangeBatch> {
        if !self.try_hold() {
            return None;
        }
        // SAFETY: this flush holds the slot.
        let batch = unsafe { &mut *self.batch.get() };
        let taken = (!batch.is_empty()).then(|| batch.take(spare()));
        self.release();
        taken
    }
}

/// This thread's slot, whether the thread holds it, and the transitions it has seen.
/// Released and flushed when the thread exits.
struct Mine {
    slot: Arc<Slot>,
    holding: Cell<bool>,
    /// Set while `with_batch` runs, so that it never hands out the batch twice.
    in_use: Cell<bool>,
    /// [`TRANSITIONS`] when this thread last flushed.
    seen: Cell<u64>,
}

impl Mine {
    /// Runs `f` on this thread's batch, holding the slot from now until [`Self::release`]; a
    /// flush on another thread holds it only while it takes the batch, so this waits for that.
    /// None if called again from inside `f`.
    fn with_batch<R>(&self, f: impl FnOnce(&mut RangeBatch) -> R) -> Option<R> {
        if self.in_use.replace(true) {
            return None;
        }
        if !self.holding.get() {
            let mut spins = 0u32;
            while !self.slot.try_hold() {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            self.holding.set(true);
        }
        // SAFETY: this thread holds the slot, and `in_use` keeps this the only reference.
        let out = f(unsafe { &mut *self.slot.batch.get() });
        self.in_use.set(false);
        Some(out)
    }

    /// Lets flushes take this thread's batch.
    fn release(&self) {
        if self.holding.replace(false) {
            self.slot.release();
        }
    }

    /// Whether a window transition happened since this thread last looked (the caller then
    /// flushes).
    fn caught_up(&self) -> bool {
        let transitions = TRANSITIONS.load(Relaxed);
        if transitions == self.seen.get() {
            return false;
        }
        self.seen.set(transitions);
        true
    }
}

impl Drop for Mine {
    fn drop(&mut self) {
        self.release();
        if let Some(t) = running() {
            flush(t);
        }
    }
}

thread_local! {
    static MINE: Mine = {
        let slot = Arc::new(Slot {
            held: AtomicBool::new(false),
            batch: UnsafeCell::new(RangeBatch::default()),
        });
        if let Ok(mut all) = BATCHES.lock() {
            all.retain(|b| b.strong_count() > 0);
            all.push(Arc::downgrade(&slot));
        }
        Mine {
            slot,
            holding: Cell::new(false),
            in_use: Cell::new(false),
            seen: Cell::new(TRANSITIONS.load(Relaxed)),
        }
    };
}

/// Adds a finished operator range to this thread's batch, freeing the batch for flushes when
/// the range is the thread's `outermost` open operator; sends every batch when this one is
/// full or a window transition happened since this thread last flushed.
pub fn record(t: &Tracer, r: FinishedOp<'_>, outermost: bool) {
    let send = MINE
        .try_with(|m| {
            let full = m
                .with_batch(|b| {
                    b.push(r);
                    b.is_full()
                })
                .unwrap_or_else(|| {
                    t.counters.dropped_channel.fetch_add(1, Relaxed);
                    false
                });
            // A flush frees the batch itself.
            if outermost {
                m.release();
            }
            m.caught_up() || full
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

/// Adds native operators that finished on thread `tid`, their records in `records` (the
/// observer's record buffer, each at its `record_at`), to this thread's batch (`stack`: the Python stack of one with a stack handle),
/// and frees the batch for flushes (the observer hands them over when no operator of theirs
/// holds the thread's place in the batch: at its outermost operator's end, or a few dozen at a
/// time inside it); sends every batch when this one is full or a window transition happened
/// since this thread last flushed. False, and counted, where they were not added (`stack`
/// then was never called).
pub fn record_native(
    t: &Tracer,
    records: &[u8],
    tid: u32,
    ops: &[NativeOp],
    stack: impl FnMut(&NativeOp) -> Option<PyStack>,
) -> bool {
    let pid = crate::host::process::pid();
    let (added, send) = MINE
        .try_with(|m| {
            let added = m.with_batch(|b| {
                b.push_native(records, pid, tid, ops, stack)
                    .then(|| b.is_full())
            });
            m.release();
            match added.flatten() {
                Some(full) => (true, m.caught_up() || full),
                None => (false, m.caught_up()),
            }
        })
        // The thread is exiting: its batch has gone.
        .unwrap_or((false, false));
    if !added {
        t.counters
            .dropped_channel
            .fetch_add(ops.len() as u64, Relaxed);
    }
    if send {
        flush(t);
    }
    added
}

/// For an operator's end that is not recorded (the window stopped, or the tracer): the batch
/// is freed at the `outermost` operator's end all the same, and what this thread recorded
/// before a window transition is flushed.
pub fn not_recorded(t: Option<&Tracer>, outermost: bool) {
    let caught_up = MINE
        .try_with(|m| {
            if outermost {
                m.release();
            }
            t.is_some() && m.caught_up()
        })
        .unwrap_or(false);
    if let Some(t) = t.filter(|_| caught_up) {
        flush(t);
    }
}

/// Sends every thread's batch to the writer (the channel drops, and counts, what it cannot
/// take). Never blocks on the writer; called from any thread but the writer's.
pub fn flush(t: &Tracer) {
    // What this thread finished before the flush goes with it.
    let _ = MINE.try_with(Mine::release);
    let _order = FLUSHING.lock().unwrap_or_else(|e| e.into_inner());
    for batch in take_live() {
        t.channel.send_op_batch(batch);
    }
}

/// [`flush`] at a window transition: threads with operators still open flush what they
/// finished at their next operator's end.
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

/// Empties every live thread's batch that no operator holds open, in the threads' order; the
/// empty ones are left out. Callers hold `FLUSHING`.
fn take_live() -> Vec<RangeBatch> {
    let live: Vec<_> = match BATCHES.lock() {
        Ok(all) => all.iter().filter_map(Weak::upgrade).collect(),
        Err(_) => return Vec::new(),
    };
    live.iter().filter_map(|slot| slot.take_if_free()).collect()
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
