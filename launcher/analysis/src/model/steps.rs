//! Step latency statistics: count, total, mean, interpolated percentiles, tokens per second
//! (overall and per step), and their mean ± std over runs.

use serde::{Deserialize, Serialize};

use crate::load::Step;
use crate::saturating::{self, AddSat};

/// Latency statistics of a set of steps (nanoseconds). Percentiles interpolate linearly between
/// the two nearest ranks (numpy's default): `p` of sorted `x[0..n]` is at index `p/100*(n-1)`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepStats {
    pub count: usize,
    pub total_ns: i64,
    pub mean_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    /// Steps that reported `args.work` (tokens), their work and their time.
    pub work_steps: usize,
    pub work: f64,
    pub work_time_ns: i64,
    /// Tokens per second overall: `work / work_time`, when any step reported work.
    pub throughput_per_s: Option<f64>,
    /// Tokens per second of each step that reported work (its work over its duration):
    /// p50 by [`percentile`]'s rule, min and max.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_tokens_per_s: Option<Rates>,
}

/// Per-step rates: p50 (interpolated as [`percentile`]), min, max.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    pub p50: f64,
    pub min: f64,
    pub max: f64,
}

/// A step's tokens per second: its work over its duration (none without work or duration).
pub fn tokens_per_s(s: &Step) -> Option<f64> {
    let w = s.work?;
    (s.dur > 0).then(|| w / (s.dur as f64 / 1e9))
}

/// [`percentile`] of sorted floats, by the same rule.
pub fn percentile_f64(sorted: &[f64], p: u32) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let scaled = p as usize * (sorted.len() - 1);
    let lo = scaled / 100;
    let rem = (scaled % 100) as f64;
    if rem == 0.0 {
        return sorted[lo];
    }
    sorted[lo] + (sorted[lo + 1] - sorted[lo]) * rem / 100.0
}

/// Mean and sample standard deviation (n - 1; 0 for one value) of one figure over runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MeanStd {
    pub mean: f64,
    pub std: f64,
}

impl MeanStd {
    pub fn of(values: &[f64]) -> MeanStd {
        let n = values.len();
        if n == 0 {
            return MeanStd::default();
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let std = if n < 2 {
            0.0
        } else {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        };
        MeanStd { mean, std }
    }
}

/// Step figures over several runs: each run's figure, then mean ± std over the runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSpread {
    /// The runs, by name, in the order read.
    pub runs: Vec<String>,
    /// Each run's step statistics, in the same order.
    pub steps: Vec<StepStats>,
    pub mean_ns: MeanStd,
    pub p50_ns: MeanStd,
    pub p90_ns: MeanStd,
    pub p99_ns: MeanStd,
    /// Over the runs that reported tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_s: Option<MeanStd>,
}

impl RunSpread {
    /// The spread of `runs` (name, step statistics), runs without steps left out.
    pub fn of(runs: Vec<(String, StepStats)>) -> RunSpread {
        let runs: Vec<_> = runs.into_iter().filter(|r| r.1.count > 0).collect();
        let over = |f: fn(&StepStats) -> f64| {
            MeanStd::of(&runs.iter().map(|r| f(&r.1)).collect::<Vec<_>>())
        };
        let rates: Vec<f64> = runs.iter().filter_map(|r| r.1.throughput_per_s).collect();
        RunSpread {
            mean_ns: over(|s| s.mean_ns),
            p50_ns: over(|s| s.p50_ns),
            p90_ns: over(|s| s.p90_ns),
            p99_ns: over(|s| s.p99_ns),
            tokens_per_s: (!rates.is_empty()).then(|| MeanStd::of(&rates)),
            runs: runs.iter().map(|r| r.0.clone()).collect(),
            steps: runs.into_iter().map(|r| r.1).collect(),
        }
    }
}

/// Percentile `p` (an integer percent) of sorted values, interpolating linearly: exact rational
/// arithmetic up to the final division.
pub fn percentile(sorted: &[i64], p: u32) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let scaled = p as usize * (sorted.len() - 1);
    let lo = scaled / 100;
    let rem = (scaled % 100) as i64;
    if rem == 0 {
        return sorted[lo] as f64;
    }
    let diff = sorted[lo + 1] - sorted[lo];
    sorted[lo] as f64 + (diff as i128 * rem as i128) as f64 / 100.0
}

/// [`percentile`] 50 of `values` in any order (they are reordered), in linear time: the middle
/// value, or the mean of the two middle ones for an even count.
pub fn median(values: &mut [i64]) -> f64 {
    let n = values.len();
    if n == 0 {
        return 0.0;
    }
    let (left, &mut upper, _) = values.select_nth_unstable(n / 2);
    if n % 2 == 1 {
        return upper as f64;
    }
    let lower = left.iter().copied().max().unwrap_or(upper);
    lower as f64 + (upper - lower) as f64 / 2.0
}

/// The figures of a set of durations that the kernel and API tables give (Nsight Systems'
/// `cuda_gpu_kern_sum` and `cuda_api_sum`), in linear time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub count: u64,
    /// Saturating at the 64-bit limit.
    pub total: i64,
    pub mean: f64,
    pub median: f64,
    pub min: i64,
    pub max: i64,
}

impl Spread {
    /// The spread of `durations` (reordered); all 0 for none.
    pub fn of(durations: &mut [i64]) -> Spread {
        let total = saturating::sum(durations.iter().copied());
        let count = durations.len() as u64;
        Spread {
            count,
            total,
            mean: if count == 0 {
                0.0
            } else {
                total as f64 / count as f64
            },
            min: durations.iter().copied().min().unwrap_or(0),
            max: durations.iter().copied().max().unwrap_or(0),
            median: median(durations),
        }
    }
}

pub fn step_stats<'a>(steps: impl Iterator<Item = &'a Step>) -> StepStats {
    let mut durs = Vec::new();
    let mut rates = Vec::new();
    let mut s = StepStats::default();
    for st in steps {
        durs.push(st.dur);
        rates.extend(tokens_per_s(st));
        if let Some(w) = st.work {
            s.work_steps += 1;
            s.work += w;
            s.work_time_ns.add_sat(st.dur);
        }
    }
    if durs.is_empty() {
        return s;
    }
    durs.sort_unstable();
    s.count = durs.len();
    s.total_ns = saturating::sum(durs.iter().copied());
    s.mean_ns = s.total_ns as f64 / s.count as f64;
    s.p50_ns = percentile(&durs, 50);
    s.p90_ns = percentile(&durs, 90);
    s.p99_ns = percentile(&durs, 99);
    s.min_ns = durs[0];
    s.max_ns = durs[durs.len() - 1];
    if s.work_steps > 0 && s.work_time_ns > 0 {
        s.throughput_per_s = Some(s.work / (s.work_time_ns as f64 / 1e9));
    }
    if !rates.is_empty() {
        rates.sort_unstable_by(f64::total_cmp);
        s.step_tokens_per_s = Some(Rates {
            p50: percentile_f64(&rates, 50),
            min: rates[0],
            max: rates[rates.len() - 1],
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let v: Vec<i64> = (1..=10).map(|x| x * 100).collect();
        assert_eq!(percentile(&v, 50), 550.0);
        assert_eq!(percentile(&v, 90), 910.0);
        assert_eq!(percentile(&v, 99), 991.0);
        assert_eq!(percentile(&[7], 99), 7.0);
        for v in [
            vec![5],
            vec![9, 1],
            vec![3, 1, 2],
            vec![400, 100, 250, 50],
            vec![],
        ] {
            let mut sorted = v.clone();
            sorted.sort_unstable();
            assert_eq!(median(&mut v.clone()), percentile(&sorted, 50), "{v:?}");
        }
        let steps: Vec<Step> = [300, 100, 200]
            .iter()
            .enumerate()
            .map(|(i, &d)| Step {
                number: i as i64,
                start: 0,
                dur: d,
                work: Some(10.0),
                ..Step::default()
            })
            .collect();
        let s = step_stats(steps.iter());
        assert_eq!(s.count, 3);
        assert_eq!(s.mean_ns, 200.0);
        assert_eq!(s.p50_ns, 200.0);
        assert_eq!(s.throughput_per_s, Some(30.0 / 600e-9));
    }
}
