//! *CUDA API calls*: the report's `api_calls` table (Nsight Systems' `cuda_api_sum`), up to
//! `--top` rows, every figure with its `data-key`. Absent when the traces have no API calls.

use std::fmt::Write;

use super::super::model::Summary;
use super::super::render::{dur, pct};
use super::svg::{data, esc};

pub fn section(s: &Summary, top: usize) -> String {
    if s.api_calls.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        r#"<section id="cp-api"><h2>CUDA API calls</h2><table><tr><th>call</th><th>count</th><th>total</th><th>share</th><th>mean</th><th>median</th><th>min</th><th>max</th></tr>"#,
    );
    for (i, r) in s.api_calls.iter().take(top).enumerate() {
        let key = |field: &str| format!("api_calls.{i}.{field}");
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td{}>{}</td>",
            esc(&r.name),
            data(&key("count"), r.count),
            r.count
        );
        for (field, value, text) in [
            ("total_ns", r.total_ns as f64, dur(r.total_ns as f64)),
            ("share", r.share, pct(r.share)),
            ("mean_ns", r.mean_ns, dur(r.mean_ns)),
            ("median_ns", r.median_ns, dur(r.median_ns)),
            ("min_ns", r.min_ns as f64, dur(r.min_ns as f64)),
            ("max_ns", r.max_ns as f64, dur(r.max_ns as f64)),
        ] {
            let _ = write!(out, "<td{}>{}</td>", data(&key(field), value), esc(&text));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    let more = s.api_calls.len().saturating_sub(top);
    if more > 0 {
        let _ = write!(out, r#"<p class="note">({more} more in summary.json)</p>"#);
    }
    out.push_str("</section>");
    out
}
