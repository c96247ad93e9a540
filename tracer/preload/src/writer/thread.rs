//! The writer thread, the end of the data path: it drains the channel into the session
//! (cycles and their files), ticks the session's flushes, the time window and buffer reclaim,
//! and reports the files it wrote when asked to finish.

use crate::host::error::StartError;
use crate::host::process::{guard, say};
use crate::host::symbols::Resolver;
use crate::pipe::channel::{Inbox, Msg};
use crate::pipe::tracer::Tracer;
use crate::window::boundaries as window;
use crossbeam_channel::RecvTimeoutError;
use cuprof_core::session::{Action, Session};
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(100);
/// How often the writer looks for messages while the window collects ([`Receiving`]).
const POLL: Duration = Duration::from_millis(1);
/// How long operators may wait in a quiet thread's batch (`op_batch`) before the writer takes
/// them.
const OP_TAKE_EVERY: Duration = Duration::from_secs(1);

/// Starts the writer thread on `session`, fed by `inbox`.
pub fn spawn(t: &'static Tracer, session: Session, inbox: Inbox) -> Result<(), StartError> {
    std::thread::Builder::new()
        .name("cuprof-writer".into())
        .spawn(move || guard((), || run(t, session, inbox)))
        .map(drop)
        .map_err(StartError::WriterThread)
}

fn run(t: &Tracer, mut session: Session, inbox: Inbox) {
    // Asked here, not in InitializeInjection: the driver is still inside cuInit there.
    session.set_devices(crate::host::devices::properties());
    let mut reclaim = crate::writer::reclaim::Reclaim::new(Instant::now());
    let mut symbols = Resolver::default();
    let mut last_op_take = Instant::now();
    let mut receiving = Receiving::default();
    // On-demand captures whose recording ended; reported once their cycle is closed.
    let mut ending: Vec<u32> = Vec::new();
    loop {
        let now = Instant::now();
        let wait = [
            session.next_deadline(),
            window::time_deadline(),
            Some(reclaim.deadline()),
        ]
        .into_iter()
        .flatten()
        .map(|d| d.saturating_duration_since(now))
        .fold(TICK, Duration::min);
        match receiving
            .next(&inbox, wait)
            .map(|m| take_data(&mut session, &mut symbols, m))
        {
            Ok(None) => {}
            Ok(Some(Msg::SyncFlush(reply))) => {
                session.sync_flush();
                let _ = reply.send(());
            }
            Ok(Some(Msg::CaptureEnded(cycle))) => ending.push(cycle),
            Ok(Some(Msg::CloseEnded(reply))) => {
                session.close_ended();
                crate::writer::report::publish(session.written());
                let _ = reply.send(());
            }
            Ok(Some(Msg::Shutdown(reply))) => {
                // What is still queued is written; a second request has nobody to answer.
                while let Some(m) = inbox.try_recv() {
                    if let Some(Msg::CaptureEnded(cycle)) = take_data(&mut session, &mut symbols, m)
                    {
                        ending.push(cycle);
                    }
                }
                finish(t, session, &ending);
                let _ = reply.send(());
                return;
            }
            Ok(Some(_)) => {}
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                finish(t, session, &ending);
                return;
            }
        }
        if last_op_take.elapsed() >= OP_TAKE_EVERY {
            last_op_take = Instant::now();
            for batch in crate::pipe::op_batch::take_all_if(|| inbox.is_empty()) {
                take_ops(&mut session, batch);
            }
        }
        // After an exit that gave up waiting for this thread, the window and the pool are done.
        if crate::pipe::tracer::running().is_some() {
            window::poll_time(t);
            reclaim.tick(t, Instant::now());
        }
        if let Action::FlushCupti { forced } = session.tick(Instant::now()) {
            tracing::trace!(forced, "CUPTI flush");
            t.flush_cupti(forced);
        }
        for e in session.take_errors() {
            say(e.trim_start_matches("cuprof: "));
        }
        crate::writer::report::publish(session.written());
        ending.retain(|&cycle| {
            let open = session.has_cycle(cycle);
            if !open {
                crate::state::captures::finished(cycle, session.written());
            }
            open
        });
    }
}

/// How the writer waits for messages. While the window collects and messages keep coming, it
/// polls instead of sleeping on the channel: a send to a writer asleep on it is a futex wake
/// made by the sending program thread, once per operator batch and step (30 µs each on this
/// project's VM: 0.2 µs per operator on a diffusers transformer, BENCHMARKS.md). A poll every
/// millisecond costs the writer wake-ups it would mostly have had anyway; after
/// [`QUIET_POLLS`] polls found nothing it sleeps on the channel again.
#[derive(Default)]
struct Receiving {
    empty_polls: u32,
}

/// Empty polls in a row after which the writer sleeps on the channel.
const QUIET_POLLS: u32 = 10;

impl Receiving {
    /// The next message, waiting up to `wait`.
    fn next(&mut self, inbox: &Inbox, wait: Duration) -> Result<Msg, RecvTimeoutError> {
        let got = if !window::collecting() || self.empty_polls >= QUIET_POLLS {
            inbox.recv_timeout(wait)
        } else {
            match inbox.try_recv() {
                Some(m) => Ok(m),
                None => {
                    std::thread::sleep(wait.min(POLL));
                    inbox.try_recv().ok_or(RecvTimeoutError::Timeout)
                }
            }
        };
        match got {
            Ok(_) => self.empty_polls = 0,
            Err(_) => self.empty_polls = self.empty_polls.saturating_add(1),
        }
        got
    }
}

/// Ends the session, then reports the captures still open (a process that exits mid-capture).
fn finish(t: &Tracer, session: Session, ending: &[u32]) {
    let written = crate::writer::report::finish(t, session);
    for &cycle in ending {
        crate::state::captures::finished(cycle, &written);
    }
}

/// Hands a data message to the session; gives back a request (sync-flush, shutdown) for the
/// caller to act on.
fn take_data(session: &mut Session, symbols: &mut Resolver, m: Msg) -> Option<Msg> {
    match m {
        Msg::Input(i) => {
            crate::state::live::input(&i);
            session.handle(i)
        }
        Msg::AllocationStack(raw) => session.handle(symbols.resolve(raw)),
        Msg::OpRanges(batch) => take_ops(session, batch),
        request => return Some(request),
    }
    None
}

fn take_ops(session: &mut Session, mut batch: cuprof_core::range_batch::RangeBatch) {
    let ranges: Vec<_> = batch.drain().collect();
    crate::pipe::op_batch::give_back(batch);
    crate::state::live::ranges(&ranges);
    for r in ranges {
        session.handle(cuprof_core::session::Input::Range(r));
    }
}
