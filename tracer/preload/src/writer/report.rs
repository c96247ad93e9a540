//! What the user is told when the session ends: the files written, the records lost and what
//! to change for each cause, on stderr and in the launcher's report file.

use crate::host::process::say;
use crate::pipe::tracer::Tracer;
use crate::window::boundaries as window;
use cuprof_core::config::report::ReportLine;
use cuprof_core::session::{Session, Written};
use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

/// The trace files finished so far, one path per line (`cuprof_trace_files`).
static FILES: Mutex<String> = Mutex::new(String::new());

/// Publishes the files the session has finished (the writer calls it as cycles close).
pub fn publish(written: &[Written]) {
    let mut files = FILES.lock().unwrap_or_else(|e| e.into_inner());
    if files.lines().count() == written.len() {
        return;
    }
    files.clear();
    for w in written {
        files.push_str(&w.path.to_string_lossy());
        files.push('\n');
    }
}

/// What [`publish`] last published.
pub fn files_written() -> String {
    FILES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

fn human(bytes: u64) -> String {
    cuprof_core::byte_size::format(i64::try_from(bytes).unwrap_or(i64::MAX), 1)
}

/// Finishes the session and tells the user (stderr and the launcher's report file); gives
/// back the files written.
pub fn finish(t: &Tracer, session: Session) -> Vec<Written> {
    let (written, errors) = session.finish();
    publish(&written);
    for e in &errors {
        say(e.trim_start_matches("cuprof: "));
    }
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
    if written.is_empty() && stats_failed(t) == 0 {
        let why = if window::is_on_demand() {
            format!(
                "process {} was ready for cuprof capture and nothing was captured: no trace written",
                t.pid
            )
        } else if window::steps_seen() == 0 && window::expects_steps() {
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
    written
}

/// Cycles whose file failed (each said when it did): nothing else is to be said about them.
fn stats_failed(t: &Tracer) -> u64 {
    t.counters.failed_files.load(Relaxed)
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
