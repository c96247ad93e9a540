//! The `files` table: one row per input file, with what its header says (rank, host, clock
//! anchor, devices) and what was lost (`cuprofStats`) or cut (a file that ends early).

use std::path::{Path, PathBuf};

use anyhow::Result;
use cuprof_core::reader::{ReadSummary, TraceMeta};

use super::schema;
use super::table::Table;
use crate::escape::terminal::Shown;

/// What the files table needs of one exported file.
pub struct FileRow {
    pub path: PathBuf,
    pub rank: i64,
    pub cycle: i64,
    pub meta: TraceMeta,
    pub read: ReadSummary,
    /// How its GPU work names its operator (`AttributionRule::column`).
    pub operator_link: &'static str,
}

/// `DIR/files/files.parquet`.
pub fn write(dir: &Path, rows: &[FileRow]) -> Result<()> {
    let d = dir.join("files");
    std::fs::create_dir_all(&d)
        .map_err(|e| anyhow::anyhow!("{}: cannot create the directory: {e}", d.shown()))?;
    let mut t = Table::create(&d.join("files.parquet"), schema::FILES)?;
    for f in rows {
        let m = &f.meta;
        let st = m.stats.as_ref();
        let u = |v: u64| Some(v as i64);
        let devices = (!m.devices.is_empty()).then(|| {
            m.devices
                .iter()
                .map(|d| {
                    format!(
                        "{}: {}",
                        d.id.map(|i| i.to_string()).unwrap_or_else(|| "?".into()),
                        d.name.as_deref().unwrap_or("?")
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        });
        t.row()
            .text(Some(&f.path.to_string_lossy()))
            .int(f.rank)
            .int(f.cycle)
            .int(m.world_size)
            .text(m.hostname.as_deref())
            .int(m.pid)
            .text(m.cuprof_version.as_deref())
            .text(m.window.as_deref())
            .text(m.trace_name.as_deref())
            .text(devices.as_deref())
            .int(m.base_time_ns)
            .int(m.clock.map(|c| c.realtime_ns))
            .int(m.clock.map(|c| c.monotonic_ns))
            .int(f.read.events as i64)
            .int(f.read.compressed_bytes as i64)
            .int(f.read.uncompressed_bytes as i64)
            .text(f.read.truncated.as_ref().map(|t| t.to_string()).as_deref())
            .int(st.and_then(|s| u(s.events)))
            .int(st.and_then(|s| u(s.dropped_channel)))
            .int(st.and_then(|s| u(s.dropped_cupti)))
            .int(st.and_then(|s| u(s.dropped_buffers)))
            .int(st.and_then(|s| u(s.kernels_without_timestamps)))
            .int(st.and_then(|s| u(s.memory_events_dropped)))
            .boolean(st.and_then(|s| s.complete))
            .text(Some(f.operator_link))
            .end()?;
    }
    t.finish()?;
    Ok(())
}
