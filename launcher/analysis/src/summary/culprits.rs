//! What holds the job back, ranked from the summary's other figures: the ranks furthest from
//! the median rank in compute, communication, collective wait and step time, the rank the
//! others wait for in their collectives, and the slowest steps.
//!
//! Lock-step ranks have equal step times whatever holds them back, so step time alone never
//! names a GPU straggler: its compute is above the median and its waits in collectives are
//! below (the others wait for it). Each figure names its ranks by distance from the median,
//! either way, with the ratio that says which way.

use serde::{Deserialize, Serialize};

use crate::model::ratio;
use crate::model::steps::percentile_f64;
use crate::sections::collectives::CollectiveWait;
use crate::sections::series::StepTime;

/// Ranks named per figure, furthest first.
pub const NAMED: usize = 3;
/// A rank within this fraction of the median is not named: lock-step ranks differ by noise.
pub const NEAR: f64 = 0.01;
/// Slowest steps named.
pub const SLOWEST: usize = 5;
/// Outliers named per spread, furthest from the median first.
pub const OUTLIERS: usize = 5;
/// A rank is an outlier of a spread beyond this many interquartile ranges from the quartiles.
pub const FENCE: f64 = 1.5;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Culprits {
    /// Per figure of a rank, its median over the ranks and the ranks furthest from it; empty
    /// with fewer than two ranks.
    pub rank_figures: Vec<RankFigure>,
    /// The rank that waits least in the collectives it shares with others: the one they wait
    /// for; absent unless `collective_waits` has two ranks and they do not all wait alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_for: Option<WaitedFor>,
    /// The longest steps (by step number, on the rank where it took longest) of those longer
    /// than the median, longest first; ties by step number.
    pub slowest_steps: Vec<SlowStep>,
    /// The median of every rank's step durations (`steps.p50_ns`), what they compare to.
    pub step_median_ns: f64,
    /// Per figure of a rank, its distribution over the ranks (the page draws these past a few
    /// dozen ranks, instead of one bar per rank): quartiles, extremes and outliers; empty with
    /// fewer than two ranks.
    #[serde(default)]
    pub spreads: Vec<RankSpread>,
}

/// One figure's distribution over the ranks that have it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSpread {
    /// A field of `ranks[].gpu` (`compute_ns`, `comm_compute_overlap_ns`, `communication_ns`,
    /// `memcpy_ns`, `memset_ns`, `idle_host_bound_ns`, `idle_sync_wait_ns`),
    /// `collective_wait_ns` (`collective_waits[].wait_ns`) or `mean_step_ns`
    /// (`ranks[].steps.mean_ns`).
    pub figure: String,
    /// Ranks that have the figure.
    pub ranks: usize,
    /// The smallest value, the quartiles (as `steps.p50_ns`: linear between the two nearest
    /// ranks), the largest.
    pub min: f64,
    pub p25: f64,
    pub median: f64,
    pub p75: f64,
    pub max: f64,
    /// Up to [`OUTLIERS`] ranks beyond [`FENCE`] interquartile ranges below `p25` or above
    /// `p75` and at least [`NEAR`] of the median from it, furthest from the median first
    /// (ties: by rank); `vs_median` as in `rank_figures`.
    pub outliers: Vec<RankOutlier>,
}

/// One figure over the ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankFigure {
    /// `compute_ns` (`ranks[].gpu.compute_ns`), `communication_ns` (`ranks[].gpu.
    /// communication_ns`: communication not under compute), `collective_wait_ns`
    /// (`collective_waits[].wait_ns`) or `mean_step_ns` (`ranks[].steps.mean_ns`).
    pub figure: String,
    /// Over the ranks that have the figure (mean of the middle two for an even count).
    pub median: f64,
    /// Up to [`NAMED`] ranks whose figure differs from the median by [`NEAR`] of it or more,
    /// furthest first (ties: by rank).
    pub ranks: Vec<RankOutlier>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankOutlier {
    pub rank: i64,
    pub value: f64,
    /// `value / median` (0 when the median is 0).
    pub vs_median: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitedFor {
    pub rank: i64,
    pub wait_ns: i64,
    /// The median wait of the ranks in `collective_waits`.
    pub median_wait_ns: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlowStep {
    pub step: i64,
    pub rank: i64,
    pub dur_ns: i64,
    /// `dur_ns / step_median_ns`.
    pub vs_median: f64,
}

/// What a [`RankFigure::figure`] is, in words.
pub fn figure_label(figure: &str) -> &'static str {
    match figure {
        "compute_ns" => "compute",
        "communication_ns" => "communication not under compute",
        "collective_wait_ns" => "waiting in collectives",
        "mean_step_ns" => "mean step time",
        "comm_compute_overlap_ns" => "communication under compute",
        "memcpy_ns" => "memcpy",
        "memset_ns" => "memset",
        "idle_host_bound_ns" => "idle, host-bound",
        "idle_sync_wait_ns" => "idle, sync wait",
        _ => "figure",
    }
}

/// One rank's figures that culprits are ranked by (summary.json's `ranks[]`).
pub struct RankFigures<'a> {
    pub rank: i64,
    /// Its GPU time breakdown (`ranks[].gpu`), the spreads' figures.
    pub gpu: &'a crate::model::Breakdown,
    pub compute_ns: i64,
    pub communication_ns: i64,
    /// Its mean step time, when it has steps.
    pub mean_step_ns: Option<f64>,
    pub step_times: &'a [StepTime],
}

/// The culprits of `ranks` (in rank order), with `waits` (summary.json's `collective_waits`)
/// and `step_median_ns` (`steps.p50_ns`).
pub fn find(ranks: &[RankFigures], waits: &[CollectiveWait], step_median_ns: f64) -> Culprits {
    let mut rank_figures = Vec::new();
    let mut spreads = Vec::new();
    if ranks.len() > 1 {
        let of = |f: fn(&RankFigures) -> f64| -> Vec<(i64, f64)> {
            ranks.iter().map(|r| (r.rank, f(r))).collect()
        };
        let stepped: Vec<(i64, f64)> = ranks
            .iter()
            .filter_map(|r| r.mean_step_ns.map(|m| (r.rank, m)))
            .collect();
        let waited: Vec<(i64, f64)> = waits.iter().map(|w| (w.rank, w.wait_ns as f64)).collect();
        for (figure, values) in [
            ("compute_ns", of(|r| r.compute_ns as f64)),
            ("communication_ns", of(|r| r.communication_ns as f64)),
            ("collective_wait_ns", waited.clone()),
            ("mean_step_ns", stepped.clone()),
        ] {
            if values.len() > 1 {
                rank_figures.push(furthest(figure, &values));
            }
        }
        let gpu = |f: fn(&crate::model::Breakdown) -> i64| -> Vec<(i64, f64)> {
            ranks.iter().map(|r| (r.rank, f(r.gpu) as f64)).collect()
        };
        for (figure, values) in [
            ("compute_ns", gpu(|b| b.compute_ns)),
            (
                "comm_compute_overlap_ns",
                gpu(|b| b.comm_compute_overlap_ns),
            ),
            ("communication_ns", gpu(|b| b.communication_ns)),
            ("memcpy_ns", gpu(|b| b.memcpy_ns)),
            ("memset_ns", gpu(|b| b.memset_ns)),
            ("idle_host_bound_ns", gpu(|b| b.idle_host_bound_ns)),
            ("idle_sync_wait_ns", gpu(|b| b.idle_sync_wait_ns)),
            ("collective_wait_ns", waited),
            ("mean_step_ns", stepped),
        ] {
            if values.len() > 1 {
                spreads.push(spread(figure, &values));
            }
        }
    }
    Culprits {
        rank_figures,
        spreads,
        waited_for: waited_for(waits),
        slowest_steps: slowest_steps(ranks, step_median_ns),
        step_median_ns,
    }
}

/// The median of `values` and the ranks furthest from it.
fn furthest(figure: &str, values: &[(i64, f64)]) -> RankFigure {
    let mut sorted: Vec<f64> = values.iter().map(|v| v.1).collect();
    sorted.sort_by(f64::total_cmp);
    let median = percentile_f64(&sorted, 50);
    let mut far: Vec<&(i64, f64)> = values
        .iter()
        .filter(|v| (v.1 - median).abs() >= NEAR * median.abs() && v.1 != median)
        .collect();
    let dist = |v: &&(i64, f64)| (v.1 - median).abs();
    far.sort_by(|a, b| dist(b).total_cmp(&dist(a)).then(a.0.cmp(&b.0)));
    RankFigure {
        figure: figure.to_string(),
        median,
        ranks: far
            .into_iter()
            .take(NAMED)
            .map(|&(rank, value)| RankOutlier {
                rank,
                value,
                vs_median: ratio(value, median),
            })
            .collect(),
    }
}

/// The distribution of `values` (rank, value) and its outliers.
fn spread(figure: &str, values: &[(i64, f64)]) -> RankSpread {
    let mut sorted: Vec<f64> = values.iter().map(|v| v.1).collect();
    sorted.sort_by(f64::total_cmp);
    let (p25, median, p75) = (
        percentile_f64(&sorted, 25),
        percentile_f64(&sorted, 50),
        percentile_f64(&sorted, 75),
    );
    let iqr = p75 - p25;
    let (lo, hi) = (p25 - FENCE * iqr, p75 + FENCE * iqr);
    let mut out: Vec<&(i64, f64)> = values
        .iter()
        .filter(|v| (v.1 < lo || v.1 > hi) && (v.1 - median).abs() >= NEAR * median.abs())
        .collect();
    let dist = |v: &&(i64, f64)| (v.1 - median).abs();
    out.sort_by(|a, b| dist(b).total_cmp(&dist(a)).then(a.0.cmp(&b.0)));
    RankSpread {
        figure: figure.to_string(),
        ranks: values.len(),
        min: sorted[0],
        p25,
        median,
        p75,
        max: sorted[sorted.len() - 1],
        outliers: out
            .into_iter()
            .take(OUTLIERS)
            .map(|&(rank, value)| RankOutlier {
                rank,
                value,
                vs_median: ratio(value, median),
            })
            .collect(),
    }
}

/// The rank waiting least (ties: the lowest), when some rank waits more.
fn waited_for(waits: &[CollectiveWait]) -> Option<WaitedFor> {
    let least = waits.iter().min_by_key(|w| (w.wait_ns, w.rank))?;
    let most = waits.iter().map(|w| w.wait_ns).max()?;
    if waits.len() < 2 || most == least.wait_ns {
        return None;
    }
    let mut sorted: Vec<f64> = waits.iter().map(|w| w.wait_ns as f64).collect();
    sorted.sort_by(f64::total_cmp);
    Some(WaitedFor {
        rank: least.rank,
        wait_ns: least.wait_ns,
        median_wait_ns: percentile_f64(&sorted, 50),
    })
}

/// Each step number's longest duration over the ranks (ties: the lowest rank), the longest
/// [`SLOWEST`] of those longer than `median`.
fn slowest_steps(ranks: &[RankFigures], median: f64) -> Vec<SlowStep> {
    let mut longest: std::collections::BTreeMap<i64, (i64, i64)> = Default::default();
    for r in ranks {
        for s in r.step_times {
            let e = longest.entry(s.step).or_insert((r.rank, s.dur_ns));
            if s.dur_ns > e.1 {
                *e = (r.rank, s.dur_ns);
            }
        }
    }
    let mut steps: Vec<(i64, (i64, i64))> = longest
        .into_iter()
        .filter(|(_, (_, d))| *d as f64 > median)
        .collect();
    steps.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
    steps
        .into_iter()
        .take(SLOWEST)
        .map(|(step, (rank, dur_ns))| SlowStep {
            step,
            rank,
            dur_ns,
            vs_median: ratio(dur_ns as f64, median),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(rank: i64, wait_ns: i64) -> CollectiveWait {
        CollectiveWait {
            rank,
            matched: 4,
            gpu_ns: 1_000_000,
            wait_ns,
        }
    }

    #[test]
    fn furthest_from_the_median_either_way() {
        // Median of 10, 10, 12, 30, 4: 10. Furthest: 30 (20 away), then 4 (6), then 12 (2);
        // the ranks at the median are not named.
        let f = furthest(
            "compute_ns",
            &[(0, 10.0), (1, 10.0), (2, 12.0), (3, 30.0), (4, 4.0)],
        );
        assert_eq!(f.median, 10.0);
        let named: Vec<(i64, f64, f64)> = f
            .ranks
            .iter()
            .map(|r| (r.rank, r.value, r.vs_median))
            .collect();
        assert_eq!(named, [(3, 30.0, 3.0), (4, 4.0, 0.4), (2, 12.0, 1.2)]);
        // All equal, or within 1% of the median: nobody.
        assert!(furthest("x", &[(0, 5.0), (1, 5.0)]).ranks.is_empty());
        let near = furthest("x", &[(0, 1000.0), (1, 1005.0), (2, 996.0), (3, 1009.0)]);
        assert_eq!(near.median, 1002.5);
        assert!(near.ranks.is_empty());
        let f = furthest("x", &[(0, 1000.0), (1, 1000.0), (2, 1010.0)]);
        assert_eq!(f.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn spreads_name_the_ranks_beyond_the_fences() {
        // 8 ranks: quartiles of 10, 10, 11, 11, 12, 12, 13, 40 (rank 7) and 1 (rank 8):
        // sorted 1 10 10 11 11 12 12 13 40: p25 10, median 11, p75 12; fences 7 and 15.
        let v: Vec<(i64, f64)> = [10.0, 10.0, 11.0, 11.0, 12.0, 12.0, 13.0, 40.0, 1.0]
            .into_iter()
            .enumerate()
            .map(|(i, x)| (i as i64, x))
            .collect();
        let s = spread("compute_ns", &v);
        assert_eq!(
            (s.ranks, s.min, s.p25, s.median, s.p75, s.max),
            (9, 1.0, 10.0, 11.0, 12.0, 40.0)
        );
        let named: Vec<(i64, f64)> = s.outliers.iter().map(|o| (o.rank, o.value)).collect();
        assert_eq!(named, [(7, 40.0), (8, 1.0)]);
        assert_eq!(s.outliers[1].vs_median, 1.0 / 11.0);
        // A zero interquartile range: every rank off the median by 1% or more is out, the
        // furthest five named; noise under 1% is not.
        let mut v: Vec<(i64, f64)> = (0..40).map(|r| (r, 1000.0)).collect();
        v[3].1 = 1005.0;
        for (k, r) in [5, 6, 7, 8, 9, 10].into_iter().enumerate() {
            v[r].1 = 1100.0 + 10.0 * k as f64;
        }
        let s = spread("x", &v);
        let named: Vec<i64> = s.outliers.iter().map(|o| o.rank).collect();
        assert_eq!(named, [10, 9, 8, 7, 6]);
        // All equal: nobody.
        assert!(spread("x", &[(0, 5.0), (1, 5.0)]).outliers.is_empty());
    }

    #[test]
    fn the_rank_waiting_least_is_waited_for() {
        let w = waited_for(&[wait(0, 300), wait(1, 20), wait(2, 280)]).unwrap();
        assert_eq!((w.rank, w.wait_ns, w.median_wait_ns), (1, 20, 280.0));
        // Everyone alike, or one rank: nobody is waited for.
        assert_eq!(waited_for(&[wait(0, 5), wait(1, 5)]), None);
        assert_eq!(waited_for(&[wait(0, 5)]), None);
    }
}
