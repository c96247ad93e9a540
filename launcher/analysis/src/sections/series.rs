//! The series `report --html` plots and `summary.json` carries so that every plotted number
//! can be checked against it: each rank's step durations in step order, and each device's
//! memory counter (`reserved_bytes`), thinned to a bounded number of points that keeps every
//! extreme (the peak included), so a long run does not make the summary or the page huge.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::load::FileData;

/// One `ProfilerStep#N` of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepTime {
    pub step: i64,
    pub dur_ns: i64,
    /// Its tokens per second (`args.work` over its duration), when it reported tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_s: Option<f64>,
}

/// Every step of the files `idx`, by step number (a number seen in two profiling cycles
/// appears twice, in file order).
pub fn step_times(files: &[FileData], idx: &[usize]) -> Vec<StepTime> {
    let mut out: Vec<StepTime> = idx
        .iter()
        .flat_map(|&i| files[i].steps.iter())
        .map(|s| StepTime {
            step: s.number,
            dur_ns: s.dur,
            tokens_per_s: crate::model::tokens_per_s(s),
        })
        .collect();
    // Stable: repeats keep file order.
    out.sort_by_key(|s| s.step);
    out
}

/// At most this many points per device (two per time bucket).
pub const MAX_POINTS: usize = 2000;

/// The memory counter of one device of one rank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySeries {
    pub rank: i64,
    pub device: i64,
    /// Counter samples in the trace(s).
    pub samples: usize,
    /// Highest `reserved_bytes`, and the time of its first sample.
    pub peak_bytes: i64,
    pub peak_ns: i64,
    /// `[time_ns, reserved_bytes]` in time order: every sample when there are at most
    /// [`MAX_POINTS`], else the time range cut into `MAX_POINTS / 2` equal buckets and in each
    /// the lowest and the highest sample (first of equals): the peak, and each
    /// bucket's extremes, survive.
    pub points: Vec<(i64, i64)>,
}

/// Memory series of the files `idx` (one rank), per device in device order.
pub fn memory(rank: i64, files: &[FileData], idx: &[usize]) -> Vec<MemorySeries> {
    let mut by_dev: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    for &i in idx {
        for &(dev, t, b) in &files[i].memory {
            by_dev.entry(dev).or_default().push((t, b));
        }
    }
    by_dev
        .into_iter()
        .map(|(device, mut s)| {
            // Stable: samples at one time keep file order (the last is the value after it).
            s.sort_by_key(|p| p.0);
            let (peak_ns, peak_bytes) = s
                .iter()
                .copied()
                .reduce(|best, p| if p.1 > best.1 { p } else { best })
                .expect("a device has samples");
            MemorySeries {
                rank,
                device,
                samples: s.len(),
                peak_bytes,
                peak_ns,
                points: thin(&s, MAX_POINTS),
            }
        })
        .collect()
}

/// `s` (time-sorted) reduced to at most `max` points: per equal time bucket its lowest and
/// highest sample, in time order.
pub fn thin(s: &[(i64, i64)], max: usize) -> Vec<(i64, i64)> {
    if s.len() <= max {
        return s.to_vec();
    }
    let buckets = (max / 2).max(1) as i128;
    let (t0, t1) = (s[0].0, s[s.len() - 1].0);
    let span = (t1 - t0).max(1) as i128;
    let bucket = |t: i64| (((t - t0) as i128 * buckets / span).min(buckets - 1)) as i64;
    let mut out = Vec::with_capacity(max);
    let mut i = 0;
    while i < s.len() {
        let b = bucket(s[i].0);
        let (mut lo, mut hi) = (i, i);
        let mut j = i;
        while j < s.len() && bucket(s[j].0) == b {
            if s[j].1 < s[lo].1 {
                lo = j;
            }
            if s[j].1 > s[hi].1 {
                hi = j;
            }
            j += 1;
        }
        out.push(s[lo.min(hi)]);
        if lo != hi {
            out.push(s[lo.max(hi)]);
        }
        i = j;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thin_keeps_every_extreme_in_time_order() {
        let s: Vec<(i64, i64)> = (0..10)
            .map(|t| (t, [1, 5, 2, 2, 9, 0, 3, 3, 3, 4][t as usize]))
            .collect();
        assert_eq!(thin(&s, 10), s);
        // 2 buckets of [0, 9]: t 0..=4 and 5..=9.
        assert_eq!(thin(&s, 4), vec![(0, 1), (4, 9), (5, 0), (9, 4)]);
    }
}
