//! Top kernels and top operators as horizontal bars on a time axis (hover: every figure of
//! the row).

use std::fmt::Write;

use super::super::load::is_comm_kernel;
use super::super::model::Summary;
use super::super::render::{dur, pct, short};
use super::svg::{self, data, esc, f, Scale};

const W: f64 = 760.0;
const M_LEFT: f64 = 300.0;
const M_RIGHT: f64 = 80.0;
const ROW: f64 = 20.0;

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

fn chart(out: &mut String, rows: &[Row], label: &str, legend: &[(&str, &str)]) {
    let max = rows
        .iter()
        .flat_map(|r| r.bars.iter().map(|b| b.ns))
        .max()
        .unwrap_or(0) as f64;
    let (div, unit) = svg::time_unit(max);
    let per = rows.first().map_or(1, |r| r.bars.len()) as f64;
    let row_h = ROW * per.max(1.0) * 0.75 + 6.0;
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
    let x = Scale::new(0.0, max, M_LEFT, W - M_RIGHT);
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
        let bh = (row_h - 6.0) / r.bars.len() as f64;
        for (k, b) in r.bars.iter().enumerate() {
            let y = y0 + bh * k as f64;
            let _ = write!(
                out,
                r#"<rect class="bar {}" x="{}" y="{}" width="{}" height="{}"{}/><text class="value" x="{}" y="{}">{}</text>"#,
                b.class,
                f(M_LEFT),
                f(y),
                f((x.at(b.ns as f64) - M_LEFT).max(0.5)),
                f(bh - 1.0),
                data(&b.key, b.ns),
                f(x.at(b.ns as f64) + 4.0),
                f(y + bh / 2.0 + 3.0),
                dur(b.ns as f64)
            );
        }
        out.push_str("</g>");
    }
    svg::x_axis(out, &x, axis_y, div, &format!("time ({unit})"));
    out.push_str(&legend_svg);
    out.push_str("</svg>");
}

pub fn kernels(s: &Summary, top: usize) -> String {
    let mut out = String::from(r#"<section id="cp-kernels"><h2>Top kernels</h2>"#);
    if s.top_kernels.is_empty() {
        out.push_str(r#"<p class="none">no kernels</p></section>"#);
        return out;
    }
    let rows: Vec<Row> = s
        .top_kernels
        .iter()
        .take(top)
        .enumerate()
        .map(|(i, k)| {
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
                label: short(&k.name, 44),
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
    );
    more(&mut out, s.top_kernels.len(), top);
    out.push_str("</section>");
    out
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
    let rows: Vec<Row> = o
        .top
        .iter()
        .take(top)
        .enumerate()
        .map(|(i, r)| Row {
            label: short(&r.name, 44),
            title: format!(
                "{}\n{} calls; GPU {} ({} of GPU time), with nested operators {}; CPU total {}, self {}",
                r.name,
                r.count,
                dur(r.gpu_ns as f64),
                pct(r.gpu_share),
                dur(r.gpu_total_ns as f64),
                dur(r.cpu_ns as f64),
                dur(r.self_cpu_ns as f64)
            ),
            bars: vec![
                Bar {
                    class: "compute",
                    key: format!("operators.top.{i}.gpu_ns"),
                    ns: r.gpu_ns,
                },
                Bar {
                    class: "cpu",
                    key: format!("operators.top.{i}.self_cpu_ns"),
                    ns: r.self_cpu_ns,
                },
            ],
        })
        .collect();
    chart(
        &mut out,
        &rows,
        "top operators by GPU time",
        &[
            ("compute", "GPU time launched (innermost operator)"),
            ("cpu", "self CPU time"),
        ],
    );
    more(&mut out, o.top.len(), top);
    out.push_str("</section>");
    out
}

/// Per compilation: its compile time (when recorded) beside the CPU and GPU time of its
/// compiled code's calls.
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
    );
    more(&mut out, c.compilations.len(), top);
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
