//! What the live figures of `cuprof top` cost the writer thread of an on-demand process
//! (issue 27: `cuprof top` adds at most 2 % to a recording process):
//!
//!     cargo bench -p cuprof-core --bench live      (scripts/bench/top_overhead.sh runs it)
//!
//! - `events`: [`LiveStats::events`] on batches as the writer gets them, a PyTorch-like mix (a
//!   runtime API record and a kernel record per launch, 20 kernel names shared as the decoder
//!   shares them, a memcpy every 50th launch): ns per record, to set against the writer's own
//!   cost per record (BENCHMARKS.md, "CPU path": about 1 µs).
//! - `snapshot`: one [`LiveStats::snapshot`] (what a `live` request costs, once a second while
//!   `cuprof top` watches) with two seconds of intervals at 100,000 kernels a second.
//!
//! Plain timing on the thread's CPU clock, fastest of 7 passes.

mod common;
use common::thread_cpu_ns;
use cuprof_core::event::{ApiCall, ApiDomain, Event, Kernel, Memcpy, Name};
use cuprof_core::live::LiveStats;
use std::sync::Arc;

const LAUNCHES: u64 = 200_000;
/// Launches per batch (a 2 MiB buffer holds about this many kernel records and API records).
const BATCH: u64 = 4_000;
/// 100,000 kernels a second.
const PERIOD_NS: u64 = 10_000;

fn kernel(name: &Name, start: u64, correlation: u32) -> Event {
    let mut k = Kernel::sample("", correlation, start, start + 6_000);
    k.name = name.clone();
    Event::Kernel(k)
}

fn batches() -> Vec<Vec<Event>> {
    let names: Vec<Name> = (0..20)
        .map(|i| Arc::from(format!("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_{i}FunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_")))
        .collect();
    let launch: Name = Arc::from("cudaLaunchKernel");
    let mut out = Vec::new();
    let mut batch = Vec::new();
    for i in 0..LAUNCHES {
        let t = 1_763_800_000_000_000_000 + i * PERIOD_NS;
        let correlation = i as u32;
        batch.push(Event::Api(ApiCall {
            domain: ApiDomain::Runtime,
            cbid: 211,
            name: launch.clone(),
            start: t,
            end: t + 2_000,
            pid: 1,
            tid: 1,
            correlation,
            return_value: 0,
        }));
        batch.push(kernel(
            &names[i as usize % names.len()],
            t + 3_000,
            correlation,
        ));
        if i % 50 == 0 {
            batch.push(Event::Memcpy(Memcpy {
                copy_kind: 1,
                src_kind: 1,
                dst_kind: 3,
                flags: 0,
                bytes: 4096,
                start: t + 9_000,
                end: t + 9_500,
                device: 0,
                context: 1,
                stream: 7,
                correlation,
                runtime_correlation: correlation,
                graph_id: 0,
                graph_node_id: 0,
                src_device: None,
                dst_device: None,
            }));
        }
        if (i + 1) % BATCH == 0 {
            out.push(std::mem::take(&mut batch));
        }
    }
    out
}

fn main() {
    let batches = batches();
    let records: usize = batches.iter().map(Vec::len).sum();
    let mut per_record = Vec::new();
    let mut snapshot_us = Vec::new();
    for _ in 0..7 {
        let mut live = LiveStats::new(false);
        live.begin(0);
        let t = thread_cpu_ns();
        for b in &batches {
            live.events(std::hint::black_box(b));
        }
        per_record.push((thread_cpu_ns() - t) as f64 / records as f64);
        let t = thread_cpu_ns();
        let s = std::hint::black_box(live.snapshot());
        snapshot_us.push((thread_cpu_ns() - t) as f64 / 1e3);
        assert_eq!(s.kernels_total.len(), 5);
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "live figures: events {:.1} ns per record ({records} records: {LAUNCHES} launches, API + kernel + a memcpy every 50th)",
        min(&per_record)
    );
    println!(
        "live figures: snapshot {:.0} µs (two seconds at 100,000 kernels a second)",
        min(&snapshot_us)
    );
}
