//! GPU time per rank as stacked bars on one time axis: compute alone, compute with
//! communication under it (overlap), communication alone, memcpy, memset, idle host-bound,
//! idle sync wait. These are the report's exclusive parts with compute split at the overlap,
//! so they add up to the rank's wall time exactly; the table beside gives every figure,
//! communication's total included. Past [`ONE_PER_RANK_UP_TO`] ranks, each part's
//! distribution over the ranks instead ([`super::spread`]), its outliers named.

use std::fmt::Write;

use super::spread::ONE_PER_RANK_UP_TO;
use super::svg::{self, data, f, Scale};
use crate::format::{dur, pct};
use crate::model::{ratio, Breakdown};
use crate::summary::schema::Summary;

const W: f64 = 760.0;
const M_LEFT: f64 = 64.0;
const M_RIGHT: f64 = 16.0;
const BAR: f64 = 22.0;
const GAP: f64 = 10.0;
/// (label, CSS class, summary key(s) relative to a breakdown, value).
fn parts(b: &Breakdown) -> [(&'static str, &'static str, &'static str, i64); 7] {
    [
        (
            "compute only",
            "compute",
            "compute_ns - comm_compute_overlap_ns",
            b.compute_ns - b.comm_compute_overlap_ns,
        ),
        (
            "compute + communication",
            "overlap",
            "comm_compute_overlap_ns",
            b.comm_compute_overlap_ns,
        ),
        (
            "communication only",
            "comm",
            "communication_ns",
            b.communication_ns,
        ),
        ("memcpy", "memcpy", "memcpy_ns", b.memcpy_ns),
        ("memset", "memset", "memset_ns", b.memset_ns),
        (
            "idle, host-bound",
            "host",
            "idle_host_bound_ns",
            b.idle_host_bound_ns,
        ),
        (
            "idle, sync wait",
            "sync",
            "idle_sync_wait_ns",
            b.idle_sync_wait_ns,
        ),
    ]
}

/// `compute_ns - x` under `prefix` becomes `prefix.compute_ns - prefix.x`.
fn key(prefix: &str, rel: &str) -> String {
    rel.split(" - ")
        .map(|k| format!("{prefix}.{k}"))
        .collect::<Vec<_>>()
        .join(" - ")
}

pub fn section(s: &Summary) -> String {
    let mut out = String::from(r#"<section id="cp-gpu"><h2>GPU time per rank</h2>"#);
    if s.gpu.wall_ns == 0 {
        out.push_str(r#"<p class="none">no GPU activity</p></section>"#);
        return out;
    }
    if s.ranks.len() > ONE_PER_RANK_UP_TO {
        // A bar per rank of 512 would be 16,000 px tall: each part's distribution over the
        // ranks instead, its outliers named.
        out.push_str(super::spread::NOTE);
        super::spread::gpu_charts(&mut out, s);
        table(&mut out, s);
        out.push_str("</section>");
        return out;
    }
    let drawn: Vec<usize> = (0..s.ranks.len()).collect();
    let max = drawn
        .iter()
        .map(|&ri| s.ranks[ri].gpu.wall_ns)
        .max()
        .unwrap_or(0) as f64;
    let (div, unit) = svg::time_unit(max);
    let h = 20.0 + (BAR + GAP) * drawn.len() as f64 + 80.0;
    let x = Scale::new(0.0, max, M_LEFT, W - M_RIGHT);
    svg::open(&mut out, "chart", W, h, "GPU time breakdown per rank");
    for (row, &ri) in drawn.iter().enumerate() {
        let r = &s.ranks[ri];
        let y0 = 10.0 + (BAR + GAP) * row as f64;
        let _ = write!(
            out,
            r#"<text class="tick" x="{}" y="{}" text-anchor="end">rank {}</text>"#,
            f(M_LEFT - 6.0),
            f(y0 + BAR / 2.0 + 4.0),
            r.rank
        );
        let mut at = 0i64;
        for (label, class, rel, v) in parts(&r.gpu) {
            if v > 0 {
                let _ = write!(
                    out,
                    r#"<rect class="part {class}" x="{}" y="{}" width="{}" height="{BAR}"{}><title>rank {}: {label} {} ({} of {})</title></rect>"#,
                    f(x.at(at as f64)),
                    f(y0),
                    f((x.at((at + v) as f64) - x.at(at as f64)).max(0.5)),
                    data(&key(&format!("ranks.{ri}.gpu"), rel), v),
                    r.rank,
                    dur(v as f64),
                    pct(ratio(v as f64, r.gpu.wall_ns as f64)),
                    dur(r.gpu.wall_ns as f64)
                );
            }
            at += v;
        }
    }
    let axis_y = 10.0 + (BAR + GAP) * drawn.len() as f64;
    svg::x_axis(
        &mut out,
        &x,
        axis_y,
        div,
        &format!("GPU time in the rank's windows ({unit})"),
    );
    let items: Vec<(String, &str)> = parts(&Breakdown::default())
        .iter()
        .map(|p| (format!("part {}", p.1), p.0))
        .collect();
    let items: Vec<(&str, &str)> = items.iter().map(|(c, l)| (c.as_str(), *l)).collect();
    svg::legend(&mut out, &items, M_LEFT, W - M_RIGHT, axis_y + 40.0);
    out.push_str("</svg>");
    table(&mut out, s);
    out.push_str("</section>");
    out
}

fn table(out: &mut String, s: &Summary) {
    out.push_str(
        "<table><thead><tr><th>rank</th><th>wall</th><th>compute</th><th>communication \
         (not under compute)</th><th>communication total</th><th>comm under compute</th>\
         <th>memcpy</th><th>memset</th><th>idle host-bound</th><th>idle sync wait</th></tr>\
         </thead><tbody>",
    );
    let row =
        |out: &mut String, id: Option<String>, label: String, prefix: String, b: &Breakdown| {
            match id {
                Some(id) => {
                    let _ = write!(out, r#"<tr id="{id}"><td>{label}</td>"#);
                }
                None => {
                    let _ = write!(out, "<tr><td>{label}</td>");
                }
            }
            for (k, v) in [
                ("wall_ns", b.wall_ns),
                ("compute_ns", b.compute_ns),
                ("communication_ns", b.communication_ns),
                ("communication_total_ns", b.communication_total_ns),
                ("comm_compute_overlap_ns", b.comm_compute_overlap_ns),
                ("memcpy_ns", b.memcpy_ns),
                ("memset_ns", b.memset_ns),
                ("idle_host_bound_ns", b.idle_host_bound_ns),
                ("idle_sync_wait_ns", b.idle_sync_wait_ns),
            ] {
                let share = if k == "wall_ns" {
                    String::new()
                } else {
                    format!(" {}", pct(ratio(v as f64, b.wall_ns as f64)))
                };
                let _ = write!(
                    out,
                    "<td{}>{}{share}</td>",
                    data(&format!("{prefix}.{k}"), v),
                    dur(v as f64)
                );
            }
            out.push_str("</tr>");
        };
    // Many ranks' rows fold away (HTML's own <details>, no script), as the step table's do,
    // after the row of all ranks.
    let folded = s.ranks.len() > ONE_PER_RANK_UP_TO;
    if folded {
        row(out, None, "all".into(), "gpu".into(), &s.gpu);
        let _ = write!(
            out,
            "</tbody></table><details><summary>every rank ({})</summary><table><tbody>",
            s.ranks.len()
        );
    }
    for (ri, r) in s.ranks.iter().enumerate() {
        row(
            out,
            Some(super::culprits::rank_anchor(r.rank)),
            format!("rank {}", r.rank),
            format!("ranks.{ri}.gpu"),
            &r.gpu,
        );
    }
    if s.ranks.len() > 1 && !folded {
        row(out, None, "all".into(), "gpu".into(), &s.gpu);
    }
    out.push_str("</tbody></table>");
    if folded {
        out.push_str("</details>");
    }
}
