//! `cuprof flame`: NVTX ranges -> kernel, weighted by GPU time (or API calls by CPU time); when
//! the trace has PyTorch operators, Python lines -> operators -> kernel instead, or (`--memory`)
//! Python lines -> operators -> the bytes PyTorch allocated in them; or (`--modules`) nn.Module
//! path -> operators -> kernel.

use crate::saturating::{self, AddSat};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::escape::plain::folded_frame as frame;
use crate::escape::terminal::Shown;
use crate::io::console::{outln, Console};
use crate::io::output::Staged;
use crate::load::{TensorMemoryOn, NO_NAME};
use crate::model::links::{NONE, NO_OPERATOR};
use crate::model::{Analysis, Paths, NO_LAUNCH};

#[derive(Clone, Debug)]
pub struct FlameOptions {
    /// Trace files or directories (several ranks get one root frame each).
    pub paths: Vec<PathBuf>,
    /// The SVG to write.
    pub out: PathBuf,
    /// Weight CUDA runtime/driver API calls by their CPU time instead of GPU work by GPU time.
    pub cpu: bool,
    /// Weight PyTorch's tensor allocations by their bytes instead (the trace's `[memory]`
    /// events: the MEM activity with the native observer, or torch.profiler's
    /// `profile_memory`), under the Python lines and operators that made them.
    pub memory: bool,
    /// Also write the folded stacks (`frame;frame;leaf weight` per line: nanoseconds, or
    /// bytes with `--memory`).
    pub folded: Option<PathBuf>,
    /// Stack by NVTX ranges even when the trace has PyTorch operators.
    pub nvtx: bool,
    /// Stack by nn.Module path instead of Python stack: module path -> operators -> kernel.
    pub modules: bool,
    pub jobs: crate::io::jobs::Jobs,
}

/// The SVG written unless asked (`-o`).
pub const DEFAULT_OUT: &str = "flame.svg";

impl FlameOptions {
    /// The GPU time of `paths` by operator or NVTX range, to [`DEFAULT_OUT`], on every core.
    pub fn new(paths: Vec<PathBuf>) -> Self {
        FlameOptions {
            paths,
            out: PathBuf::from(DEFAULT_OUT),
            cpu: false,
            memory: false,
            folded: None,
            nvtx: false,
            modules: false,
            jobs: crate::io::jobs::Jobs::default(),
        }
    }
}

/// The frame above operators that ran in no module call (`flame --modules`).
pub const NO_MODULE: &str = "(no module)";

/// The input paths, as a message names them.
fn shown_list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.shown().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a flame graph weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Weigh {
    /// GPU operations, by GPU time (ns).
    GpuTime,
    /// CUDA runtime/driver API calls, by CPU time (ns).
    ApiTime,
    /// PyTorch's allocations, by bytes (frees are not drawn: a flame graph adds its weights).
    Allocated,
}

impl Weigh {
    fn unit(self) -> &'static str {
        match self {
            Weigh::Allocated => "bytes",
            _ => "ns",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Weigh::GpuTime => "GPU operations",
            Weigh::ApiTime => "CUDA API calls",
            Weigh::Allocated => "PyTorch allocations",
        }
    }
}

/// A stack's last frame: an operation or API call (its name id), or what PyTorch allocated on
/// the CPU or a GPU.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Leaf {
    Name(u32),
    Allocated(TensorMemoryOn),
}

/// How the stacks above the operators are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stacks {
    /// The outermost operator's Python call stack.
    Python,
    /// The `nn.Module` path of the innermost module call holding the operator.
    Modules,
    /// NVTX ranges only, even when the trace has operators.
    Nvtx,
}

/// Where a leaf hangs: under its operators, or (no operator) under its NVTX ranges.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Under {
    /// An id of the operator chains (`Call stack` id, then operator names outermost first).
    Operators(u32),
    /// An id of `module_stacks`: module path components, then operator names.
    Modules(u32),
    /// An NVTX path id; `found`: the launch is in the trace.
    Ranges { path: u32, found: bool },
}

/// Folded stacks with their weights (nanoseconds, or bytes for [`Weigh::Allocated`]), sorted
/// by stack. Stacks go through the
/// operators when a file has any (unless `nvtx`): the outermost operator's Python call stack
/// (outermost frame first), the operators outermost first, the leaf; work no operator launched
/// is under `(no operator)`, then its NVTX ranges. With [`Stacks::Modules`] the operators hang
/// under their module path's components instead (`(no module)` outside every module call).
pub(crate) fn folded(an: &Analysis, weigh: Weigh, how: Stacks) -> BTreeMap<String, u64> {
    let nvtx = how == Stacks::Nvtx;
    let multi = {
        let mut r = an.ranks.clone();
        r.sort_unstable();
        r.dedup();
        r.len() > 1
    };
    let by_op = !nvtx && an.links.iter().any(Option::is_some);
    let mut chains = Paths::default();
    let mut module_stacks: Vec<String> = Vec::new();
    let mut module_ids: rustc_hash::FxHashMap<String, u32> = rustc_hash::FxHashMap::default();
    // (rank, where, leaf) -> weight
    let mut acc: BTreeMap<(i64, Under, Leaf), u64> = BTreeMap::new();
    let mut chain = Vec::new();
    let mut key = Vec::new();
    for (fi, f) in an.files.iter().enumerate() {
        let rank = an.ranks[fi];
        let links = an.links[fi].as_ref().filter(|_| by_op);
        // Per operator of the file: its chain id, computed on first use.
        let mut chain_of = vec![NONE; links.map_or(0, |_| f.cpu_ops.len())];
        let tree = an.modules[fi].as_ref();
        let mut under = |op: u32, path: Option<u32>| match links {
            Some(l) if op != NONE && how == Stacks::Modules => {
                if chain_of[op as usize] == NONE {
                    l.chain(op, &mut chain);
                    let mut text = match tree.map_or(NONE, |t| t.op[op as usize]) {
                        NONE => NO_MODULE.to_string(),
                        m => {
                            let t = tree.expect("a module call is in a tree");
                            let p = &t.paths[t.path[m as usize] as usize];
                            p.split('.').map(frame).collect::<Vec<_>>().join(";")
                        }
                    };
                    for &c in &chain {
                        text.push(';');
                        text.push_str(&frame(an.names.name(f.cpu_ops[c as usize].name)));
                    }
                    let next = module_stacks.len() as u32;
                    chain_of[op as usize] = *module_ids.entry(text).or_insert_with_key(|k| {
                        module_stacks.push(k.clone());
                        next
                    });
                }
                Under::Modules(chain_of[op as usize])
            }
            Some(l) if op != NONE => {
                if chain_of[op as usize] == NONE {
                    l.chain(op, &mut chain);
                    key.clear();
                    key.push(
                        chain
                            .iter()
                            .map(|&c| f.cpu_ops[c as usize].stack)
                            .find(|&s| s != NO_NAME)
                            .unwrap_or(NO_NAME),
                    );
                    key.extend(chain.iter().map(|&c| f.cpu_ops[c as usize].name));
                    chain_of[op as usize] = chains.id(&key);
                }
                Under::Operators(chain_of[op as usize])
            }
            _ => Under::Ranges {
                path: path.unwrap_or(0),
                found: path.is_some(),
            },
        };
        match weigh {
            Weigh::ApiTime => {
                for (ai, (a, &p)) in f.apis.iter().zip(&an.api_paths[fi]).enumerate() {
                    let op = links.map_or(NONE, |l| l.api[ai]);
                    acc.entry((rank, under(op, Some(p)), Leaf::Name(a.name)))
                        .or_default()
                        .add_sat((a.end - a.start) as u64);
                }
            }
            Weigh::GpuTime => {
                for (oi, (o, p)) in f.ops.iter().zip(&an.op_paths[fi]).enumerate() {
                    let op = links.map_or(NONE, |l| l.gpu[oi]);
                    acc.entry((rank, under(op, *p), Leaf::Name(o.name)))
                        .or_default()
                        .add_sat((o.end - o.start) as u64);
                }
            }
            Weigh::Allocated => {
                for (k, m) in f.tensor_memory.iter().enumerate() {
                    if m.bytes <= 0 {
                        continue;
                    }
                    // Outside every operator: `(no operator)`, with no NVTX path (allocations
                    // are not placed in ranges).
                    let op = links.map_or(NONE, |l| l.tensor_memory[k]);
                    acc.entry((rank, under(op, Some(0)), Leaf::Allocated(m.on)))
                        .or_default()
                        .add_sat(m.bytes as u64);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    for ((rank, under, leaf), w) in acc {
        if w == 0 {
            continue;
        }
        let mut stack: Vec<String> = Vec::new();
        if multi {
            stack.push(format!("rank {rank}"));
        }
        match under {
            Under::Operators(c) => {
                let key = &chains.paths[c as usize];
                if key[0] != NO_NAME {
                    // `Call stack` is innermost frame first.
                    stack.extend(an.names.name(key[0]).rsplit(';').map(|s| frame(s.trim())));
                }
                stack.extend(key[1..].iter().map(|&n| frame(an.names.name(n))));
            }
            Under::Modules(m) => stack.push(module_stacks[m as usize].clone()),
            Under::Ranges { path, found } => {
                if by_op {
                    stack.push(NO_OPERATOR.to_string());
                }
                if !found {
                    stack.push(NO_LAUNCH.to_string());
                }
                for &n in &an.paths.paths[path as usize] {
                    stack.push(frame(an.names.name(n)));
                }
            }
        }
        stack.push(match leaf {
            Leaf::Name(n) => frame(an.names.name(n)),
            Leaf::Allocated(TensorMemoryOn::Cpu) => "[CPU allocations]".to_string(),
            Leaf::Allocated(TensorMemoryOn::Device) => "[GPU allocations]".to_string(),
        });
        *out.entry(stack.join(";")).or_default() += w;
    }
    out
}

/// Folded lines (`frame;frame;leaf weight`), each made of its stack's own string (a stack
/// may be as long as its longest name: it is not copied).
fn lines(stacks: BTreeMap<String, u64>) -> Vec<String> {
    stacks
        .into_iter()
        .map(|(mut s, w)| {
            // Exactly: a stack that fills its string would otherwise double it.
            s.reserve_exact(1 + 20);
            s.push(' ');
            s.push_str(itoa::Buffer::new().format(w));
            s
        })
        .collect()
}

/// Draws the flame graph of folded `lines` (inferno) into `w`; `paths` are the inputs named in
/// the subtitle.
fn draw(
    lines: &[String],
    weigh: Weigh,
    by_op: bool,
    how: Stacks,
    paths: &[PathBuf],
    w: &mut impl std::io::Write,
) -> Result<()> {
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = match (weigh, by_op) {
        (Weigh::ApiTime, true) if how == Stacks::Modules => {
            "cuprof: CPU time of CUDA API calls by nn.Module path and operator"
        }
        (Weigh::GpuTime, true) if how == Stacks::Modules => {
            "cuprof: GPU time by nn.Module path, operator and kernel"
        }
        (Weigh::Allocated, true) if how == Stacks::Modules => {
            "cuprof: bytes PyTorch allocated, by nn.Module path and operator"
        }
        (Weigh::ApiTime, false) => "cuprof: CPU time of CUDA API calls by NVTX range",
        (Weigh::GpuTime, false) => "cuprof: GPU time by NVTX range and kernel",
        (Weigh::ApiTime, true) => "cuprof: CPU time of CUDA API calls by Python stack and operator",
        (Weigh::GpuTime, true) => "cuprof: GPU time by Python stack, operator and kernel",
        (Weigh::Allocated, _) => "cuprof: bytes PyTorch allocated, by Python stack and operator",
    }
    .to_string();
    opt.count_name = weigh.unit().to_string();
    // Inferno escapes `<>&"'`; the names in the frames and the paths in the subtitle hold no
    // control (`folded_frame`, `shown`), and the document is checked whole before it is written.
    opt.subtitle = Some(crate::escape::terminal::shown_paths(paths, " "));
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut opt, lines.iter().map(String::as_str), &mut svg)?;
    let svg = String::from_utf8(svg)?;
    w.write_all(crate::escape::xml::valid_document(&svg).as_bytes())?;
    Ok(())
}

/// The page's flame graphs of `paths`' analysis (beyond [`PAGE_RANK_ROOTS_UP_TO`] ranks, summed
/// over the ranks): what `cuprof flame PATHS` draws (GPU time; by
/// operator when the traces have operators; `None` when there is no GPU work to draw) and what
/// `cuprof flame PATHS --memory` draws (`None` when the traces recorded no PyTorch
/// allocations). The page is shared: their subtitles name the inputs by base name, not by
/// where they sat on this machine.
pub fn page_svgs(an: &Analysis, paths: &[PathBuf]) -> Result<(Option<String>, Option<String>)> {
    let names = base_names(paths);
    Ok((
        svg_of(an, Weigh::GpuTime, &names)?,
        svg_of(an, Weigh::Allocated, &names)?,
    ))
}

/// At most this many ranks get a flame graph of their own on the page beyond
/// [`PAGE_RANK_ROOTS_UP_TO`] ranks: each one about as large as the summed graph, every rank of
/// 512 would make the page hundreds of megabytes.
pub const PAGE_RANK_FLAMES: usize = 8;
/// And their graphs together at most this many bytes (the first one always kept): a rank's
/// graph of a large model can be a megabyte.
pub const PAGE_RANK_FLAME_BYTES: usize = 4 << 20;

/// `svgs` in order while their sizes add up to at most `bound` bytes (the first always).
fn within_bytes(svgs: Vec<(i64, String)>, bound: usize) -> Vec<(i64, String)> {
    let mut total = 0usize;
    svgs.into_iter()
        .enumerate()
        .take_while(|(i, (_, svg))| {
            total = total.saturating_add(svg.len());
            *i == 0 || total <= bound
        })
        .map(|(_, x)| x)
        .collect()
}

/// The ranks the first panel of `s` names (each figure's furthest ranks, the rank the others
/// wait for, the slowest steps' ranks), in that order, each once, at most
/// [`PAGE_RANK_FLAMES`]; none up to [`PAGE_RANK_ROOTS_UP_TO`] ranks, where the page's graph
/// has a root per rank.
pub fn page_flame_ranks(s: &crate::summary::schema::Summary) -> Vec<i64> {
    if s.ranks.len() <= PAGE_RANK_ROOTS_UP_TO {
        return Vec::new();
    }
    let c = &s.culprits;
    let named = c
        .rank_figures
        .iter()
        .flat_map(|f| f.ranks.iter().map(|r| r.rank))
        .chain(c.waited_for.as_ref().map(|w| w.rank))
        .chain(c.slowest_steps.iter().map(|st| st.rank));
    let mut out: Vec<i64> = Vec::new();
    for r in named {
        if !out.contains(&r) && out.len() < PAGE_RANK_FLAMES {
            out.push(r);
        }
    }
    out
}

/// The GPU-time flame graph of each rank of `ranks` alone (as `cuprof flame` draws it for
/// that rank's files, named by base name), in that order, while they add up to at most
/// [`PAGE_RANK_FLAME_BYTES`]; a rank without GPU work has none.
pub fn page_rank_svgs(an: &Analysis, ranks: &[i64]) -> Result<Vec<(i64, String)>> {
    if ranks.is_empty() {
        return Ok(Vec::new());
    }
    let stacks = shared_page_paths(folded(an, Weigh::GpuTime, Stacks::Python));
    let by_op = an.links.iter().any(Option::is_some);
    let mut out = Vec::new();
    for &rank in ranks {
        let root = format!("rank {rank};");
        let mine: BTreeMap<String, u64> = stacks
            .iter()
            .filter_map(|(k, &w)| k.strip_prefix(&root).map(|rest| (rest.to_string(), w)))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let files: Vec<PathBuf> = an
            .files
            .iter()
            .zip(&an.ranks)
            .filter(|(_, &r)| r == rank)
            .map(|(f, _)| f.path.clone())
            .collect();
        let mut svg = Vec::new();
        draw(
            &lines(mine),
            Weigh::GpuTime,
            by_op,
            Stacks::Python,
            &base_names(&files),
            &mut svg,
        )?;
        out.push((rank, String::from_utf8(svg)?));
    }
    Ok(within_bytes(out, PAGE_RANK_FLAME_BYTES))
}

/// Beyond this many ranks the page's flame graphs sum the ranks into one root: one root per
/// rank of 512 is 2 px wide, a barcode.
pub const PAGE_RANK_ROOTS_UP_TO: usize = 8;

/// `stacks` with their frames' source paths as a shared page shows them
/// ([`super::source_paths`]), the weights of stacks that become equal summed.
fn shared_page_paths(stacks: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for (stack, w) in stacks {
        out.entry(super::source_paths::shown(&stack).into_owned())
            .or_default()
            .add_sat(w);
    }
    out
}

/// `stacks` without their `rank N` root frame, the weights of equal stacks summed.
fn over_ranks(stacks: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    for (stack, w) in stacks {
        let rest = match stack.split_once(';') {
            Some((root, rest)) if root.starts_with("rank ") => rest.to_string(),
            _ => stack,
        };
        out.entry(rest).or_default().add_sat(w);
    }
    out
}

/// The folded stacks `cuprof flame PATHS` draws: GPU time (ns) by stack, by operator when
/// the traces have operators (`cuprof serve`'s flame data).
pub fn gpu_stacks(an: &Analysis) -> BTreeMap<String, u64> {
    folded(an, Weigh::GpuTime, Stacks::Python)
}

/// The inputs as a shared page names them: by base name, not by where they sat on this
/// machine.
pub fn base_names(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .map(|p| p.file_name().map_or_else(|| p.clone(), Into::into))
        .collect()
}

fn svg_of(an: &Analysis, weigh: Weigh, paths: &[PathBuf]) -> Result<Option<String>> {
    let mut stacks = folded(an, weigh, Stacks::Python);
    let mut ranks = an.ranks.clone();
    ranks.sort_unstable();
    ranks.dedup();
    if ranks.len() > PAGE_RANK_ROOTS_UP_TO {
        stacks = over_ranks(stacks);
    }
    let stacks = shared_page_paths(stacks);
    if stacks.is_empty() {
        return Ok(None);
    }
    let by_op = an.links.iter().any(Option::is_some);
    let mut out = Vec::new();
    draw(
        &lines(stacks),
        weigh,
        by_op,
        Stacks::Python,
        paths,
        &mut out,
    )?;
    Ok(Some(String::from_utf8(out)?))
}

/// `cuprof flame`: the SVG (and the folded stacks where asked) written, and what was written
/// printed on `stdout`. `stderr` gets the notices (`flame` has none today); errors are
/// returned, not printed.
pub fn flame(
    args: &FlameOptions,
    stdout: &mut (impl Write + Send),
    stderr: &mut (impl Write + Send),
) -> Result<()> {
    flame_to(args, &mut Console::new(stdout, stderr))
}

fn flame_to(args: &FlameOptions, con: &mut Console) -> Result<()> {
    let inputs = crate::load::trace_files(&args.paths)?;
    crate::io::output::refuse_input(&args.out, &inputs)?;
    if let Some(p) = &args.folded {
        crate::io::output::refuse_input(p, &inputs)?;
        if crate::io::output::same_file(p, &args.out) || p == &args.out {
            bail!(
                "{}: --folded and -o name the same file; pick two paths",
                p.shown()
            );
        }
    }
    let an = args.jobs.install(|| crate::model::analyse(&args.paths))??;
    let weigh = match (args.cpu, args.memory) {
        (true, _) => Weigh::ApiTime,
        (_, true) => Weigh::Allocated,
        _ => Weigh::GpuTime,
    };
    let how = match (args.nvtx, args.modules) {
        (true, _) => Stacks::Nvtx,
        (_, true) => Stacks::Modules,
        _ => Stacks::Python,
    };
    if how == Stacks::Modules && an.modules.iter().all(Option::is_none) {
        let inputs = shown_list(&args.paths);
        bail!(
            "{inputs}: {}",
            if an.links.iter().all(Option::is_none) {
                crate::sections::modules::NO_OPERATORS
            } else {
                crate::sections::modules::NO_MODULE_CALLS
            }
        );
    }
    let stacks = folded(&an, weigh, how);
    let by_op = !args.nvtx && an.links.iter().any(Option::is_some);
    let what = weigh.what();
    if stacks.is_empty() {
        let inputs = shown_list(&args.paths);
        if weigh == Weigh::Allocated {
            bail!(
                "{inputs}: no PyTorch allocations (`[memory]` events) in the trace(s); nothing \
                 to draw (record them with the MEM activity, `cuprof run --activities CPU MEM`, \
                 or torch.profiler's profile_memory=True)"
            );
        }
        bail!(
            "{inputs}: no {what} with a duration in the trace(s); nothing to draw (try {})",
            if args.cpu { "without --cpu" } else { "--cpu" }
        );
    }
    let total: u64 = saturating::sum(stacks.values().copied());
    let count = stacks.len();
    let lines = lines(stacks);
    if let Some(p) = &args.folded {
        crate::io::output::write(p, (lines.join("\n") + "\n").as_bytes())
            .with_context(|| format!("{}: cannot write the folded stacks", p.shown()))?;
    }
    let (staged, file) = Staged::create(&args.out)?;
    let mut w = BufWriter::new(file);
    draw(&lines, weigh, by_op, how, &args.paths, &mut w)
        .with_context(|| format!("{}: cannot draw the flame graph", args.out.shown()))?;
    let file = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("{}: cannot write the SVG", args.out.shown()))?;
    staged.commit(file)?;
    let total = match weigh {
        Weigh::Allocated => crate::format::bytes(total.min(i64::MAX as u64) as i64),
        _ => crate::format::dur(total as f64),
    };
    outln!(
        con,
        "wrote {} ({} stacks, {total} of {what})",
        args.out.shown(),
        count,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn rank_graphs_stop_at_the_byte_bound_keeping_the_first() {
        let svgs = |sizes: &[usize]| -> Vec<(i64, String)> {
            sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| (i as i64 * 10, "x".repeat(n)))
                .collect()
        };
        let ranks = |v: Vec<(i64, String)>| v.into_iter().map(|x| x.0).collect::<Vec<_>>();
        // 3 + 4 = 7 fits 8; 7 + 2 does not: the rest is left out, even what would fit.
        assert_eq!(ranks(super::within_bytes(svgs(&[3, 4, 2, 1]), 8)), [0, 10]);
        assert_eq!(ranks(super::within_bytes(svgs(&[3, 5, 1]), 8)), [0, 10]);
        // The first is kept whatever its size.
        assert_eq!(ranks(super::within_bytes(svgs(&[20, 1]), 8)), [0]);
        assert!(super::within_bytes(Vec::new(), 8).is_empty());
    }
}
