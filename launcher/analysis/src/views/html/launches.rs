//! *Kernel launches*: the report's `launches` (HTA's kernel launch statistics: each kernel's
//! launch call and the delay from its end to the kernel's start), over all launches and per
//! kernel name, every figure with its `data-key`. Absent without a kernel joined to its launch
//! call. *Launch queues*: the report's `launch_queues` (HTA's queue length per stream), absent
//! without them. *Idle time by stream*: the report's `idle_by_stream` (HTA's idle time
//! breakdown), absent without it.

use std::fmt::Write;

use serde_json::{json, Value};

use super::svg::{data, esc};
use crate::format::dur;
use crate::sections::idle::KERNEL_WAIT_NS;
use crate::sections::launches::{LaunchSpread, LATE_START_NS, SLOW_CALL_NS};
use crate::sections::queues::FULL_QUEUE;
use crate::summary::schema::Summary;

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

/// A table's rows from the first `top` of `len` rows of summary.json's `key`, each cell keyed
/// `KEY.ROW.FIELD`, then the table's end and how many rows summary.json has beyond them.
fn keyed_rows<const N: usize>(
    out: &mut String,
    key: &str,
    len: usize,
    top: usize,
    rows: impl Iterator<Item = [(&'static str, Value, String); N]>,
) {
    for (i, cells) in rows.take(top).enumerate() {
        out.push_str("<tr>");
        for (field, value, text) in &cells {
            let at = format!("{key}.{i}.{field}");
            let _ = write!(out, "<td{}>{}</td>", data(&at, value), esc(text));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    let more = len.saturating_sub(top);
    if more > 0 {
        let _ = write!(out, r#"<p class="note">({more} more in summary.json)</p>"#);
    }
}

pub fn queues(s: &Summary, top: usize) -> String {
    if s.launch_queues.is_empty() {
        return String::new();
    }
    let mut out = format!(
        r#"<section id="cp-queues"><h2>Launch queues</h2><p class="note">Operations launched on a stream and not yet started, averaged over time: near 0, each starts as soon as it is launched and the stream waits on the host; deep, the host runs ahead of the GPU; at {FULL_QUEUE} the next launch blocks (HTA's queue length).</p><table><tr><th>rank</th><th>device</th><th>stream</th><th>launches</th><th>mean queue</th><th>max</th><th>at full queue</th></tr>"#
    );
    let rows = s.launch_queues.iter().map(|r| {
        [
            ("rank", json!(r.rank), r.rank.to_string()),
            ("device", json!(r.device), r.device.to_string()),
            ("stream", json!(r.stream), r.stream.to_string()),
            ("launches", json!(r.launches), r.launches.to_string()),
            ("mean", json!(r.mean), format!("{:.2}", r.mean)),
            ("max", json!(r.max), r.max.to_string()),
            ("full_ns", json!(r.full_ns), dur(r.full_ns as f64)),
        ]
    });
    keyed_rows(&mut out, "launch_queues", s.launch_queues.len(), top, rows);
    out.push_str("</section>");
    out
}

pub fn idle_by_stream(s: &Summary, top: usize) -> String {
    if s.idle_by_stream.is_empty() {
        return String::new();
    }
    let mut out = format!(
        r#"<section id="cp-idle"><h2>Idle time by stream</h2><p class="note">The gaps between a stream's operations (HTA's idle time breakdown): host wait, the next one's launch call started after the previous one ended, so the GPU waited on the host; kernel wait, a gap under {} between operations already launched (launch overhead: CUDA graphs and fusion shrink it); other, a longer one (an event, another stream, a synchronization).</p><table><tr><th>rank</th><th>device</th><th>stream</th><th>operations</th><th>idle</th><th>host wait</th><th>kernel wait</th><th>other</th></tr>"#,
        esc(&dur(KERNEL_WAIT_NS as f64))
    );
    let ns = |field, v: i64| (field, json!(v), dur(v as f64));
    let rows = s.idle_by_stream.iter().map(|r| {
        [
            ("rank", json!(r.rank), r.rank.to_string()),
            ("device", json!(r.device), r.device.to_string()),
            ("stream", json!(r.stream), r.stream.to_string()),
            ("ops", json!(r.ops), r.ops.to_string()),
            ns("idle_ns", r.idle_ns),
            ns("host_wait_ns", r.host_wait_ns),
            ns("kernel_wait_ns", r.kernel_wait_ns),
            ns("other_ns", r.other_ns),
        ]
    });
    keyed_rows(
        &mut out,
        "idle_by_stream",
        s.idle_by_stream.len(),
        top,
        rows,
    );
    out.push_str("</section>");
    out
}
