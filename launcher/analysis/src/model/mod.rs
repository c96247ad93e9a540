//! What every figure is derived from: the loaded files ([`Analysis`]) and what is computed from
//! them once (NVTX range paths, ranks, operator nesting), with the maths the sections share.
//!
//! One file a job: [`attribution`] (NVTX range paths of launches), [`intervals`] (unions and
//! the per-device breakdown), [`steps`] (latency statistics), [`links`] (operator nesting and
//! what each operator launched), [`modules`] (the `nn.Module` call each operator ran in),
//! [`ratios`]. The figures themselves are in `sections`, the
//! summary that gathers them in `summary`.

pub mod attribution;
pub mod intervals;
pub mod links;
pub mod modules;
pub mod ratios;
pub mod steps;

use std::path::PathBuf;

use anyhow::Result;
use rayon::prelude::*;

use crate::load::{number_ranks, FileData, Interner, NO_NAME};

pub use attribution::{api_paths, op_paths, Paths, NO_LAUNCH, NO_RANGE};
pub use intervals::{breakdown, sync_wait, union, Breakdown};
pub use links::Links;
pub use ratios::{imbalance, ratio};
pub use steps::{
    median, percentile, percentile_f64, step_stats, tokens_per_s, MeanStd, Rates, RunSpread,
    Spread, StepStats,
};

/// Loads every trace named by `paths` (one file per worker of the current rayon pool) and
/// derives the per-file attribution.
pub fn analyse(paths: &[PathBuf]) -> Result<Analysis> {
    analyse_files(&crate::load::inputs::trace_files(paths)?)
}

/// Each run's step statistics, and their mean ± std over the runs (`--all-runs`).
pub fn over_runs(runs: &[crate::load::runs::Run]) -> Result<RunSpread> {
    let mut out = Vec::new();
    for run in runs {
        let an = analyse_files(&run.files)?;
        let steps = step_stats(an.files.iter().flat_map(|f| f.steps.iter()));
        out.push((crate::load::runs::label(run), steps));
    }
    Ok(RunSpread::of(out))
}

/// Loads the trace files `files` (no directories: one run's, as `load::runs::choose` lists
/// them) and derives the per-file attribution.
pub fn analyse_files(files: &[PathBuf]) -> Result<Analysis> {
    let (names, loaded) = crate::load::load_all(files)?;
    Ok(Analysis::new(names, loaded))
}

/// Loaded files and what was derived from them once.
pub struct Analysis {
    pub names: Interner,
    pub files: Vec<FileData>,
    pub paths: Paths,
    /// Per file, per API call: range path.
    pub api_paths: Vec<Vec<u32>>,
    /// Per file, per GPU op: range path of its launch (`None`: no launch record).
    pub op_paths: Vec<Vec<Option<u32>>>,
    /// Per file: the rank it is counted under.
    pub ranks: Vec<i64>,
    /// Per file: operator nesting and attribution (`None`: the file has no operators).
    pub links: Vec<Option<Links>>,
    /// Per file: its module calls' nesting and paths (`None`: the file has no module call).
    pub modules: Vec<Option<modules::ModuleTree>>,
}

impl Analysis {
    pub fn new(names: Interner, files: Vec<FileData>) -> Self {
        // Range paths are interned across files, one file after another; what depends on one
        // file alone runs on every worker: on 8 ranks it was most of the work after loading,
        // which would hold `report DIR` on 8 cores well under 8x (BENCHMARKS.md). Operator
        // nesting and module trees do not need the range paths: with one big file they run
        // beside them, each on a worker of its own.
        let ((paths, api_p, op_p), (links, module_trees)) = rayon::join(
            || {
                let mut paths = Paths::default();
                let api_p: Vec<Vec<u32>> = files.iter().map(|f| api_paths(f, &mut paths)).collect();
                let op_p: Vec<Vec<Option<u32>>> = files
                    .par_iter()
                    .zip(&api_p)
                    .map(|(f, a)| op_paths(f, a))
                    .collect();
                (paths, api_p, op_p)
            },
            || -> (Vec<_>, Vec<_>) {
                files
                    .par_iter()
                    .map(|f| rayon::join(|| links::links(f), || modules::tree(f, &names)))
                    .unzip()
            },
        );
        let known: Vec<Option<i64>> = files.iter().map(|f| f.rank).collect();
        let ranks = number_ranks(&known);
        Analysis {
            names,
            files,
            paths,
            api_paths: api_p,
            op_paths: op_p,
            ranks,
            links,
            modules: module_trees,
        }
    }

    /// Label of an op's NVTX bucket.
    pub fn bucket_name(&self, path: Option<u32>) -> &str {
        match path {
            None => NO_LAUNCH,
            Some(p) => match self.paths.innermost(p) {
                NO_NAME => NO_RANGE,
                n => self.names.name(n),
            },
        }
    }
}
