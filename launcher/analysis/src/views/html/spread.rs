//! A figure's distribution over the ranks, drawn where one bar or row per rank no longer
//! reads (past [`ONE_PER_RANK_UP_TO`] ranks): a histogram of the ranks, a box from p25 to p75
//! with the median, whiskers to the smallest and the largest rank, and the outliers
//! (summary.json's `culprits.spreads`) each as a dot labelled `rank N` with its value, linked
//! to the rank's row.

use std::fmt::Write;

use super::svg::{self, data, esc, f, Scale};
use crate::format::{dur, times};
use crate::model::Breakdown;
use crate::summary::culprits::figure_label;
use crate::summary::schema::Summary;

/// Up to this many ranks the page draws one bar (or row) per rank; beyond, distributions.
pub const ONE_PER_RANK_UP_TO: usize = 32;

const W: f64 = 760.0;
const M: f64 = 24.0;
/// Histogram bins across the axis.
const BINS: usize = 40;
const HIST: f64 = 36.0;
const LINE: f64 = 15.0;
/// About 6.2 px per character of an 11 px label.
const CHAR: f64 = 6.2;

/// What the figures of a distribution chart mean, once per section.
pub const NOTE: &str = r#"<p class="note">Distributions over the ranks: bars count the ranks in each bin; the box spans p25 to p75 with the median inside, the whiskers reach the smallest and the largest rank; the ranks beyond 1.5 interquartile ranges from the box (and 1% or more from the median) are dots, the furthest five named, each linked to its row.</p>"#;

/// The field `figure` of a rank's GPU time breakdown, for the spreads of `ranks[].gpu`.
pub fn gpu_field(b: &Breakdown, figure: &str) -> Option<i64> {
    Some(match figure {
        "compute_ns" => b.compute_ns,
        "comm_compute_overlap_ns" => b.comm_compute_overlap_ns,
        "communication_ns" => b.communication_ns,
        "memcpy_ns" => b.memcpy_ns,
        "memset_ns" => b.memset_ns,
        "idle_host_bound_ns" => b.idle_host_bound_ns,
        "idle_sync_wait_ns" => b.idle_sync_wait_ns,
        _ => return None,
    })
}

/// The chart of the spread of `figure`, whose ranks' values are `values` (rank, its
/// `data-key` in summary.json, value); nothing when summary.json has no such spread or every
/// value is 0.
pub fn chart(out: &mut String, s: &Summary, figure: &str, values: &[(i64, String, f64)]) {
    let Some((si, sp)) = s
        .culprits
        .spreads
        .iter()
        .enumerate()
        .find(|(_, x)| x.figure == figure)
    else {
        return;
    };
    if sp.max == 0.0 && sp.min == 0.0 {
        return;
    }
    let at = format!("culprits.spreads.{si}");
    let (div, unit) = svg::time_unit(sp.max.abs().max(sp.min.abs()));
    // The axis fits the values, on round ticks.
    let ts = svg::ticks(sp.min / div, sp.max / div, 6);
    let lo = ts.first().map_or(sp.min, |t| t * div).min(sp.min);
    let hi = ts.last().map_or(sp.max, |t| t * div).max(sp.max);
    let x = Scale::new(lo, hi, M, W - M);
    // The outliers' labels, each on the first line (from the histogram up) where it overlaps
    // no other, its box kept inside the chart.
    let mut placed: Vec<(usize, f64, f64)> = Vec::new();
    let mut labels = Vec::new();
    for o in &sp.outliers {
        let text = format!("rank {}: {} ({})", o.rank, dur(o.value), times(o.vs_median));
        let w = CHAR * text.chars().count() as f64;
        let cx = x
            .at(o.value)
            .clamp(M / 2.0 + w / 2.0, W - M / 2.0 - w / 2.0);
        let (a, b) = (cx - w / 2.0, cx + w / 2.0);
        let line = (0..)
            .find(|&l| {
                placed
                    .iter()
                    .all(|&(pl, pa, pb)| pl != l || b + 8.0 < pa || a > pb + 8.0)
            })
            .expect("a free line");
        placed.push((line, a, b));
        labels.push((line, cx, text));
    }
    let lines = placed.iter().map(|p| p.0 + 1).max().unwrap_or(0);
    let top = 6.0 + LINE * lines as f64;
    let base = top + HIST;
    let box_y = base + 6.0;
    let axis_y = box_y + 18.0;
    let h = axis_y + 40.0;
    let label = format!("{} over {} ranks", figure_label(figure), sp.ranks);
    svg::open(out, "chart spread", W, h, &label);
    // The histogram of the ranks.
    let mut bins = [0usize; BINS];
    let width = (hi - lo) / BINS as f64;
    for (_, _, v) in values {
        let b = if width > 0.0 {
            (((v - lo) / width) as usize).min(BINS - 1)
        } else {
            0
        };
        bins[b] += 1;
    }
    let most = bins.iter().copied().max().unwrap_or(1).max(1);
    for (b, &n) in bins.iter().enumerate().filter(|(_, n)| **n > 0) {
        let (a, e) = (lo + width * b as f64, lo + width * (b + 1) as f64);
        let bh = (HIST * n as f64 / most as f64).max(1.5);
        let _ = write!(
            out,
            r#"<rect class="bin" x="{}" y="{}" width="{}" height="{}" data-count="{n}"><title>{n} rank(s) from {} to {}</title></rect>"#,
            f(x.at(a)),
            f(base - bh),
            f((x.at(e) - x.at(a) - 1.0).max(0.5)),
            f(bh),
            dur(a),
            dur(e)
        );
    }
    // The box, the median and the whiskers.
    let mid = box_y + 6.0;
    let _ = write!(
        out,
        r#"<g class="box"><title>over {} ranks: min {}, p25 {}, median {}, p75 {}, max {}</title><line class="whisker" x1="{}" y1="{}" x2="{}" y2="{}"/><rect class="iqr" x="{}" y="{}" width="{}" height="12"/>"#,
        sp.ranks,
        dur(sp.min),
        dur(sp.p25),
        dur(sp.median),
        dur(sp.p75),
        dur(sp.max),
        f(x.at(sp.min)),
        f(mid),
        f(x.at(sp.max)),
        f(mid),
        f(x.at(sp.p25)),
        f(box_y),
        f((x.at(sp.p75) - x.at(sp.p25)).max(1.0)),
    );
    for (k, v, class) in [
        ("min", sp.min, "whisker"),
        ("p25", sp.p25, "quartile"),
        ("median", sp.median, "median"),
        ("p75", sp.p75, "quartile"),
        ("max", sp.max, "whisker"),
    ] {
        let _ = write!(
            out,
            r#"<line class="{class}" x1="{}" y1="{}" x2="{}" y2="{}"{}/>"#,
            f(x.at(v)),
            f(box_y),
            f(x.at(v)),
            f(box_y + 12.0),
            data(&format!("{at}.{k}"), v)
        );
    }
    out.push_str("</g>");
    // The outliers: a dot each, its value keyed as the rank's own figure, and its label.
    for (k, (o, (line, cx, text))) in sp.outliers.iter().zip(&labels).enumerate() {
        let dot = x.at(o.value);
        let ly = base - HIST - LINE * *line as f64 - 3.0;
        let key = values
            .iter()
            .find(|v| v.0 == o.rank)
            .map_or(String::new(), |v| data(&v.1, v.2));
        let _ = write!(
            out,
            r##"<a href="#{}"><line class="leader" x1="{}" y1="{}" x2="{}" y2="{}"/><circle class="outlier" cx="{}" cy="{}" r="4"{key}><title>{}</title></circle><text class="named" x="{}" y="{}" text-anchor="middle"{}>{}</text></a>"##,
            super::culprits::rank_anchor(o.rank),
            f(dot),
            f(ly + 3.0),
            f(dot),
            f(mid - 4.0),
            f(dot),
            f(mid),
            esc(text),
            f(*cx),
            f(ly),
            data(&format!("{at}.outliers.{k}.value"), o.value),
            esc(text)
        );
    }
    svg::x_axis(
        out,
        &x,
        axis_y,
        div,
        &format!("{} per rank ({unit})", figure_label(figure)),
    );
    out.push_str("</svg>");
}

/// The spreads of the GPU time breakdown's figures, in the breakdown's order.
pub fn gpu_charts(out: &mut String, s: &Summary) {
    for figure in [
        "compute_ns",
        "comm_compute_overlap_ns",
        "communication_ns",
        "memcpy_ns",
        "memset_ns",
        "idle_host_bound_ns",
        "idle_sync_wait_ns",
    ] {
        let values: Vec<(i64, String, f64)> = s
            .ranks
            .iter()
            .enumerate()
            .filter_map(|(ri, r)| {
                gpu_field(&r.gpu, figure)
                    .map(|v| (r.rank, format!("ranks.{ri}.gpu.{figure}"), v as f64))
            })
            .collect();
        chart(out, s, figure, &values);
    }
}
