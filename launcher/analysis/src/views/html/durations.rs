//! The report's tables of named durations (`nsys stats`' figures): *CUDA API calls*
//! (`api_calls`, `cuda_api_sum`) and *NVTX ranges and labels* (`ranges`, `nvtx_sum`), up to
//! `--top` rows each, every figure with its `data-key`. A table without rows has no section.

use std::fmt::Write;

use serde_json::json;

use super::svg::{data, esc};
use crate::format::{dur, pct};
use crate::sections::durations::DurationRow;
use crate::summary::schema::Summary;

pub fn api_calls(s: &Summary, top: usize) -> String {
    section(
        "cp-api",
        "CUDA API calls",
        "call",
        "api_calls",
        &s.api_calls,
        top,
    )
}

pub fn ranges(s: &Summary, top: usize) -> String {
    section(
        "cp-ranges",
        "NVTX ranges and labels",
        "range",
        "ranges",
        &s.ranges,
        top,
    )
}

/// Section `id` titled `title`: `rows` under summary.json's `key`, the first column `what`.
fn section(
    id: &str,
    title: &str,
    what: &str,
    key: &str,
    rows: &[DurationRow],
    top: usize,
) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!(
        r#"<section id="{id}"><h2>{title}</h2><table><tr><th>{what}</th><th>count</th><th>total</th><th>share</th><th>mean</th><th>median</th><th>min</th><th>max</th></tr>"#,
    );
    for (i, r) in rows.iter().take(top).enumerate() {
        let key = |field: &str| format!("{key}.{i}.{field}");
        let _ = write!(out, "<tr><td><code>{}</code></td>", esc(&r.name));
        // Each value as summary.json writes it: the integers as integers.
        for (field, value, text) in [
            ("count", json!(r.count), r.count.to_string()),
            ("total_ns", json!(r.total_ns), dur(r.total_ns as f64)),
            ("share", json!(r.share), pct(r.share)),
            ("mean_ns", json!(r.mean_ns), dur(r.mean_ns)),
            ("median_ns", json!(r.median_ns), dur(r.median_ns)),
            ("min_ns", json!(r.min_ns), dur(r.min_ns as f64)),
            ("max_ns", json!(r.max_ns), dur(r.max_ns as f64)),
        ] {
            let _ = write!(out, "<td{}>{}</td>", data(&key(field), value), esc(&text));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    let more = rows.len().saturating_sub(top);
    if more > 0 {
        let _ = write!(out, r#"<p class="note">({more} more in summary.json)</p>"#);
    }
    out.push_str("</section>");
    out
}
