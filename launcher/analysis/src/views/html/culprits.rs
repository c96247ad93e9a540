//! *What holds the job back*, the page's first panel: summary.json's `culprits` (the ranks
//! furthest from the median rank in each figure, the rank the others wait for in collectives,
//! the slowest steps) and the top kernels, each linked to the row or chart with its detail.

use std::fmt::Write;

use super::svg::{data, esc};
use crate::format::{dur, pct, times};
use crate::model::ratio;
use crate::summary::culprits::{figure_label, NAMED};
use crate::summary::schema::Summary;

/// The anchor of rank `rank`'s row in the GPU time table.
pub fn rank_anchor(rank: i64) -> String {
    format!("cp-rank-{rank}")
}

/// The anchor of the `i`th kernel's row in the kernel table.
pub fn kernel_anchor(i: usize) -> String {
    format!("cp-kernel-{i}")
}

pub fn section(s: &Summary) -> String {
    let c = &s.culprits;
    let ranked = c.rank_figures.iter().any(|f| !f.ranks.is_empty())
        || c.waited_for.is_some()
        || !c.slowest_steps.is_empty();
    if !ranked && s.top_kernels.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        r#"<section id="cp-culprits"><h2>What holds the job back</h2><p class="note">The ranks furthest from the median rank in each figure (either way: the ratio says which), the rank the others wait for in their collectives (it waits least), the slowest steps (a step's time is its slowest rank's) and the top kernels; each links to its row.</p>"#,
    );
    let rank_link = |rank: i64| format!(r##"<a href="#{}">rank {rank}</a>"##, rank_anchor(rank));
    if ranked {
        out.push_str(
            "<table><thead><tr><th>what</th><th>who</th><th>value</th><th>median</th>\
             <th>vs median</th></tr></thead><tbody>",
        );
        for (fi, f) in c.rank_figures.iter().enumerate() {
            let at = format!("culprits.rank_figures.{fi}");
            for (ri, r) in f.ranks.iter().enumerate() {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td{}>{}</td><td{}>{}</td><td{}>{}</td></tr>",
                    figure_label(&f.figure),
                    rank_link(r.rank),
                    data(&format!("{at}.ranks.{ri}.value"), r.value),
                    dur(r.value),
                    data(&format!("{at}.median"), f.median),
                    dur(f.median),
                    data(&format!("{at}.ranks.{ri}.vs_median"), r.vs_median),
                    times(r.vs_median)
                );
            }
        }
        if let Some(w) = &c.waited_for {
            let _ = write!(
                out,
                r##"<tr><td><a href="#cp-collectives">the others wait for it in collectives</a></td><td>{}</td><td{}>{}</td><td{}>{}</td><td>{}</td></tr>"##,
                rank_link(w.rank),
                data("culprits.waited_for.wait_ns", w.wait_ns),
                dur(w.wait_ns as f64),
                data("culprits.waited_for.median_wait_ns", w.median_wait_ns),
                dur(w.median_wait_ns),
                times(ratio(w.wait_ns as f64, w.median_wait_ns))
            );
        }
        // The heatmap shows a step across ranks; with one rank, the step chart.
        let steps_at = if s.ranks.len() > 1 {
            "cp-heatmap"
        } else {
            "cp-steps"
        };
        for (i, st) in c.slowest_steps.iter().enumerate() {
            let _ = write!(
                out,
                r##"<tr><td><a href="#{steps_at}">slow step <b data-key="culprits.slowest_steps.{i}.step" data-value="{}">{}</b></a></td><td>{}</td><td{}>{}</td><td{}>{}</td><td{}>{}</td></tr>"##,
                st.step,
                st.step,
                rank_link(st.rank),
                data(&format!("culprits.slowest_steps.{i}.dur_ns"), st.dur_ns),
                dur(st.dur_ns as f64),
                data("culprits.step_median_ns", c.step_median_ns),
                dur(c.step_median_ns),
                data(
                    &format!("culprits.slowest_steps.{i}.vs_median"),
                    st.vs_median
                ),
                times(st.vs_median)
            );
        }
        out.push_str("</tbody></table>");
    }
    if !s.top_kernels.is_empty() {
        out.push_str(
            "<table><thead><tr><th>kernel</th><th>total</th><th>share of kernel time</th></tr>\
             </thead><tbody>",
        );
        for (i, k) in s.top_kernels.iter().take(NAMED).enumerate() {
            let _ = write!(
                out,
                r##"<tr><td class="name"><a href="#{}"><code>{}</code></a></td><td{}>{}</td><td{}>{}</td></tr>"##,
                kernel_anchor(i),
                esc(&k.name),
                data(&format!("top_kernels.{i}.total_ns"), k.total_ns),
                dur(k.total_ns as f64),
                data(&format!("top_kernels.{i}.share"), k.share),
                pct(k.share)
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");
    out
}
