//! One streaming pass over a trace file into compact columns: GPU operations, API calls, NVTX
//! ranges, steps, sync intervals and PyTorch operators. Strings are interned once per distinct
//! name.

use std::cell::RefCell;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

mod builder;
pub mod chunked;
pub mod columns;
pub mod inputs;
pub mod python_frames;
pub mod runs;

pub use builder::{cuda_category, is_known_host_category, rank_from_name};
pub use columns::*;
pub use inputs::trace_files;

use crate::escape::terminal::Shown;
use builder::{finish, Builder};
use cuprof_core::reader::{ReadSummary, TraceReader};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Loads `files`, one per worker of the current rayon pool, each with its own interner; the
/// names are then merged in file order, so the result is the same as loading them one after
/// the other into one interner.
pub fn load_all(files: &[PathBuf]) -> Result<(Interner, Vec<FileData>)> {
    let loaded = crate::io::jobs::map_in_order(files, |f| {
        let mut names = Interner::default();
        load(f, &mut names).map(|d| (names, d))
    })?;
    let mut names = Interner::default();
    let mut out = Vec::with_capacity(loaded.len());
    for (own, mut data) in loaded {
        data.rename(&names.absorb(own));
        out.push(data);
    }
    Ok((names, out))
}

/// The warning about a file's malformed events, as `report` and `export` print it.
pub fn malformed_warning(path: &str, skipped: u64, clamped: u64) -> String {
    format!(
        "warning: {path}: {skipped} malformed event(s) skipped (ts or dur missing, not a number, \
         not finite or beyond ±2^62 ns), {clamped} clamped (negative dur read as 0)"
    )
}

/// `` `a`, `b` `` for the categories of ignored events, escaped: they are a trace's text.
pub fn category_list(ignored: &std::collections::BTreeMap<String, u64>) -> String {
    let cats: Vec<String> = ignored
        .keys()
        .map(|c| format!("`{}`", crate::escape::terminal::printable_line(c)))
        .collect();
    cats.join(", ")
}

/// Why a file that parsed as JSON is not a trace, when it is not. `read` may cover only the
/// start of the events (a read stopped at the first one is enough to tell).
pub fn not_a_trace(path: &Path, reader: &TraceReader<'_>, read: &ReadSummary) -> Option<String> {
    if read.truncated.is_some() || read.stopped {
        return None;
    }
    let p = path.shown();
    if !reader.has_events_array() {
        let keys = &reader.meta().members;
        if keys.iter().any(|(k, _)| k == "nodes") {
            return Some(format!(
                "{p}: a PyTorch execution trace (`nodes`, no `traceEvents`), not a Chrome trace; \
                 pass the Kineto trace of the same run (`*.pt.trace.json`) or cuprof's \
                 `*.trace.json.gz`"
            ));
        }
        return Some(format!(
            "{p}: a JSON object without `traceEvents` ({} other member(s)), not a Chrome \
             trace; pass a cuprof `*.trace.json.gz` or another Kineto/Chrome JSON trace",
            keys.len()
        ));
    }
    if reader.is_bare_array() && read.events == 0 {
        return Some(format!(
            "{p}: an empty JSON array, with no trace events; pass a cuprof `*.trace.json.gz` or \
             another Kineto/Chrome JSON trace"
        ));
    }
    None
}

/// The rank each file is counted under: its own when it has one, else the next ranks after
/// every known one, in file order (what `report`, `merge` and `export` all number by). A
/// crafted rank at the 64-bit limit saturates instead of overflowing.
pub fn number_ranks(known: &[Option<i64>]) -> Vec<i64> {
    let mut next = known
        .iter()
        .flatten()
        .max()
        .map_or(0, |r| r.saturating_add(1));
    known
        .iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                let this = next;
                next = next.saturating_add(1);
                this
            })
        })
        .collect()
}

/// Every file's bar, drawn together: files are read by several workers at once, and bars
/// drawn on their own would overwrite each other's line.
fn bars() -> &'static MultiProgress {
    static BARS: std::sync::OnceLock<MultiProgress> = std::sync::OnceLock::new();
    BARS.get_or_init(MultiProgress::new)
}

static SHOW_BARS: AtomicBool = AtomicBool::new(false);

/// Draws [`progress`] bars on the process's stderr when it is a terminal, from now on. The
/// `cuprof` binary asks for them; a program using the library in-process (a test) gets none,
/// its stderr being its own.
pub fn show_progress_bars() {
    SHOW_BARS.store(true, Ordering::Relaxed);
}

/// A progress bar over `reader` that appears once the read has taken more than a second (only
/// after [`show_progress_bars`], and only on a terminal). Call `finish_and_clear` on what the
/// returned cell holds when done.
pub fn progress(reader: &mut TraceReader<'_>, path: &Path) -> Rc<RefCell<Option<ProgressBar>>> {
    let bar: Rc<RefCell<Option<ProgressBar>>> = Rc::new(RefCell::new(None));
    if !SHOW_BARS.load(Ordering::Relaxed) {
        return bar;
    }
    let total = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let cell = bar.clone();
    let started = Instant::now();
    let label = path.shown().to_string();
    reader.on_progress(move |p| {
        let mut b = cell.borrow_mut();
        if b.is_none() && started.elapsed() > Duration::from_secs(1) {
            let pb = bars().add(ProgressBar::new(total.max(p.compressed)));
            pb.set_style(
                ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            pb.set_message(label.clone());
            *b = Some(pb);
        }
        if let Some(pb) = b.as_ref() {
            pb.set_position(p.compressed);
        }
    });
    bar
}

/// Reads `path` in one pass, or, when cuprof's writer indexed it, its chunks on every worker
/// of the current rayon pool (the same columns: [`chunked`]). A progress bar appears when a
/// read in one pass takes more than a second.
pub fn load(path: &Path, names: &mut Interner) -> Result<FileData> {
    if let Some(data) = chunked::load(path, names) {
        return Ok(data);
    }
    let mut reader = TraceReader::open(path)?;
    let bar = progress(&mut reader, path);
    let mut b = Builder::new(names, path);
    // The reader's errors name the file already: no context, so the message stays one line.
    let read = reader.read_events(|e| {
        b.event(e);
        ControlFlow::Continue(())
    });
    if let Some(pb) = bar.borrow_mut().take() {
        pb.finish_and_clear();
    }
    let read = read?;
    if let Some(why) = not_a_trace(path, &reader, &read) {
        bail!(why);
    }
    let Builder { data, frames, .. } = b;
    Ok(finish(data, frames, names, reader.meta().clone(), read))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert!(is_comm_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
        assert!(is_comm_kernel("void ncclKernel_AllGather(ncclWork*)"));
        assert!(is_comm_kernel("NCCL_custom"));
        assert!(!is_comm_kernel("sm90_gemm_nc"));
        assert!(is_sync_call("cudaDeviceSynchronize"));
        assert!(is_sync_call("cuStreamSynchronize"));
        assert!(!is_sync_call("cudaLaunchKernel"));
        assert_eq!(step_number("ProfilerStep#12"), Some(12));
        assert_eq!(step_number("ProfilerStep"), None);
        assert_eq!(
            rank_from_name(Path::new("/d/run-rank12-cycle2.trace.json.gz")),
            Some(12)
        );
        assert_eq!(rank_from_name(Path::new("/d/run.trace.json.gz")), None);
    }
}
