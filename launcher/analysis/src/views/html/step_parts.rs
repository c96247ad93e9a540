//! *Step time breakdown*: summary.json's `step_breakdown` as TensorBoard's overview stacks it:
//! a bar per step (past 200 steps, per bin of consecutive steps: their means), stacked from
//! the bottom as compute, communication, copies, GPU idle and host, on the step's slowest
//! rank, so that a bar is the step's time.

use std::fmt::Write;

use super::svg::{self, data, f, Scale};
use crate::format::{dur, pct};
use crate::model::ratio;
use crate::summary::schema::Summary;

const W: f64 = 760.0;
const M_LEFT: f64 = 64.0;
const M_RIGHT: f64 = 16.0;
const PLOT: f64 = 240.0;
const TOP: f64 = 10.0;

/// The parts, bottom up: (summary field, CSS class, legend).
const PARTS: [(&str, &str, &str); 5] = [
    ("compute_ns", "compute", "compute"),
    (
        "communication_ns",
        "comm",
        "communication (not under compute)",
    ),
    ("copies_ns", "memcpy", "copies (memcpy, memset; no kernel)"),
    ("idle_ns", "gpuidle", "GPU idle between its work"),
    ("host_ns", "cpu", "host (no GPU work yet, or any more)"),
];

/// One bar: its steps' range in step numbers, its label, its summary key, its parts' values.
struct Bar {
    from: f64,
    to: f64,
    what: String,
    key: String,
    total: f64,
    parts: [f64; 5],
}

pub fn section(s: &Summary) -> String {
    let b = &s.step_breakdown;
    if b.steps.is_empty() {
        return String::new();
    }
    let mut out = String::from(r#"<section id="cp-step-parts"><h2>Step time breakdown</h2>"#);
    let binned = !b.bins.is_empty();
    let bars: Vec<Bar> = if binned {
        b.bins
            .iter()
            .enumerate()
            .map(|(i, x)| Bar {
                from: x.first_step as f64 - 0.5,
                to: x.last_step as f64 + 0.5,
                what: format!(
                    "steps {}–{} ({} steps, means)",
                    x.first_step, x.last_step, x.steps
                ),
                key: format!("step_breakdown.bins.{i}"),
                total: x.dur_ns,
                parts: x.parts(),
            })
            .collect()
    } else {
        b.steps
            .iter()
            .enumerate()
            .map(|(i, x)| Bar {
                from: x.step as f64 - 0.5,
                to: x.step as f64 + 0.5,
                what: format!("step {} on rank {}", x.step, x.rank),
                key: format!("step_breakdown.steps.{i}"),
                total: x.dur_ns as f64,
                parts: x.parts().map(|v| v as f64),
            })
            .collect()
    };
    let per = b.bins.first().map_or(1, |x| x.steps);
    let _ = write!(
        out,
        r#"<p class="note">Each step on its slowest rank (its parts add up to the step's time): compute kernels; communication kernels not under compute; copies and sets with no kernel; the GPU idle between its first and last operation of the step; the host alone before the step's first GPU operation or after its last. Operations are cut at the step's ends.{}</p>"#,
        if binned {
            format!(
                " {} steps: each bar is the mean of {per} consecutive steps.",
                b.steps.len()
            )
        } else {
            String::new()
        }
    );
    let max = bars.iter().map(|x| x.total).fold(0.0, f64::max);
    let (div, unit) = svg::time_unit(max);
    let y = Scale::new(0.0, max, TOP + PLOT, TOP);
    let lo = bars.iter().map(|x| x.from).fold(f64::INFINITY, f64::min);
    let hi = bars.iter().map(|x| x.to).fold(f64::NEG_INFINITY, f64::max);
    let x = Scale::new(lo, hi, M_LEFT, W - M_RIGHT);
    let axis_y = TOP + PLOT;
    let items: Vec<(String, &str)> = PARTS
        .iter()
        .map(|p| (format!("part {}", p.1), p.2))
        .collect();
    let items: Vec<(&str, &str)> = items.iter().map(|(c, l)| (c.as_str(), *l)).collect();
    let mut legend = String::new();
    let end = svg::legend(&mut legend, &items, M_LEFT, W - M_RIGHT, axis_y + 42.0);
    svg::open(
        &mut out,
        "chart",
        W,
        end + 4.0,
        "step time breakdown: compute, communication, copies, GPU idle, host",
    );
    svg::y_axis(
        &mut out,
        &y,
        M_LEFT,
        W - M_RIGHT,
        div,
        &format!("step time, slowest rank ({unit})"),
    );
    for bar in &bars {
        let (x0, x1) = (x.at(bar.from), x.at(bar.to));
        let gap = if x1 - x0 > 3.0 { 1.0 } else { 0.0 };
        let mut title = format!("{}: {}", bar.what, dur(bar.total));
        for (p, v) in PARTS.iter().zip(bar.parts) {
            let _ = write!(title, "\n{} {} ({})", p.2, dur(v), pct(ratio(v, bar.total)));
        }
        let _ = write!(
            out,
            r#"<g class="stack"><title>{}</title>"#,
            super::svg::esc(&title)
        );
        let mut at = 0.0;
        for (p, v) in PARTS.iter().zip(bar.parts) {
            if v > 0.0 {
                let _ = write!(
                    out,
                    r#"<rect class="part {}" x="{}" y="{}" width="{}" height="{}"{}/>"#,
                    p.1,
                    f(x0),
                    f(y.at(at + v)),
                    f((x1 - x0 - gap).max(0.5)),
                    f((y.at(at) - y.at(at + v)).max(0.5)),
                    data(&format!("{}.{}", bar.key, p.0), as_written(v, binned))
                );
            }
            at += v;
        }
        out.push_str("</g>");
    }
    svg::x_axis_int(
        &mut out,
        &x,
        axis_y,
        &if binned {
            format!("step number (each bar: the mean of {per} consecutive steps)")
        } else {
            "step number".to_string()
        },
    );
    out.push_str(&legend);
    out.push_str("</svg></section>");
    out
}

/// A part's value as summary.json writes it: whole nanoseconds per step, a mean per bin.
fn as_written(v: f64, binned: bool) -> serde_json::Value {
    if binned {
        serde_json::json!(v)
    } else {
        serde_json::json!(v as i64)
    }
}
