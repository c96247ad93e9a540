//! `Analysis::summarize`: every section's figure computed from the loaded files, into
//! summary.json's [`Summary`].

use std::collections::BTreeMap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::load::{GpuOp, OpKind};
use crate::model::{
    breakdown, imbalance, ratio, step_stats, sync_wait, Analysis, Breakdown, Spread,
};
use crate::saturating::{self, AddSat};
use crate::sections::{
    allocations, collectives, durations, findings, idle, launches, modules, operators, queues,
    series, step_breakdown, torch_compile, triton,
};
use crate::summary::culprits;
use crate::summary::schema::*;

/// What [`Analysis::op_figures`] finds: each kernel's durations, unsorted, and the sorted rows
/// of NVTX buckets and copies.
struct OpFigures {
    kernels: Vec<(u32, Spread)>,
    nvtx_buckets: Vec<BucketRow>,
    memcpy: Vec<MemcpyRow>,
}

impl Analysis {
    /// Every section's figure. Sections that read only the loaded files run at once, each on a
    /// worker of the current pool: with one big file, one after another they held `report` on
    /// one core after the load (BENCHMARKS.md, "One big trace on every core").
    pub fn summarize(&self) -> Summary {
        let mut by_rank: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
        for (i, &r) in self.ranks.iter().enumerate() {
            by_rank.entry(r).or_default().push(i);
        }
        let (names, files, links) = (&self.names, &self.files, &self.links);
        let mut per_rank: Vec<RankSummary> = Vec::new();
        let mut gpu = Breakdown::default();
        let mut op_figures = None;
        let mut ops = None;
        let mut collective_waits = Vec::new();
        let mut step_parts = None;
        let mut api_calls = Vec::new();
        let mut ranges = Vec::new();
        let mut collective_rows = None;
        let mut triton_kernels = None;
        let mut launch_rows = None;
        let mut launch_queues = None;
        let mut idle_by_stream = Vec::new();
        let mut module_view = None;
        let mut memory = Vec::new();
        let mut allocations = None;
        let mut found = None;
        // Each task writes a local of its own; the scope ends when all of them have. The tasks
        // start in the order given (FIFO), those that go over every GPU operation or API call
        // first, so that the last to start are short and no worker waits long at the end.
        rayon::scope_fifo(|s| {
            s.spawn_fifo(|_| launch_queues = Some(queues::queues(names, files, &self.ranks)));
            s.spawn_fifo(|_| launch_rows = Some(launches::launches(names, files)));
            s.spawn_fifo(|_| found = Some(findings::find(names, files, links, &self.ranks)));
            s.spawn_fifo(|_| idle_by_stream = idle::idle_by_stream(files, &self.ranks));
            s.spawn_fifo(|_| ops = Some(operators::summarize(names, files, links)));
            s.spawn_fifo(|_| {
                per_rank = by_rank
                    .par_iter()
                    .map(|(&rank, idx)| self.rank_summary(rank, idx))
                    .collect();
                for r in &per_rank {
                    gpu.add(&r.gpu);
                }
            });
            s.spawn_fifo(|_| op_figures = Some(self.op_figures()));
            s.spawn_fifo(|_| step_parts = Some(step_breakdown::step_breakdown(files, &self.ranks)));
            s.spawn_fifo(|_| module_view = Some(self.modules_view(modules::ModuleView::default())));
            s.spawn_fifo(|_| {
                allocations = Some(allocations::find(
                    names,
                    files,
                    links,
                    &self.modules,
                    &self.ranks,
                ))
            });
            s.spawn_fifo(|_| collective_waits = collectives::waits(files, links));
            s.spawn_fifo(|_| collective_rows = Some(collectives::collectives(names, files, links)));
            s.spawn_fifo(|_| triton_kernels = Some(triton::kernels(names, files, links)));
            s.spawn_fifo(|_| api_calls = durations::api_calls(names, files));
            s.spawn_fifo(|_| ranges = durations::ranges(names, files));
            s.spawn_fifo(|_| {
                memory = by_rank
                    .iter()
                    .flat_map(|(&rank, idx)| series::memory(rank, files, idx))
                    .collect()
            });
        });
        let files = self
            .files
            .iter()
            .zip(&self.ranks)
            .map(|(f, &rank)| FileSummary {
                path: f.path.to_string_lossy().into_owned(),
                rank,
                events: f.read.events,
                uncompressed_bytes: f.read.uncompressed_bytes,
                truncated: f.read.truncated.as_ref().map(|t| t.to_string()),
                malformed_events_skipped: f.malformed_skipped,
                malformed_events_clamped: f.malformed_clamped,
                ignored_events: saturating::sum(f.ignored.values().copied()),
                ignored_categories: f.ignored.clone(),
                gpu_ops: f.ops.len() as u64,
                profiler_overhead_events: f.overhead.0,
                profiler_overhead_ns: f.overhead.1,
            })
            .collect();
        let mut dropped = Dropped::default();
        for r in &per_rank {
            dropped.add(&r.dropped);
        }
        let ranks = per_rank;
        let steps = step_stats(self.files.iter().flat_map(|f| f.steps.iter()));
        let OpFigures {
            kernels,
            nvtx_buckets,
            memcpy,
        } = op_figures.expect("computed in the scope");
        let ops = ops.expect("computed in the scope");
        let kernel_total: i64 = saturating::sum(kernels.iter().map(|k| k.1.total));
        let launcher = |name: u32| ops.as_ref().and_then(|(_, by)| by.get(&name)).cloned();
        let mut top_kernels: Vec<KernelRow> = kernels
            .into_iter()
            .map(|(name, k)| KernelRow {
                name: self.names.name(name).to_string(),
                count: k.count,
                total_ns: k.total,
                mean_ns: k.mean,
                median_ns: k.median,
                min_ns: k.min,
                max_ns: k.max,
                share: ratio(k.total as f64, kernel_total as f64),
                operator: launcher(name).map(|l| l.0),
                operator_ns: launcher(name).map(|l| l.1),
            })
            .collect();
        top_kernels.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));

        let cross_rank = self.cross_rank(&ranks, &by_rank);
        let figures: Vec<culprits::RankFigures> = ranks
            .iter()
            .map(|r| culprits::RankFigures {
                rank: r.rank,
                gpu: &r.gpu,
                compute_ns: r.gpu.compute_ns,
                communication_ns: r.gpu.communication_ns,
                mean_step_ns: (r.steps.count > 0).then_some(r.steps.mean_ns),
                step_times: &r.step_times,
            })
            .collect();
        let culprits = culprits::find(&figures, &collective_waits, steps.p50_ns);
        let torch_compile =
            torch_compile::summarize(&self.names, &self.files, ops.as_ref().map(|o| &o.0));
        let findings = found.expect("computed in the scope").findings(gpu.wall_ns);
        Summary {
            tool: "cuprof report".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            files,
            steps,
            step_bins: None,
            step_breakdown: step_parts.expect("computed in the scope"),
            runs: None,
            gpu,
            ranks,
            top_kernels,
            nvtx_buckets,
            memcpy,
            dropped,
            cross_rank,
            culprits,
            api_calls,
            ranges,
            collectives: collective_rows.expect("computed in the scope"),
            collective_waits,
            triton_kernels: triton_kernels.expect("computed in the scope"),
            launches: launch_rows.expect("computed in the scope"),
            launch_queues: launch_queues.expect("computed in the scope"),
            idle_by_stream,
            findings,
            torch_compile,
            operators: ops.map(|o| o.0),
            modules: module_view,
            memory,
            allocations: allocations.expect("computed in the scope"),
        }
    }

    /// Per kernel, per NVTX bucket and per kind of copy or set: their durations (overlaps
    /// counted in full for each kernel) and the copies' sizes.
    fn op_figures(&self) -> OpFigures {
        let mut kernels: FxHashMap<u32, Vec<i64>> = FxHashMap::default();
        let mut buckets: FxHashMap<&str, (u64, i64)> = FxHashMap::default();
        let mut memcpy: FxHashMap<u32, (Vec<i64>, Vec<i64>)> = FxHashMap::default();
        for (fi, f) in self.files.iter().enumerate() {
            for (o, path) in f.ops.iter().zip(&self.op_paths[fi]) {
                let d = o.end - o.start;
                match o.kind {
                    OpKind::Compute | OpKind::Comm => kernels.entry(o.name).or_default().push(d),
                    OpKind::Memcpy | OpKind::Memset => {
                        let m = memcpy.entry(o.name).or_default();
                        m.0.push(o.bytes);
                        m.1.push(d);
                    }
                }
                let b = buckets.entry(self.bucket_name(*path)).or_default();
                b.0 += 1;
                b.1.add_sat(d);
            }
        }
        let kernels: Vec<(u32, Spread)> = kernels
            .into_iter()
            .map(|(name, mut durs)| (name, Spread::of(&mut durs)))
            .collect();
        let bucket_total: i64 = saturating::sum(buckets.values().map(|b| b.1));
        let mut nvtx_buckets: Vec<BucketRow> = buckets
            .into_iter()
            .map(|(name, (count, total))| BucketRow {
                name: name.to_string(),
                count,
                total_ns: total,
                share: ratio(total as f64, bucket_total as f64),
            })
            .collect();
        nvtx_buckets.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        let mut memcpy: Vec<MemcpyRow> = memcpy
            .into_iter()
            .map(|(name, (mut sizes, mut durs))| {
                let n = self.names.name(name);
                let (size, time) = (Spread::of(&mut sizes), Spread::of(&mut durs));
                MemcpyRow {
                    kind: n.strip_prefix("Memcpy ").unwrap_or(n).to_string(),
                    count: time.count,
                    bytes: size.total,
                    total_ns: time.total,
                    bandwidth_gbps: ratio(size.total as f64, time.total as f64),
                    median_bytes: size.median,
                    min_bytes: size.min,
                    max_bytes: size.max,
                    median_ns: time.median,
                    min_ns: time.min,
                    max_ns: time.max,
                }
            })
            .collect();
        memcpy.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.kind.cmp(&b.kind)));
        OpFigures {
            kernels,
            nvtx_buckets,
            memcpy,
        }
    }

    /// The module view grouped as `view` asks (`report --module-by`, `--module-depth`).
    pub fn modules_view(&self, view: modules::ModuleView) -> modules::Modules {
        modules::summarize(&self.files, &self.links, &self.modules, view)
    }

    fn rank_summary(&self, rank: i64, idx: &[usize]) -> RankSummary {
        let mut devices: Vec<DeviceSummary> = Vec::new();
        let mut dropped = Dropped::default();
        // Each file (profiling cycle) is its own window: breakdowns of a rank's files add up.
        let mut per_device: BTreeMap<i64, DeviceSummary> = BTreeMap::new();
        for &fi in idx {
            let f = &self.files[fi];
            let mut ops_by: BTreeMap<i64, Vec<&GpuOp>> = BTreeMap::new();
            for o in &f.ops {
                ops_by.entry(o.device).or_default().push(o);
            }
            for (dev, ops) in ops_by {
                let b = breakdown(&ops, &sync_wait(f, dev));
                let start = ops.iter().map(|o| o.start).min().unwrap_or(0);
                let end = ops.iter().map(|o| o.end).max().unwrap_or(0);
                let d = per_device.entry(dev).or_insert_with(|| DeviceSummary {
                    device: dev,
                    window_start_ns: start,
                    window_end_ns: end,
                    breakdown: Breakdown::default(),
                });
                d.window_start_ns = d.window_start_ns.min(start);
                d.window_end_ns = d.window_end_ns.max(end);
                d.breakdown.add(&b);
            }
            match &f.meta.stats {
                Some(st) => {
                    dropped.dropped_channel.add_sat(st.dropped_channel);
                    dropped.dropped_cupti.add_sat(st.dropped_cupti);
                    dropped.dropped_buffers.add_sat(st.dropped_buffers);
                    dropped
                        .kernels_without_timestamps
                        .add_sat(st.kernels_without_timestamps);
                    dropped
                        .memory_events_dropped
                        .add_sat(st.memory_events_dropped);
                    if st.complete == Some(false) {
                        dropped.files_incomplete += 1;
                    }
                }
                None => dropped.files_without_stats += 1,
            }
        }
        devices.extend(per_device.into_values());
        let mut gpu = Breakdown::default();
        for d in &devices {
            gpu.add(&d.breakdown);
        }
        RankSummary {
            rank,
            files: idx
                .iter()
                .map(|&i| self.files[i].path.to_string_lossy().into_owned())
                .collect(),
            steps: step_stats(idx.iter().flat_map(|&i| self.files[i].steps.iter())),
            step_times: series::step_times(&self.files, idx),
            devices,
            gpu,
            dropped,
        }
    }

    fn cross_rank(&self, ranks: &[RankSummary], by_rank: &BTreeMap<i64, Vec<usize>>) -> CrossRank {
        // Step number -> (rank, longest duration of that step on the rank).
        let mut per_step: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
        for (&rank, idx) in by_rank {
            let mut mine: BTreeMap<i64, i64> = BTreeMap::new();
            for &i in idx {
                for s in &self.files[i].steps {
                    let e = mine.entry(s.number).or_insert(s.dur);
                    *e = (*e).max(s.dur);
                }
            }
            for (n, d) in mine {
                per_step.entry(n).or_default().push((rank, d));
            }
        }
        let mut slowest = Vec::new();
        let mut slow_count: BTreeMap<i64, usize> = BTreeMap::new();
        for (step, v) in per_step {
            if v.len() < 2 {
                continue;
            }
            // Ties go to the lowest rank (v is in rank order; max_by_key keeps the last max).
            let (rank, dur) = v
                .iter()
                .copied()
                .rev()
                .max_by_key(|&(_, d)| d)
                .expect("non-empty");
            let mean = v.iter().map(|x| x.1 as f64).sum::<f64>() / v.len() as f64;
            *slow_count.entry(rank).or_default() += 1;
            slowest.push(SlowestStep {
                step,
                rank,
                dur_ns: dur,
                mean_ns: mean,
                ranks: v.len(),
            });
        }
        let per_rank: Vec<RankRow> = ranks
            .iter()
            .map(|r| RankRow {
                rank: r.rank,
                steps: r.steps.count,
                mean_step_ns: r.steps.mean_ns,
                total_step_ns: r.steps.total_ns,
                busy_ns: r.gpu.busy_ns,
                communication_total_ns: r.gpu.communication_total_ns,
                comm_compute_overlap_ns: r.gpu.comm_compute_overlap_ns,
                comm_overlap_fraction: ratio(
                    r.gpu.comm_compute_overlap_ns as f64,
                    r.gpu.communication_total_ns as f64,
                ),
                slowest_in_steps: slow_count.get(&r.rank).copied().unwrap_or(0),
            })
            .collect();
        let step_means: Vec<f64> = per_rank
            .iter()
            .filter(|r| r.steps > 0)
            .map(|r| r.mean_step_ns)
            .collect();
        let busy: Vec<f64> = per_rank.iter().map(|r| r.busy_ns as f64).collect();
        CrossRank {
            ranks: ranks.len(),
            per_rank,
            step_time_imbalance: imbalance(&step_means),
            busy_imbalance: imbalance(&busy),
            slowest_rank_per_step: slowest,
        }
    }
}
