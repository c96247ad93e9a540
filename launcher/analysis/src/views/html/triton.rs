//! *Triton kernels*: the report's `triton_kernels` rows (per torch.compile kernel and the file
//! inductor wrote it to: launches, the GPU time of their kernels, GB/s and TFLOP/s against
//! inductor's estimates, the launch config), every figure with its `data-key`. Absent without
//! Triton launches.

use std::fmt::Write;

use serde_json::{json, Value};

use super::svg::{data, esc};
use crate::format::{dur, gbps, tflops};
use crate::summary::schema::Summary;
use crate::views::source_paths::shown_file;

pub fn section(s: &Summary, top: usize) -> String {
    if s.triton_kernels.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        r#"<section id="cp-triton"><h2>Triton kernels</h2><table><tr><th>kernel</th><th>launches</th><th>GPU time</th><th>kernels</th><th>GB/s</th><th>TFLOP/s</th><th>warps</th><th>stages</th><th>config</th><th>file</th></tr>"#,
    );
    let count = |v: Option<i64>| v.map_or("-".to_string(), |n| n.to_string());
    for (i, t) in s.triton_kernels.iter().take(top).enumerate() {
        let _ = write!(out, "<tr><td><code>{}</code></td>", esc(&t.name));
        // Each value as summary.json writes it.
        let cells: [(&str, Value, String); 7] = [
            ("launches", json!(t.launches), t.launches.to_string()),
            ("gpu_ns", json!(t.gpu_ns), dur(t.gpu_ns as f64)),
            ("kernels", json!(t.kernels), t.kernels.to_string()),
            ("gbps", json!(t.gbps), gbps(t.gbps)),
            ("tflops", json!(t.tflops), tflops(t.tflops)),
            ("num_warps", json!(t.num_warps), count(t.num_warps)),
            ("num_stages", json!(t.num_stages), count(t.num_stages)),
        ];
        for (field, value, text) in &cells {
            let key = format!("triton_kernels.{i}.{field}");
            let _ = write!(out, "<td{}>{}</td>", data(&key, value), esc(text));
        }
        let _ = write!(
            out,
            "<td><code>{}</code></td><td><code>{}</code></td></tr>",
            esc(&t.config),
            esc(shown_file(&t.file))
        );
    }
    out.push_str("</table></section>");
    out
}
