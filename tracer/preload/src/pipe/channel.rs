//! The channel to the writer thread: its message, and how each producer sends on it.
//!
//! Producers run on the program's threads and on CUPTI's, and must never be held up by a slow
//! writer, so each kind of message has its send policy here, in one place:
//!
//! | message | from | when the channel is full |
//! | --- | --- | --- |
//! | a CUPTI buffer's records | `buffers` | dropped and counted; past [`MAX_IN_FLIGHT`] records waiting, too. While draining at exit: waits (2 s) |
//! | an NVTX range, an allocation's stack, a stream-ordered allocation's stream | `ranges` (through `window`), `callbacks` | dropped and counted (a lost stream is written as 0) |
//! | a thread's batch of PyTorch operator ranges | `op_batch` | dropped and counted; past [`MAX_OP_BATCHES_IN_FLIGHT`] batches waiting, too |
//! | a window transition | `window` | waits 200 ms (few, and must not be lost) |
//! | finish / sync-flush requests | `lifecycle` | waits, then waits for the writer's reply |
//!
//! Drops are counted in `dropped_channel` (reported at the end and in `cuprofStats`).

use crate::host::symbols::RawStack;
use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender};
use cuprof_core::event::{Event, Range};
use cuprof_core::range_batch::RangeBatch;
use cuprof_core::session::{Counters, Input};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// A message to the writer thread.
pub enum Msg {
    Input(Input),
    /// An allocation's stack (`--with-stack`), symbolised by the writer thread.
    AllocationStack(RawStack),
    /// PyTorch operators' ranges, batched by the thread that ran them.
    OpRanges(RangeBatch),
    /// Close everything and report; the sender waits on the reply (bounded).
    Shutdown(Sender<()>),
    /// Make what is written so far survive a crash; the sender waits on the reply (bounded).
    SyncFlush(Sender<()>),
    /// An on-demand capture's recording ended (after its `EndRecording`): the writer reports
    /// its files once the cycle is closed.
    CaptureEnded(u32),
    /// Close every cycle whose recording ended, now (a Python `profile()` block ended); the
    /// sender waits on the reply (bounded).
    CloseEnded(Sender<()>),
}

/// The most decoded records allowed to wait for the writer (136 bytes each: about 270 MB):
/// past it, batches are dropped and counted, so a writer that falls behind (a slow disk) costs
/// records, never the program's memory.
pub const MAX_IN_FLIGHT: usize = 2_000_000;
/// The most operator batches allowed to wait for the writer. A batch holds up to 512 ranges,
/// where one channel slot held one before, so the channel's own bound no longer bounds memory:
/// past this (32,768 operators, at most about 7 MiB) a batch is dropped and counted.
pub const MAX_OP_BATCHES_IN_FLIGHT: usize = 64;
/// How long a window transition waits for room.
const WINDOW_WAIT: Duration = Duration::from_millis(200);
/// How long a buffer's records wait for room while the writer drains at exit.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// What both ends share.
#[derive(Default)]
struct Shared {
    /// Decoded records waiting for the writer, across all batches in the channel.
    in_flight: AtomicUsize,
    /// Operator batches waiting for the writer.
    op_batches_in_flight: AtomicUsize,
    /// At exit the writer drains the channel while CUPTI hands back its last buffers: their
    /// batches wait (bounded) instead of being dropped.
    draining: AtomicBool,
}

/// The sending end, held by the tracer.
pub struct Outbox {
    tx: Sender<Msg>,
    shared: Arc<Shared>,
    counters: Arc<Counters>,
}

/// The receiving end, held by the writer thread.
pub struct Inbox {
    rx: Receiver<Msg>,
    shared: Arc<Shared>,
}

/// A channel of `capacity` messages; drops are counted in `counters`.
pub fn bounded(capacity: usize, counters: Arc<Counters>) -> (Outbox, Inbox) {
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let shared = Arc::new(Shared::default());
    (
        Outbox {
            tx,
            shared: shared.clone(),
            counters,
        },
        Inbox { rx, shared },
    )
}

impl Outbox {
    /// One CUPTI buffer's decoded records. Never blocks, except while draining at exit.
    pub fn send_events(&self, events: Vec<Event>) {
        let n = events.len();
        if n == 0 {
            return;
        }
        let in_flight = &self.shared.in_flight;
        let draining = self.shared.draining.load(Relaxed);
        let sent = if in_flight.fetch_add(n, Relaxed) + n > MAX_IN_FLIGHT && !draining {
            false
        } else {
            let msg = Msg::Input(Input::Events(events));
            if draining {
                self.tx.send_timeout(msg, DRAIN_WAIT).is_ok()
            } else {
                self.tx.try_send(msg).is_ok()
            }
        };
        if !sent {
            in_flight.fetch_sub(n, Relaxed);
            self.counters.dropped_channel.fetch_add(n as u64, Relaxed);
        }
    }

    /// A finished NVTX range. Never blocks.
    pub fn send_range(&self, range: Range) {
        self.offer(Msg::Input(Input::Range(range)));
    }

    /// A thread's batch of operator ranges. Never blocks.
    pub fn send_op_batch(&self, batch: RangeBatch) {
        let n = batch.len() as u64;
        let waiting = &self.shared.op_batches_in_flight;
        let room = waiting.fetch_add(1, Relaxed) < MAX_OP_BATCHES_IN_FLIGHT;
        if !room || self.tx.try_send(Msg::OpRanges(batch)).is_err() {
            waiting.fetch_sub(1, Relaxed);
            self.counters.dropped_channel.fetch_add(n, Relaxed);
        }
    }

    /// An allocation's stack, to be symbolised. Never blocks.
    pub fn send_stack(&self, stack: RawStack) {
        self.offer(Msg::AllocationStack(stack));
    }

    /// The stream handle a stream-ordered allocation call was given. Never blocks.
    pub fn send_allocation_stream(&self, correlation: u32, stream: u64) {
        self.offer(Msg::Input(Input::AllocationStream {
            correlation,
            stream,
        }));
    }

    fn offer(&self, msg: Msg) {
        if self.tx.try_send(msg).is_err() {
            self.counters.dropped_channel.fetch_add(1, Relaxed);
        }
    }

    /// A window transition (step, begin or end of recording): few, and must not be lost, so
    /// this waits briefly for room.
    pub fn send_window(&self, input: Input) {
        let _ = self.tx.send_timeout(Msg::Input(input), WINDOW_WAIT);
    }

    /// From now on batches wait for room instead of being dropped: the writer is draining.
    /// After the capture's `EndRecording`, with the same patience as window messages.
    pub fn send_capture_ended(&self, cycle: u32) {
        let _ = self.tx.send_timeout(Msg::CaptureEnded(cycle), WINDOW_WAIT);
    }

    pub fn start_draining(&self) {
        self.shared.draining.store(true, Relaxed);
    }

    /// Asks the writer to finish its files and waits for it, each up to `wait`. False when
    /// it did not finish in time, or its queue stayed full for all of `wait`.
    pub fn finish_writer(&self, wait: Duration) -> bool {
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        match self.tx.send_timeout(Msg::Shutdown(reply_tx), wait) {
            Ok(()) => reply_rx.recv_timeout(wait).is_ok(),
            // The writer is gone (it said why when it stopped): nothing to wait for.
            Err(SendTimeoutError::Disconnected(_)) => true,
            Err(SendTimeoutError::Timeout(_)) => false,
        }
    }

    /// Events sent that the writer has not taken yet.
    pub fn events_waiting(&self) -> usize {
        self.shared.in_flight.load(Relaxed)
    }

    /// Asks the writer to make what it wrote survive a crash and waits for it, each up to
    /// `wait`.
    /// Has the writer close every cycle whose recording ended, once what was sent before is
    /// written; waits up to `wait` for that. Whether it was done in time.
    pub fn close_ended(&self, wait: Duration) -> bool {
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        self.tx
            .send_timeout(Msg::CloseEnded(reply_tx), wait)
            .is_ok()
            && reply_rx.recv_timeout(wait).is_ok()
    }

    pub fn sync_flush(&self, wait: Duration) {
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        if self.tx.send_timeout(Msg::SyncFlush(reply_tx), wait).is_ok() {
            let _ = reply_rx.recv_timeout(wait);
        }
    }
}

impl Inbox {
    /// The next message, waiting up to `wait`.
    pub fn recv_timeout(&self, wait: Duration) -> Result<Msg, RecvTimeoutError> {
        self.rx.recv_timeout(wait).inspect(|m| self.taken(m))
    }

    /// The next message if one is waiting.
    pub fn try_recv(&self) -> Option<Msg> {
        self.rx.try_recv().ok().inspect(|m| self.taken(m))
    }

    /// Nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    fn taken(&self, msg: &Msg) {
        match msg {
            Msg::Input(Input::Events(events)) => {
                self.shared.in_flight.fetch_sub(events.len(), Relaxed);
            }
            Msg::OpRanges(_) => {
                self.shared.op_batches_in_flight.fetch_sub(1, Relaxed);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_writer_says_whether_the_writer_finished() {
        let patient = Duration::from_secs(30);
        let short = Duration::from_millis(20);
        // A writer that answers.
        let (out, inbox) = bounded(4, Arc::default());
        let writer = std::thread::spawn(move || {
            if let Ok(Msg::Shutdown(reply)) = inbox.recv_timeout(patient) {
                let _ = reply.send(());
            }
        });
        assert!(out.finish_writer(patient));
        writer.join().unwrap();
        // One that has the request queued but does not answer in time.
        let (out, _inbox) = bounded(4, Arc::default());
        assert!(!out.finish_writer(short));
        // One whose queue stays full.
        let (out, inbox) = bounded(1, Arc::default());
        out.send_capture_ended(1);
        assert!(!out.finish_writer(short));
        // One that is gone: nothing to wait for.
        drop(inbox);
        assert!(out.finish_writer(short));
    }
}
