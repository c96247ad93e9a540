//! Step latency statistics: count, total, mean, interpolated percentiles, throughput.

use serde::{Deserialize, Serialize};

use crate::analysis::load::Step;
use crate::analysis::saturating::{self, AddSat};

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
    /// Steps that reported `args.work`, their work and their time.
    pub work_steps: usize,
    pub work: f64,
    pub work_time_ns: i64,
    /// `work / work_time` in units per second, when any step reported work.
    pub throughput_per_s: Option<f64>,
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

pub fn step_stats<'a>(steps: impl Iterator<Item = &'a Step>) -> StepStats {
    let mut durs = Vec::new();
    let mut s = StepStats::default();
    for st in steps {
        durs.push(st.dur);
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
        let steps: Vec<Step> = [300, 100, 200]
            .iter()
            .enumerate()
            .map(|(i, &d)| Step {
                number: i as i64,
                start: 0,
                dur: d,
                work: Some(10.0),
            })
            .collect();
        let s = step_stats(steps.iter());
        assert_eq!(s.count, 3);
        assert_eq!(s.mean_ns, 200.0);
        assert_eq!(s.p50_ns, 200.0);
        assert_eq!(s.throughput_per_s, Some(30.0 / 600e-9));
    }
}
