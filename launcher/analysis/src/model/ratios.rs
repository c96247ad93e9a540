//! Ratios shared by every figure: `a / b` that is 0 for no total, and max-over-mean imbalance.

/// `a / b`, 0 when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

/// `max / mean`; `None` for no values or a zero mean.
pub fn imbalance(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let max = v.iter().copied().fold(f64::MIN, f64::max);
    (mean > 0.0).then(|| max / mean)
}
