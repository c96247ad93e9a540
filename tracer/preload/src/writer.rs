//! The writer thread: owns the session (cycles and their files), drains the channel, ticks
//! sync-flushes and drains, and reports the files it wrote.

use crate::{control, hooks, phase, say, tracer, Msg, Phase, Tracer, TRACER};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use cuprof_core::config::report::ReportLine;
use cuprof_core::config::Config;
use cuprof_core::memory::MemoryTimeline;
use cuprof_core::session::{Action, Input, Session, Sink, Written};
use cuprof_core::trace_writer::{base_time_ns, TraceMeta};
use cuprof_core::window::StepPattern;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(100);
/// How long operators may wait in a quiet thread's batch (`op_batch`) before the writer takes
/// them.
const OP_TAKE_EVERY: Duration = Duration::from_secs(1);
static WRITER: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);
static SHUT: AtomicBool = AtomicBool::new(false);

/// Opens `NAME-rankR[-cycleC].trace.json.gz` in the output directory, never overwriting.
struct FileSink {
    dir: PathBuf,
    name: String,
    rank: u32,
    multi_cycle: bool,
}

impl Sink for FileSink {
    fn open(&mut self, cycle: u32) -> std::io::Result<(Box<dyn Write + Send>, PathBuf)> {
        std::fs::create_dir_all(&self.dir)?;
        let file_name = cuprof_core::config::trace_file_name(
            &self.name,
            self.rank,
            self.multi_cycle.then_some(cycle),
        );
        let unique = cuprof_core::config::unique_path(&self.dir, &file_name, std::process::id())?;
        if let Some(note) = unique.renamed_note(&file_name) {
            say(&note);
        }
        Ok((
            Box::new(std::io::BufWriter::with_capacity(1 << 20, unique.file)),
            unique.path,
        ))
    }

    fn open_snapshot(
        &mut self,
        unix_time: u64,
    ) -> std::io::Result<(Box<dyn Write + Send>, PathBuf)> {
        std::fs::create_dir_all(&self.dir)?;
        let file_name = cuprof_core::config::memory_file_name(&self.name, self.rank, unix_time);
        let unique = cuprof_core::config::unique_path(&self.dir, &file_name, std::process::id())?;
        Ok((Box::new(std::io::BufWriter::new(unique.file)), unique.path))
    }
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most len bytes.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn meta(cfg: &Config, t: &Tracer) -> TraceMeta {
    let realtime = clock(libc::CLOCK_REALTIME);
    TraceMeta {
        devices: Vec::new(),
        rank: cfg.rank.rank,
        world_size: cfg.rank.world_size,
        local_rank: cfg.rank.local_rank,
        pid: t.pid,
        process_name: std::fs::read_to_string("/proc/self/comm")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        hostname: hostname(),
        cupti_version: t.cupti_version,
        cycle: 1,
        clock_realtime_ns: realtime,
        clock_monotonic_ns: clock(libc::CLOCK_MONOTONIC),
        window: format!("{:?}", cfg.capture),
        base_time_ns: base_time_ns(realtime),
        trace_name: String::new(),
    }
}

pub fn spawn(cfg: &Config, tracer: Tracer, rx: Receiver<Msg>) -> Result<(), String> {
    let meta = meta(cfg, &tracer);
    let counters = tracer.counters.clone();
    if TRACER.set(tracer).is_err() {
        return Err("cuprof was already started in this process".into());
    }
    let sink = FileSink {
        dir: cfg.dir.clone(),
        name: cfg.name.clone(),
        rank: cfg.rank.rank,
        multi_cycle: cfg.capture.multi_cycle(),
    };
    let mut session = Session::new(
        meta,
        cfg.gzip_level,
        cfg.flush_interval,
        Box::new(sink),
        counters,
    );
    if !cfg.activities.cpu {
        session = session.without_flows();
    }
    if cfg.activities.mem {
        let mut timeline = MemoryTimeline::new(cfg.max_mem_events as usize);
        if let Ok(conf) = std::env::var("PYTORCH_CUDA_ALLOC_CONF") {
            timeline.allocator_settings_mut().pytorch_cuda_alloc_conf = conf;
        }
        session = session.with_memory(timeline);
    }
    let handle = std::thread::Builder::new()
        .name("cuprof-writer".into())
        .spawn(move || crate::guard((), || run(session, rx)))
        .map_err(|e| format!("could not start the writer thread: {e}"))?;
    if let Ok(mut w) = WRITER.lock() {
        *w = Some(handle);
    }
    crate::set_phase(Phase::Running);
    hooks::install_lifecycle();
    hooks::install_signals();
    if let Some(t) = TRACER.get() {
        control::start(
            t,
            &cfg.capture,
            cfg.step_nvtx.as_deref().map(StepPattern::new),
        );
    }
    Ok(())
}

fn run(mut session: Session, rx: Receiver<Msg>) {
    // Asked here, not in InitializeInjection: the driver is still inside cuInit there.
    session.set_devices(crate::entry::device_properties());
    let mut reclaim = crate::reclaim::Reclaim::new(Instant::now());
    let mut symbols = crate::stacks::Resolver::default();
    let mut last_op_take = Instant::now();
    loop {
        let now = Instant::now();
        let wait = [
            session.next_deadline(),
            control::time_deadline(),
            Some(reclaim.deadline()),
        ]
        .into_iter()
        .flatten()
        .map(|d| d.saturating_duration_since(now))
        .fold(TICK, Duration::min);
        match rx.recv_timeout(wait) {
            Ok(Msg::Input(i)) => {
                if let Input::Events(events) = &i {
                    crate::buffers::taken(events.len());
                }
                session.handle(i);
            }
            Ok(Msg::AllocationStack(raw)) => session.handle(symbols.resolve(raw)),
            Ok(Msg::OpRanges(batch)) => batch
                .received()
                .for_each(|r| session.handle(Input::Range(r))),
            Ok(Msg::SyncFlush(reply)) => {
                session.sync_flush();
                let _ = reply.send(());
            }
            Ok(Msg::Shutdown(reply)) => {
                while let Ok(m) = rx.try_recv() {
                    match m {
                        Msg::Input(i) => session.handle(i),
                        Msg::AllocationStack(raw) => session.handle(symbols.resolve(raw)),
                        Msg::OpRanges(batch) => batch
                            .received()
                            .for_each(|r| session.handle(Input::Range(r))),
                        _ => {}
                    }
                }
                report(session);
                let _ = reply.send(());
                return;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                report(session);
                return;
            }
        }
        control::poll_time();
        if last_op_take.elapsed() >= OP_TAKE_EVERY {
            last_op_take = Instant::now();
            for batch in crate::op_batch::take_all_if(|| rx.is_empty()) {
                batch
                    .into_ranges()
                    .for_each(|r| session.handle(Input::Range(r)));
            }
        }
        if let Some(t) = tracer() {
            reclaim.tick(t, Instant::now());
        }
        if let Action::FlushCupti { forced } = session.tick(Instant::now()) {
            tracing::trace!(forced, "CUPTI flush");
            if let Some(t) = TRACER.get() {
                t.flush_cupti(forced);
            }
        }
        for e in session.take_errors() {
            say(e.trim_start_matches("cuprof: "));
        }
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// Finishes the session and tells the user (stderr and the launcher's report file).
fn report(session: Session) {
    let (written, errors) = session.finish();
    for e in &errors {
        say(e.trim_start_matches("cuprof: "));
    }
    let Some(t) = TRACER.get() else { return };
    let stats = t.counters.snapshot();
    tracing::debug!(
        ?written,
        ?stats,
        records = t.counters.records.load(Relaxed),
        "session finished"
    );
    // Under `cuprof run` the launcher prints the lines once the program has ended (stderr may be
    // closed by then, or interleaved with the program's own output).
    let say = |m: &str| {
        if t.report_file.is_none() {
            say(m)
        }
    };
    let lost = stats.dropped_channel + stats.dropped_cupti + stats.dropped_buffers;
    let mut lines = Vec::new();
    for Written { path, events, .. } in &written {
        let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        say(&format!(
            "wrote {} ({events} events, {})",
            path.display(),
            human(bytes)
        ));
        lines.push(
            ReportLine::File {
                path: path.clone(),
                events: *events,
                bytes,
            }
            .to_line(),
        );
    }
    if lost > 0 {
        let note = format!(
            "{lost} records were lost ({} channel full, {} dropped by CUPTI, {} buffer pool exhausted): {}",
            stats.dropped_channel,
            stats.dropped_cupti,
            stats.dropped_buffers,
            loss_advice(&stats)
        );
        say(&note);
        lines.push(ReportLine::Note(note).to_line());
    }
    if written.is_empty() {
        let why = if control::steps_seen() == 0 && crate::entry::expects_steps() {
            "no step was recorded: no NVTX range matched the step pattern and cuprof_step() was never called".to_string()
        } else {
            format!(
                "process {} initialised CUDA but did no GPU work in the profiling window: no trace written",
                t.pid
            )
        };
        say(&why);
        lines.push(ReportLine::Note(why).to_line());
    }
    if let Some(rf) = &t.report_file {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(rf)
        {
            let _ = f.write_all(lines.concat().as_bytes());
        }
    }
}

/// Ends tracing: closes the window, flushes CUPTI, waits (bounded) for the writer to finish
/// the files. Safe to call more than once and from any thread but the writer.
pub fn shutdown() {
    if phase() != Phase::Running || hooks::forked_child() || SHUT.swap(true, Relaxed) {
        return;
    }
    let Some(t) = tracer() else { return };
    control::at_exit();
    crate::op_batch::flush(t);
    t.set_kinds(false);
    crate::buffers::DRAINING.store(true, Relaxed);
    t.flush_cupti(true);
    let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
    let sent =
        t.tx.send_timeout(Msg::Shutdown(reply_tx), hooks::SHUTDOWN_WAIT)
            .is_ok();
    if sent && reply_rx.recv_timeout(hooks::SHUTDOWN_WAIT).is_err() {
        say("the trace writer did not finish within 10 s; the trace may be incomplete (cuprof repair can close it)");
    }
    crate::set_phase(Phase::Stopped);
}

/// A signal the program handles itself: make what is written so far survive, keep tracing.
pub fn sync_flush() {
    let Some(t) = tracer() else { return };
    crate::op_batch::flush(t);
    t.flush_cupti(false);
    let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
    let wait = std::time::Duration::from_secs(1);
    if t.tx.send_timeout(Msg::SyncFlush(reply_tx), wait).is_ok() {
        let _ = reply_rx.recv_timeout(wait);
    }
}

/// The program is about to tear CUDA down (cudaDeviceReset, context destruction): records
/// still inside CUPTI would be lost with the context, so ask for them now.
pub fn flush_before_teardown() {
    if let Some(t) = tracer() {
        t.flush_cupti(true);
    }
}

/// What to change for each cause of loss that happened.
fn loss_advice(stats: &cuprof_core::trace_writer::TraceStats) -> String {
    let mut advice = Vec::new();
    if stats.dropped_channel > 0 {
        advice.push(
            "the writer fell behind: narrow the window or record less (CUPROF_ACTIVITIES, CUPROF_API)",
        );
    }
    if stats.dropped_cupti > 0 {
        advice.push("CUPTI ran out of buffer room: raise CUPROF_BUFFER_SIZE");
    }
    if stats.dropped_buffers > 0 {
        advice.push(
            "CUPTI's buffers held more records than the pool allows, or more threads held buffers than it allows: raise CUPROF_BUFFERS",
        );
    }
    advice.join("; ")
}
