//! *Collectives*: the report's `collectives` rows (per collective name, element type and group
//! size: calls, nccl-tests' message bytes, the GPU time of their kernels, algorithm and bus
//! bandwidth, their CPU time), then each rank's waiting in them (`collective_waits`) and the
//! rank the others wait for (past a few dozen ranks, the waits' distribution over the ranks,
//! its outliers named); every figure with its `data-key`. Absent without collectives.

use std::fmt::Write;

use serde_json::{json, Value};

use super::svg::{data, esc};
use crate::format::{bytes, dur, gbps, pct};
use crate::model::ratio;
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
    out.push_str("</table>");
    waits(&mut out, s);
    out.push_str("</section>");
    out
}

/// Up to this many ranks' rows show; beyond, they fold under a `<details>` (no script).
const OPEN_ROWS: usize = super::spread::ONE_PER_RANK_UP_TO;

/// Each rank's waiting in the collectives it shares with others, and the rank they wait for.
fn waits(out: &mut String, s: &Summary) {
    if s.collective_waits.is_empty() {
        return;
    }
    out.push_str(r#"<h3>Waiting in collectives</h3><p class="note">Per rank: its kernels' time in the collectives it shares with other ranks, and of it the time beyond the shortest rank's kernel of each (waiting for the ranks that came later).</p>"#);
    if let Some(w) = &s.culprits.waited_for {
        let _ = write!(
            out,
            r##"<p><a href="#{}">Rank {}</a> waits least (<b{}>{}</b>; the median rank <b{}>{}</b>): the other ranks wait for it.</p>"##,
            super::culprits::rank_anchor(w.rank),
            w.rank,
            data("culprits.waited_for.wait_ns", w.wait_ns),
            dur(w.wait_ns as f64),
            data("culprits.waited_for.median_wait_ns", w.median_wait_ns),
            dur(w.median_wait_ns)
        );
    }
    let folded = s.collective_waits.len() > OPEN_ROWS;
    if folded {
        // Past a few dozen ranks, the waits' distribution with the outliers named first.
        out.push_str(super::spread::NOTE);
        let values: Vec<(i64, String, f64)> = s
            .collective_waits
            .iter()
            .enumerate()
            .map(|(i, w)| {
                (
                    w.rank,
                    format!("collective_waits.{i}.wait_ns"),
                    w.wait_ns as f64,
                )
            })
            .collect();
        super::spread::chart(out, s, "collective_wait_ns", &values);
        let _ = write!(
            out,
            "<details><summary>every rank ({})</summary>",
            s.collective_waits.len()
        );
    }
    out.push_str("<table><tr><th>rank</th><th>collectives</th><th>GPU time</th><th>waiting</th><th>share</th></tr>");
    for (i, w) in s.collective_waits.iter().enumerate() {
        let at = format!("collective_waits.{i}");
        let _ = write!(
            out,
            "<tr><td>rank {}</td><td{}>{}</td><td{}>{}</td><td{}>{}</td><td>{}</td></tr>",
            w.rank,
            data(&format!("{at}.matched"), w.matched),
            w.matched,
            data(&format!("{at}.gpu_ns"), w.gpu_ns),
            dur(w.gpu_ns as f64),
            data(&format!("{at}.wait_ns"), w.wait_ns),
            dur(w.wait_ns as f64),
            pct(ratio(w.wait_ns as f64, w.gpu_ns as f64))
        );
    }
    out.push_str("</table>");
    if folded {
        out.push_str("</details>");
    }
}
