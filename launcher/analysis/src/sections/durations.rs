//! `cuprof report`'s tables of named durations, each with the figures of an `nsys stats`
//! summary: calls, total time, its share of the table's total, mean, median, minimum and
//! maximum.
//!
//! * `api_calls` (Nsight Systems' `cuda_api_sum`): the runtime and driver calls of the traces
//!   (`cuda_runtime` / `cuda_driver` events) by name. Which calls a cuprof trace holds is
//!   `CUPROF_API`'s choice (by default the calls that launch, copy, set, synchronize, allocate
//!   and record or wait on events).
//! * `ranges` (`nvtx_sum`): the NVTX ranges and `record_function` labels (`user_annotation`
//!   events other than the `ProfilerStep#N` steps, which have their own figures) by name, each
//!   range's own duration (a range nested in another counts in both, as Nsight Systems counts
//!   it).

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::load::{FileData, Interner};
use crate::model::{ratio, Spread};
use crate::saturating::AddSat;

/// One name over every file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DurationRow {
    pub name: String,
    pub count: u64,
    pub total_ns: i64,
    /// `total_ns` over the total of every row of the table.
    pub share: f64,
    pub mean_ns: f64,
    /// The middle duration (the mean of the two middle ones for an even count, as numpy's).
    pub median_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
}

/// The API calls of `files` by name, by total time (then name).
pub fn api_calls(names: &Interner, files: &[FileData]) -> Vec<DurationRow> {
    by_name(
        names,
        files
            .iter()
            .flat_map(|f| f.apis.iter().map(|a| (a.name, a.end - a.start))),
    )
}

/// The ranges and labels of `files` by name, by total time (then name).
pub fn ranges(names: &Interner, files: &[FileData]) -> Vec<DurationRow> {
    by_name(
        names,
        files
            .iter()
            .flat_map(|f| f.ranges.iter().map(|r| (r.name, r.end - r.start))),
    )
}

/// `(name id, duration)` pairs summed up by name.
fn by_name(names: &Interner, durations: impl Iterator<Item = (u32, i64)>) -> Vec<DurationRow> {
    let mut by_name: FxHashMap<u32, Vec<i64>> = FxHashMap::default();
    for (name, dur) in durations {
        by_name.entry(name).or_default().push(dur);
    }
    let mut total_all = 0i64;
    let mut rows: Vec<DurationRow> = by_name
        .into_iter()
        .map(|(name, mut durs)| {
            let s = Spread::of(&mut durs);
            total_all.add_sat(s.total);
            DurationRow {
                name: names.name(name).to_string(),
                count: s.count,
                total_ns: s.total,
                share: 0.0,
                mean_ns: s.mean,
                median_ns: s.median,
                min_ns: s.min,
                max_ns: s.max,
            }
        })
        .collect();
    for r in &mut rows {
        r.share = ratio(r.total_ns as f64, total_all as f64);
    }
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.name.cmp(&b.name))
    });
    rows
}
