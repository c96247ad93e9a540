//! The data-quality panel at the top of the page: what the figures below leave out (records
//! the tracer lost, malformed events, other accelerators' events, files cut short), each with
//! what it means for those figures. Absent when there is nothing to say: a page without it
//! read every record. The counts are the terminal's and report.md's (summary.json's `dropped`
//! and `files`), and carry `data-key` like every other number.

use std::fmt::Write;

use super::svg::{data, esc};
use crate::format::dur;
use crate::summary::schema::Summary;

/// The base name of a trace path: the page is meant to be shared, and the directory a trace
/// sat in on the user's machine says nothing to its reader.
pub fn base_name(p: &str) -> &str {
    p.rsplit(['/', '\\']).next().unwrap_or(p)
}

pub fn section(s: &Summary) -> String {
    let mut items: Vec<String> = Vec::new();
    let d = &s.dropped;
    if d.total() > 0 {
        let mut li = format!(
            "<b{}>{}</b> records were lost (<span{}>{}</span> channel full, <span{}>{}</span> dropped by CUPTI, <span{}>{}</span> buffer pool exhausted)",
            data("dropped.dropped_channel + dropped.dropped_cupti + dropped.dropped_buffers", d.total()),
            d.total(),
            data("dropped.dropped_channel", d.dropped_channel),
            d.dropped_channel,
            data("dropped.dropped_cupti", d.dropped_cupti),
            d.dropped_cupti,
            data("dropped.dropped_buffers", d.dropped_buffers),
            d.dropped_buffers
        );
        let by_rank: Vec<String> = s
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, r)| r.dropped.total() > 0)
            .map(|(ri, r)| {
                format!(
                    "rank {} <span{}>{}</span>",
                    r.rank,
                    data(
                        &format!("ranks.{ri}.dropped.dropped_channel + ranks.{ri}.dropped.dropped_cupti + ranks.{ri}.dropped.dropped_buffers"),
                        r.dropped.total()
                    ),
                    r.dropped.total()
                )
            })
            .collect();
        if s.ranks.len() > 1 && !by_rank.is_empty() {
            let _ = write!(li, "; by rank: {}", by_rank.join(", "));
        }
        li.push_str(": the tracer could not keep up, so kernels, copies or API calls that ran are missing; GPU time, busy fractions and call counts below are lower than what ran.");
        items.push(li);
    }
    // Counts of the whole set, each with what it means for the figures.
    for (key, n, meaning) in [
        (
            "kernels_without_timestamps",
            d.kernels_without_timestamps,
            "kernels came without timestamps from CUPTI: they are in no time figure below.",
        ),
        (
            "memory_events_dropped",
            d.memory_events_dropped,
            "memory events were dropped: the device-memory chart may miss allocations and understate the peak.",
        ),
        (
            "files_without_stats",
            d.files_without_stats as u64,
            "file(s) have no cuprofStats (cut short, or not written by cuprof): what they lost is unknown.",
        ),
        (
            "files_incomplete",
            d.files_incomplete as u64,
            "file(s) say they are incomplete: their figures cover only part of the run.",
        ),
    ] {
        if n > 0 {
            items.push(format!(
                "<b{}>{n}</b> {meaning}",
                data(&format!("dropped.{key}"), n)
            ));
        }
    }
    for (fi, f) in s.files.iter().enumerate() {
        let name = esc(base_name(&f.path));
        if let Some(t) = &f.truncated {
            items.push(format!(
                "<code>{name}</code> (rank {}) is cut short and was read up to the cut ({}): its figures cover what was read; later steps and kernels are missing.",
                f.rank,
                esc(t)
            ));
        }
        if f.malformed_events_skipped + f.malformed_events_clamped > 0 {
            items.push(format!(
                "<code>{name}</code>: <b{}>{}</b> malformed event(s) skipped (ts or dur missing, not a number, not finite or beyond ±2^62 ns) and <b{}>{}</b> clamped (negative dur read as 0): skipped events are in no figure; clamped ones count as lasting 0.",
                data(&format!("files.{fi}.malformed_events_skipped"), f.malformed_events_skipped),
                f.malformed_events_skipped,
                data(&format!("files.{fi}.malformed_events_clamped"), f.malformed_events_clamped),
                f.malformed_events_clamped
            ));
        }
        if f.ignored_events > 0 {
            let cats: Vec<String> = f
                .ignored_categories
                .keys()
                .map(|c| format!("<code>{}</code>", esc(c)))
                .collect();
            items.push(format!(
                "<code>{name}</code>: <b{}>{}</b> event(s) of categories {} ignored: not CUDA activity (another accelerator's), so the GPU figures leave them out.",
                data(&format!("files.{fi}.ignored_events"), f.ignored_events),
                f.ignored_events,
                cats.join(", ")
            ));
        }
        if f.profiler_overhead_events > 0 {
            items.push(format!(
                "<code>{name}</code>: <b{}>{}</b> profiler overhead record(s), <b{}>{}</b> in all: the profiler's own work (CUPTI's buffer flushes, instrumentation) on the traced threads, inside the CPU times below; the GPU figures are not affected.",
                data(&format!("files.{fi}.profiler_overhead_events"), f.profiler_overhead_events),
                f.profiler_overhead_events,
                data(&format!("files.{fi}.profiler_overhead_ns"), f.profiler_overhead_ns),
                dur(f.profiler_overhead_ns as f64)
            ));
        }
    }
    if items.is_empty() {
        return String::new();
    }
    let mut out =
        String::from(r#"<section id="cp-quality" class="quality"><h2>Data quality</h2><ul>"#);
    for li in items {
        let _ = write!(out, "<li>{li}</li>");
    }
    out.push_str("</ul></section>");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base_names() {
        assert_eq!(
            super::base_name("/home/u/run/rank0.json.gz"),
            "rank0.json.gz"
        );
        assert_eq!(super::base_name("r.json"), "r.json");
        assert_eq!(super::base_name(r"C:\t\r.json"), "r.json");
    }
}
