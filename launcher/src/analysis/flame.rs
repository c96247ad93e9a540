//! `cuprof flame`: NVTX ranges -> kernel, weighted by GPU time (or API calls by CPU time).

use std::collections::BTreeMap;
use std::io::BufWriter;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::model::{Analysis, NO_LAUNCH};
use crate::console::outln;
use crate::output::Staged;

#[derive(clap::Args)]
pub struct FlameArgs {
    /// Trace files or directories (several ranks get one root frame each).
    #[arg(required = true, value_name = "TRACE")]
    pub paths: Vec<PathBuf>,
    /// The SVG to write.
    #[arg(short, long, value_name = "SVG", default_value = "flame.svg")]
    pub out: PathBuf,
    /// Weight CUDA runtime/driver API calls by their CPU time instead of GPU work by GPU time.
    #[arg(long)]
    pub cpu: bool,
    /// Also write the folded stacks (`frame;frame;leaf nanoseconds` per line).
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
}

/// A frame name safe for the folded format (`;` separates frames, the count ends the line).
fn frame(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect()
}

/// Folded stacks with their weights in nanoseconds, sorted by stack.
pub(crate) fn folded(an: &Analysis, cpu: bool) -> BTreeMap<String, u64> {
    let multi = {
        let mut r = an.ranks.clone();
        r.sort_unstable();
        r.dedup();
        r.len() > 1
    };
    // (rank, path id, leaf name id, launch found) -> weight
    let mut acc: BTreeMap<(i64, u32, u32, bool), u64> = BTreeMap::new();
    for (fi, f) in an.files.iter().enumerate() {
        let rank = an.ranks[fi];
        if cpu {
            for (a, &p) in f.apis.iter().zip(&an.api_paths[fi]) {
                *acc.entry((rank, p, a.name, true)).or_default() += (a.end - a.start) as u64;
            }
        } else {
            for (o, p) in f.ops.iter().zip(&an.op_paths[fi]) {
                let key = (rank, p.unwrap_or(0), o.name, p.is_some());
                *acc.entry(key).or_default() += (o.end - o.start) as u64;
            }
        }
    }
    let mut out = BTreeMap::new();
    for ((rank, path, leaf, found), w) in acc {
        if w == 0 {
            continue;
        }
        let mut stack: Vec<String> = Vec::new();
        if multi {
            stack.push(format!("rank {rank}"));
        }
        if !found {
            stack.push(NO_LAUNCH.to_string());
        }
        for &n in &an.paths.paths[path as usize] {
            stack.push(frame(an.names.name(n)));
        }
        stack.push(frame(an.names.name(leaf)));
        *out.entry(stack.join(";")).or_default() += w;
    }
    out
}

pub fn flame(args: FlameArgs) -> Result<()> {
    let inputs = super::trace_files(&args.paths)?;
    crate::output::refuse_input(&args.out, &inputs)?;
    if let Some(p) = &args.folded {
        crate::output::refuse_input(p, &inputs)?;
        if crate::output::same_file(p, &args.out) || p == &args.out {
            bail!(
                "{}: --folded and -o name the same file; pick two paths",
                p.display()
            );
        }
    }
    let an = super::analyse(&args.paths)?;
    let stacks = folded(&an, args.cpu);
    let what = if args.cpu {
        "CUDA API calls"
    } else {
        "GPU operations"
    };
    if stacks.is_empty() {
        bail!(
            "{}: no {what} with a duration in the trace(s); nothing to draw (try {})",
            args.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if args.cpu { "without --cpu" } else { "--cpu" }
        );
    }
    let lines: Vec<String> = stacks.iter().map(|(s, w)| format!("{s} {w}")).collect();
    if let Some(p) = &args.folded {
        crate::output::write(p, (lines.join("\n") + "\n").as_bytes())
            .with_context(|| format!("{}: cannot write the folded stacks", p.display()))?;
    }
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = if args.cpu {
        "cuprof: CPU time of CUDA API calls by NVTX range".to_string()
    } else {
        "cuprof: GPU time by NVTX range and kernel".to_string()
    };
    opt.count_name = "ns".to_string();
    opt.subtitle = Some(
        args.paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
    );
    let (staged, file) = Staged::create(&args.out)?;
    let mut w = BufWriter::new(file);
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), &mut w)
        .with_context(|| format!("{}: cannot draw the flame graph", args.out.display()))?;
    let file = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("{}: cannot write the SVG", args.out.display()))?;
    staged.commit(file)?;
    let total: u64 = stacks.values().sum();
    outln!(
        "wrote {} ({} stacks, {} of {what})",
        args.out.display(),
        stacks.len(),
        super::render::dur(total as f64)
    )
}
