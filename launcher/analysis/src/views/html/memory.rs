//! Device memory (`reserved_bytes` of the trace's `cuda_memory` counter) over time, one chart
//! per rank and device, with the peak marked. Time is from the series' first sample.

use std::fmt::Write;

use super::svg::{self, data, f, Scale};
use crate::format::{bytes, dur};
use crate::summary::schema::Summary;

const W: f64 = 760.0;
const H: f64 = 220.0;
const M_LEFT: f64 = 64.0;
const M_RIGHT: f64 = 16.0;
const M_TOP: f64 = 22.0;
const M_BOTTOM: f64 = 44.0;

pub fn section(s: &Summary) -> String {
    if s.memory.is_empty() {
        return String::new();
    }
    let mut out = String::from(r#"<section id="cp-memory"><h2>Device memory</h2>"#);
    for (mi, m) in s.memory.iter().enumerate() {
        let t0 = m.points.first().map_or(0, |p| p.0);
        let t1 = m.points.last().map_or(0, |p| p.0);
        let (tdiv, tunit) = svg::time_unit((t1 - t0) as f64);
        let (bdiv, bunit) = svg::byte_unit(m.peak_bytes as f64);
        let x = Scale::new(0.0, (t1 - t0) as f64, M_LEFT, W - M_RIGHT);
        let y = Scale::new(0.0, m.peak_bytes as f64 * 1.1, H - M_BOTTOM, M_TOP);
        svg::open(
            &mut out,
            "chart memory",
            W,
            H,
            &format!(
                "reserved device memory of rank {} device {}",
                m.rank, m.device
            ),
        );
        let _ = write!(
            out,
            r#"<text class="axis" x="{}" y="14">rank {} GPU {}: {} samples</text>"#,
            f(M_LEFT),
            m.rank,
            m.device,
            m.samples
        );
        svg::y_axis(
            &mut out,
            &y,
            M_LEFT,
            W - M_RIGHT,
            bdiv,
            &format!("reserved ({bunit})"),
        );
        svg::x_axis(
            &mut out,
            &x,
            H - M_BOTTOM,
            tdiv,
            &format!("time since the first sample ({tunit})"),
        );
        // A counter holds its value until the next sample: a step line.
        let mut d = String::new();
        for (i, &(t, b)) in m.points.iter().enumerate() {
            let (px, py) = (x.at((t - t0) as f64), y.at(b as f64));
            if i == 0 {
                let _ = write!(d, "M{} {}", f(px), f(py));
            } else {
                let _ = write!(d, "H{}V{}", f(px), f(py));
            }
        }
        let _ = write!(out, r#"<path class="mem" d="{d}"/>"#);
        for (j, &(t, b)) in m.points.iter().enumerate() {
            let _ = write!(
                out,
                r#"<circle class="memdot" cx="{}" cy="{}" r="2"{}><title>{} at {}</title></circle>"#,
                f(x.at((t - t0) as f64)),
                f(y.at(b as f64)),
                data(&format!("memory.{mi}.points.{j}.1"), b),
                bytes(b),
                dur((t - t0) as f64)
            );
        }
        // The peak's label goes in the title row, right: beside the marker it ran into the
        // y axis's top label and the line.
        let (px, py) = (x.at((m.peak_ns - t0) as f64), y.at(m.peak_bytes as f64));
        let _ = write!(
            out,
            r#"<g class="peak"><circle cx="{}" cy="{}" r="5"{}><title>peak {} ({} B) at {}</title></circle><text x="{}" y="{}" text-anchor="end">peak {}, circled</text></g></svg>"#,
            f(px),
            f(py),
            data(&format!("memory.{mi}.peak_bytes"), m.peak_bytes),
            bytes(m.peak_bytes),
            m.peak_bytes,
            dur((m.peak_ns - t0) as f64),
            f(W - M_RIGHT),
            14,
            bytes(m.peak_bytes)
        );
    }
    out.push_str("</section>");
    out
}
