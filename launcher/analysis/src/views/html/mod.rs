//! `cuprof report --html`: one self-contained HTML page (no script, no network: its
//! Content-Security-Policy forbids both, so it opens the same on an air-gapped node and as a
//! mail attachment) with the report's figures drawn as inline SVG:
//!
//! * a data-quality panel first, when records were lost, events skipped or files cut short
//!   ([`quality`]);
//! * what holds the job back: the ranks furthest from the median rank, the rank the others
//!   wait for, the slowest steps and the top kernels, each linked to its detail ([`culprits`]);
//! * what to look at: the report's findings, with the operators and lines behind them
//!   ([`findings`]);
//! * step latency over the step number per rank, and its distribution with p50/p90/p99
//!   ([`steps`]);
//! * each step's time stacked as compute, communication, copies, GPU idle and host
//!   ([`step_parts`]);
//! * GPU time per rank as stacked bars, with every figure in a table ([`breakdown`]); past a
//!   few dozen ranks, each figure's distribution over the ranks with its outliers named
//!   ([`spread`]), as for the collective waits and the mean step time;
//! * a rank × step heatmap of step time, with several ranks ([`heatmap`]);
//! * top kernels and top operators as bars ([`bars`]);
//! * CPU and GPU time per nn.Module path, class or attribute ([`modules`]);
//! * the memory copies and sets, with their size and time spreads ([`copies`]);
//! * the CUDA API calls, and the NVTX ranges and labels, by name ([`durations`]);
//! * the collectives, with nccl-tests' figures ([`collectives`]);
//! * device memory over time with its peak, when the traces have the memory counter
//!   ([`memory`]);
//! * the flame graph of `cuprof flame` ([`flame`]); past 8 ranks summed over the ranks, with
//!   a selector (a stylesheet's `:has()`, no script) for each rank the first panel names.
//!
//! Every drawn number shows on hover (an SVG `<title>`) and carries `data-key` (its path in
//! summary.json) and `data-value` (its value there, written the same way), so a test can check
//! the page against summary.json mark by mark. The SVG is written by hand ([`svg`]): see that
//! module for why no plotting crate.

mod bars;
mod breakdown;
mod collectives;
mod copies;
mod culprits;
mod durations;
mod findings;
mod flame;
mod heatmap;
mod launches;
mod memory;
mod modules;
mod quality;
mod spread;
mod step_parts;
mod steps;
mod svg;
mod triton;

use std::fmt::Write;

use crate::summary::schema::Summary;
use svg::esc;

const STYLE: &str = r#"
body { font: 14px/1.45 system-ui, sans-serif; margin: 20px 28px; color: #222; }
h1 { font-size: 22px; margin: 0 0 4px; }
h3 { font-size: 15px; margin: 16px 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 2px; }
header p, p.note { color: #555; margin: 2px 0; }
p.none { color: #777; font-style: italic; }
nav a { margin-right: 14px; }
.figs { display: flex; flex-wrap: wrap; gap: 12px 24px; }
svg.chart { max-width: 100%; height: auto; font-family: system-ui, sans-serif; }
svg.chart text { font-size: 11px; fill: #333; }
svg.chart text.axis { font-size: 12px; fill: #555; }
svg.chart .grid { stroke: #ebebeb; }
svg.chart .axisline { stroke: #999; }
svg.chart .line { fill: none; stroke-width: 1.5; }
svg.chart .dot:hover, svg.chart .memdot:hover { stroke: #000; }
svg.chart .bin { fill: #9db7d5; }
svg.chart .pt { fill: #4e79a7; fill-opacity: 0.7; }
svg.chart .pt:hover, svg.chart .bandpt:hover { stroke: #000; }
svg.chart .band { fill: #c6d4e6; }
svg.chart .median { stroke: #1f3b5c; }
svg.chart .named { stroke-width: 1; }
svg.chart .bandpt { fill: #1f3b5c; fill-opacity: 0.3; }
svg.chart .pct line { stroke: #c0392b; stroke-width: 1.5; stroke-dasharray: 5 3; }
svg.chart .pct text { fill: #c0392b; font-weight: 600; }
svg.chart .compute { fill: #4e79a7; }
svg.chart .overlap { fill: #8c6bb1; }
svg.chart .comm { fill: #f28e2b; }
svg.chart .memcpy { fill: #59a14f; }
svg.chart .memset { fill: #b6d7a8; }
svg.chart .host { fill: #cfcfcf; }
svg.chart .sync { fill: #e15759; }
svg.chart .cpu { fill: #b9a98f; }
svg.chart .gpuidle { fill: #f1ce63; }
svg.chart .part:hover, svg.chart .bar:hover, svg.chart .cell:hover { stroke: #000; }
svg.chart .cell { stroke: #ddd; stroke-width: 0.5; }
svg.chart .cell.slowest { stroke: #111; stroke-width: 1.2; }
svg.chart .swatch { stroke: #ccc; stroke-width: 0.5; }
svg.chart .value { fill: #555; font-size: 10px; }
svg.chart .mem { fill: none; stroke: #4e79a7; stroke-width: 1.5; }
svg.chart .memdot { fill: #4e79a7; fill-opacity: 0.25; }
svg.chart .peak circle { fill: none; stroke: #c0392b; stroke-width: 2; }
svg.chart .peak text { fill: #c0392b; font-weight: 600; }
svg.chart .iqr { fill: #c6d4e6; stroke: #1f3b5c; stroke-width: 1; }
svg.chart .whisker, svg.chart .quartile { stroke: #1f3b5c; stroke-width: 1; }
svg.chart line.median { stroke-width: 2.5; }
svg.chart .outlier { fill: #c0392b; }
svg.chart .leader { stroke: #c0392b; stroke-width: 0.8; stroke-dasharray: 2 2; }
svg.chart text.named { fill: #c0392b; font-weight: 600; }
svg.chart .box:hover .iqr, svg.chart .outlier:hover { stroke: #000; }
table { border-collapse: collapse; margin: 10px 0; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
td code { display: inline-block; max-width: 60em; white-space: normal; overflow-wrap: anywhere; text-align: left; }
th { background: #f6f6f6; font-weight: 600; white-space: normal; vertical-align: bottom; }
th:first-child, td:first-child { text-align: left; }
svg.flame { width: 100%; height: auto; }
section.quality { background: #fff6e5; border: 1px solid #f0c36d; padding: 2px 14px 6px; margin-top: 14px; }
section.quality h2 { margin-top: 8px; border: none; }
section.quality li { margin: 3px 0; }
"#;

/// The page for `s`; `flame_svg` is what `cuprof flame` would write (none: no GPU work),
/// `memory_flame_svg` what `cuprof flame --memory` would (none: no PyTorch allocations).
/// Writes the page to `w` as it is made: the head and the navigation, then each section,
/// dropped once written (a section may be as large as the longest name it shows, several
/// times over), and the flame graphs' SVGs dropped once inlined: the page is never whole in
/// memory.
pub fn write_page(
    w: &mut dyn std::io::Write,
    s: &Summary,
    flame_svg: Option<String>,
    memory_flame_svg: Option<String>,
    top: usize,
) -> std::io::Result<()> {
    write_page_ranked(w, s, flame_svg, Vec::new(), memory_flame_svg, top)
}

/// [`write_page`], with `rank_flames` (rank, SVG): the flame graphs of single ranks
/// (`crate::views::flame::page_rank_svgs` of `page_flame_ranks`) that a selector shows instead
/// of the graph summed over the ranks.
pub fn write_page_ranked(
    w: &mut dyn std::io::Write,
    s: &Summary,
    flame_svg: Option<String>,
    rank_flames: Vec<(i64, String)>,
    memory_flame_svg: Option<String>,
    top: usize,
) -> std::io::Result<()> {
    let mut out = String::with_capacity(64 * 1024);
    let events: u64 = s.files.iter().map(|f| f.events).sum();
    let _ = write!(
        out,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="cuprof {}">
<title>cuprof report</title><style>{STYLE}</style></head><body>
<header><h1>cuprof report</h1><p>{} file(s), {} rank(s), {} events; every figure is in summary.json (hover a mark for its numbers)</p>"#,
        esc(&s.version),
        s.files.len(),
        s.ranks.len(),
        events
    );
    // The flame graphs first: inlining one holds its SVG and copies of it at once, better
    // before the other sections exist than beside them.
    let flame = flame_section(flame_svg, rank_flames, s.ranks.len());
    let memory_flame = memory_flame_section(memory_flame_svg);
    let sections = [
        quality::section(s),
        culprits::section(s),
        findings::section(s, top),
        steps::section(s),
        step_parts::section(s),
        breakdown::section(s),
        heatmap::section(s),
        bars::kernels(s, top),
        bars::operators(s, top),
        modules::section(s, top),
        bars::torch_compile(s, top),
        copies::section(s),
        durations::api_calls(s, top),
        durations::ranges(s, top),
        collectives::section(s, top),
        triton::section(s, top),
        launches::section(s, top),
        launches::queues(s, top),
        launches::idle_by_stream(s, top),
        memory::section(s),
        flame,
        memory_flame,
    ];
    out.push_str("<nav>");
    for sec in sections.iter().filter(|x| !x.is_empty()) {
        // Each section starts `<section id="ID"><h2>TITLE</h2>`.
        let id = between(sec, "id=\"", "\"");
        let title = between(sec, "<h2>", "</h2>");
        let _ = write!(out, r##"<a href="#{id}">{title}</a>"##);
    }
    out.push_str("</nav></header>\n");
    w.write_all(out.as_bytes())?;
    drop(out);
    for sec in sections {
        w.write_all(sec.as_bytes())?;
        w.write_all(b"\n")?;
    }
    w.write_all(b"</body></html>\n")
}

fn flame_section(svg: Option<String>, rank_flames: Vec<(i64, String)>, ranks: usize) -> String {
    let mut out = String::from(r#"<section id="cp-flame"><h2>Flame graph</h2>"#);
    match svg {
        Some(svg) => {
            if ranks > crate::views::flame::PAGE_RANK_ROOTS_UP_TO {
                let _ = write!(
                    out,
                    r#"<p class="note">Summed over the {ranks} ranks (<code>cuprof flame</code> draws one root per rank; hover a frame for its time)."#
                );
                if !rank_flames.is_empty() {
                    let _ = write!(
                        out,
                        " The selector shows one rank's graph instead, for {} rank(s) the first panel names (at most {}, and {} MiB of graphs: a graph per rank would make the page too large; <code>cuprof flame</code> on a rank's file draws any other).",
                        rank_flames.len(),
                        crate::views::flame::PAGE_RANK_FLAMES,
                        crate::views::flame::PAGE_RANK_FLAME_BYTES >> 20
                    );
                }
                out.push_str("</p>");
            } else {
                out.push_str(r#"<p class="note">As <code>cuprof flame</code> draws it (hover a frame for its time; the SVG file adds zoom and search).</p>"#);
            }
            if rank_flames.is_empty() {
                let inlined = flame::inline(&svg);
                drop(svg);
                out.push_str(&inlined);
            } else {
                rank_picker(&mut out, svg, rank_flames, ranks);
            }
        }
        None => out.push_str(r#"<p class="none">no GPU work to draw</p>"#),
    }
    out.push_str("</section>");
    out
}

/// The summed graph and each rank's, one shown at a time by a `<select>`: the page has no
/// script, so a stylesheet shows the graph whose option is checked (`:has()`); a browser
/// without `:has()` keeps showing the summed graph.
fn rank_picker(out: &mut String, summed: String, rank_flames: Vec<(i64, String)>, ranks: usize) {
    let _ = write!(
        out,
        r#"<p><label for="cp-flame-pick">Ranks shown: </label><select id="cp-flame-pick"><option value="all" selected>all {ranks} ranks, summed</option>"#
    );
    for (rank, _) in &rank_flames {
        let _ = write!(out, r#"<option value="{rank}">rank {rank}</option>"#);
    }
    out.push_str("</select></p><style>#cp-flame .flame-of:not(#cp-flame-all) { display: none; }");
    for (rank, _) in &rank_flames {
        let _ = write!(
            out,
            "\n#cp-flame:has(#cp-flame-pick option[value=\"{rank}\"]:checked) #cp-flame-all {{ display: none; }}\n#cp-flame:has(#cp-flame-pick option[value=\"{rank}\"]:checked) #cp-flame-rank-{rank} {{ display: block; }}"
        );
    }
    out.push_str("</style>");
    out.push_str(r#"<div class="flame-of" id="cp-flame-all">"#);
    let inlined = flame::inline(&summed);
    drop(summed);
    out.push_str(&inlined);
    drop(inlined);
    out.push_str("</div>");
    for (rank, svg) in rank_flames {
        let _ = write!(out, r#"<div class="flame-of" id="cp-flame-rank-{rank}">"#);
        out.push_str(&flame::inline_prefixed(&svg, &format!("r{rank}-")));
        out.push_str("</div>");
    }
}

/// What `cuprof flame --memory` draws, when the traces recorded PyTorch's allocations (no
/// section otherwise); its ids are prefixed, as the GPU flame graph above uses the same ones.
fn memory_flame_section(svg: Option<String>) -> String {
    let Some(svg) = svg else {
        return String::new();
    };
    let mut out = String::from(
        r#"<section id="cp-flame-memory"><h2>Allocations by Python stack</h2><p class="note">The bytes PyTorch allocated under each Python stack and operator, as <code>cuprof flame --memory</code> draws them (frees are not drawn).</p>"#,
    );
    let inlined = flame::inline_prefixed(&svg, "mem-");
    drop(svg);
    out.push_str(&inlined);
    out.push_str("</section>");
    out
}

fn between<'a>(s: &'a str, a: &str, b: &str) -> &'a str {
    let Some(i) = s.find(a) else { return "" };
    let rest = &s[i + a.len()..];
    &rest[..rest.find(b).unwrap_or(0)]
}
