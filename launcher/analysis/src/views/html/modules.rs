//! *Modules*: the report's `modules` rows (per nn.Module path, class or attribute: calls, CPU
//! and GPU time, self and inclusive), every figure with its `data-key`; or the one line saying
//! why there are none.

use std::fmt::Write;

use serde_json::{json, Value};

use super::svg::{data, esc};
use crate::format::dur;
use crate::summary::schema::Summary;
use crate::views::render::modules_title;

pub fn section(s: &Summary, top: usize) -> String {
    let Some(m) = &s.modules else {
        return String::new();
    };
    let mut out = format!(
        r#"<section id="cp-modules"><h2>Modules</h2><p class="note">{}</p>"#,
        esc(&modules_title(m))
    );
    if let Some(note) = &m.note {
        let _ = write!(out, "<p>{}</p></section>", esc(note));
        return out;
    }
    out.push_str(
        "<table><tr><th>module</th><th>calls</th><th>CPU self</th><th>CPU total</th><th>GPU self</th><th>GPU total</th></tr>",
    );
    for (i, r) in m.rows.iter().take(top).enumerate() {
        let _ = write!(out, "<tr><td><code>{}</code></td>", esc(&r.name));
        // Each value as summary.json writes it.
        let cells: [(&str, Value, String); 5] = [
            ("calls", json!(r.calls), r.calls.to_string()),
            (
                "cpu_self_ns",
                json!(r.cpu_self_ns),
                dur(r.cpu_self_ns as f64),
            ),
            (
                "cpu_inclusive_ns",
                json!(r.cpu_inclusive_ns),
                dur(r.cpu_inclusive_ns as f64),
            ),
            (
                "gpu_self_ns",
                json!(r.gpu_self_ns),
                dur(r.gpu_self_ns as f64),
            ),
            (
                "gpu_inclusive_ns",
                json!(r.gpu_inclusive_ns),
                dur(r.gpu_inclusive_ns as f64),
            ),
        ];
        for (field, value, text) in &cells {
            let key = format!("modules.rows.{i}.{field}");
            let _ = write!(out, "<td{}>{}</td>", data(&key, value), esc(text));
        }
        out.push_str("</tr>");
    }
    let _ = write!(
        out,
        "</table><p>GPU time of kernels launched outside every module call: <span{}>{}</span></p></section>",
        data("modules.outside_gpu_ns", m.outside_gpu_ns),
        esc(&dur(m.outside_gpu_ns as f64))
    );
    out
}
