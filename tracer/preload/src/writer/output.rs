//! The session the writer thread drives (`cuprof_core::session`), set up for this process:
//! its files (`NAME-rankR[-cycleC].trace.json.gz` and memory snapshots in the output
//! directory, never overwriting), the trace's metadata, the memory timeline.

use crate::host::process::{clock_ns, say};
use crate::pipe::tracer::Tracer;
use cuprof_core::config::report::ReportLine;
use cuprof_core::config::Config;
use cuprof_core::memory::MemoryTimeline;
use cuprof_core::session::{Session, Sink};
use cuprof_core::trace_writer::{base_time_ns, TraceMeta};
use std::io::Write;
use std::path::PathBuf;

/// Opens the session's files in the output directory, never overwriting one.
struct FileSink {
    dir: PathBuf,
    name: String,
    rank: u32,
    multi_cycle: bool,
    tensorboard: bool,
    /// The launcher's report file (`cuprof run`), told of each trace as it opens.
    report_file: Option<PathBuf>,
}

impl Sink for FileSink {
    fn open(&mut self, cycle: u32) -> std::io::Result<(Box<dyn Write + Send>, PathBuf)> {
        // An on-demand capture may name its own directory (`cuprof capture --dir`).
        let dir = crate::state::captures::capture_dir(cycle).unwrap_or_else(|| self.dir.clone());
        std::fs::create_dir_all(&dir)?;
        let file_name = cuprof_core::config::trace_file_name(
            &self.name,
            self.rank,
            // A cycle after the first (a later Python `profile()` block's) is named even when
            // the window has one cycle per block.
            (self.multi_cycle || cycle > 1).then_some(cycle),
            self.tensorboard,
        );
        let unique = cuprof_core::config::unique_path(&dir, &file_name, std::process::id())?;
        if let Some(note) = unique.renamed_note(&file_name) {
            say(&note);
        }
        // Told now, not only once closed: whoever waits for this file learns from a missing
        // `file` line that the process died with it unfinished.
        let opened = ReportLine::Opened {
            pid: crate::host::process::pid(),
            path: unique.path.clone(),
        };
        if let Some(rf) = &self.report_file {
            let _ = cuprof_core::config::report::append(rf, &opened);
        }
        crate::state::captures::opened(cycle, &opened);
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

fn meta(cfg: &Config, t: &Tracer) -> TraceMeta {
    let realtime = clock_ns(libc::CLOCK_REALTIME);
    let hostname = hostname();
    TraceMeta {
        devices: Vec::new(),
        rank: cfg.rank.rank,
        world_size: cfg.rank.world_size,
        local_rank: cfg.rank.local_rank,
        // Set per file, from what the operator recorder saw.
        distributed: false,
        pid: t.pid,
        process_name: std::fs::read_to_string("/proc/self/comm")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        run_id: cfg
            .run_id
            .clone()
            .unwrap_or_else(|| crate::host::process::run_id(cfg.rank.world_size, &hostname)),
        name: cfg.name.clone(),
        hostname,
        cupti_version: t.cupti_version,
        cycle: 1,
        clock_realtime_ns: realtime,
        clock_monotonic_ns: clock_ns(libc::CLOCK_MONOTONIC),
        window: cfg.window_text(),
        operators: None,
        base_time_ns: base_time_ns(realtime),
        trace_name: String::new(),
    }
}

/// The session for this process's traces, as `cfg` asks.
pub fn session(cfg: &Config, t: &Tracer) -> Session {
    let sink = FileSink {
        dir: cfg.dir.clone(),
        name: cfg.name.clone(),
        rank: cfg.rank.rank,
        multi_cycle: cfg.capture.multi_cycle(),
        tensorboard: cfg.tensorboard,
        report_file: cfg.report_file.clone(),
    };
    let mut session = Session::new(
        meta(cfg, t),
        cfg.gzip_level,
        cfg.flush_interval,
        Box::new(sink),
        t.counters.clone(),
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
    session
}
