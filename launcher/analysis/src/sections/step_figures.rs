//! Steps binned by one of their figures (`cuprof report --bin kv_len=0,512,1024`): per bin the
//! steps, their latency percentiles and tokens per second.

use serde::{Deserialize, Serialize};

use crate::load::FileData;
use crate::model::{step_stats, StepStats};

/// `--bin FIGURE=E0,E1,...`: bin `i` holds the steps whose figure is in `[E_i, E_i+1)`, the last
/// `[E_last, inf)`.
#[derive(Debug, Clone, PartialEq)]
pub struct BinSpec {
    pub figure: String,
    pub edges: Vec<f64>,
}

impl std::str::FromStr for BinSpec {
    type Err = String;

    /// `FIGURE=E0,E1,...`: a name, then one edge or more, finite and increasing.
    fn from_str(text: &str) -> Result<Self, String> {
        let want = "give FIGURE=E0,E1,... (e.g. kv_len=0,512,1024): a figure name, then increasing numbers";
        let Some((figure, list)) = text.split_once('=') else {
            return Err(format!("{text:?} has no '=': {want}"));
        };
        let figure = figure.trim();
        if figure.is_empty() {
            return Err(format!("{text:?} names no figure: {want}"));
        }
        let mut edges = Vec::new();
        for e in list.split(',') {
            match e.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => edges.push(v),
                _ => {
                    return Err(format!(
                        "edge {:?} of {text:?} is not a finite number: {want}",
                        e.trim()
                    ))
                }
            }
        }
        if let Some(w) = edges.windows(2).find(|w| w[1] <= w[0]) {
            return Err(format!(
                "edges of {text:?} must increase, but {} follows {}: {want}",
                w[1], w[0]
            ));
        }
        Ok(BinSpec {
            figure: figure.to_string(),
            edges,
        })
    }
}

/// One bin: `[lo, hi)`, `hi` none for the last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepBin {
    pub lo: f64,
    pub hi: Option<f64>,
    /// Its steps: count, latency mean and p50/p90/p99, tokens per second.
    pub steps: StepStats,
}

/// The steps of every file binned by `figure`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepBins {
    pub figure: String,
    pub bins: Vec<StepBin>,
    /// Steps whose figure is below the first edge.
    pub below: usize,
    /// Steps without the figure.
    pub without: usize,
}

pub fn bins(files: &[FileData], spec: &BinSpec) -> StepBins {
    let steps = || files.iter().flat_map(|f| f.steps.iter());
    let value = |s: &crate::load::Step| s.figure(&spec.figure);
    let bins = spec
        .edges
        .iter()
        .enumerate()
        .map(|(i, &lo)| {
            let hi = spec.edges.get(i + 1).copied();
            let inside = |v: f64| v >= lo && hi.is_none_or(|h| v < h);
            StepBin {
                lo,
                hi,
                steps: step_stats(steps().filter(|s| value(s).is_some_and(inside))),
            }
        })
        .collect();
    let first = spec.edges.first().copied().unwrap_or(f64::INFINITY);
    StepBins {
        figure: spec.figure.clone(),
        bins,
        below: steps()
            .filter(|s| value(s).is_some_and(|v| v < first))
            .count(),
        without: steps().filter(|s| value(s).is_none()).count(),
    }
}
