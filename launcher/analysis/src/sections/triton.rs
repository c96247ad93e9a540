//! `cuprof report`'s Triton kernels: the kernels torch.compile generated, as inductor's own
//! kernel benchmarks report them. Each launch is an operator named after its kernel
//! (`triton_poi_fused_add_0`) that carries the keyword inputs inductor gives the profiler:
//! `kernel_file` (the generated module, to read the kernel's source), the launch's config
//! (`num_warps`, `num_stages`, `kernel_kwargs`), and inductor's estimates of one launch's bytes
//! moved (`kernel_num_gb`) and floating-point operations (`kernel_flop`). Both cuprof's traces
//! and torch.profiler's (with `record_shapes`) have them.
//!
//! Per kernel and file: launches, the GPU time and count of the kernels attributed to the
//! launches (as any operator's: [`crate::model::links::LaunchedKernels`]), and what that time
//! achieves against the estimates: GB/s (inductor's bytes over GPU time, the figure its
//! benchmarks print, to hold against the device's memory bandwidth) and TFLOP/s.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::load::{FileData, Interner, NO_NAME};
use crate::model::links::{LaunchedKernels, Links};
use crate::saturating::AddSat;

/// One Triton kernel (its name and the file inductor wrote it to) over every file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TritonRow {
    /// The kernel's name, its launch operator's.
    pub name: String,
    /// `kernel_file`: the generated module holding the kernel's source.
    pub file: String,
    /// The first launch's config: `num_warps`, `num_stages` (absent when not written) and
    /// `kernel_kwargs` (`XBLOCK=128`; empty when not written).
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub config: String,
    pub launches: u64,
    /// The launch operators' own spans on the CPU, summed.
    pub cpu_ns: i64,
    /// The GPU time and count of the kernels attributed to the launches.
    pub gpu_ns: i64,
    pub kernels: u64,
    /// Inductor's estimate of the bytes the launches moved, over `gpu_ns`: GB/s (10^9 bytes
    /// per second); absent without an estimate on every launch or without GPU time.
    pub gbps: Option<f64>,
    /// Inductor's count of the launches' floating-point operations over `gpu_ns`, TFLOP/s;
    /// absent as `gbps` is.
    pub tflops: Option<f64>,
}

/// The Triton kernels of `files` (`links`: each file's operator links), by GPU time (then
/// name and file).
pub fn kernels(names: &Interner, files: &[FileData], links: &[Option<Links>]) -> Vec<TritonRow> {
    struct Acc {
        num_warps: i64,
        num_stages: i64,
        config: u32,
        launches: u64,
        cpu_ns: i64,
        gpu_ns: i64,
        kernels: u64,
        /// Summed over the launches; `None` once a launch has no estimate.
        gb: Option<f64>,
        flop: Option<i64>,
    }
    let mut by: FxHashMap<(u32, u32), Acc> = FxHashMap::default();
    for (f, links) in files.iter().zip(links) {
        let Some(links) = links.as_ref().filter(|_| !f.triton.is_empty()) else {
            continue;
        };
        let launched = LaunchedKernels::of_file(f, links);
        for t in &f.triton {
            let op = &f.cpu_ops[t.op as usize];
            let a = by.entry((op.name, t.file)).or_insert(Acc {
                num_warps: t.num_warps,
                num_stages: t.num_stages,
                config: t.config,
                launches: 0,
                cpu_ns: 0,
                gpu_ns: 0,
                kernels: 0,
                gb: Some(0.0),
                flop: Some(0),
            });
            a.launches += 1;
            a.cpu_ns.add_sat(op.end - op.start);
            if let Some((ns, k)) = launched.of(t.op) {
                a.gpu_ns.add_sat(ns);
                a.kernels += k;
            }
            a.gb =
                a.gb.zip(Some(t.num_gb).filter(|g| g.is_finite() && *g >= 0.0))
                    .map(|(s, g)| s + g);
            a.flop = a
                .flop
                .zip(Some(t.flop).filter(|f| *f >= 0))
                .map(|(s, f)| s.saturating_add(f));
        }
    }
    let text = |id: u32| {
        if id == NO_NAME {
            String::new()
        } else {
            names.name(id).to_string()
        }
    };
    let mut rows: Vec<TritonRow> = by
        .into_iter()
        .map(|((name, file), a)| {
            let seconds = (a.gpu_ns > 0).then_some(a.gpu_ns as f64 / 1e9);
            TritonRow {
                name: text(name),
                file: text(file),
                num_warps: (a.num_warps >= 0).then_some(a.num_warps),
                num_stages: (a.num_stages >= 0).then_some(a.num_stages),
                config: text(a.config),
                launches: a.launches,
                cpu_ns: a.cpu_ns,
                gpu_ns: a.gpu_ns,
                kernels: a.kernels,
                gbps: a.gb.zip(seconds).map(|(gb, s)| gb / s),
                tflops: a.flop.zip(seconds).map(|(f, s)| f as f64 / s / 1e12),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.gpu_ns
            .cmp(&a.gpu_ns)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.file.cmp(&b.file))
    });
    rows
}
