//! `/api/live`: what `cuprof top` shows of each on-demand process of this user, as JSON (the
//! processes asked the same way, through `top_cmd::rows` over core's control protocol).

use cuprof_core::control::Live;
use cuprof_core::live::{Top, WINDOW_NS};
use serde::Serialize;

use crate::top_view::Row;

#[derive(Serialize)]
struct Named {
    name: String,
    count: u64,
    ns: u64,
}

fn named(tops: &[Top]) -> Vec<Named> {
    tops.iter()
        .map(|t| Named {
            name: t.name.clone(),
            count: t.count,
            ns: t.ns,
        })
        .collect()
}

/// One process's figures.
#[derive(Serialize)]
struct Figures {
    pid: u32,
    rank: u32,
    name: String,
    state: String,
    step: u64,
    recording: bool,
    /// The last second of GPU work: its length and the time some work ran in it (ns).
    window_ns: u64,
    busy_ns: u64,
    kernels_last: Vec<Named>,
    kernels_total: Vec<Named>,
    ops_last: Vec<Named>,
    ops_total: Vec<Named>,
    step_last_ns: Option<u64>,
    step_p50_ns: Option<u64>,
    memory_bytes: Option<u64>,
}

/// One process: its figures, or why it gave none.
#[derive(Serialize)]
#[serde(untagged)]
enum Process {
    Live(Box<Figures>),
    Failed { error: String },
}

fn process(l: &Live) -> Process {
    let (s, f) = (&l.status, &l.snapshot);
    Process::Live(Box::new(Figures {
        pid: s.pid,
        rank: s.rank,
        name: s.name.clone(),
        state: s.state.clone(),
        step: s.step,
        recording: f.since.is_some(),
        window_ns: WINDOW_NS,
        busy_ns: f.busy_ns,
        kernels_last: named(&f.kernels_last),
        kernels_total: named(&f.kernels_total),
        ops_last: named(&f.ops_last),
        ops_total: named(&f.ops_total),
        step_last_ns: f.step_last_ns,
        step_p50_ns: f.step_p50_ns,
        memory_bytes: f.memory_bytes,
    }))
}

/// Every on-demand process of this user on this host now, as a JSON array (empty: none).
pub fn processes() -> anyhow::Result<String> {
    let rows = match crate::control_cmd::socket_dir()? {
        Some(dir) => crate::top_cmd::rows(&dir, &[], None),
        None => Vec::new(),
    };
    let out: Vec<Process> = rows
        .iter()
        .map(|r| match r {
            Row::Live(l) => process(l),
            Row::Failed(error) => Process::Failed {
                error: error.clone(),
            },
        })
        .collect();
    Ok(cuprof_analysis::escape::json::to_string(&out)?)
}
