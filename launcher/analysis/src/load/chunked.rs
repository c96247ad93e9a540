//! One trace file read on every core: the chunks cuprof's writer indexed, each inflated and parsed on its own worker, joined in order.
//!
//! Each chunk loads into columns of its own ([`Builder`], its own [`Interner`]); they are
//! joined in file order ([`Interner::absorb`], [`FileData::append`]), which numbers names and
//! threads as one read front to back would, so every figure is the same. Anything unexpected
//! (no index, an index the file contradicts, a chunk whose length or CRC-32 differs, one that
//! does not end where the next starts, an event the reader refuses) gives `None`, and the caller
//! reads the file in one pass, which also says what is wrong with it, if anything.

use std::path::Path;

use cuprof_core::reader::chunks::{follows, Chunks};
use cuprof_core::reader::{Boundary, Detail, TraceMeta};
use rayon::prelude::*;

use super::builder::{finish, Builder};
use super::columns::{FileData, Interner};
use super::python_frames::PyFrame;

/// One chunk's columns.
struct Part {
    names: Interner,
    data: FileData,
    frames: Vec<PyFrame>,
    meta: TraceMeta,
    events: u64,
    /// Where the chunk starts and ends (`None` for the first's start and the last's end).
    start: Option<Boundary>,
    end: Option<Boundary>,
}

fn part(chunks: &Chunks, i: usize, path: &Path) -> Option<Part> {
    let mut names = Interner::default();
    let mut b = Builder::new(&mut names, path);
    let done = chunks.read_chunk(i, path, Detail::Full, |e| {
        b.event(e);
        true
    })?;
    let Builder { data, frames, .. } = b;
    Some(Part {
        names,
        data,
        frames,
        meta: done.meta,
        events: done.events,
        start: done.start,
        end: done.end,
    })
}

/// `path`'s columns read chunk by chunk on the current pool, or `None` (see the module's doc).
pub fn load(path: &Path, names: &mut Interner) -> Option<FileData> {
    load_timed(path, names).map(|(data, _)| data)
}

/// Wall time of a read by chunks: the chunks inflated and parsed (on every worker), then
/// joined (on one): what the benchmark's serial fraction is measured from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Phases {
    pub chunks: std::time::Duration,
    pub join: std::time::Duration,
}

/// [`load`], timing its two phases.
pub fn load_timed(path: &Path, names: &mut Interner) -> Option<(FileData, Phases)> {
    let started = std::time::Instant::now();
    let chunks = Chunks::open(path)?;
    let n = chunks.index.chunks.len();
    let parts: Vec<Option<Part>> = (0..n)
        .into_par_iter()
        .map(|i| part(&chunks, i, path))
        .collect();
    let parts = parts.into_iter().collect::<Option<Vec<Part>>>()?;
    let parsed = std::time::Instant::now();
    // Each chunk was read from the state the one before it ends in.
    if parts.windows(2).any(|w| !follows(w[0].end, w[1].start)) {
        return None;
    }
    let mut parts = parts.into_iter();
    let Part {
        names: mut own,
        mut data,
        mut frames,
        mut meta,
        mut events,
        ..
    } = parts.next()?;
    for p in parts {
        let renamed = own.absorb(p.names);
        let mut later = p.data;
        later.rename(&renamed);
        let threads = data.append(later);
        frames.extend(p.frames.into_iter().map(|f| PyFrame {
            thread: threads[f.thread as usize],
            name: renamed[f.name as usize],
            ..f
        }));
        meta.extend(p.meta);
        events += p.events;
    }
    let mut data = finish(data, frames, &mut own, meta, chunks.summary(events));
    // Into the caller's interner, as a read in one pass into it would have numbered them.
    data.rename(&names.absorb(own));
    let phases = Phases {
        chunks: parsed - started,
        join: parsed.elapsed(),
    };
    Some((data, phases))
}
