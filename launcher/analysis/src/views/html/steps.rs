//! Step latency: each rank's step durations over the step number, and the distribution of all
//! of them with p50/p90/p99 marked, plus the statistics table.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::svg::{self, data, esc, f, Scale};
use crate::format::dur;
use crate::model::StepStats;
use crate::summary::schema::Summary;

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
    extra_tables(&mut out, s);
    out.push_str("</section>");
    out
}

/// Ranks drawn as one line each; beyond, a band of the per-step min and max over ranks with
/// the median, and the ranks slowest most often drawn and named.
const MAX_LINES: usize = 8;
/// Ranks named and drawn over the band.
const NAMED: usize = 3;
/// Marks with hover text, at most: beyond, the lines stay and the table gives the figures
/// (a dot per step of 10,000 steps would weigh megabytes and hide the line).
const MAX_DOTS: usize = 4000;
/// Below this many step times the distribution shows each one; from it on, a histogram.
const POINTS_BELOW: usize = 30;

/// Step latency over the step number: a line per rank, or a band summarising many ranks; the
/// legend sits under the plot area so it never covers a line.
fn over_steps(out: &mut String, s: &Summary) {
    let all = s.ranks.iter().flat_map(|r| r.step_times.iter());
    let (lo, hi) = all.clone().fold((i64::MAX, i64::MIN), |(a, b), t| {
        (a.min(t.step), b.max(t.step))
    });
    let (y0, y1) = time_range(s.steps.min_ns as f64, s.steps.max_ns as f64);
    let (div, unit) = svg::time_unit(y1);
    let x = Scale::new(lo as f64, hi as f64, M_LEFT, W - M_RIGHT);
    let y = Scale::new(y0, y1, H - M_BOTTOM, M_TOP);
    let mut body = String::new();
    let mut items: Vec<(String, String)> = Vec::new();
    let with_steps = s.ranks.iter().filter(|r| !r.step_times.is_empty()).count();
    if with_steps <= MAX_LINES {
        let points: usize = s.ranks.iter().map(|r| r.step_times.len()).sum();
        for (ri, r) in s.ranks.iter().enumerate() {
            if r.step_times.is_empty() {
                continue;
            }
            rank_line(&mut body, s, ri, &x, &y, points <= MAX_DOTS);
            if with_steps > 1 {
                items.push((svg::series_colour(ri).into(), format!("rank {}", r.rank)));
            }
        }
    } else {
        band(&mut body, s, &x, &y, &mut items);
    }
    let mut legend = String::new();
    let h = legend_rows(&mut legend, &items, H + 2.0);
    svg::open(out, "chart", W, h, "step latency over step number per rank");
    svg::y_axis(
        out,
        &y,
        M_LEFT,
        W - M_RIGHT,
        div,
        &format!("step time ({unit})"),
    );
    svg::x_axis_int(out, &x, H - M_BOTTOM, "step number");
    out.push_str(&body);
    out.push_str(&legend);
    out.push_str("</svg>");
}

/// The step time axis from `min` to `max` with a tenth of their span beyond each (at least a
/// fiftieth of `max` in all: steps of equal time get a flat line in the middle), not below 0:
/// 4.2 to 4.7 ms steps use the plot's height, not its top tenth.
fn time_range(min: f64, max: f64) -> (f64, f64) {
    let span = (max - min).max(max / 50.0).max(1.0);
    ((min - span / 10.0).max(0.0), max + span / 10.0)
}

/// Rank `ri`'s line, with a dot per step (hover: rank, step, duration) when `dots`.
fn rank_line(out: &mut String, s: &Summary, ri: usize, x: &Scale, y: &Scale, dots: bool) {
    let r = &s.ranks[ri];
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
    if dots {
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
    }
    out.push_str("</g>");
}

/// Many ranks: per step, the band from the fastest to the slowest rank and the median (the
/// lower of the two middle values with an even count, so that it is a rank's own time and
/// its hover names that rank); over it, the ranks slowest in the most steps.
fn band(out: &mut String, s: &Summary, x: &Scale, y: &Scale, items: &mut Vec<(String, String)>) {
    // step -> (duration, rank index, index in step_times)
    let mut by_step: BTreeMap<i64, Vec<(i64, usize, usize)>> = BTreeMap::new();
    for (ri, r) in s.ranks.iter().enumerate() {
        for (j, t) in r.step_times.iter().enumerate() {
            by_step.entry(t.step).or_default().push((t.dur_ns, ri, j));
        }
    }
    type Mark = (i64, usize, usize);
    let stats: Vec<(i64, [Mark; 3])> = by_step
        .into_iter()
        .map(|(step, mut v)| {
            v.sort_unstable();
            let n = v.len();
            (step, [v[0], v[(n - 1) / 2], v[n - 1]])
        })
        .collect();
    let pt = |step: i64, d: i64| format!("{},{}", f(x.at(step as f64)), f(y.at(d as f64)));
    let upper = stats.iter().map(|(k, m)| pt(*k, m[2].0));
    let lower = stats.iter().rev().map(|(k, m)| pt(*k, m[0].0));
    let _ = write!(
        out,
        r#"<polygon class="band" points="{}"/><polyline class="line median" points="{}"/>"#,
        upper.chain(lower).collect::<Vec<_>>().join(" "),
        stats
            .iter()
            .map(|(k, m)| pt(*k, m[1].0))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let ranks = s.ranks.iter().filter(|r| !r.step_times.is_empty()).count();
    items.push((
        BAND.into(),
        format!("fastest to slowest of {ranks} ranks, per step"),
    ));
    items.push((MEDIAN.into(), "median rank".into()));
    // The ranks slowest in the most steps, by name (ties: the lower rank).
    let mut slow: Vec<(usize, i64)> = s
        .cross_rank
        .per_rank
        .iter()
        .filter(|r| r.slowest_in_steps > 0)
        .map(|r| (r.slowest_in_steps, r.rank))
        .collect();
    slow.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (k, (n, rank)) in slow.into_iter().take(NAMED).enumerate() {
        let Some(ri) = s.ranks.iter().position(|r| r.rank == rank) else {
            continue;
        };
        let colour = NAMED_COLOURS[k];
        let pts: Vec<String> = s.ranks[ri]
            .step_times
            .iter()
            .map(|t| pt(t.step, t.dur_ns))
            .collect();
        let _ = write!(
            out,
            r#"<polyline class="line named" stroke="{colour}" points="{}"/>"#,
            pts.join(" ")
        );
        let steps = if n == 1 { "step" } else { "steps" };
        items.push((
            colour.into(),
            format!("rank {rank} (slowest in {n} {steps})"),
        ));
    }
    if stats.len() * 3 > MAX_DOTS {
        return;
    }
    for (step, m) in &stats {
        for (what, (d, ri, j)) in ["fastest", "median", "slowest"].iter().zip(m) {
            let _ = write!(
                out,
                r#"<circle class="bandpt" cx="{}" cy="{}" r="2"{}><title>step {step}: {what} rank {}, {}</title></circle>"#,
                f(x.at(*step as f64)),
                f(y.at(*d as f64)),
                data(&format!("ranks.{ri}.step_times.{j}.dur_ns"), d),
                s.ranks[*ri].rank,
                dur(*d as f64)
            );
        }
    }
}

/// The band's and the median's colours (the page's style draws them with these).
const BAND: &str = "#c6d4e6";
const MEDIAN: &str = "#1f3b5c";
/// Colours of the named slowest ranks: apart from the band's blues.
const NAMED_COLOURS: [&str; NAMED] = ["#d62728", "#ff7f0e", "#9467bd"];

/// Legend entries `(colour, label)` in rows under the plot from `y`; returns the chart's
/// height below them.
fn legend_rows(out: &mut String, items: &[(String, String)], y: f64) -> f64 {
    if items.is_empty() {
        return H;
    }
    let (mut lx, mut ly) = (M_LEFT, y);
    for (colour, label) in items {
        // About 6.2 px per character at 11 px, as svg::legend reckons.
        let w = 30.0 + 6.2 * label.chars().count() as f64;
        if lx > M_LEFT && lx + w > W - M_RIGHT {
            lx = M_LEFT;
            ly += 16.0;
        }
        let _ = write!(
            out,
            r#"<rect x="{}" y="{}" width="10" height="10" fill="{colour}"/><text class="legend" x="{}" y="{}">{}</text>"#,
            f(lx),
            f(ly),
            f(lx + 14.0),
            f(ly + 9.0),
            esc(label)
        );
        lx += w;
    }
    ly + 18.0
}

/// The distribution of every rank's step times: each one as a dot when there are few (a
/// histogram of 2 steps is one block), else a histogram (about 30 bins) with the pooled
/// p50/p90/p99 as vertical lines.
fn distribution(out: &mut String, s: &Summary) {
    let n: usize = s.ranks.iter().map(|r| r.step_times.len()).sum();
    if n < POINTS_BELOW {
        points(out, s);
    } else {
        histogram(out, s);
    }
}

/// One dot per step time on the time axis, stacked where they would touch.
fn points(out: &mut String, s: &Summary) {
    let st = &s.steps;
    let (mut lo, mut hi) = (st.min_ns as f64, st.max_ns as f64);
    let pad = ((hi - lo) * 0.05).max(lo * 0.05).max(1.0);
    lo = (lo - pad).max(0.0);
    hi += pad;
    let (div, unit) = svg::time_unit(hi);
    let x = Scale::new(lo, hi, M_LEFT, W - M_RIGHT);
    let mut all: Vec<(i64, usize, usize)> = s
        .ranks
        .iter()
        .enumerate()
        .flat_map(|(ri, r)| {
            r.step_times
                .iter()
                .enumerate()
                .map(move |(j, t)| (t.dur_ns, ri, j))
        })
        .collect();
    all.sort_unstable();
    // Dots 8 px wide: one within 8 px of the column's first goes on top of the column.
    let mut column = (f64::MIN, 0usize);
    let mut placed = Vec::new();
    for &(d, ri, j) in &all {
        let px = x.at(d as f64);
        if px - column.0 < 8.0 {
            column.1 += 1;
        } else {
            column = (px, 1);
        }
        placed.push((column.0, column.1, d, ri, j));
    }
    let top = placed.iter().map(|p| p.1).max().unwrap_or(1).max(2) as f64;
    let y = Scale::new(0.0, top + 0.5, H - M_BOTTOM, M_TOP);
    svg::open(out, "chart", W, H, "every step time");
    svg::y_axis_int(out, &y, M_LEFT, W - M_RIGHT, "steps");
    svg::x_axis(
        out,
        &x,
        H - M_BOTTOM,
        div,
        &format!("step time ({unit}), one dot per step"),
    );
    for (cx, k, d, ri, j) in placed {
        let _ = write!(
            out,
            r#"<circle class="pt" cx="{}" cy="{}" r="4"{}><title>rank {} step {}: {}</title></circle>"#,
            f(cx),
            f(y.at(k as f64 - 0.5)),
            data(&format!("ranks.{ri}.step_times.{j}.dur_ns"), d),
            s.ranks[ri].rank,
            s.ranks[ri].step_times[j].step,
            dur(d as f64)
        );
    }
    out.push_str("</svg>");
}

/// Histogram of every rank's step durations (about 30 bins) with the pooled p50/p90/p99 as
/// vertical lines.
fn histogram(out: &mut String, s: &Summary) {
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
    svg::y_axis_int(out, &y, M_LEFT, W - M_RIGHT, "steps");
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
    // Labels of close percentiles go one under the other (14 px: the box of an 11 px label)
    // instead of on top of each other.
    let mut last_x = f64::MIN;
    let mut row = 0.0;
    for (p, key, v) in [
        ("p50", "steps.p50_ns", st.p50_ns),
        ("p90", "steps.p90_ns", st.p90_ns),
        ("p99", "steps.p99_ns", st.p99_ns),
    ] {
        let px = x.at(v);
        // A label at an end of the axis stays inside the plot, clear of the count ticks.
        let label_x = px.clamp(M_LEFT + 14.0, W - M_RIGHT - 14.0);
        row = if label_x - last_x < 26.0 {
            row + 14.0
        } else {
            0.0
        };
        last_x = label_x;
        let _ = write!(
            out,
            r#"<g class="pct"><line x1="{}" y1="{}" x2="{}" y2="{}"{}><title>{p} {}</title></line><text x="{}" y="{}" text-anchor="middle">{p}</text></g>"#,
            f(px),
            f(M_TOP + 12.0 + row),
            f(px),
            f(H - M_BOTTOM),
            data(key, v),
            dur(v),
            f(label_x),
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
    rate_cell(out, &format!("{key}.throughput_per_s"), st.throughput_per_s);
    out.push_str("</tr>");
}

fn rate_cell(out: &mut String, key: &str, v: Option<f64>) {
    match v {
        Some(v) => {
            let _ = write!(out, "<td{}>{v:.1}</td>", data(key, v));
        }
        None => out.push_str("<td>-</td>"),
    }
}

/// The latency cells (mean, p50, p90, p99; "-" where there is no step) and the tokens/s cell
/// of the steps summarised at `key` in summary.json.
fn step_cells(out: &mut String, key: &str, st: &StepStats) {
    for (k, v) in [
        ("mean_ns", st.mean_ns),
        ("p50_ns", st.p50_ns),
        ("p90_ns", st.p90_ns),
        ("p99_ns", st.p99_ns),
    ] {
        if st.count == 0 {
            out.push_str("<td>-</td>");
        } else {
            let _ = write!(out, "<td{}>{}</td>", data(&format!("{key}.{k}"), v), dur(v));
        }
    }
    rate_cell(out, &format!("{key}.throughput_per_s"), st.throughput_per_s);
}

/// `report --bin`: the steps per bin of a figure, and `--all-runs`: the steps per run with
/// mean ± std.
fn extra_tables(out: &mut String, s: &Summary) {
    if let Some(b) = &s.step_bins {
        let _ = write!(
            out,
            "<h3>Steps by {}</h3><table><thead><tr><th>bin [lo, hi)</th><th>steps</th><th>mean</th>\
             <th>p50</th><th>p90</th><th>p99</th><th>tokens/s</th></tr></thead><tbody>",
            esc(&b.figure)
        );
        for (i, bin) in b.bins.iter().enumerate() {
            let hi = bin.hi.map_or_else(|| "inf".to_string(), |h| h.to_string());
            let key = format!("step_bins.bins.{i}.steps");
            let _ = write!(
                out,
                "<tr><td>[{}, {hi})</td><td{}>{}</td>",
                bin.lo,
                data(&format!("{key}.count"), bin.steps.count),
                bin.steps.count
            );
            step_cells(out, &key, &bin.steps);
            out.push_str("</tr>");
        }
        let _ = write!(
            out,
            "</tbody></table><p>{} step(s) below the first edge, {} without the figure</p>",
            b.below, b.without
        );
    }
    if let Some(r) = &s.runs {
        out.push_str(
            "<h3>Steps over runs</h3><table><thead><tr><th>run</th><th>steps</th><th>mean</th>\
             <th>p50</th><th>p90</th><th>p99</th><th>tokens/s</th></tr></thead><tbody>",
        );
        for (i, (name, st)) in r.runs.iter().zip(&r.steps).enumerate() {
            let key = format!("runs.steps.{i}");
            let _ = write!(out, "<tr><td>{}</td><td>{}</td>", esc(name), st.count);
            step_cells(out, &key, st);
            out.push_str("</tr>");
        }
        let _ = write!(
            out,
            "<tr><td>mean ± std ({} runs)</td><td></td>",
            r.runs.len()
        );
        for m in [r.mean_ns, r.p50_ns, r.p90_ns, r.p99_ns] {
            let _ = write!(out, "<td>{} ± {}</td>", dur(m.mean), dur(m.std));
        }
        match r.tokens_per_s {
            Some(m) => {
                let _ = write!(out, "<td>{:.1} ± {:.1}</td>", m.mean, m.std);
            }
            None => out.push_str("<td>-</td>"),
        }
        out.push_str("</tr></tbody></table>");
    }
}

fn table(out: &mut String, s: &Summary) {
    out.push_str(
        "<table><thead><tr><th>ranks</th><th>steps</th><th>mean</th><th>p50</th><th>p90</th>\
         <th>p99</th><th>min</th><th>max</th><th>tokens/s</th></tr></thead><tbody>",
    );
    stats_row(out, "all", "steps", &s.steps);
    // Beyond the ranks drawn as lines, the rows per rank fold away (HTML's own <details>, no
    // script): 512 rows would push every chart below them out of sight.
    let fold = s.ranks.len() > MAX_LINES;
    if fold {
        let _ = write!(
            out,
            "</tbody></table><details><summary>every rank ({})</summary><table><tbody>",
            s.ranks.len()
        );
    }
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
    if fold {
        out.push_str("</details>");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn step_axis_fits_the_data() {
        // 4.2 to 4.7 ms: 4.15 to 4.75 ms.
        let (a, b) = super::time_range(4_200_000.0, 4_700_000.0);
        assert_eq!((a.round(), b.round()), (4_150_000.0, 4_750_000.0));
        // Equal steps: a fiftieth of 1 ms, a tenth of it each side; a wide spread stops at 0.
        assert_eq!(super::time_range(1e6, 1e6), (998_000.0, 1_002_000.0));
        assert_eq!(super::time_range(1e5, 1e7), (0.0, 1e7 + 990_000.0));
    }
}
