//! *Memory copies and sets*: the report's `memcpy` rows (per kind: count, bytes, time,
//! bandwidth, and each operation's size and time spread, Nsight Systems' `cuda_gpu_mem_size_sum`
//! and `cuda_gpu_mem_time_sum`), every figure with its `data-key`. Absent without copies or sets.

use std::fmt::Write;

use serde_json::{json, Value};

use super::svg::{data, esc};
use crate::format::{bytes, dur};
use crate::summary::schema::Summary;

pub fn section(s: &Summary) -> String {
    if s.memcpy.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        r#"<section id="cp-copies"><h2>Memory copies and sets</h2><table><tr><th>kind</th><th>count</th><th>bytes</th><th>time</th><th>GB/s</th><th>median size</th><th>max size</th><th>median time</th><th>max time</th></tr>"#,
    );
    for (i, m) in s.memcpy.iter().enumerate() {
        let _ = write!(out, "<tr><td><code>{}</code></td>", esc(&m.kind));
        // Each value as summary.json writes it.
        let cells: [(&str, Value, String); 8] = [
            ("count", json!(m.count), m.count.to_string()),
            ("bytes", json!(m.bytes), bytes(m.bytes)),
            ("total_ns", json!(m.total_ns), dur(m.total_ns as f64)),
            (
                "bandwidth_gbps",
                json!(m.bandwidth_gbps),
                format!("{:.2}", m.bandwidth_gbps),
            ),
            (
                "median_bytes",
                json!(m.median_bytes),
                bytes(m.median_bytes.round() as i64),
            ),
            ("max_bytes", json!(m.max_bytes), bytes(m.max_bytes)),
            ("median_ns", json!(m.median_ns), dur(m.median_ns)),
            ("max_ns", json!(m.max_ns), dur(m.max_ns as f64)),
        ];
        for (field, value, text) in &cells {
            let key = format!("memcpy.{i}.{field}");
            let _ = write!(out, "<td{}>{}</td>", data(&key, value), esc(text));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></section>");
    out
}
