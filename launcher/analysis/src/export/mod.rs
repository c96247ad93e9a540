//! `cuprof export PATH... -o DIR`: traces (cuprof's or any Kineto trace) as a Parquet dataset
//! that DuckDB, Spark, pandas or polars query directly.
//!
//! One directory per table, Hive-partitioned by rank and profiling cycle:
//! `DIR/kernels/rank=0/cycle=1/NAME.parquet`, one file per input file and table (empty tables
//! included, so a query over `DIR/TABLE/**/*.parquet` always finds files), plus
//! `DIR/files/files.parquet`, one row per input. The columns are in [`schema`] and
//! `docs/tables.md`.
//!
//! Each input is read once by the streaming reader and written as it is read, a batch of rows
//! at a time ([`table`]), so memory does not grow with the trace. Files are exported in
//! parallel, one per worker ([`crate::io::jobs`], `-j N`). A file cuprof's writer indexed (its
//! gzip cut into chunks) is itself read and encoded on every worker, a run of chunks each,
//! with the same rows in the same order ([`chunked`]); any other file, or one whose index
//! does not hold, is read front to back. Every output file is written under a temporary name
//! and renamed into place when complete.

mod args;
mod chunked;
mod files;
mod groups;
mod rows;
pub mod schema;
mod table;

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cuprof_core::reader::TraceReader;

use crate::escape::terminal::Shown;
use crate::io::console::{outln, Console};
use crate::io::output::same_file;
use crate::load::trace_files;
use crate::load::{category_list, malformed_warning, not_a_trace, number_ranks, rank_from_name};
use files::FileRow;

#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// Trace files (`*.trace.json.gz`, plain JSON too), or directories of rank traces.
    pub paths: Vec<PathBuf>,
    /// The dataset's directory (created if needed; files of the same name are replaced).
    pub out: PathBuf,
    pub jobs: crate::io::jobs::Jobs,
}

/// What the header of a file says about where its rows go.
struct Header {
    rank: Option<i64>,
    cycle: i64,
}

/// `cuprof export`: the dataset written, and what it holds printed on `stdout` (with a note
/// per input cut short or with events skipped). `stderr` gets the notices (`export` has none
/// today); errors are returned, not printed.
pub fn export(
    args: &ExportOptions,
    stdout: &mut (impl Write + Send),
    stderr: &mut (impl Write + Send),
) -> Result<()> {
    let mut con = Console::new(stdout, stderr);
    args.jobs.install(|| export_all(args, &mut con))?
}

/// `export`, one file per worker of the current rayon pool.
fn export_all(args: &ExportOptions, con: &mut Console) -> Result<()> {
    let inputs = trace_files(&args.paths)?;
    refuse_output(&args.out, &args.paths, &inputs)?;

    // Ranks first: a file without one gets the next rank after every known one, in file order,
    // as `cuprof report` numbers it; that needs every header before any row is written.
    let headers = crate::io::jobs::map_in_order(&inputs, |p| header(p))?;
    let known: Vec<Option<i64>> = headers.iter().map(|h| h.rank).collect();
    let ranks = number_ranks(&known);
    let names = file_names(&inputs);

    std::fs::create_dir_all(&args.out).with_context(|| {
        format!(
            "{}: cannot create the output directory; pick a writable -o DIR",
            args.out.shown()
        )
    })?;
    let indices: Vec<usize> = (0..inputs.len()).collect();
    let done = crate::io::jobs::map_in_order(&indices, |&i| {
        let path = &inputs[i];
        let partition = format!("rank={}/cycle={}", ranks[i], headers[i].cycle);
        let exported = match chunked::export(path, &args.out, &partition, &names[i])? {
            Some(e) => e,
            None => {
                let mut reader = TraceReader::open(path)?;
                let tables = rows::FileTables::create(&args.out, &partition, &names[i])?;
                tables.fill(&mut reader)?
            }
        };
        let rows::Exported {
            read,
            counts,
            skipped,
            rule,
            meta,
        } = exported;
        let row = FileRow {
            path: path.clone(),
            rank: ranks[i],
            cycle: headers[i].cycle,
            meta,
            read,
            operator_link: rule.column(),
        };
        Ok((row, (counts, skipped)))
    })?;
    let (rows, counted): (Vec<FileRow>, Vec<(rows::Counts, rows::Skipped)>) =
        done.into_iter().unzip();
    let (counts, skipped): (Vec<rows::Counts>, Vec<rows::Skipped>) = counted.into_iter().unzip();
    files::write(&args.out, &rows)?;

    let events: u64 = rows.iter().map(|r| r.read.events).sum();
    let mut totals: Vec<(&str, u64)> = schema::TABLES
        .iter()
        .filter(|(t, _)| *t != "files")
        .map(|(t, _)| (*t, 0))
        .collect();
    for c in counts.iter().flatten() {
        if let Some(t) = totals.iter_mut().find(|t| t.0 == c.0) {
            t.1 += c.1;
        }
    }
    let list: Vec<String> = totals.iter().map(|(t, n)| format!("{t} {n}")).collect();
    outln!(
        con,
        "exported {} file{} ({events} events) to {}: {}",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        args.out.shown(),
        list.join(", ")
    )?;
    for (r, skip) in rows.iter().zip(&skipped) {
        let p = r.path.shown().to_string();
        if let Some(t) = &r.read.truncated {
            outln!(con, "note: {p}: {t}")?;
        }
        if skip.malformed + skip.clamped > 0 {
            outln!(
                con,
                "{}",
                malformed_warning(&p, skip.malformed, skip.clamped)
            )?;
        }
        if !skip.ignored.is_empty() {
            outln!(
                con,
                "warning: {p}: {} event(s) of categories {} skipped: not CUDA activity nor host \
                 events, which no table holds",
                skip.ignored.values().sum::<u64>(),
                category_list(&skip.ignored)
            )?;
        }
    }
    Ok(())
}

/// Where `path`'s rows go; refuses, as `report` does, a JSON file that is not a trace (`{}`,
/// `[]`, an execution trace), before any output is created.
fn header(path: &Path) -> Result<Header> {
    let mut r = TraceReader::open(path)?;
    let meta = r.read_header()?;
    let header = Header {
        rank: meta.rank.or_else(|| rank_from_name(path)),
        cycle: meta.cycle.unwrap_or(0),
    };
    // The first event, if any, tells an empty array from a trace; reading stops there.
    let read = r.read_events(|_| std::ops::ControlFlow::Break(()))?;
    if let Some(why) = not_a_trace(path, &r, &read) {
        bail!(why);
    }
    Ok(header)
}

/// The output directory must not be an input, nor hold the input files (the dataset would be
/// mixed with the traces, and a later `export DIR` would read its own output).
fn refuse_output(out: &Path, given: &[PathBuf], inputs: &[PathBuf]) -> Result<()> {
    if let Some(p) = given.iter().find(|p| same_file(out, p)) {
        bail!(
            "{}: the output directory is one of the inputs ({}); pick another -o DIR",
            out.shown(),
            p.shown()
        );
    }
    let parent_of = |p: &Path| match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    if let Some(p) = inputs.iter().find(|p| same_file(out, &parent_of(p))) {
        bail!(
            "{}: the output directory holds an input ({}); pick another -o DIR",
            out.shown(),
            p.shown()
        );
    }
    Ok(())
}

/// `NAME.parquet` for each input: its file name less the trace suffix, with `-N` added to the
/// second and later inputs of the same name (files of two directories).
fn file_names(inputs: &[PathBuf]) -> Vec<String> {
    let mut seen = HashSet::new();
    inputs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let stem = cuprof_core::config::split_trace_suffix(&name).0.to_owned();
            let stem = if seen.insert(stem.clone()) {
                stem
            } else {
                format!("{stem}-{i}")
            };
            format!("{stem}.parquet")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_per_input() {
        let n = file_names(&[
            "a/job-rank0.trace.json.gz".into(),
            "b/job-rank0.trace.json.gz".into(),
            "c/kineto.json".into(),
        ]);
        assert_eq!(
            n,
            ["job-rank0.parquet", "job-rank0-1.parquet", "kineto.parquet"]
        );
    }
}
