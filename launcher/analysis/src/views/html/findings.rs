//! *What to look at*: the report's findings (host synchronizations, pageable copies, the GPU
//! waiting for the host, kernels shorter than their launch, driver allocations inside steps),
//! costliest first, each with the
//! operators and Python lines behind it and what to do. Absent when nothing was found. Every
//! figure carries `data-key` (its path in summary.json's `findings`).

use std::fmt::Write;

use super::svg::{data, esc};
use crate::format::{bytes, dur};
use crate::sections::findings::{advice, headline, rank_spread_line, time_column, title, Finding};
use crate::sections::operators::CallSiteKind;
use crate::summary::schema::Summary;
use crate::views::render::call_site_kind;
use crate::views::source_paths::shown;

/// Sources shown per finding at most (summary.json has them all).
const ROWS: usize = 8;

pub fn section(s: &Summary, top: usize) -> String {
    if s.findings.is_empty() {
        return String::new();
    }
    let sites = call_site_kind(s.operators.as_ref());
    let mut out = format!(
        r#"<section id="cp-findings"><h2>What to look at</h2><p class="note">Patterns that cost time, costliest first, with the operators and {} behind them.</p>"#,
        sites.plural()
    );
    // The section comes before the plots: a few rows each keep them in sight.
    let rows = top.min(ROWS);
    for (i, f) in s.findings.iter().enumerate() {
        finding(&mut out, i, f, sites, rows);
    }
    out.push_str("</section>");
    out
}

fn finding(out: &mut String, i: usize, f: &Finding, sites: CallSiteKind, top: usize) {
    // A figure marked with its path under the finding (`count`, `ranks.3.time_ns`).
    let value = serde_json::to_value(f).unwrap_or_default();
    let mark = |path: &str, text: String| {
        let at = path
            .split('.')
            .fold(&value, |v, k| match k.parse::<usize>() {
                Ok(n) => &v[n],
                Err(_) => &v[k],
            });
        format!(
            "<b{}>{}</b>",
            data(&format!("findings.{i}.{path}"), at),
            esc(&text)
        )
    };
    let _ = write!(
        out,
        r#"<h3>{}. {}</h3><p>{}.</p>"#,
        i + 1,
        title(f),
        capitalized(&headline(f, mark))
    );
    if let Some(spread) = rank_spread_line(f, mark) {
        let _ = write!(out, "<p>{}.</p>", capitalized(&spread));
    }
    if f.has_operators() {
        sources(out, i, f, sites, top);
    }
    let _ = write!(out, r#"<p class="note">{}</p>"#, code_spans(advice(f)));
}

/// The operators and call sites behind finding `i`, up to `top`.
fn sources(out: &mut String, i: usize, f: &Finding, sites: CallSiteKind, top: usize) {
    let lines = f.sources.iter().any(|s| s.call_site.is_some());
    let copies = f.bytes.is_some();
    out.push_str("<table><tr><th>operator</th>");
    if lines {
        let _ = write!(out, "<th>{}</th>", sites.noun());
    }
    let _ = write!(out, "<th>count</th><th>{}</th>", time_column(f));
    if copies {
        out.push_str("<th>bytes</th>");
    }
    out.push_str("</tr>");
    for (j, src) in f.sources.iter().take(top).enumerate() {
        let key = |field: &str| format!("findings.{i}.sources.{j}.{field}");
        let _ = write!(out, "<tr><td><code>{}</code></td>", esc(&src.operator));
        if lines {
            let _ = write!(
                out,
                "<td><code>{}</code></td>",
                esc(&shown(src.call_site.as_deref().unwrap_or("")))
            );
        }
        let _ = write!(
            out,
            "<td{}>{}</td><td{}>{}</td>",
            data(&key("count"), src.count),
            src.count,
            data(&key("time_ns"), src.time_ns),
            esc(&dur(src.time_ns as f64))
        );
        if let Some(b) = src.bytes {
            let _ = write!(out, "<td{}>{}</td>", data(&key("bytes"), b), esc(&bytes(b)));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    let more = f.sources.len().saturating_sub(top);
    if more > 0 {
        let _ = write!(out, r#"<p class="note">({more} more in summary.json)</p>"#);
    }
}

/// The sentence with its first letter upper case (the terminal's headline reads after a colon).
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// `text` escaped, its `backquoted` spans set as code.
fn code_spans(text: &str) -> String {
    let mut out = String::new();
    for (k, part) in text.split('`').enumerate() {
        if k % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", esc(part));
        } else {
            out.push_str(&esc(part));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_code_spans_are_escaped() {
        assert_eq!(
            code_spans("Use `a<b>` then `c`."),
            "Use <code>a&lt;b&gt;</code> then <code>c</code>."
        );
        assert_eq!(capitalized("the GPU"), "The GPU");
    }
}
