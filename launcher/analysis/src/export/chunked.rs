//! One trace file exported on every core: runs of the chunks cuprof's writer indexed, each parsed and encoded into row groups on its own worker, appended to the tables in order.
//!
//! The chunks (`docs/trace-format.md`, "The gzip layout") are cut into runs of consecutive
//! chunks ([`run_len`]: 4 to 16 chunks each, up to 32 runs in a file of up to 512 chunks). A
//! worker reads a run's chunks (inflating them as it parses them) into in-memory tables whose
//! batches it encodes at once ([`super::groups::Encoder`]), so a run ends as compressed row
//! groups, one or more per table that got rows. Runs go in windows of
//! twice the pool's workers; after each window the row groups are appended to each table's file
//! in chunk order. A row depends on its event alone, and what a file counts (skipped events,
//! launches) adds up, so the tables hold the rows of a read front to back, in its order; only
//! where the row groups are cut differs.
//!
//! Anything unexpected (no index, an index the file contradicts, a chunk whose length or
//! CRC-32 differs, one that does not end where the next starts, an event the reader refuses)
//! gives `None` before any table is renamed into place (the temporary files are removed), and
//! the caller exports the file in one pass, which also says what is wrong with it, if anything.

use std::ops::Range;
use std::path::Path;

use anyhow::Result;
use cuprof_core::reader::chunks::{follows, Chunks};
use cuprof_core::reader::{Boundary, Detail, TraceMeta};
use parquet::arrow::arrow_writer::ArrowRowGroupWriterFactory;
use rayon::prelude::*;

use super::groups::{Encoder, Group, GroupFile};
use super::rows::{table_path, Counts, Exported, FileTables, Launches, Skipped};
use super::table::Table;

/// Runs a file's chunks are cut into, at most (26 to 32 for a file of 128 to 512 chunks), so
/// that the file spreads over that many workers...
const RUNS: usize = 32;
/// ... unless a run would hold fewer chunks than this (4 of the writer's 4 MiB: row groups of
/// tens of thousands of rows rather than a few thousand; a file of 16 MiB or less is one run)...
const MIN_RUN_CHUNKS: usize = 4;
/// ... or more than this (64 MiB of JSON: a row group per table and run).
const MAX_RUN_CHUNKS: usize = 16;

/// Chunks per run for a file of `chunks` chunks: the same for any number of workers, so the
/// files' row groups are too.
pub fn run_len(chunks: usize) -> usize {
    chunks.div_ceil(RUNS).clamp(MIN_RUN_CHUNKS, MAX_RUN_CHUNKS)
}

/// One run's row groups (by table, in table order) and what it counted.
struct Run {
    groups: Vec<Vec<Group>>,
    skipped: Skipped,
    launches: Launches,
    meta: TraceMeta,
    events: u64,
    /// Where its first chunk starts (`None` for the file's first) and its last ends (`None`
    /// for the file's last, which ended the trace cleanly).
    start: Option<Boundary>,
    end: Option<Boundary>,
}

/// Reads the chunks `range` into row groups encoded with `factories` (by table, in order).
fn run(
    chunks: &Chunks,
    range: Range<usize>,
    path: &Path,
    factories: &[(&'static str, ArrowRowGroupWriterFactory)],
) -> Option<Run> {
    let mut tables = FileTables::build(|table, cols| {
        let (_, factory) = factories
            .iter()
            .find(|(t, _)| *t == table)
            .expect("a file per table");
        Ok(Table::with_sink(path, cols, Encoder::new(factory, cols)))
    })
    .ok()?;
    let mut meta: Option<TraceMeta> = None;
    let (mut start, mut end, mut events) = (None, None, 0);
    for i in range.clone() {
        let done = chunks.read_chunk(i, path, Detail::Full, |e| tables.event(e).is_ok())?;
        if i == range.start {
            start = done.start;
        } else if !follows(end, done.start) {
            // Each chunk was read from the state the one before it ends in.
            return None;
        }
        end = done.end;
        match &mut meta {
            Some(m) => m.extend(done.meta),
            None => meta = Some(done.meta),
        }
        events += done.events;
    }
    let (tables, skipped, launches) = tables.into_parts();
    let mut groups = Vec::with_capacity(tables.len());
    for (_, t) in tables {
        let (encoder, _) = t.into_sink().ok()?;
        groups.push(encoder.finish().ok()?);
    }
    Some(Run {
        groups,
        skipped,
        launches,
        meta: meta?,
        events,
        start,
        end,
    })
}

/// Exports `path` into `DIR/TABLE/PARTITION/NAME` by chunks on the current pool: `Ok(None)`
/// when it cannot (see the module's doc; nothing is left in the tables' place), an error when
/// a table cannot be written.
pub fn export(path: &Path, dir: &Path, partition: &str, name: &str) -> Result<Option<Exported>> {
    let Some(chunks) = Chunks::open(path) else {
        return Ok(None);
    };
    let n = chunks.index.chunks.len();
    let mut files = Vec::new();
    let mut factories = Vec::new();
    for (table, cols) in super::schema::TABLES.iter().filter(|(t, _)| *t != "files") {
        let (file, factory) = GroupFile::create(&table_path(dir, table, partition, name)?, cols)?;
        files.push(file);
        factories.push((*table, factory));
    }
    let runs: Vec<Range<usize>> = (0..n)
        .step_by(run_len(n))
        .map(|s| s..(s + run_len(n)).min(n))
        .collect();
    let mut counts: Vec<u64> = vec![0; files.len()];
    let mut skipped = Skipped::default();
    let mut launches = Launches::default();
    let mut meta: Option<TraceMeta> = None;
    let mut events = 0;
    let mut end: Option<Boundary> = None;
    // Twice the workers per window: one slow run leaves the others work, and at most that many
    // runs' row groups wait in memory.
    let window = 2 * rayon::current_num_threads().max(1);
    for (w, batch) in runs.chunks(window).enumerate() {
        let done: Vec<Option<Run>> = batch
            .par_iter()
            .map(|r| run(&chunks, r.clone(), path, &factories))
            .collect();
        for (k, r) in done.into_iter().enumerate() {
            let Some(r) = r else {
                return Ok(None);
            };
            let first = w == 0 && k == 0;
            // The first run starts the file; every other starts where the one before ended.
            if (first && r.start.is_some()) || (!first && !follows(end, r.start)) {
                return Ok(None);
            }
            end = r.end;
            for ((file, count), groups) in files.iter_mut().zip(&mut counts).zip(r.groups) {
                for g in groups {
                    *count += g.rows as u64;
                    file.append(g)?;
                }
            }
            skipped.add(r.skipped);
            launches.add(r.launches);
            match &mut meta {
                Some(m) => m.extend(r.meta),
                None => meta = Some(r.meta),
            }
            events += r.events;
        }
    }
    // The last run ended the trace (its `end` is `None` only then).
    if end.is_some() {
        return Ok(None);
    }
    let Some(meta) = meta else {
        return Ok(None);
    };
    let mut table_counts = Counts::new();
    for ((file, count), (table, _)) in files.into_iter().zip(counts).zip(&factories) {
        file.finish()?;
        table_counts.push((table, count));
    }
    let read = chunks.summary(events);
    Ok(Some(Exported {
        read,
        counts: table_counts,
        skipped,
        rule: launches.rule(),
        meta,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_spread_a_file_then_grow_to_their_cap() {
        let runs = |n: usize| n.div_ceil(run_len(n));
        assert_eq!([run_len(2), run_len(128), run_len(129)], [4, 4, 5]);
        assert_eq!(
            [runs(2), runs(28), runs(128), runs(129), runs(256)],
            [1, 7, 32, 26, 32]
        );
        assert_eq!([run_len(512), run_len(513), run_len(5459)], [16, 16, 16]);
        assert_eq!(runs(5459), 342);
    }
}
