//! The writer thread, the end of the data path: it drains the channel into the session
//! (cycles and their files), ticks the session's flushes, the time window and buffer reclaim,
//! and reports the files it wrote when asked to finish.

use crate::channel::{Inbox, Msg};
use crate::error::StartError;
use crate::process::{guard, say};
use crate::symbols::Resolver;
use crate::tracer::Tracer;
use crate::window;
use crossbeam_channel::RecvTimeoutError;
use cuprof_core::session::{Action, Session};
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(100);
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
    session.set_devices(crate::devices::properties());
    let mut reclaim = crate::reclaim::Reclaim::new(Instant::now());
    let mut symbols = Resolver::default();
    let mut last_op_take = Instant::now();
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
        match inbox
            .recv_timeout(wait)
            .map(|m| take_data(&mut session, &mut symbols, m))
        {
            Ok(None) => {}
            Ok(Some(Msg::SyncFlush(reply))) => {
                session.sync_flush();
                let _ = reply.send(());
            }
            Ok(Some(Msg::CaptureEnded(cycle))) => ending.push(cycle),
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
            for batch in crate::op_batch::take_all_if(|| inbox.is_empty()) {
                take_ops(&mut session, batch);
            }
        }
        // After an exit that gave up waiting for this thread, the window and the pool are done.
        if crate::tracer::running().is_some() {
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
        crate::report::publish(session.written());
        ending.retain(|&cycle| {
            let open = session.has_cycle(cycle);
            if !open {
                crate::control::finished(cycle, session.written());
            }
            open
        });
    }
}

/// Ends the session, then reports the captures still open (a process that exits mid-capture).
fn finish(t: &Tracer, session: Session, ending: &[u32]) {
    let written = crate::report::finish(t, session);
    for &cycle in ending {
        crate::control::finished(cycle, &written);
    }
}

/// Hands a data message to the session; gives back a request (sync-flush, shutdown) for the
/// caller to act on.
fn take_data(session: &mut Session, symbols: &mut Resolver, m: Msg) -> Option<Msg> {
    match m {
        Msg::Input(i) => {
            crate::live::input(&i);
            session.handle(i)
        }
        Msg::AllocationStack(raw) => session.handle(symbols.resolve(raw)),
        Msg::OpRanges(batch) => take_ops(session, batch),
        request => return Some(request),
    }
    None
}

fn take_ops(session: &mut Session, batch: cuprof_core::range_batch::RangeBatch) {
    let ranges: Vec<_> = batch.into_ranges().collect();
    crate::live::ranges(&ranges);
    for r in ranges {
        session.handle(cuprof_core::session::Input::Range(r));
    }
}
