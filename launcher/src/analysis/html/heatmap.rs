//! Rank × step heatmap of step time, drawn when several ranks have steps. A cell's colour is
//! its step time relative to the mean of that step over the ranks that ran it (white: the
//! mean, red: slower, blue: faster), so a straggler stands out even when step time drifts;
//! the slowest rank of each step is outlined. A step number seen twice on a rank (two
//! profiling cycles) shows its longest time, as the report's slowest-rank figures do.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::super::model::Summary;
use super::super::render::dur;
use super::svg::{self, data, f};

const W: f64 = 760.0;
const M_LEFT: f64 = 64.0;
const M_RIGHT: f64 = 16.0;
const ROW: f64 = 18.0;

/// Colour of `r` = time / step mean, with `dev` the largest |r - 1| of the map.
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
        .fold(0.01, f64::max);
    let cw = (W - M_LEFT - M_RIGHT) / cells.len() as f64;
    let h = 8.0 + ROW * s.ranks.len() as f64 + 40.0;
    let mut out = String::from(
        r#"<section id="cp-heatmap"><h2>Step time per rank and step</h2><p class="note">Colour: step time relative to that step's mean over ranks (white = mean, red = slower, blue = faster); outlined: the step's slowest rank.</p>"#,
    );
    svg::open(
        &mut out,
        "chart heatmap",
        W,
        h,
        "rank by step heatmap of step time",
    );
    for (ri, r) in s.ranks.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text class="tick" x="{}" y="{}" text-anchor="end">rank {}</text>"#,
            f(M_LEFT - 6.0),
            f(8.0 + ROW * ri as f64 + ROW / 2.0 + 4.0),
            r.rank
        );
    }
    for (ci, (step, by)) in cells.iter().enumerate() {
        let mean = means[step];
        for (&ri, &(d, j)) in by {
            let rank = s.ranks[ri].rank;
            let outlined = slowest.get(step) == Some(&rank);
            let _ = write!(
                out,
                r#"<rect class="cell{}" x="{}" y="{}" width="{}" height="{}" fill="{}"{}><title>rank {rank} step {step}: {} ({:+.1}% vs the step's mean over {} ranks, {}){}</title></rect>"#,
                if outlined { " slowest" } else { "" },
                f(M_LEFT + cw * ci as f64),
                f(8.0 + ROW * ri as f64),
                f(cw.max(0.5)),
                f(ROW - 1.0),
                colour(d as f64 / mean, dev),
                data(&format!("ranks.{ri}.step_times.{j}.dur_ns"), d),
                dur(d as f64),
                (d as f64 / mean - 1.0) * 100.0,
                by.len(),
                dur(mean),
                if outlined { "; slowest" } else { "" }
            );
        }
    }
    // Step numbers under every column when they fit, else under the first, the last and a
    // few between.
    let n = cells.len();
    let y = 8.0 + ROW * s.ranks.len() as f64 + 14.0;
    let mut shown = Vec::new();
    let labels = if n <= 24 { n } else { 6 };
    for k in 0..labels {
        let ci = if labels > 1 {
            k * (n - 1) / (labels - 1)
        } else {
            0
        };
        if shown.last() != Some(&ci) {
            shown.push(ci);
        }
    }
    for (ci, step) in cells.keys().enumerate() {
        if shown.contains(&ci) {
            let _ = write!(
                out,
                r#"<text class="tick" x="{}" y="{}" text-anchor="middle">{step}</text>"#,
                f(M_LEFT + cw * (ci as f64 + 0.5)),
                f(y)
            );
        }
    }
    let _ = write!(
        out,
        r#"<text class="axis" x="{}" y="{}" text-anchor="middle">step number</text></svg></section>"#,
        f((M_LEFT + W - M_RIGHT) / 2.0),
        f(y + 16.0)
    );
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn colours() {
        assert_eq!(super::colour(1.0, 0.5), "#ffffff");
        assert_eq!(super::colour(1.5, 0.5), "#d62728");
        assert_eq!(super::colour(0.5, 0.5), "#1f77b4");
        assert_eq!(super::colour(3.0, 0.5), "#d62728");
    }
}
