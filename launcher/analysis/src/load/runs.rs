//! The input files grouped by run, and the one run a command reads: never two added together,
//! a merged trace never beside the rank files it holds.
//!
//! A file's run (docs/analysis.md, "Runs"):
//! * its `cuprof.run_id` (every rank of one run shares it);
//! * without one (cuprof before run ids, other tools), files named `STEM-rankR...` group by
//!   `STEM` and by the tool (cuprof or not); other tools' files of one stem are one run only
//!   while no two claim the same rank and no two say different `distributedInfo.world_size`;
//! * any other file is a run of its own.
//!
//! A merged trace (`cuprofMerged` in its header) names the run and ranks it holds: it is skipped
//! when the inputs hold files of that run (or, naming none, when they hold any rank file), and
//! is a run of its own otherwise. The run read is the newest (its files' `cuprof.clock`, else
//! their modification times), or the one `--run` names by name or id.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use anyhow::{bail, Result};
use cuprof_core::reader::{TraceMeta, TraceReader};
use serde::{Deserialize, Serialize};

use crate::escape::terminal::printable_line;
use crate::escape::terminal::Shown;

/// Header member that marks a merged trace: `{"run_id": ID, "name": NAME, "ranks": [R, ...]}`
/// (`true` in merges before runs had ids).
pub const MERGED_MARK: &str = "cuprofMerged";

/// What a merged trace's mark says it holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MergedMark {
    pub run_id: Option<String>,
    pub name: Option<String>,
    pub ranks: Vec<i64>,
}

/// The mark of a merged trace: its header's [`MERGED_MARK`] (or, as merges before the mark
/// wrote it, a `cuprof` member with `merged`); `None` for any other file.
pub fn merged_mark(meta: &TraceMeta) -> Option<MergedMark> {
    meta.members.iter().find_map(|(k, v)| {
        if k == MERGED_MARK {
            Some(serde_json::from_str(v.get()).unwrap_or_default())
        } else if k == "cuprof"
            && serde_json::from_str::<serde_json::Value>(v.get())
                .map(|j| j.get("merged").is_some())
                .unwrap_or(false)
        {
            Some(MergedMark::default())
        } else {
            None
        }
    })
}

/// One run among the inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The file name prefix (`cuprof.name`, else the files' stem, else the file's name).
    pub name: String,
    /// `cuprof.run_id` (a merged trace's: its mark's).
    pub id: Option<String>,
    pub files: Vec<PathBuf>,
    pub ranks: BTreeSet<i64>,
    /// Nanoseconds since the epoch: the newest of its files' times.
    pub time_ns: i64,
}

/// The files a command reads, and what to tell about the choice (lines for stderr).
#[derive(Debug, Clone)]
pub struct Chosen {
    pub files: Vec<PathBuf>,
    pub notes: Vec<String>,
    /// Runs among the inputs.
    pub runs: usize,
    /// Every run among the inputs, oldest first (`report --all-runs`).
    pub every: Vec<Run>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Id(String),
    Stem { stem: String, cuprof: bool },
    File(PathBuf),
}

/// What one file's header says of its run.
struct FileRun {
    path: PathBuf,
    key: Key,
    name: String,
    rank: Option<i64>,
    world: Option<i64>,
    time_ns: i64,
    cuprof: bool,
}

/// `STEM` of `STEM-rankR...`: the prefix before the first `-rank` followed by a digit.
pub fn stem(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let mut from = 0;
    while let Some(at) = name[from..].find("-rank") {
        let at = from + at;
        if name[at + 5..].starts_with(|c: char| c.is_ascii_digit()) && at > 0 {
            return Some(name[..at].to_owned());
        }
        from = at + 5;
    }
    None
}

/// A file's name without its trace extension.
fn bare_name(path: &Path) -> String {
    let name = path.file_name().map_or_else(
        || path.to_string_lossy().into_owned(),
        |n| n.to_string_lossy().into(),
    );
    for ext in [".trace.json.gz", ".trace.json", ".json.gz", ".json"] {
        if let Some(b) = name.strip_suffix(ext) {
            return b.to_owned();
        }
    }
    name
}

fn mtime_ns(path: &Path) -> i64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// `YYYY-MM-DD HH:MM:SS UTC` of nanoseconds since the epoch.
pub fn utc(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60
    )
}

fn shown(p: &Path) -> String {
    p.shown().to_string()
}

/// The runs of `files` (newest first), and the merged traces among them with their marks.
/// What the files a folder holds were grouped into.
struct Grouped {
    runs: Vec<Run>,
    merged: Vec<(PathBuf, MergedMark)>,
    unread: Vec<PathBuf>,
    /// Copies (an export, `cp`) of a file read: (the copy, the file).
    copies: Vec<(PathBuf, PathBuf)>,
}

/// One trace of one process: its run, host, process and cycle. Two files with the same are
/// one trace twice (torch.profiler's `export_chrome_trace` of cuprof's file, a `cp`).
type TraceIdentity = (String, Option<String>, i64, i64, Option<i64>);

fn identity(meta: &TraceMeta) -> Option<TraceIdentity> {
    Some((
        meta.run_id.clone()?,
        meta.hostname.clone(),
        meta.pid?,
        meta.cycle?,
        meta.rank,
    ))
}

fn group(files: &[PathBuf], headers: Vec<Option<TraceMeta>>) -> Grouped {
    let mut plain: Vec<FileRun> = Vec::new();
    let mut merged: Vec<(PathBuf, MergedMark)> = Vec::new();
    let mut unread: Vec<PathBuf> = Vec::new();
    let mut copies: Vec<(PathBuf, PathBuf)> = Vec::new();
    // Files named `STEM-rankR...` first: cuprof's own name is kept over a copy's.
    let mut order: Vec<(&PathBuf, Option<TraceMeta>)> = files.iter().zip(headers).collect();
    order.sort_by_key(|(p, _)| stem(p).is_none());
    let mut seen: BTreeMap<TraceIdentity, PathBuf> = BTreeMap::new();
    for (path, meta) in order {
        let Some(meta) = meta else {
            unread.push(path.clone());
            continue;
        };
        if let Some(mark) = merged_mark(&meta) {
            merged.push((path.clone(), mark));
            continue;
        }
        if let Some(id) = identity(&meta) {
            if let Some(first) = seen.get(&id) {
                copies.push((path.clone(), first.clone()));
                continue;
            }
            seen.insert(id, path.clone());
        }
        let cuprof = meta.members.iter().any(|(k, _)| k == "cuprof");
        let rank = meta.rank.or_else(|| super::rank_from_name(path));
        let time_ns = meta.clock.map_or_else(|| mtime_ns(path), |c| c.realtime_ns);
        let (key, name) = match (&meta.run_id, stem(path)) {
            (Some(id), s) => (
                Key::Id(id.clone()),
                meta.run_name
                    .clone()
                    .or(s)
                    .unwrap_or_else(|| bare_name(path)),
            ),
            (None, Some(s)) => (
                Key::Stem {
                    stem: s.clone(),
                    cuprof,
                },
                s,
            ),
            (None, None) => (Key::File(path.clone()), bare_name(path)),
        };
        plain.push(FileRun {
            path: path.clone(),
            key,
            name,
            rank,
            world: meta.world_size,
            time_ns,
            cuprof,
        });
    }
    // Other tools' files of one stem are one run only while each has a rank, no two the same,
    // and those that say a world size say the same one.
    let mut by_key: BTreeMap<Key, Vec<FileRun>> = BTreeMap::new();
    for f in plain {
        by_key.entry(f.key.clone()).or_default().push(f);
    }
    let mut groups: Vec<Vec<FileRun>> = Vec::new();
    for (key, fs) in by_key {
        let foreign = matches!(key, Key::Stem { .. }) && fs.iter().all(|f| !f.cuprof);
        let ranks: BTreeSet<Option<i64>> = fs.iter().map(|f| f.rank).collect();
        let worlds: BTreeSet<i64> = fs.iter().filter_map(|f| f.world).collect();
        if foreign && (ranks.len() < fs.len() || ranks.contains(&None) || worlds.len() > 1) {
            groups.extend(fs.into_iter().map(|f| vec![f]));
        } else {
            groups.push(fs);
        }
    }
    let mut runs: Vec<Run> = groups
        .into_iter()
        .map(|fs| Run {
            name: fs[0].name.clone(),
            id: match &fs[0].key {
                Key::Id(id) => Some(id.clone()),
                _ => None,
            },
            ranks: fs.iter().filter_map(|f| f.rank).collect(),
            time_ns: fs.iter().map(|f| f.time_ns).max().unwrap_or(0),
            files: fs.into_iter().map(|f| f.path).collect(),
        })
        .collect();
    sort_newest_first(&mut runs);
    Grouped {
        runs,
        merged,
        unread,
        copies,
    }
}

fn sort_newest_first(runs: &mut [Run]) {
    runs.sort_by(|a, b| {
        b.time_ns
            .cmp(&a.time_ns)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.id.cmp(&b.id))
            .then_with(|| a.files.cmp(&b.files))
    });
}

/// The run of `paths` a command reads: `want` (a run's name or id; the newest of several of
/// that name), else the newest. `what` names the inputs in the notes (`A`, the paths...).
/// Files whose header cannot be read, or that are no trace, go with the run read, where
/// reading them says what is wrong with them.
pub fn choose(paths: &[PathBuf], want: Option<&str>, what: &str) -> Result<Chosen> {
    let files = super::trace_files(paths)?;
    let headers = crate::io::jobs::map_in_order(&files, |p| {
        // Not a trace (no `traceEvents`): no run; reading it says what it is.
        Ok(TraceReader::open(p).ok().and_then(|mut r| {
            let meta = r.read_header().ok()?.clone();
            r.has_events_array().then_some(meta)
        }))
    })?;
    let Grouped {
        mut runs,
        merged,
        unread,
        copies,
    } = group(&files, headers);
    let mut notes = Vec::new();
    for (copy, of) in copies {
        notes.push(format!(
            "skipping {}: a copy of {} (the same run, process and cycle)",
            shown(&copy),
            shown(&of)
        ));
    }
    // Merged traces beside the rank files of their run are skipped; the others are runs.
    for (path, mark) in merged {
        let holds = |r: &Run| match (&mark.run_id, &mark.name) {
            (Some(id), _) => r.id.as_ref() == Some(id),
            (None, Some(name)) => r.id.is_none() && &r.name == name,
            (None, None) => true,
        };
        if let Some(r) = runs.iter().find(|r| holds(r)) {
            notes.push(format!(
                "skipping {}: a merged trace of run {}, whose rank files are among the inputs",
                shown(&path),
                printable_line(&r.name)
            ));
            continue;
        }
        runs.push(Run {
            name: mark.name.clone().unwrap_or_else(|| bare_name(&path)),
            id: mark.run_id.clone(),
            ranks: mark.ranks.iter().copied().collect(),
            time_ns: mtime_ns(&path),
            files: vec![path],
        });
    }
    sort_newest_first(&mut runs);
    let Some(newest) = runs.first() else {
        return Ok(Chosen {
            files: unread,
            notes,
            runs: 0,
            every: Vec::new(),
        });
    };
    let chosen = match want {
        None => newest.clone(),
        Some(w) => match runs
            .iter()
            .find(|r| r.id.as_deref() == Some(w))
            .or_else(|| runs.iter().find(|r| r.name == w))
        {
            Some(r) => r.clone(),
            None => {
                let names: Vec<String> = runs.iter().map(label).collect();
                bail!(
                    "--run {}: no run of that name or id in {what}; pick one of: {}",
                    printable_line(w),
                    names.join(", ")
                );
            }
        },
    };
    if runs.len() > 1 {
        let how = match want {
            Some(_) => "reading the one --run names",
            None => "reading the newest (choose another with --run NAME or --run ID)",
        };
        notes.insert(0, format!("{} runs in {what}; {how}:", runs.len()));
        for (i, r) in runs.iter().enumerate() {
            notes.insert(
                1 + i,
                format!(
                    "  {} {}: {} file(s), {} rank(s), {}",
                    if *r == chosen { "*" } else { " " },
                    label(r),
                    r.files.len(),
                    r.ranks.len(),
                    utc(r.time_ns)
                ),
            );
        }
    }
    let mut files = chosen.files;
    files.extend(unread);
    files.sort();
    let count = runs.len();
    runs.reverse();
    Ok(Chosen {
        files,
        notes,
        runs: count,
        every: runs,
    })
}

/// The inputs as the notes name them: the paths, escaped, space-separated.
pub fn inputs_named(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| shown(p)).collect();
    shown.join(" ")
}

/// `NAME (run ID)`, or `NAME` without an id; escaped.
pub fn label(r: &Run) -> String {
    match &r.id {
        Some(id) if *id != r.name => {
            format!("{} (run {})", printable_line(&r.name), printable_line(id))
        }
        _ => printable_line(&r.name).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_and_dates() {
        assert_eq!(
            stem(Path::new("/d/job-a-rank12-cycle2.trace.json.gz")).as_deref(),
            Some("job-a")
        );
        assert_eq!(stem(Path::new("/d/rank0.json")), None);
        assert_eq!(
            stem(Path::new("/d/x-rankless-rank1.json")).as_deref(),
            Some("x-rankless")
        );
        assert_eq!(bare_name(Path::new("/d/h_12.pt.trace.json")), "h_12.pt");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000_123_456_789), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(951_782_400 * 1_000_000_000), "2000-02-29 00:00:00 UTC");
    }
}
