//! `cuprof merge DIR`: every rank's trace in one timeline.
//!
//! * pids: rank `R`'s pid `P` becomes `R * 10_000_000 + P` (GPU ordinals and OS pids stay
//!   distinct within a rank as they were; ranks never collide); process names get a `rank R `
//!   prefix and sort indices the same offset, so each rank is one contiguous group of processes.
//! * flow ids: `R * 2^32 + id` (string ids: `rR:id`), unique across the merged file.
//! * clocks: each file's times are moved onto the reference file's (the lowest rank's) base and
//!   clock: `ts' = ts + (base_R - base_ref) - skew_R`, where `skew_R` is how far rank R's wall
//!   clock runs ahead of the reference's. Event times are CLOCK_REALTIME (CUPTI's clock), so:
//!   - on the reference's host (same `cuprof.hostname`) every process reads the one system
//!     clock: the skew is 0. The `cuprof.clock` anchors (CLOCK_REALTIME and CLOCK_MONOTONIC read
//!     at one instant) are compared all the same: on one host the monotonic clock is shared too,
//!     so `(realtime_R - monotonic_R) - (realtime_ref - monotonic_ref)` is how much the wall
//!     clock was stepped or slewed (NTP) between the two anchors; it is reported as
//!     `anchor_drift_ns`, not applied (the step moved both processes' clocks alike).
//!   - on another host the anchors cannot relate the clocks (monotonic clocks count from each
//!     host's boot). The skew is estimated from collectives instead: a NCCL kernel ends at
//!     nearly the same instant on every rank, so the skew is the median, over the communication
//!     kernels matched by (step, name, order within the step), of `end_R - end_ref`. Without a
//!     collective to match it is taken as 0 (wall clocks synchronised by NTP/PTP).
//!
//! The output says which case applied to each rank.
//!
//! Layout: the header marks the file as merged (`"cuprofMerged": {"run_id": ID, "name": NAME,
//! "ranks": [R, ...]}`: the run and ranks it holds, so that analysis never counts it beside its
//! rank files; `crate::load::runs`); the `cuprof` member,
//! whose `merged.ranks` table holds each rank's event count and truncation, comes after
//! `traceEvents`, once the events have been counted. The file is written to a temporary file
//! beside `-o` and renamed over it at the end: an existing `-o` file is intact until then.
//!
//! Speed: one file per worker, which reads the rank's events, rewrites them and deflates them
//! into a segment (a temporary file beside `-o`); the segments are spliced in rank order into
//! one gzip member. Each segment's blocks are deflated on every free worker too
//! ([`crate::io::gzip_out`]), so one large rank uses all cores as well: compression on one thread
//! is what held merge to a third of report's speed. A rank file cuprof's writer indexed is also
//! read on every worker, a chunk each ([`chunked`]); any other is read front to back
//! ([`rank`]). The worker reading a rank does less than
//! `report` does, plus a copy: the reader decodes a plain event by hand and says where its
//! `pid`, `ts`, `id` and `args` stand (`Event::spans`; other events: serde_json, then a scan
//! that stops after the last member rewritten), and each event's bytes go out as they are but
//! for those values, with no allocation per event.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use cuprof_core::reader::{TraceMeta, TraceReader};
use flate2::Compression;
use serde::Serialize;

use crate::escape::terminal::Shown;
use crate::format::{dur, Table};
use crate::io::console::{outln, Console};
use crate::io::gzip_out::ParGzWriter;
use crate::io::output::Staged;
use crate::load::runs::{choose, inputs_named, merged_mark, MergedMark, MERGED_MARK};
use crate::load::{load, number_ranks, rank_from_name, Interner, OpKind};
use rank::{json_str, RankWritten};
pub use rank::{ID_STRIDE, PID_STRIDE};

mod chunked;
mod rank;

#[derive(Clone, Debug)]
pub struct MergeOptions {
    /// Directory of rank traces (or the trace files themselves).
    pub paths: Vec<PathBuf>,
    /// The merged trace to write (gzip).
    pub out: PathBuf,
    /// The run to merge, by name or id, when the inputs hold several (default: the newest).
    pub run: Option<String>,
    pub jobs: crate::io::jobs::Jobs,
}

/// The merged trace written unless asked (`-o`).
pub const DEFAULT_OUT: &str = "merged.trace.json.gz";

impl MergeOptions {
    /// The rank traces of `paths` merged into [`DEFAULT_OUT`], on every core.
    pub fn new(paths: Vec<PathBuf>) -> Self {
        MergeOptions {
            paths,
            out: PathBuf::from(DEFAULT_OUT),
            run: None,
            jobs: crate::io::jobs::Jobs::default(),
        }
    }
}

/// How one input file was placed on the merged timeline.
#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    pub rank: i64,
    pub file: String,
    pub hostname: Option<String>,
    /// Estimated wall-clock skew of this file against the reference, nanoseconds.
    pub skew_ns: i64,
    /// What was added to every `ts` of this file, nanoseconds.
    pub shift_ns: i64,
    /// How the skew was obtained.
    pub method: String,
    /// Same host only: change of `realtime - monotonic` between the reference's anchor and this
    /// file's (NTP steps or slew in between); informative, not applied.
    pub anchor_drift_ns: Option<i64>,
    pub pid_offset: i64,
    pub events: u64,
    pub truncated: Option<String>,
    /// Events whose bytes were not all UTF-8, copied with U+FFFD for each bad sequence.
    #[serde(skip)]
    pub not_utf8: u64,
}

/// Deflate level of the merged file. zlib-rs's level 2 takes about two thirds of level 3's time
/// for 2% more bytes (241 MB of JSON: 19.5 MB against 19.1 MB); level 1 is faster still but
/// 37% larger (26.1 MB). BENCHMARKS.md, "Offline commands".
const MERGED_LEVEL: Compression = Compression::new(2);

/// Absolute end times (base + end, ns) of a file's communication kernels, keyed by (step number
/// of the launching call, or -1; kernel name; order among those of that step and name).
pub(crate) type CollectiveEnds = BTreeMap<(i64, String, usize), i64>;

pub(crate) fn collective_ends(path: &Path) -> Result<CollectiveEnds> {
    let mut names = Interner::default();
    let f = load(path, &mut names)?;
    let base = f.meta.base_time_ns.unwrap_or(0);
    let mut by_corr: BTreeMap<i64, i64> = BTreeMap::new();
    for a in &f.apis {
        if a.corr >= 0 {
            by_corr.entry(a.corr).or_insert(a.start);
        }
    }
    let mut steps: Vec<(i64, i64, i64)> = f
        .steps
        .iter()
        .map(|s| (s.start, s.start + s.dur, s.number))
        .collect();
    steps.sort_unstable();
    let step_of = |t: i64| -> i64 {
        let i = steps.partition_point(|s| s.0 <= t);
        match i.checked_sub(1).map(|i| steps[i]) {
            Some((_, end, n)) if t <= end => n,
            _ => -1,
        }
    };
    let mut comm: Vec<(i64, i64, u32, i64)> = f
        .ops
        .iter()
        .filter(|o| o.kind == OpKind::Comm)
        .map(|o| {
            let step = by_corr.get(&o.corr).map_or(-1, |&t| step_of(t));
            (step, o.start, o.name, o.end)
        })
        .collect();
    comm.sort_unstable();
    let mut out = CollectiveEnds::new();
    let mut seen: BTreeMap<(i64, u32), usize> = BTreeMap::new();
    for (step, _, name, end) in comm {
        let k = seen.entry((step, name)).or_default();
        out.insert(
            (step, names.name(name).to_string(), *k),
            base.saturating_add(end),
        );
        *k += 1;
    }
    Ok(out)
}

/// Median of `end_R - end_ref` over the collectives both have, and how many matched.
pub(crate) fn collective_skew(
    r: &CollectiveEnds,
    reference: &CollectiveEnds,
) -> Option<(i64, usize)> {
    let mut d: Vec<i64> = r
        .iter()
        .filter_map(|(k, e)| reference.get(k).map(|re| e.saturating_sub(*re)))
        .collect();
    if d.is_empty() {
        return None;
    }
    d.sort_unstable();
    let n = d.len();
    let median = if n % 2 == 1 {
        d[n / 2]
    } else {
        ((i128::from(d[n / 2 - 1]) + i128::from(d[n / 2])).div_euclid(2)) as i64
    };
    Some((median, n))
}

/// Skew, method and anchor drift of `m` against the reference `r`; `collectives` is the
/// collective-based estimate, used across hosts.
pub(crate) fn skew(
    m: &TraceMeta,
    r: &TraceMeta,
    collectives: impl FnOnce() -> Result<Option<(i64, usize)>>,
) -> Result<(i64, String, Option<i64>)> {
    if let (Some(h), Some(rh)) = (&m.hostname, &r.hostname) {
        if h == rh {
            let drift = match (m.clock, r.clock) {
                (Some(c), Some(rc)) => Some(
                    (c.realtime_ns.saturating_sub(c.monotonic_ns))
                        .saturating_sub(rc.realtime_ns.saturating_sub(rc.monotonic_ns)),
                ),
                _ => None,
            };
            return Ok((0, format!("same host {h}: one CLOCK_REALTIME"), drift));
        }
    }
    Ok(match collectives()? {
        Some((s, n)) => (
            s,
            format!("other host: median end offset of {n} matched NCCL kernels"),
            None,
        ),
        None => (
            0,
            "other host, no NCCL kernels to match: assumed 0 (NTP)".to_string(),
            None,
        ),
    })
}

/// `cuprof merge`: the merged trace written, and how each rank was placed printed on
/// `stdout`; inputs skipped are noted on `stderr`. Errors are returned, not printed.
pub fn merge(
    args: &MergeOptions,
    stdout: &mut (impl Write + Send),
    stderr: &mut (impl Write + Send),
) -> Result<()> {
    let mut con = Console::new(stdout, stderr);
    args.jobs.install(|| merge_on_pool(args, &mut con))?
}

/// `merge`, its reads and compression on the current rayon pool.
fn merge_on_pool(args: &MergeOptions, con: &mut Console) -> Result<()> {
    // A file named as an input cannot be the output; one found in a directory can only be if it
    // is a merged trace (an earlier output, skipped below and replaced).
    let named: Vec<PathBuf> = args.paths.iter().filter(|p| !p.is_dir()).cloned().collect();
    crate::io::output::refuse_input(&args.out, &named)?;
    let chosen = choose(&args.paths, args.run.as_deref(), &inputs_named(&args.paths))?;
    for n in &chosen.notes {
        con.note(n);
    }
    let files = chosen.files;
    // Each header, and what is wrong with a file that is JSON but no trace (`{}`, `[]`): read
    // up to its first event, as `report` and `export` refuse it.
    let headers = crate::io::jobs::map_in_order(&files, |p| {
        let mut r = TraceReader::open(p)?;
        let meta = r.read_header()?.clone();
        let read = r.read_events(|_| ControlFlow::Break(()))?;
        Ok((meta, crate::load::not_a_trace(p, &r, &read)))
    })?;
    let mut inputs: Vec<(PathBuf, TraceMeta)> = Vec::new();
    for (p, (meta, not_a_trace)) in files.into_iter().zip(headers) {
        if let Some(why) = not_a_trace {
            bail!("{why}");
        }
        if merged_mark(&meta).is_some() {
            con.note(&format!(
                "skipping {}: it is itself a merged trace",
                p.shown()
            ));
            continue;
        }
        crate::io::output::refuse_input(&args.out, std::slice::from_ref(&p))?;
        inputs.push((p, meta));
    }
    if inputs.is_empty() {
        bail!(
            "{}: no rank traces to merge; pass the directory cuprof wrote them to",
            args.paths
                .iter()
                .map(|p| p.shown().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let known: Vec<Option<i64>> = inputs
        .iter()
        .map(|(p, m)| m.rank.or_else(|| rank_from_name(p)))
        .collect();
    let mut ranked: Vec<(i64, PathBuf, TraceMeta)> = number_ranks(&known)
        .into_iter()
        .zip(inputs)
        .map(|(r, (p, m))| (r, p, m))
        .collect();
    ranked.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let placements = write_merged(&args.out, &ranked)?;

    let mut t = Table::new(&[
        ">rank",
        "file",
        "host",
        ">skew vs ref",
        ">shift",
        ">events",
        "skew source",
    ]);
    for p in &placements {
        let mut how = p.method.clone();
        if let Some(d) = p.anchor_drift_ns.filter(|d| *d != 0) {
            how.push_str(&format!(
                " (anchors drifted {}, not applied)",
                dur(d as f64)
            ));
        }
        t.row(vec![
            p.rank.to_string(),
            p.file.clone(),
            p.hostname.clone().unwrap_or_default(),
            dur(p.skew_ns as f64),
            dur(p.shift_ns as f64),
            p.events.to_string(),
            how,
        ]);
    }
    con.print(&t.text())?;
    for p in &placements {
        if let Some(tr) = &p.truncated {
            outln!(
                con,
                "warning: {} is cut short: {tr}; merged what was read",
                p.file
            )?;
        }
        if p.not_utf8 > 0 {
            outln!(
                con,
                "warning: {}: {} event(s) held bytes that are not UTF-8; merged with U+FFFD in \
                 their place",
                p.file,
                p.not_utf8
            )?;
        }
    }
    let max_skew = placements
        .iter()
        .map(|p| p.skew_ns.abs())
        .max()
        .unwrap_or(0);
    outln!(
        con,
        "estimated clock skew against rank {} (max |skew| {}); wrote {} ({} ranks, {} events)",
        placements[0].rank,
        dur(max_skew as f64),
        args.out.shown(),
        placements
            .iter()
            .map(|p| p.rank)
            .collect::<BTreeSet<_>>()
            .len(),
        placements.iter().map(|p| p.events).sum::<u64>()
    )
}

fn write_merged(out: &Path, ranked: &[(i64, PathBuf, TraceMeta)]) -> Result<Vec<Placement>> {
    let (_, _, reference) = &ranked[0];
    let base0 = reference.base_time_ns.unwrap_or(0);
    let mut reference_ends: Option<CollectiveEnds> = None;
    let mut placements: Vec<Placement> = Vec::with_capacity(ranked.len());
    for (i, (rank, path, m)) in ranked.iter().enumerate() {
        // The reference is placed by its own clock. Without a host name, `skew` would match its
        // collectives against themselves: two full loads of the file for a skew of 0, which made
        // merging one rank of many small events 0.4x report's speed (BENCHMARKS.md).
        let (skew_ns, method, anchor_drift_ns) = if i == 0 && m.hostname.is_none() {
            (0, "the reference: its own clock".to_string(), None)
        } else {
            skew(m, reference, || {
                if reference_ends.is_none() {
                    reference_ends = Some(collective_ends(&ranked[0].1)?);
                }
                let mine = collective_ends(path)?;
                Ok(collective_skew(
                    &mine,
                    reference_ends.as_ref().expect("loaded"),
                ))
            })?
        };
        placements.push(Placement {
            rank: *rank,
            file: path.to_string_lossy().into_owned(),
            hostname: m.hostname.clone(),
            skew_ns,
            shift_ns: m
                .base_time_ns
                .unwrap_or(base0)
                .saturating_sub(base0)
                .saturating_sub(skew_ns),
            method,
            anchor_drift_ns,
            pid_offset: rank.saturating_mul(PID_STRIDE),
            events: 0,
            truncated: None,
            not_utf8: 0,
        });
    }

    let (staged, file) = Staged::create(out)?;
    let wr = |e: std::io::Error| {
        anyhow::Error::new(e).context(format!("{}: cannot write the merged trace", out.shown()))
    };
    let mut w =
        ParGzWriter::new(BufWriter::with_capacity(1 << 20, file), MERGED_LEVEL).map_err(wr)?;
    // The mark: which run and ranks the file holds, so that analysis never counts it beside
    // them (load::runs).
    // The value every input shares, else none.
    let same = |all: BTreeSet<Option<String>>| {
        if all.len() == 1 {
            all.into_iter().next().flatten()
        } else {
            None
        }
    };
    let mark = MergedMark {
        run_id: same(ranked.iter().map(|(_, _, m)| m.run_id.clone()).collect()),
        name: same(
            ranked
                .iter()
                .map(|(_, p, m)| m.run_name.clone().or_else(|| crate::load::runs::stem(p)))
                .collect(),
        ),
        ranks: ranked
            .iter()
            .map(|(r, _, _)| *r)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
    };
    let mark = crate::escape::json::to_string(&mark).map_err(|e| wr(std::io::Error::other(e)))?;
    let devices = reference
        .members
        .iter()
        .find(|(k, _)| k == "deviceProperties")
        .map(|(_, v)| crate::escape::json::escape_raw_str(v.get()).into_owned())
        .unwrap_or_else(|| "[]".to_string());
    write!(
        w,
        "{{\"schemaVersion\": 1,\n \"deviceProperties\": {devices},\n \"{MERGED_MARK}\": {mark},\n \"displayTimeUnit\": \"ms\",\n \"baseTimeNanoseconds\": {base0},\n \"traceEvents\": [\n"
    )
    .map_err(wr)?;

    // Each rank's events are rewritten and deflated by a worker of their own into a segment
    // (a temporary file beside the output), then spliced in rank order.
    let ranks: Vec<usize> = (0..ranked.len()).collect();
    let segments = crate::io::jobs::map_in_order(&ranks, |&i| {
        let (rank, path, _) = &ranked[i];
        let shift = placements[i].shift_ns;
        let segment = || -> Result<_> {
            let (staged, file) = Staged::create(out)?;
            let seg = ParGzWriter::raw(BufWriter::with_capacity(1 << 20, file), MERGED_LEVEL);
            Ok((staged, seg))
        };
        // By chunks when the file is indexed, else (or when that fails) front to back into a
        // new segment: the first one's temporary file is removed as it is dropped.
        let (mut staged, mut seg) = segment()?;
        let written =
            match chunked::write_rank(*rank, shift, path, &mut seg, MERGED_LEVEL).map_err(wr)? {
                Some(written) => written,
                None => {
                    (staged, seg) = segment()?;
                    rank::write_rank(*rank, shift, path, &mut seg, &wr)?
                }
            };
        let seg = seg.finish_segment().map_err(wr)?;
        let file = seg.out.into_inner().map_err(|e| wr(e.into_error()))?;
        Ok((staged, file, seg.crc, seg.len, written))
    })?;
    let mut first = true;
    for (i, (staged, file, crc, len, written)) in segments.into_iter().enumerate() {
        let RankWritten {
            summary,
            wrote,
            not_utf8,
        } = written;
        drop(file);
        if wrote {
            if !first {
                w.write_all(b",\n").map_err(wr)?;
            }
            first = false;
            // The segment was opened write-only: read it back through its path.
            let mut back = std::fs::File::open(staged.tmp_path()).map_err(wr)?;
            w.append_segment(&mut back, &crc, len).map_err(wr)?;
        }
        drop(staged);
        placements[i].events = summary.events;
        placements[i].not_utf8 = not_utf8;
        placements[i].truncated = summary.truncated.as_ref().map(|t| t.to_string());
    }
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let merged = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "merged": {
            "reference_rank": placements[0].rank,
            "pid_stride": PID_STRIDE,
            "flow_id_stride": ID_STRIDE,
            "ranks": placements,
        }
    });
    let merged = crate::escape::json::to_string(&merged).map_err(|e| wr(e.into()))?;
    write!(
        w,
        "\n],\n \"cuprof\": {merged},\n \"traceName\": {}}}\n",
        json_str(&name)
    )
    .map_err(wr)?;
    let inner = w.finish().map_err(wr)?;
    staged.commit(inner.into_inner().map_err(|e| wr(e.into_error()))?)?;
    Ok(placements)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuprof_core::reader::ClockAnchor;

    #[test]
    fn skew_by_host() {
        let mk = |host: &str, rt: i64, mono: i64| TraceMeta {
            hostname: Some(host.to_string()),
            clock: Some(ClockAnchor {
                realtime_ns: rt,
                monotonic_ns: mono,
            }),
            ..Default::default()
        };
        let r = mk("h", 1_000_000, 500);
        let never = || -> Result<Option<(i64, usize)>> { panic!("same host needs no collectives") };
        let (s, _, drift) = skew(&mk("h", 2_000_250, 1_000_500), &r, never).unwrap();
        assert_eq!((s, drift), (0, Some(250)));
        let (s, m, _) = skew(&mk("other", 2_000_250, 7), &r, || Ok(Some((-42, 3)))).unwrap();
        assert_eq!(s, -42);
        assert!(m.contains("3 matched"), "{m}");
        let (s, m, _) = skew(&TraceMeta::default(), &r, || Ok(None)).unwrap();
        assert_eq!(s, 0);
        assert!(m.contains("assumed 0"), "{m}");
    }

    #[test]
    fn collective_median() {
        let k = |s: i64, i: usize| (s, "ncclDevKernel_AllReduce".to_string(), i);
        let a: CollectiveEnds = [
            (k(1, 0), 1100),
            (k(1, 1), 2090),
            (k(2, 0), 3300),
            (k(3, 0), 9),
        ]
        .into_iter()
        .collect();
        let r: CollectiveEnds = [(k(1, 0), 1000), (k(1, 1), 2000), (k(2, 0), 3000)]
            .into_iter()
            .collect();
        assert_eq!(collective_skew(&a, &r), Some((100, 3)));
        assert_eq!(collective_skew(&a, &CollectiveEnds::new()), None);
    }
}
