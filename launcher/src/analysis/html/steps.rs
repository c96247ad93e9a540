//! Step latency: each rank's step durations over the step number, and the distribution of all
//! of them with p50/p90/p99 marked, plus the statistics table.

use std::fmt::Write;

use super::super::model::{StepStats, Summary};
use super::super::render::dur;
use super::svg::{self, data, esc, f, Scale};

const W: f64 = 760.0;
const H: f64 = 300.0;
const M_LEFT: f64 = 64.0;
const M_RIGHT: f64 = 16.0;
const M_TOP: f64 = 16.0;
const M_BOTTOM: f64 = 44.0;

pub fn section(s: &Summary) -> String {
    let mut out = String::from(r#"<section id="cp-steps"><h2>Step latency</h2>"#);
    if s.steps.count == 0 {
        out.push_str(r#"<p class="none">no <code>ProfilerStep#N</code> annotations in the trace(s)</p></section>"#);
        return out;
    }
    out.push_str(r#"<div class="figs">"#);
    over_steps(&mut out, s);
    distribution(&mut out, s);
    out.push_str("</div>");
    table(&mut out, s);
    out.push_str("</section>");
    out
}

/// One line per rank, one dot per step (hover: rank, step, duration).
fn over_steps(out: &mut String, s: &Summary) {
    let all = s.ranks.iter().flat_map(|r| r.step_times.iter());
    let (lo, hi) = all.clone().fold((i64::MAX, i64::MIN), |(a, b), t| {
        (a.min(t.step), b.max(t.step))
    });
    let max = s.steps.max_ns as f64;
    let (div, unit) = svg::time_unit(max);
    let x = Scale::new(lo as f64, hi as f64, M_LEFT, W - M_RIGHT);
    let y = Scale::new(0.0, max * 1.05, H - M_BOTTOM, M_TOP);
    svg::open(out, "chart", W, H, "step latency over step number per rank");
    svg::y_axis(
        out,
        &y,
        M_LEFT,
        W - M_RIGHT,
        div,
        &format!("step time ({unit})"),
    );
    svg::x_axis(out, &x, H - M_BOTTOM, 1.0, "step number");
    for (ri, r) in s.ranks.iter().enumerate() {
        if r.step_times.is_empty() {
            continue;
        }
        let colour = svg::series_colour(ri);
        let pts: Vec<String> = r
            .step_times
            .iter()
            .map(|t| format!("{},{}", f(x.at(t.step as f64)), f(y.at(t.dur_ns as f64))))
            .collect();
        let _ = write!(
            out,
            r#"<g class="rank" data-rank="{}"><polyline class="line" stroke="{colour}" points="{}"/>"#,
            r.rank,
            pts.join(" ")
        );
        for (j, t) in r.step_times.iter().enumerate() {
            let _ = write!(
                out,
                r#"<circle class="dot" cx="{}" cy="{}" r="2.5" fill="{colour}"{}><title>rank {} step {}: {}</title></circle>"#,
                f(x.at(t.step as f64)),
                f(y.at(t.dur_ns as f64)),
                data(&format!("ranks.{ri}.step_times.{j}.dur_ns"), t.dur_ns),
                r.rank,
                t.step,
                dur(t.dur_ns as f64)
            );
        }
        out.push_str("</g>");
    }
    legend(out, s);
    out.push_str("</svg>");
}

/// Rank colours, top right, when there are several ranks.
fn legend(out: &mut String, s: &Summary) {
    if s.ranks.len() < 2 {
        return;
    }
    for (ri, r) in s.ranks.iter().enumerate() {
        let (lx, ly) = (W - M_RIGHT - 70.0, M_TOP + 4.0 + 14.0 * ri as f64);
        let _ = write!(
            out,
            r#"<rect x="{}" y="{}" width="10" height="10" fill="{}"/><text class="legend" x="{}" y="{}">rank {}</text>"#,
            f(lx),
            f(ly),
            svg::series_colour(ri),
            f(lx + 14.0),
            f(ly + 9.0),
            r.rank
        );
    }
}

/// Histogram of every rank's step durations (about 30 bins) with the pooled p50/p90/p99 as
/// vertical lines.
fn distribution(out: &mut String, s: &Summary) {
    let st = &s.steps;
    let durs: Vec<i64> = s
        .ranks
        .iter()
        .flat_map(|r| r.step_times.iter().map(|t| t.dur_ns))
        .collect();
    let (mut lo, mut hi) = (st.min_ns as f64, st.max_ns as f64);
    if hi - lo < 1.0 {
        // Every step took the same time: one bar in the middle of ±5% around it.
        lo -= (lo * 0.05).max(1.0);
        hi += (hi * 0.05).max(1.0);
    }
    let bins = 30usize.min(durs.len().max(1));
    let width = ((hi - lo) / bins as f64).max(1.0);
    let mut counts = vec![0usize; bins];
    for &d in &durs {
        let b = (((d as f64 - lo) / width) as usize).min(bins - 1);
        counts[b] += 1;
    }
    let (div, unit) = svg::time_unit(hi);
    let top = *counts.iter().max().unwrap_or(&1) as f64;
    let x = Scale::new(lo, lo + width * bins as f64, M_LEFT, W - M_RIGHT);
    // Headroom for the percentile labels.
    let y = Scale::new(0.0, top * 1.25, H - M_BOTTOM, M_TOP);
    svg::open(out, "chart", W, H, "distribution of step latency");
    svg::y_axis(out, &y, M_LEFT, W - M_RIGHT, 1.0, "steps");
    svg::x_axis(out, &x, H - M_BOTTOM, div, &format!("step time ({unit})"));
    for (b, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let (a, e) = (lo + width * b as f64, lo + width * (b + 1) as f64);
        let _ = write!(
            out,
            r#"<rect class="bin" x="{}" y="{}" width="{}" height="{}" data-count="{c}"><title>{c} steps in [{}, {})</title></rect>"#,
            f(x.at(a) + 0.5),
            f(y.at(c as f64)),
            f((x.at(e) - x.at(a) - 1.0).max(1.0)),
            f(y.at(0.0) - y.at(c as f64)),
            dur(a),
            dur(e)
        );
    }
    // Labels of close percentiles go one under the other instead of on top of each other.
    let mut last_x = f64::MIN;
    let mut row = 0.0;
    for (p, key, v) in [
        ("p50", "steps.p50_ns", st.p50_ns),
        ("p90", "steps.p90_ns", st.p90_ns),
        ("p99", "steps.p99_ns", st.p99_ns),
    ] {
        let px = x.at(v);
        row = if px - last_x < 26.0 { row + 11.0 } else { 0.0 };
        last_x = px;
        let _ = write!(
            out,
            r#"<g class="pct"><line x1="{}" y1="{}" x2="{}" y2="{}"{}><title>{p} {}</title></line><text x="{}" y="{}" text-anchor="middle">{p}</text></g>"#,
            f(px),
            f(M_TOP + 12.0 + row),
            f(px),
            f(H - M_BOTTOM),
            data(key, v),
            dur(v),
            f(px),
            f(M_TOP + 9.0 + row),
        );
    }
    out.push_str("</svg>");
}

fn stats_row(out: &mut String, label: &str, key: &str, st: &StepStats) {
    let _ = write!(
        out,
        "<tr><td>{}</td><td{}>{}</td>",
        esc(label),
        data(&format!("{key}.count"), st.count),
        st.count
    );
    for (k, v) in [
        ("mean_ns", st.mean_ns),
        ("p50_ns", st.p50_ns),
        ("p90_ns", st.p90_ns),
        ("p99_ns", st.p99_ns),
    ] {
        let _ = write!(out, "<td{}>{}</td>", data(&format!("{key}.{k}"), v), dur(v));
    }
    for (k, v) in [("min_ns", st.min_ns), ("max_ns", st.max_ns)] {
        let _ = write!(
            out,
            "<td{}>{}</td>",
            data(&format!("{key}.{k}"), v),
            dur(v as f64)
        );
    }
    out.push_str("</tr>");
}

fn table(out: &mut String, s: &Summary) {
    out.push_str(
        "<table><thead><tr><th>ranks</th><th>steps</th><th>mean</th><th>p50</th><th>p90</th>\
         <th>p99</th><th>min</th><th>max</th></tr></thead><tbody>",
    );
    stats_row(out, "all", "steps", &s.steps);
    if s.ranks.len() > 1 {
        for (ri, r) in s.ranks.iter().enumerate() {
            stats_row(
                out,
                &format!("rank {}", r.rank),
                &format!("ranks.{ri}.steps"),
                &r.steps,
            );
        }
    }
    out.push_str("</tbody></table>");
}
