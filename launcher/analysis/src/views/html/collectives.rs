//! *Collectives*: the report's `collectives` rows (per collective name, element type and group
//! size: calls, nccl-tests' message bytes, the GPU time of their kernels, algorithm and bus
//! bandwidth, their CPU time), every figure with its `data-key`. Absent without collectives.

use std::fmt::Write;

use serde_json::{json, Value};

use super::svg::{data, esc};
use crate::format::{bytes, dur, gbps};
use crate::summary::schema::Summary;

pub fn section(s: &Summary, top: usize) -> String {
    if s.collectives.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        r#"<section id="cp-collectives"><h2>Collectives</h2><table><tr><th>collective</th><th>dtype</th><th>ranks</th><th>calls</th><th>bytes</th><th>GPU time</th><th>kernels</th><th>algbw GB/s</th><th>busbw GB/s</th><th>CPU time</th></tr>"#,
    );
    for (i, c) in s.collectives.iter().take(top).enumerate() {
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td>",
            esc(&c.name),
            esc(&c.dtype)
        );
        // Each value as summary.json writes it.
        let cells: [(&str, Value, String); 8] = [
            (
                "group_size",
                json!(c.group_size),
                c.group_size.map_or("-".to_string(), |n| n.to_string()),
            ),
            ("count", json!(c.count), c.count.to_string()),
            (
                "bytes",
                json!(c.bytes),
                c.bytes.map_or("-".to_string(), bytes),
            ),
            ("gpu_ns", json!(c.gpu_ns), dur(c.gpu_ns as f64)),
            ("kernels", json!(c.kernels), c.kernels.to_string()),
            ("algbw_gbps", json!(c.algbw_gbps), gbps(c.algbw_gbps)),
            ("busbw_gbps", json!(c.busbw_gbps), gbps(c.busbw_gbps)),
            ("cpu_ns", json!(c.cpu_ns), dur(c.cpu_ns as f64)),
        ];
        for (field, value, text) in &cells {
            let key = format!("collectives.{i}.{field}");
            let _ = write!(out, "<td{}>{}</td>", data(&key, value), esc(text));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></section>");
    out
}
