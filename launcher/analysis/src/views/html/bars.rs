//! Top kernels and top operators as horizontal bars on a time axis (hover: every figure of
//! the row).

use std::fmt::Write;

use super::svg::{self, data, esc, f, Scale};
use crate::format::{bytes, dur, pct};
use crate::load::is_comm_kernel;
use crate::sections::operators::RankedBy;
use crate::summary::schema::Summary;
use crate::views::source_paths::{shown, shown_file};

const W: f64 = 760.0;
const M_LEFT: f64 = 300.0;
const M_RIGHT: f64 = 80.0;
const ROW: f64 = 20.0;
/// Characters of a row's label: what fits left of the bars at 11 px.
const NAME_MAX: usize = 44;

/// One bar of a row: CSS class, summary key, nanoseconds.
struct Bar {
    class: &'static str,
    key: String,
    ns: i64,
}

struct Row {
    label: String,
    title: String,
    bars: Vec<Bar>,
}

/// Rows of bars: within a row, one bar under the other on a shared time axis, or, with
/// `split`, each bar in a panel of its own with its own axis (an operator's CPU time can be a
/// thousand times its GPU time: on one axis the GPU bars would vanish).
fn chart(out: &mut String, rows: &[Row], label: &str, legend: &[(&str, &str)], split: &[&str]) {
    let per = rows.first().map_or(1, |r| r.bars.len());
    let panels = if split.is_empty() { 1 } else { per };
    let stacked = if panels > 1 { 1.0 } else { per.max(1) as f64 };
    let row_h = ROW * stacked * 0.75 + 6.0;
    let axis_y = 8.0 + row_h * rows.len() as f64;
    let items: Vec<(String, &str)> = legend
        .iter()
        .map(|(c, t)| (format!("bar {c}"), *t))
        .collect();
    let items: Vec<(&str, &str)> = items.iter().map(|(c, l)| (c.as_str(), *l)).collect();
    // The legend wraps when it is wider than the chart: the chart is as tall as its lines.
    let mut legend_svg = String::new();
    let legend_end = svg::legend(&mut legend_svg, &items, M_LEFT, W - 10.0, axis_y + 40.0);
    let h = (axis_y + 58.0).max(legend_end + 4.0);
    // Each panel: its scale, from its own largest bar.
    let pw = (W - M_LEFT - 10.0) / panels as f64;
    let scales: Vec<(Scale, f64, &str)> = (0..panels)
        .map(|p| {
            let max = rows
                .iter()
                .flat_map(|r| {
                    r.bars
                        .iter()
                        .enumerate()
                        .filter(move |(k, _)| panels == 1 || *k == p)
                        .map(|(_, b)| b.ns)
                })
                .max()
                .unwrap_or(0) as f64;
            let (div, unit) = svg::time_unit(max);
            let x0 = M_LEFT + pw * p as f64;
            let right = if panels == 1 { M_RIGHT } else { 70.0 };
            (Scale::new(0.0, max, x0, x0 + pw - right), div, unit)
        })
        .collect();
    svg::open(out, "chart bars", W, h, label);
    for (i, r) in rows.iter().enumerate() {
        let y0 = 8.0 + row_h * i as f64;
        let _ = write!(
            out,
            r#"<g class="row"><title>{}</title><text class="tick" x="{}" y="{}" text-anchor="end">{}</text>"#,
            esc(&r.title),
            f(M_LEFT - 6.0),
            f(y0 + row_h / 2.0 + 1.0),
            esc(&r.label)
        );
        let bh = (row_h - 6.0) / stacked;
        for (k, b) in r.bars.iter().enumerate() {
            let (x, _, _) = &scales[if panels == 1 { 0 } else { k }];
            let y = y0 + if panels == 1 { bh * k as f64 } else { 0.0 };
            let _ = write!(
                out,
                r#"<rect class="bar {}" x="{}" y="{}" width="{}" height="{}"{}/><text class="value" x="{}" y="{}">{}</text>"#,
                b.class,
                f(x.r0),
                f(y),
                f((x.at(b.ns as f64) - x.r0).max(0.5)),
                f(bh - 1.0),
                data(&b.key, b.ns),
                f(x.at(b.ns as f64) + 4.0),
                f(y + bh / 2.0 + 3.0),
                dur(b.ns as f64)
            );
        }
        out.push_str("</g>");
    }
    for (p, (x, div, unit)) in scales.iter().enumerate() {
        let what = split.get(p).copied().unwrap_or("time");
        svg::x_axis(out, x, axis_y, *div, &format!("{what} ({unit})"));
    }
    out.push_str(&legend_svg);
    out.push_str("</svg>");
}

/// Row labels of at most `max` characters that stay as distinct as the names: a long name
/// keeps its start and its end (where generated names differ: `…_launch_default` against
/// `…_launch_graph`) around a middle ellipsis, and keeps more of its end while two labels
/// still read the same.
fn labels(names: &[&str], max: usize) -> Vec<String> {
    let cut = |s: &str, tail: usize| -> String {
        let c: Vec<char> = s.chars().collect();
        if c.len() <= max {
            return s.to_string();
        }
        let head = max - 1 - tail;
        let mut t: String = c[..head].iter().collect();
        t.push('…');
        t.extend(&c[c.len() - tail..]);
        t
    };
    let first_tail = max * 2 / 5;
    let mut tail = vec![first_tail; names.len()];
    let mut out: Vec<String> = names.iter().zip(&tail).map(|(n, t)| cut(n, *t)).collect();
    loop {
        // Every label of a clash grows at once: growing one alone would make the labels
        // differ only in how much of the same tail they show.
        let clashing: Vec<usize> = (0..names.len())
            .filter(|&i| {
                tail[i] < max - 9
                    && (0..names.len()).any(|j| j != i && out[j] == out[i] && names[j] != names[i])
            })
            .collect();
        if clashing.is_empty() {
            break;
        }
        for i in clashing {
            tail[i] += 1;
            out[i] = cut(names[i], tail[i]);
        }
    }
    // Names that differ only where no label of `max` characters reaches (cuBLAS's kernels
    // differ deep in the middle) go back to their first cut, which shows more of their
    // start, and are numbered in row order: `… #1`, `… #2`. The full name is each row's
    // tooltip and in the table below the chart.
    let stuck: Vec<bool> = (0..names.len())
        .map(|i| (0..names.len()).any(|j| out[j] == out[i] && names[j] != names[i]))
        .collect();
    for i in (0..names.len()).filter(|&i| stuck[i]) {
        out[i] = cut(names[i], first_tail);
    }
    let mut numbered = out.clone();
    for i in (0..names.len()).filter(|&i| stuck[i]) {
        let rank = (0..i).filter(|&j| stuck[j] && out[j] == out[i]).count() + 1;
        let mark = format!(" #{rank}");
        let room = max - mark.chars().count();
        let c: Vec<char> = out[i].chars().collect();
        let kept: String = if c.len() <= room {
            c.iter().collect()
        } else {
            // Drop from the head's end, before the ellipsis, so the tail still shows.
            let at = c.iter().position(|&x| x == '…').unwrap_or(room);
            let drop = c.len() - room;
            let head_end = at.saturating_sub(drop);
            c[..head_end].iter().chain(&c[at..]).collect()
        };
        numbered[i] = kept + &mark;
    }
    numbered
}

pub fn kernels(s: &Summary, top: usize) -> String {
    let mut out = String::from(r#"<section id="cp-kernels"><h2>Top kernels</h2>"#);
    if s.top_kernels.is_empty() {
        out.push_str(r#"<p class="none">no kernels</p></section>"#);
        return out;
    }
    let names: Vec<&str> = s
        .top_kernels
        .iter()
        .take(top)
        .map(|k| k.name.as_str())
        .collect();
    let names = labels(&names, NAME_MAX);
    let rows: Vec<Row> = s
        .top_kernels
        .iter()
        .take(top)
        .zip(names)
        .enumerate()
        .map(|(i, (k, label))| {
            let mut title = format!(
                "{}\n{} calls, total {}, mean {}, {} of kernel time",
                k.name,
                k.count,
                dur(k.total_ns as f64),
                dur(k.mean_ns),
                pct(k.share)
            );
            if let (Some(o), Some(ns)) = (&k.operator, k.operator_ns) {
                let _ = write!(title, "\nlaunched mostly by {o} ({})", dur(ns as f64));
            }
            Row {
                label,
                title,
                bars: vec![Bar {
                    class: if is_comm_kernel(&k.name) {
                        "comm"
                    } else {
                        "compute"
                    },
                    key: format!("top_kernels.{i}.total_ns"),
                    ns: k.total_ns,
                }],
            }
        })
        .collect();
    chart(
        &mut out,
        &rows,
        "top kernels by total GPU time",
        &[
            ("compute", "compute kernel"),
            ("comm", "communication kernel"),
        ],
        &[],
    );
    kernel_table(&mut out, s, top);
    more(&mut out, s.top_kernels.len(), top);
    out.push_str("</section>");
    out
}

/// The drawn kernels with their full names (wrapped, found by the browser's search) and every
/// figure of their rows; each row is the culprit panel's link target.
fn kernel_table(out: &mut String, s: &Summary, top: usize) {
    out.push_str(
        "<table><thead><tr><th>#</th><th>kernel</th><th>count</th><th>total</th><th>mean</th>\
         <th>median</th><th>max</th><th>share</th><th>launched mostly by</th></tr></thead><tbody>",
    );
    for (i, k) in s.top_kernels.iter().take(top).enumerate() {
        let at = format!("top_kernels.{i}");
        let _ = write!(
            out,
            r#"<tr id="{}"><td>{}</td><td><code>{}</code></td><td{}>{}</td><td{}>{}</td><td{}>{}</td><td{}>{}</td><td{}>{}</td><td{}>{}</td><td>{}</td></tr>"#,
            super::culprits::kernel_anchor(i),
            i + 1,
            esc(&k.name),
            data(&format!("{at}.count"), k.count),
            k.count,
            data(&format!("{at}.total_ns"), k.total_ns),
            dur(k.total_ns as f64),
            data(&format!("{at}.mean_ns"), k.mean_ns),
            dur(k.mean_ns),
            data(&format!("{at}.median_ns"), k.median_ns),
            dur(k.median_ns),
            data(&format!("{at}.max_ns"), k.max_ns),
            dur(k.max_ns as f64),
            data(&format!("{at}.share"), k.share),
            pct(k.share),
            k.operator
                .as_deref()
                .map_or(String::new(), |o| format!("<code>{}</code>", esc(o)))
        );
    }
    out.push_str("</tbody></table>");
}

pub fn operators(s: &Summary, top: usize) -> String {
    let Some(o) = &s.operators else {
        return String::new();
    };
    let mut out = String::from(r#"<section id="cp-operators"><h2>Top operators</h2>"#);
    if o.top.is_empty() {
        out.push_str(r#"<p class="none">no operators</p></section>"#);
        return out;
    }
    let names: Vec<&str> = o.top.iter().take(top).map(|r| r.name.as_str()).collect();
    let names = labels(&names, NAME_MAX);
    let rows: Vec<Row> = o
        .top
        .iter()
        .take(top)
        .zip(names)
        .enumerate()
        .map(|(i, (r, label))| Row {
            label,
            title: format!(
                "{}\n{} calls; GPU {} ({} of GPU time), with nested operators {}; CPU total {}, self {}{}",
                r.name,
                r.count,
                dur(r.gpu_ns as f64),
                pct(r.gpu_share),
                dur(r.gpu_total_ns as f64),
                dur(r.cpu_ns as f64),
                dur(r.self_cpu_ns as f64),
                r.memory.map_or(String::new(), |m| format!(
                    "\nallocated net: CPU {} (self {}), GPU {} (self {})",
                    bytes(m.cpu_bytes),
                    bytes(m.self_cpu_bytes),
                    bytes(m.device_bytes),
                    bytes(m.self_device_bytes)
                ))
            ),
            bars: gpu_and_self_cpu(&format!("operators.top.{i}"), r.gpu_ns, r.self_cpu_ns),
        })
        .collect();
    let by = match o.ranked_by {
        RankedBy::GpuTime => "top operators by GPU time",
        RankedBy::SelfCpuTime => "top operators by self CPU time (CPU-bound run)",
    };
    operator_chart(&mut out, &rows, by);
    more(&mut out, o.top.len(), top);
    call_sites(
        &mut out,
        &o.by_call_site,
        crate::views::render::call_site_kind(Some(o)),
        top,
    );
    out.push_str("</section>");
    out
}

/// An operator row's two bars: the GPU time it launched and its self CPU time, keyed under
/// `key` (its path in summary.json).
fn gpu_and_self_cpu(key: &str, gpu_ns: i64, self_cpu_ns: i64) -> Vec<Bar> {
    vec![
        Bar {
            class: "compute",
            key: format!("{key}.gpu_ns"),
            ns: gpu_ns,
        },
        Bar {
            class: "cpu",
            key: format!("{key}.self_cpu_ns"),
            ns: self_cpu_ns,
        },
    ]
}

/// The operators' charts: [`gpu_and_self_cpu`] rows in two panels.
fn operator_chart(out: &mut String, rows: &[Row], label: &str) {
    chart(
        out,
        rows,
        label,
        &[
            ("compute", "GPU time launched (innermost operator)"),
            ("cpu", "self CPU time"),
        ],
        &["GPU time", "self CPU time"],
    );
}

/// The operators by the Python line (or function) that called them (with stacks), as the
/// operators' chart.
fn call_sites(
    out: &mut String,
    sites: &[crate::sections::operators::CallSiteRow],
    kind: crate::sections::operators::CallSiteKind,
    top: usize,
) {
    if sites.is_empty() {
        return;
    }
    let _ = write!(out, "<h3>By the {} that called them</h3>", kind.noun());
    let rows: Vec<Row> = sites
        .iter()
        .take(top)
        .enumerate()
        .map(|(i, r)| Row {
            // A frame's end (file, line, function) is what tells two apart.
            label: crate::format::short_tail(&shown(&r.call_site), NAME_MAX),
            title: format!(
                "{}\n{} calls entered; GPU {} ({} of GPU time); self CPU {}{}",
                shown(&r.call_site),
                r.calls,
                dur(r.gpu_ns as f64),
                pct(r.gpu_share),
                dur(r.self_cpu_ns as f64),
                r.memory.map_or(String::new(), |m| format!(
                    "\nallocated net: CPU {}, GPU {}",
                    bytes(m.cpu_bytes),
                    bytes(m.device_bytes)
                ))
            ),
            bars: gpu_and_self_cpu(
                &format!("operators.by_call_site.{i}"),
                r.gpu_ns,
                r.self_cpu_ns,
            ),
        })
        .collect();
    operator_chart(
        out,
        &rows,
        &format!("operators by the {} that called them", kind.noun()),
    );
    more(out, sites.len(), top);
}

/// Per compilation: its compile time (when recorded) beside the CPU and GPU time of its
/// compiled code's calls; then each frame's graph breaks and each recompilation's failed guard,
/// where the trace says.
pub fn torch_compile(s: &Summary, top: usize) -> String {
    let Some(c) = &s.torch_compile else {
        return String::new();
    };
    let mut out = String::from(r#"<section id="cp-compile"><h2>torch.compile</h2>"#);
    let _ = write!(
        out,
        r#"<p>{} compilations, {} recompilations, {} graph breaks; compile time recorded {}</p>"#,
        c.compilations.len(),
        c.recompilations,
        c.graph_breaks,
        dur(c.compile_ns as f64)
    );
    let rows: Vec<Row> = c
        .compilations
        .iter()
        .take(top)
        .enumerate()
        .map(|(i, k)| {
            let mut bars = Vec::new();
            if let Some(ns) = k.compile_ns {
                bars.push(Bar {
                    class: "sync",
                    key: format!("torch_compile.compilations.{i}.compile_ns"),
                    ns,
                });
            }
            bars.push(Bar {
                class: "cpu",
                key: format!("torch_compile.compilations.{i}.cpu_ns"),
                ns: k.cpu_ns,
            });
            bars.push(Bar {
                class: "compute",
                key: format!("torch_compile.compilations.{i}.gpu_ns"),
                ns: k.gpu_ns,
            });
            Row {
                label: format!("compile id {}", k.compile_id),
                title: format!(
                    "compile id {} (frame {}, recompilation {})\ncompile {}; {} graph breaks; {} calls: CPU {}, GPU {}",
                    k.compile_id,
                    k.frame,
                    k.recompile,
                    k.compile_ns.map_or("not recorded".to_string(), |n| dur(n as f64)),
                    k.graph_breaks,
                    k.calls,
                    dur(k.cpu_ns as f64),
                    dur(k.gpu_ns as f64)
                ),
                bars,
            }
        })
        .collect();
    chart(
        &mut out,
        &rows,
        "torch.compile compilations",
        &[
            ("sync", "compile time"),
            ("cpu", "CPU time in its calls"),
            ("compute", "GPU time launched in its calls"),
        ],
        &[],
    );
    more(&mut out, c.compilations.len(), top);
    if !c.breaks.is_empty() {
        out.push_str("<h3>Graph breaks</h3><ul>");
        for b in c.breaks.iter().take(top) {
            let _ = write!(
                out,
                "<li>frame {}, <code>{}:{}</code>, {} compilation{}: {}</li>",
                b.frame,
                esc(shown_file(&b.file)),
                b.line,
                b.count,
                if b.count == 1 { "" } else { "s" },
                esc(&shown(&b.reason))
            );
        }
        out.push_str("</ul>");
        more(&mut out, c.breaks.len(), top);
    }
    let recompiled = c.recompiled();
    if !recompiled.is_empty() {
        out.push_str("<h3>Recompilations (the guard that failed)</h3><ul>");
        for (k, reason) in recompiled.iter().take(top) {
            let _ = write!(
                out,
                "<li>compile id {}: <code>{}</code></li>",
                esc(&k.compile_id),
                esc(&shown(reason))
            );
        }
        out.push_str("</ul>");
        more(&mut out, recompiled.len(), top);
    }
    out.push_str("</section>");
    out
}

fn more(out: &mut String, n: usize, top: usize) {
    if n > top {
        let _ = write!(
            out,
            r#"<p class="note">{} more in summary.json (<code>--top</code> shows more).</p>"#,
            n - top
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels_stay_distinct() {
        // They differ in the middle: the tails grow until they show it.
        let a = "GeneratedBackwardFor_cuproftest_launch_A_default_stream_kernel";
        let b = "GeneratedBackwardFor_cuproftest_launch_B_default_stream_kernel";
        let l = super::labels(&[a, b, "aten::mm"], 44);
        assert_eq!(l[0], "GeneratedBackwardFor…A_default_stream_kernel");
        assert_eq!(l[1], "GeneratedBackwardFor…B_default_stream_kernel");
        assert_eq!(l[2], "aten::mm");
        assert!(l.iter().all(|x| x.chars().count() <= 44));
    }

    #[test]
    fn names_that_differ_beyond_reach_are_numbered() {
        // Four cuBLAS kernels that differ only 60 characters in: no 44-character label shows it.
        let names: Vec<String> = (0..4)
            .map(|i| format!("sm90_xmma_gemm_f16f16_f32_tn_n_tilesize{i}x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"))
            .collect();
        let refs: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .chain(["aten::mm"])
            .collect();
        let l = super::labels(&refs, 44);
        for (i, label) in l[..4].iter().enumerate() {
            let want = format!("sm90_xmma_gemm_f16f16_f…kernel__5x_cublas #{}", i + 1);
            assert_eq!(*label, want);
            assert_eq!(label.chars().count(), 44, "{label}");
        }
        assert_eq!(l[4], "aten::mm");
    }
}
