//! *Kernel launches*: the report's `launches` (HTA's kernel launch statistics: each kernel's
//! launch call and the delay from its end to the kernel's start), over all launches and per
//! kernel name, every figure with its `data-key`. Absent without a kernel joined to its launch
//! call.

use std::fmt::Write;

use serde_json::{json, Value};

use super::super::launches::{LaunchSpread, LATE_START_NS, SLOW_CALL_NS};
use super::super::model::Summary;
use super::super::render::dur;
use super::svg::{data, esc};

/// A spread's cells, each keyed `KEY.FIELD` as summary.json writes it.
fn spread_cells(out: &mut String, key: &str, s: &LaunchSpread) {
    let cells: [(&str, Value, String); 4] = [
        ("median_ns", json!(s.median_ns), dur(s.median_ns)),
        ("p90_ns", json!(s.p90_ns), dur(s.p90_ns)),
        ("min_ns", json!(s.min_ns), dur(s.min_ns as f64)),
        ("max_ns", json!(s.max_ns), dur(s.max_ns as f64)),
    ];
    for (field, value, text) in &cells {
        let _ = write!(
            out,
            "<td{}>{}</td>",
            data(&format!("{key}.{field}"), value),
            esc(text)
        );
    }
}

pub fn section(s: &Summary, top: usize) -> String {
    let Some(l) = &s.launches else {
        return String::new();
    };
    let mut out = format!(
        r#"<section id="cp-launches"><h2>Kernel launches</h2><p class="note"><span{}>{}</span> kernels with their launch call. The delay runs from the call's end to the kernel's start: a few microseconds, the GPU waits on the host; long, work is queued ahead of it (HTA's launch statistics, with its outlier cutoffs).</p><table><tr><th></th><th>median</th><th>p90</th><th>min</th><th>max</th><th>outliers</th></tr>"#,
        data("launches.kernels", l.kernels),
        l.kernels
    );
    for (what, key, spread, outliers, count, cutoff) in [
        (
            "launch call",
            "call",
            &l.call,
            "slow_calls",
            l.slow_calls,
            SLOW_CALL_NS,
        ),
        (
            "launch delay",
            "delay",
            &l.delay,
            "late_starts",
            l.late_starts,
            LATE_START_NS,
        ),
    ] {
        let _ = write!(out, "<tr><td>{what}</td>");
        spread_cells(&mut out, &format!("launches.{key}"), spread);
        let _ = write!(
            out,
            "<td{}>{} over {}</td></tr>",
            data(&format!("launches.{outliers}"), count),
            count,
            esc(&dur(cutoff as f64))
        );
    }
    out.push_str(
        "</table><table><tr><th>kernel</th><th>kernels</th><th>delay median</th><th>delay p90</th><th>delay min</th><th>delay max</th></tr>",
    );
    for (i, r) in l.by_kernel.iter().take(top).enumerate() {
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td{}>{}</td>",
            esc(&r.name),
            data(&format!("launches.by_kernel.{i}.kernels"), r.kernels),
            r.kernels
        );
        spread_cells(&mut out, &format!("launches.by_kernel.{i}.delay"), &r.delay);
        out.push_str("</tr>");
    }
    out.push_str("</table></section>");
    out
}
