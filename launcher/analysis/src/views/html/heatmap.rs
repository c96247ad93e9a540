//! Rank × step heatmap of step time, drawn when several ranks have steps. A cell's colour is
//! its step time relative to the mean of that step over the ranks that ran it (white: the
//! mean, red: slower, blue: faster), so a straggler stands out even when step time drifts;
//! the slowest rank of each step is outlined. A step number seen twice on a rank (two
//! profiling cycles) shows its longest time, as the report's slowest-rank figures do. Past a
//! few dozen ranks, the ranks' mean step time as a distribution follows, its outliers named.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::svg::{self, data, f};
use crate::format::dur;
use crate::summary::schema::Summary;

const W: f64 = 760.0;
const M_LEFT: f64 = 64.0;
const M_RIGHT: f64 = 16.0;
const ROW: f64 = 18.0;

/// Colour of `r` = time / step mean, with `dev` the deviation drawn at full colour.
fn colour(r: f64, dev: f64) -> String {
    let t = ((r - 1.0) / dev).clamp(-1.0, 1.0);
    let fade = |c: f64| (255.0 - (255.0 - c) * t.abs()).round() as u8;
    let (cr, cg, cb) = if t >= 0.0 {
        (fade(214.0), fade(39.0), fade(40.0))
    } else {
        (fade(31.0), fade(119.0), fade(180.0))
    };
    format!("#{cr:02x}{cg:02x}{cb:02x}")
}

/// Colour limits in percent, the smallest that holds the largest deviation: fixed steps so
/// that a 5% and a 50% straggler do not both read as full red.
const LIMITS: [f64; 5] = [5.0, 10.0, 20.0, 50.0, 100.0];
/// Rows and columns drawn at most: beyond, each row holds several ranks and each column
/// several steps, and a cell shows its block's largest deviation (512 ranks × 1,000 steps
/// would be half a million cells).
const MAX_ROWS: usize = 64;
const MAX_COLS: usize = 100;
/// Ranks drawn one per row up to this many; grouped rows are thinner.
const ONE_PER_ROW: usize = 32;

/// The colour limit for the largest deviation `dev` (a fraction).
fn limit(dev: f64) -> f64 {
    LIMITS
        .into_iter()
        .find(|l| dev * 100.0 <= *l + 1e-9)
        .unwrap_or(100.0)
}

/// One cell of a step: (time, rank index, index in step_times).
type Cell = (i64, usize, usize);

pub fn section(s: &Summary) -> String {
    let with_steps = s.ranks.iter().filter(|r| !r.step_times.is_empty()).count();
    if with_steps < 2 {
        return String::new();
    }
    // step -> rank index -> (longest time, its index in step_times)
    let mut cells: BTreeMap<i64, BTreeMap<usize, (i64, usize)>> = BTreeMap::new();
    for (ri, r) in s.ranks.iter().enumerate() {
        for (j, t) in r.step_times.iter().enumerate() {
            let e = cells
                .entry(t.step)
                .or_default()
                .entry(ri)
                .or_insert((t.dur_ns, j));
            if t.dur_ns > e.0 {
                *e = (t.dur_ns, j);
            }
        }
    }
    let slowest: BTreeMap<i64, i64> = s
        .cross_rank
        .slowest_rank_per_step
        .iter()
        .map(|x| (x.step, x.rank))
        .collect();
    let means: BTreeMap<i64, f64> = cells
        .iter()
        .map(|(&step, by)| {
            let sum: i64 = by.values().map(|c| c.0).sum();
            (step, sum as f64 / by.len() as f64)
        })
        .collect();
    let dev = cells
        .iter()
        .flat_map(|(step, by)| {
            let mean = means[step];
            by.values().map(move |c| (c.0 as f64 / mean - 1.0).abs())
        })
        .fold(0.0, f64::max);
    let lim = limit(dev);
    let nr = s.ranks.len();
    let rg = nr.div_ceil(MAX_ROWS).max(1);
    let rows = nr.div_ceil(rg);
    let steps: Vec<i64> = cells.keys().copied().collect();
    let cg = steps.len().div_ceil(MAX_COLS).max(1);
    let cols = steps.len().div_ceil(cg);
    let row_h = if nr <= ONE_PER_ROW { ROW } else { 10.0 };
    // Rank labels at least 14 px apart.
    let label_every = (14.0 / row_h).ceil() as usize;
    // Grouped rows' labels (`ranks 504–511`) need more room than `rank 7`.
    let left = if rg > 1 { 104.0 } else { M_LEFT };
    let cw = (W - left - M_RIGHT) / cols as f64;
    let grid_h = row_h * rows as f64;
    let h = 8.0 + grid_h + 96.0;
    let mut out = String::from(
        r#"<section id="cp-heatmap"><h2>Step time per rank and step</h2><p class="note">Colour: step time relative to that step's mean over ranks (white = mean, red = slower, blue = faster; scale under the map); outlined: the step's slowest rank."#,
    );
    if rg > 1 || cg > 1 {
        let _ = write!(
            out,
            " {} ranks × {} steps: each row holds {rg} rank(s) and each column {cg} step(s); a cell shows the largest deviation in its block (hover: which rank and step).",
            nr,
            steps.len()
        );
    }
    out.push_str("</p>");
    svg::open(
        &mut out,
        "chart heatmap",
        W,
        h,
        "rank by step heatmap of step time",
    );
    for row in 0..rows {
        if row % label_every != 0 {
            continue;
        }
        let (a, b) = (row * rg, ((row + 1) * rg).min(nr) - 1);
        let label = if a == b {
            format!("rank {}", s.ranks[a].rank)
        } else {
            format!("ranks {}–{}", s.ranks[a].rank, s.ranks[b].rank)
        };
        let _ = write!(
            out,
            r#"<text class="tick" x="{}" y="{}" text-anchor="end">{label}</text>"#,
            f(left - 6.0),
            f(8.0 + row_h * row as f64 + row_h / 2.0 + 4.0),
        );
    }
    for (ci, chunk) in steps.chunks(cg).enumerate() {
        for row in 0..rows {
            // The block's cell furthest from its step's mean.
            let mut best: Option<(f64, i64, Cell)> = None;
            for &step in chunk {
                let mean = means[&step];
                for ri in row * rg..((row + 1) * rg).min(nr) {
                    if let Some(&(d, j)) = cells[&step].get(&ri) {
                        let r = d as f64 / mean;
                        if best.is_none_or(|b| (r - 1.0).abs() > (b.0 - 1.0).abs()) {
                            best = Some((r, step, (d, ri, j)));
                        }
                    }
                }
            }
            let Some((ratio, step, (d, ri, j))) = best else {
                continue;
            };
            let rank = s.ranks[ri].rank;
            let outlined = rg == 1 && cg == 1 && slowest.get(&step) == Some(&rank);
            let mut block = String::new();
            if rg > 1 || cg > 1 {
                let (a, b) = (row * rg, ((row + 1) * rg).min(nr) - 1);
                let _ = write!(
                    block,
                    "ranks {}–{}, steps {}–{}: largest deviation ",
                    s.ranks[a].rank,
                    s.ranks[b].rank,
                    chunk[0],
                    chunk[chunk.len() - 1]
                );
            }
            let _ = write!(
                out,
                r#"<rect class="cell{}" x="{}" y="{}" width="{}" height="{}" fill="{}"{}><title>{block}rank {rank} step {step}: {} ({:+.1}% vs the step's mean over {} ranks, {}){}</title></rect>"#,
                if outlined { " slowest" } else { "" },
                f(left + cw * ci as f64),
                f(8.0 + row_h * row as f64),
                f(cw.max(0.5)),
                f(row_h - 1.0),
                colour(ratio, lim / 100.0),
                data(&format!("ranks.{ri}.step_times.{j}.dur_ns"), d),
                dur(d as f64),
                (ratio - 1.0) * 100.0,
                cells[&step].len(),
                dur(means[&step]),
                if outlined { "; slowest" } else { "" }
            );
        }
    }
    // Step numbers under the columns: every column when they fit, else six spread out.
    let y = 8.0 + grid_h + 14.0;
    let labels = if cols <= 24 { cols } else { 6 };
    let mut shown = Vec::new();
    for k in 0..labels {
        let ci = if labels > 1 {
            k * (cols - 1) / (labels - 1)
        } else {
            0
        };
        if shown.last() != Some(&ci) {
            shown.push(ci);
        }
    }
    for ci in shown {
        let _ = write!(
            out,
            r#"<text class="tick" x="{}" y="{}" text-anchor="middle">{}</text>"#,
            f(left + cw * (ci as f64 + 0.5)),
            f(y),
            steps[ci * cg]
        );
    }
    let _ = write!(
        out,
        r#"<text class="axis" x="{}" y="{}" text-anchor="middle">step number{}</text>"#,
        f((left + W - M_RIGHT) / 2.0),
        f(y + 16.0),
        if cg > 1 {
            format!(" (first of each column's {cg})")
        } else {
            String::new()
        }
    );
    scale(&mut out, lim, y + 34.0);
    out.push_str("</svg>");
    if nr > super::spread::ONE_PER_RANK_UP_TO {
        // Lock-step ranks have equal step times: the map shows noise; the ranks' mean step
        // times, as a distribution, name the ranks that differ.
        out.push_str(super::spread::NOTE);
        let values: Vec<(i64, String, f64)> = s
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, r)| r.steps.count > 0)
            .map(|(ri, r)| (r.rank, format!("ranks.{ri}.steps.mean_ns"), r.steps.mean_ns))
            .collect();
        super::spread::chart(&mut out, s, "mean_step_ns", &values);
    }
    out.push_str("</section>");
    out
}

/// The colour scale: 11 swatches from −`lim`% to +`lim`%, labelled at both ends and 0, and
/// what it measures.
fn scale(out: &mut String, lim: f64, y: f64) {
    let _ = write!(
        out,
        r#"<text class="axis" x="{}" y="{}">step time vs the step's mean, limits ±{lim}%</text>"#,
        f(M_LEFT),
        f(y + 10.0)
    );
    let (x0, sw) = (W - M_RIGHT - 11.0 * 22.0, 22.0);
    for k in 0..11 {
        let t = (k as f64 - 5.0) / 5.0;
        let _ = write!(
            out,
            r#"<rect class="swatch" x="{}" y="{}" width="{sw}" height="12" fill="{}"/>"#,
            f(x0 + sw * k as f64),
            f(y),
            colour(1.0 + t * lim / 100.0, lim / 100.0)
        );
    }
    let clamp = if lim >= 100.0 { "≥" } else { "" };
    for (k, label) in [
        (0.0, format!("−{lim}%")),
        (5.0, "0".to_string()),
        (10.0, format!("{clamp}+{lim}%")),
    ] {
        let _ = write!(
            out,
            r#"<text class="tick" x="{}" y="{}" text-anchor="middle">{label}</text>"#,
            f(x0 + sw * (k + 0.5)),
            f(y + 26.0)
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn colours() {
        assert_eq!(super::colour(1.0, 0.5), "#ffffff");
        assert_eq!(super::colour(1.5, 0.5), "#d62728");
        assert_eq!(super::colour(0.5, 0.5), "#1f77b4");
        assert_eq!(super::colour(3.0, 0.5), "#d62728");
        assert_eq!(super::limit(0.244), 50.0);
        assert_eq!(super::limit(0.05), 5.0);
        assert_eq!(super::limit(0.0), 5.0);
        assert_eq!(super::limit(3.0), 100.0);
    }
}
