//! `cuprof report`'s CUDA API table (`summary.json`'s `api_calls`): the runtime and driver
//! calls of the traces (`cuda_runtime` / `cuda_driver` events) by name, with the figures of
//! Nsight Systems' `cuda_api_sum` report: calls, total time, its share of all API time, mean,
//! median, minimum and maximum. Which calls a cuprof trace holds is `CUPROF_API`'s choice (by
//! default the calls that launch, copy, set, synchronize, allocate and record or wait on events).

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use super::load::{FileData, Interner};
use super::model::{ratio, Spread};
use super::saturating::AddSat;

/// One API call name over every file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiRow {
    pub name: String,
    pub count: u64,
    pub total_ns: i64,
    /// `total_ns` over the total of every call.
    pub share: f64,
    pub mean_ns: f64,
    /// The middle duration (the mean of the two middle ones for an even count, as numpy's).
    pub median_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
}

/// The calls of `files` by name, by total time (then name).
pub fn summarize(names: &Interner, files: &[FileData]) -> Vec<ApiRow> {
    let mut by_name: FxHashMap<u32, Vec<i64>> = FxHashMap::default();
    for f in files {
        for a in &f.apis {
            by_name.entry(a.name).or_default().push(a.end - a.start);
        }
    }
    let mut total_all = 0i64;
    let mut rows: Vec<ApiRow> = by_name
        .into_iter()
        .map(|(name, mut durs)| {
            let s = Spread::of(&mut durs);
            total_all.add_sat(s.total);
            ApiRow {
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
