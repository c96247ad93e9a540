//! A few lines of SVG: escaping, linear scales with round ticks, axes, and the `data-key` /
//! `data-value` attributes that tie a drawn number to its place in `summary.json`.
//!
//! Why not a plotting crate: the page needs hover text (`<title>`) and data attributes on every
//! mark, which `plotters`' SVG backend does not expose, and its charts are plain lines, bars
//! and rectangles. Writing them here costs about as many lines as configuring a library and
//! adds no dependency.

use std::fmt::Write;

use serde::Serialize;

/// Text for an XML text node or a double-quoted attribute.
pub use crate::escape::xml::text as esc;

/// ` data-key="KEY" data-value="V"`: `KEY` is the value's path in summary.json (`ranks.0.gpu.
/// compute_ns`; `A - B` for a difference of two), `V` the value as summary.json writes it.
pub fn data<T: Serialize>(key: &str, v: T) -> String {
    let v = crate::escape::json::to_string(&v).unwrap_or_default();
    format!(r#" data-key="{}" data-value="{}""#, esc(key), esc(&v))
}

/// Coordinates: 1 decimal is far below a pixel and keeps the file small.
pub fn f(x: f64) -> String {
    let r = (x * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// Maps `[d0, d1]` onto `[r0, r1]`.
#[derive(Clone, Copy)]
pub struct Scale {
    pub d0: f64,
    pub d1: f64,
    pub r0: f64,
    pub r1: f64,
}

impl Scale {
    pub fn new(d0: f64, d1: f64, r0: f64, r1: f64) -> Self {
        // An empty domain (one step, equal values) still maps to the range's start.
        let d1 = if d1 > d0 { d1 } else { d0 + 1.0 };
        Scale { d0, d1, r0, r1 }
    }

    pub fn at(&self, x: f64) -> f64 {
        self.r0 + (x - self.d0) / (self.d1 - self.d0) * (self.r1 - self.r0)
    }
}

/// Round tick values covering `[lo, hi]`, about `n` of them: steps of 1, 2 or 5 times a power
/// of ten.
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi <= lo || n == 0 {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 {
        // Snap away float noise (0.30000000000000004).
        out.push((t / step).round() * step);
        t += step;
    }
    out
}

/// [`ticks`] with a spacing of at least 1, on whole numbers only.
pub fn int_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let ts = ticks(lo, hi, n);
    if spacing(&ts) >= 1.0 {
        return ts;
    }
    let (a, b) = (lo.ceil() as i64, hi.floor() as i64);
    (a..=b.max(a)).map(|v| v as f64).collect()
}

/// The distance between consecutive ticks (0 for fewer than two).
fn spacing(ts: &[f64]) -> f64 {
    if ts.len() < 2 {
        0.0
    } else {
        ts[1] - ts[0]
    }
}

/// A unit for an axis of nanoseconds whose largest value is `max`: (divisor, label).
pub fn time_unit(max: f64) -> (f64, &'static str) {
    if max >= 1e9 {
        (1e9, "s")
    } else if max >= 1e6 {
        (1e6, "ms")
    } else if max >= 1e3 {
        (1e3, "µs")
    } else {
        (1.0, "ns")
    }
}

/// A unit for an axis of bytes: (divisor, label).
pub fn byte_unit(max: f64) -> (f64, &'static str) {
    cuprof_core::byte_size::unit_upto(max, 3)
}

/// A tick label without trailing zeros, with as many decimals as the ticks' spacing needs:
/// `0.5`, `2`, `5.82803`.
pub fn tick_label(v: f64, spacing: f64) -> String {
    let decimals = if spacing > 0.0 {
        (-spacing.log10().floor()).clamp(0.0, 9.0) as usize
    } else {
        3
    };
    let s = format!("{v:.decimals$}");
    if s == "-0" {
        // A tick at -0.0 (a domain from -0.5: bars centred on whole numbers).
        return "0".into();
    }
    if !s.contains('.') {
        return s;
    }
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// An open `<svg>` of the given size with a description for screen readers.
pub fn open(out: &mut String, class: &str, w: f64, h: f64, label: &str) {
    let _ = write!(
        out,
        r#"<svg class="{class}" viewBox="0 0 {} {}" width="{}" height="{}" role="img" aria-label="{}">"#,
        f(w),
        f(h),
        f(w),
        f(h),
        esc(label)
    );
}

/// Left axis with horizontal grid lines from `x0` to `x1`; labels are `value / div`.
pub fn y_axis(out: &mut String, y: &Scale, x0: f64, x1: f64, div: f64, title: &str) {
    // Ticks are round in the shown unit, not in nanoseconds or bytes.
    let ts = ticks(y.d0 / div, y.d1 / div, 5);
    y_axis_at(out, y, x0, x1, div, title, ts);
}

/// [`y_axis`] for counts: whole-number ticks only.
pub fn y_axis_int(out: &mut String, y: &Scale, x0: f64, x1: f64, title: &str) {
    y_axis_at(out, y, x0, x1, 1.0, title, int_ticks(y.d0, y.d1, 5));
}

fn y_axis_at(out: &mut String, y: &Scale, x0: f64, x1: f64, div: f64, title: &str, ts: Vec<f64>) {
    let spacing = spacing(&ts);
    for t in ts {
        let py = y.at(t * div);
        let _ = write!(
            out,
            r#"<line class="grid" x1="{}" y1="{}" x2="{}" y2="{}"/><text class="tick" x="{}" y="{}" text-anchor="end">{}</text>"#,
            f(x0),
            f(py),
            f(x1),
            f(py),
            f(x0 - 4.0),
            f(py + 3.5),
            tick_label(t, spacing)
        );
    }
    let _ = write!(
        out,
        r#"<text class="axis" transform="translate({} {}) rotate(-90)" text-anchor="middle">{}</text>"#,
        f(x0 - 40.0),
        f((y.r0 + y.r1) / 2.0),
        esc(title)
    );
}

/// Bottom axis at `y0`; labels are `value / div`.
pub fn x_axis(out: &mut String, x: &Scale, y0: f64, div: f64, title: &str) {
    let ts = ticks(x.d0 / div, x.d1 / div, tick_count(x));
    x_axis_at(out, x, y0, div, title, ts);
}

/// [`x_axis`] for step numbers and other whole numbers: no tick at 1.5.
pub fn x_axis_int(out: &mut String, x: &Scale, y0: f64, title: &str) {
    x_axis_at(out, x, y0, 1.0, title, int_ticks(x.d0, x.d1, tick_count(x)));
}

/// About one tick per 80 px, at most 8: a narrow panel gets fewer, so that its labels do not
/// run into each other.
fn tick_count(x: &Scale) -> usize {
    (((x.r1 - x.r0).abs() / 80.0) as usize).clamp(2, 8)
}

fn x_axis_at(out: &mut String, x: &Scale, y0: f64, div: f64, title: &str, ts: Vec<f64>) {
    let _ = write!(
        out,
        r#"<line class="axisline" x1="{}" y1="{}" x2="{}" y2="{}"/>"#,
        f(x.r0),
        f(y0),
        f(x.r1),
        f(y0)
    );
    let spacing = spacing(&ts);
    for t in ts {
        let px = x.at(t * div);
        let _ = write!(
            out,
            r#"<line class="axisline" x1="{}" y1="{}" x2="{}" y2="{}"/><text class="tick" x="{}" y="{}" text-anchor="middle">{}</text>"#,
            f(px),
            f(y0),
            f(px),
            f(y0 + 4.0),
            f(px),
            f(y0 + 16.0),
            tick_label(t, spacing)
        );
    }
    let _ = write!(
        out,
        r#"<text class="axis" x="{}" y="{}" text-anchor="middle">{}</text>"#,
        f((x.r0 + x.r1) / 2.0),
        f(y0 + 32.0),
        esc(title)
    );
}

/// Legend entries `(CSS class, label)` from `x0`, wrapping into rows before `x1`; returns the
/// y below the last row.
pub fn legend(out: &mut String, items: &[(&str, &str)], x0: f64, x1: f64, y: f64) -> f64 {
    let (mut x, mut y) = (x0, y);
    for (class, label) in items {
        // About 6.2 px per character at the legend's 11 px.
        let w = 30.0 + 6.2 * label.chars().count() as f64;
        if x > x0 && x + w > x1 {
            x = x0;
            y += 16.0;
        }
        let _ = write!(
            out,
            r#"<rect class="{class}" x="{}" y="{}" width="10" height="10"/><text class="legend" x="{}" y="{}">{}</text>"#,
            f(x),
            f(y),
            f(x + 14.0),
            f(y + 9.0),
            esc(label)
        );
        x += w;
    }
    y + 16.0
}

/// Colours for ranks (and other series), cycling.
pub const SERIES: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

pub fn series_colour(i: usize) -> &'static str {
    SERIES[i % SERIES.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_ticks() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 0.9, 3), vec![0.0, 0.5]);
        assert_eq!(ticks(3.0, 3.0, 5), vec![3.0]);
        assert_eq!(int_ticks(0.0, 1.0, 8), vec![0.0, 1.0]);
        assert_eq!(int_ticks(0.0, 1.05, 5), vec![0.0, 1.0]);
        assert_eq!(int_ticks(0.0, 9999.0, 8), ticks(0.0, 9999.0, 8));
        assert_eq!(int_ticks(0.0, 4.0, 8), vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        assert_eq!(tick_label(0.30000000000000004, 0.1), "0.3");
        assert_eq!(tick_label(12.0, 2.0), "12");
        assert_eq!(tick_label(5.82803, 0.00001), "5.82803");
        assert_eq!(tick_label(-0.0001, 0.5), "0");
        assert_eq!(tick_label(-0.0, 2000.0), "0");
        assert_eq!(esc(r#"a<b & "c""#), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(
            data("steps.p50_ns", 2.5e6),
            r#" data-key="steps.p50_ns" data-value="2500000.0""#
        );
        assert_eq!(f(1.25), "1.3");
        assert_eq!(f(3.0), "3");
    }
}
