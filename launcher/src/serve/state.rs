//! What `cuprof serve` serves: the traces loaded whole (never half-read: the files are listed
//! with their sizes and times before and after each load, which must agree), the answers that
//! depend on nothing but them made once, and the watcher that loads them again when they
//! change, serving the previous load until the new one is complete.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Result};
use axum::body::Bytes;
use cuprof_analysis::escape::json;
use cuprof_analysis::escape::terminal::Shown;
use cuprof_analysis::io::console::one_line;
use cuprof_analysis::model::Analysis;
use serde::Serialize;

/// How often the watcher looks at the files.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// Loads tried while the files keep changing under one.
const TRIES: usize = 3;

/// The inputs' files, each with its size and modification time: what changes when a file is
/// written, replaced, added or removed.
type Fingerprint = BTreeMap<PathBuf, (u64, Option<SystemTime>)>;

fn fingerprint(paths: &[PathBuf]) -> Result<Fingerprint> {
    let files = cuprof_analysis::trace_files(paths)?;
    let mut out = Fingerprint::new();
    for f in files {
        let m = std::fs::metadata(&f).map_err(|e| {
            anyhow::anyhow!(
                "{}: {e}; the trace folder changed while it was read",
                f.shown()
            )
        })?;
        out.insert(f, (m.len(), m.modified().ok()));
    }
    Ok(out)
}

/// One rank's time span: from its first event's start to its last event's end (ns, the
/// trace's clock), what a timeline window of it can ask.
#[derive(Serialize)]
pub struct RankSpan {
    pub rank: i64,
    pub start: i64,
    pub end: i64,
}

/// One complete load and what is made of it once.
pub struct Loaded {
    pub analysis: Analysis,
    /// JSON answers by endpoint name (`summary`, `kernels`, ...).
    pub json: BTreeMap<&'static str, Answer>,
    /// `cuprof report --html`'s page of these traces.
    pub page: Answer,
    pub spans: Vec<RankSpan>,
    fingerprint: Fingerprint,
}

fn spans(an: &Analysis) -> Vec<RankSpan> {
    let mut by_rank: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for (f, &rank) in an.files.iter().zip(&an.ranks) {
        let times = f
            .ops
            .iter()
            .map(|o| (o.start, o.end))
            .chain(f.apis.iter().map(|a| (a.start, a.end)))
            .chain(f.ranges.iter().map(|r| (r.start, r.end)))
            .chain(f.cpu_ops.iter().map(|c| (c.start, c.end)))
            .chain(f.steps.iter().map(|s| (s.start, s.start + s.dur)));
        for (s, e) in times {
            let span = by_rank.entry(rank).or_insert((s, e));
            *span = (span.0.min(s), span.1.max(e));
        }
    }
    by_rank
        .into_iter()
        .map(|(rank, (start, end))| RankSpan { rank, start, end })
        .collect()
}

/// Answers from this size on are also kept gzipped, for the clients that accept it.
const GZIP_FROM: usize = 16 * 1024;

/// One answer made at load: its bytes, and gzipped where that is worth it (summary.json at
/// 512 ranks x 10,000 steps is 155 MB, most of it each rank's step times: compressed on every
/// core once, it goes out in a fraction of the time).
pub struct Answer {
    pub plain: Bytes,
    pub gzip: Option<Bytes>,
}

impl Answer {
    fn new(plain: Vec<u8>) -> Result<Answer> {
        Answer::made_for(plain, true)
    }

    /// An answer made for one request: gzipped too only when that client accepts it.
    pub fn made_for(plain: Vec<u8>, gzip_ok: bool) -> Result<Answer> {
        let gzip = match gzip_ok && plain.len() >= GZIP_FROM {
            true => {
                let mut w = cuprof_analysis::io::gzip_out::ParGzWriter::new(
                    Vec::new(),
                    flate2::Compression::fast(),
                )?;
                std::io::Write::write_all(&mut w, &plain)?;
                Some(Bytes::from(w.finish()?))
            }
            false => None,
        };
        Ok(Answer {
            plain: Bytes::from(plain),
            gzip,
        })
    }
}

fn to_json<T: Serialize + ?Sized>(v: &T) -> Result<Answer> {
    Answer::new(json::to_string(v)?.into_bytes())
}

/// Loads `paths` whole: the files of their newest run (as `cuprof report` chooses it), read
/// again while they changed during a read, refused after [`TRIES`] reads that changed.
pub fn load(paths: &[PathBuf], top: usize) -> Result<Loaded> {
    for _ in 0..TRIES {
        let before = fingerprint(paths)?;
        let named = cuprof_analysis::load::runs::inputs_named(paths);
        let chosen = cuprof_analysis::load::runs::choose(paths, None, &named)?;
        let an = cuprof_analysis::model::analyse_files(&chosen.files)?;
        if fingerprint(paths)? != before {
            continue;
        }
        let summary = an.summarize();
        let (flame, memory) = cuprof_analysis::views::flame::page_svgs(&an, paths)?;
        let ranked = cuprof_analysis::views::flame::page_rank_svgs(
            &an,
            &cuprof_analysis::views::flame::page_flame_ranks(&summary),
        )?;
        let mut page = Vec::new();
        cuprof_analysis::views::html::write_page_ranked(
            &mut page, &summary, flame, ranked, memory, top,
        )?;
        let stacks: Vec<FlameStack> = cuprof_analysis::views::flame::gpu_stacks(&an)
            .into_iter()
            .map(|(stack, ns)| FlameStack { stack, ns })
            .collect();
        let mut answers = BTreeMap::new();
        answers.insert("summary", to_json(&summary)?);
        answers.insert("kernels", to_json(&summary.top_kernels)?);
        answers.insert("operators", to_json(&summary.operators)?);
        answers.insert("memory", to_json(&summary.memory)?);
        answers.insert("torch_compile", to_json(&summary.torch_compile)?);
        answers.insert("flame", to_json(&stacks)?);
        return Ok(Loaded {
            spans: spans(&an),
            analysis: an,
            json: answers,
            page: Answer::new(page)?,
            fingerprint: before,
        });
    }
    bail!("the traces changed during each of {TRIES} reads: serve them once they are written")
}

/// One stack of the flame graph: its frames joined by `;`, and its GPU time.
#[derive(Serialize)]
struct FlameStack {
    stack: String,
    ns: u64,
}

/// What is served now, and what became of the last look at the files.
pub struct Served {
    pub loaded: Arc<Loaded>,
    /// Loads completed so far (1: the first).
    pub generation: u64,
    /// Why the files as they are now are not what is served (one line), if so.
    pub problem: Option<String>,
}

pub type Shared = Arc<RwLock<Served>>;

/// The loaded traces now (a reader holds them while it answers; a new load replaces them for
/// the requests after it).
pub fn current(shared: &Shared) -> (Arc<Loaded>, u64, Option<String>) {
    let s = shared.read().unwrap_or_else(|e| e.into_inner());
    (s.loaded.clone(), s.generation, s.problem.clone())
}

/// Starts the thread that loads `paths` again whenever their files change.
pub fn watch(shared: Shared, paths: Vec<PathBuf>, top: usize) {
    std::thread::spawn(move || loop {
        std::thread::sleep(WATCH_EVERY);
        let (loaded, _, _) = current(&shared);
        let changed = match fingerprint(&paths) {
            Ok(now) => now != loaded.fingerprint,
            Err(e) => {
                shared.write().unwrap_or_else(|e| e.into_inner()).problem = Some(one_line(&e));
                continue;
            }
        };
        drop(loaded);
        if !changed {
            // The files are back as served (a folder unreadable a moment, then readable).
            shared.write().unwrap_or_else(|e| e.into_inner()).problem = None;
            continue;
        }
        let result = load(&paths, top);
        let mut s = shared.write().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(l) => {
                s.loaded = Arc::new(l);
                s.generation += 1;
                s.problem = None;
            }
            Err(e) => s.problem = Some(one_line(&e)),
        }
    });
}
