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
        _ => "figure",
    }
}

/// One rank's figures that culprits are ranked by (summary.json's `ranks[]`).
pub struct RankFigures<'a> {
    pub rank: i64,
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
            ("collective_wait_ns", waited),
            ("mean_step_ns", stepped),
        ] {
            if values.len() > 1 {
                rank_figures.push(furthest(figure, &values));
            }
        }
    }
    Culprits {
        rank_figures,
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
    fn the_rank_waiting_least_is_waited_for() {
        let w = waited_for(&[wait(0, 300), wait(1, 20), wait(2, 280)]).unwrap();
        assert_eq!((w.rank, w.wait_ns, w.median_wait_ns), (1, 20, 280.0));
        // Everyone alike, or one rank: nobody is waited for.
        assert_eq!(waited_for(&[wait(0, 5), wait(1, 5)]), None);
        assert_eq!(waited_for(&[wait(0, 5)]), None);
    }
}
