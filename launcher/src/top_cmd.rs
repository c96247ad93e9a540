//! `cuprof top`: the on-demand processes of this user on this host, live, refreshed once a
//! second: each process's figures come from the process itself (`live` request of the control
//! protocol, aggregated by its writer thread), never from its trace files.
//!
//! On a terminal the view is redrawn in place until `q` (or Ctrl-C); otherwise each refresh
//! is printed as plain lines, a blank line after each, until `--count` refreshes or until no
//! process is left.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use cuprof_core::control::{self as proto, Reply, Request};

use crate::control_cmd::{ask, no_process, reach, socket_dir};
use crate::terminal::Screen;
use crate::top_view::{render, Row};

const REFRESH: Duration = Duration::from_secs(1);
/// How often plain mode looks at the interrupt flag while it waits.
const NAP: Duration = Duration::from_millis(50);

#[derive(Args, Debug)]
pub struct TopArgs {
    /// Only these processes [default: every on-demand process of this user on this host]
    #[arg(long, num_args = 1.., value_name = "PID", conflicts_with = "name")]
    pid: Vec<u32>,

    /// Only the processes started with `cuprof run --on-demand --name NAME` (CUPROF_NAME)
    #[arg(long, value_name = "NAME")]
    name: Option<String>,

    /// Stop after N refreshes [default: until q, Ctrl-C, or no process is left]
    #[arg(long, short = 'n', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
}

pub fn top(a: TopArgs) -> Result<()> {
    let Some(dir) = socket_dir()? else {
        return Err(no_process(""));
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone())?;
    }
    let screen = Screen::open();
    let mut refreshes = 0u64;
    loop {
        let started = Instant::now();
        let rows = rows(&dir, &a.pid, a.name.as_deref());
        if rows.is_empty() && (refreshes == 0 || screen.is_none()) {
            drop(screen);
            return match refreshes {
                0 => Err(no_process(
                    &a.name
                        .as_ref()
                        .map_or(String::new(), |n| format!("named {n} ")),
                )),
                _ => Ok(()),
            };
        }
        let mut lines = vec![header(rows.len(), screen.is_some())];
        lines.extend(render(&rows));
        match &screen {
            Some(s) => s.draw(&lines),
            None => cuprof_analysis::io::console::print_line(&(lines.join("\n") + "\n")),
        }
        refreshes += 1;
        if a.count.is_some_and(|n| refreshes >= n) {
            return Ok(());
        }
        let until = started + REFRESH;
        loop {
            if interrupted.load(Relaxed) {
                return Ok(());
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match &screen {
                Some(s) => {
                    if matches!(s.key(left), Some(b'q' | b'Q')) {
                        return Ok(());
                    }
                }
                None => std::thread::sleep(left.min(NAP)),
            }
        }
    }
}

fn header(processes: usize, terminal: bool) -> String {
    let s = if processes == 1 { "" } else { "es" };
    let quit = if terminal { ", q quits" } else { "" };
    format!("cuprof top: {processes} process{s}, refreshed every second{quit}")
}

/// Each process's figures, by pid: those of `pids` (none: every on-demand process of this
/// user), of those only the ones named `name` where given (`cuprof serve`'s live panel too).
pub(crate) fn rows(dir: &Path, pids: &[u32], name: Option<&str>) -> Vec<Row> {
    // Processes asked for by pid are shown while they exist (then the view ends with them).
    let pids = if pids.is_empty() {
        proto::socket_pids(dir)
    } else {
        // Each by its pid here (a process of a child PID namespace has its socket under its
        // own pid there).
        pids.iter()
            .filter_map(|&p| match reach(dir, p) {
                Ok((socket, _)) => Some(socket),
                Err(_) if proto::alive(p) => Some(p),
                Err(_) => None,
            })
            .collect()
    };
    pids.into_iter()
        .filter_map(|pid| match ask(dir, pid, &Request::Live) {
            Ok(Reply::Live(l)) => name
                .is_none_or(|n| n == l.status.name)
                .then_some(Row::Live(l)),
            // A process with an error belongs to no name that can be told.
            _ if name.is_some() => None,
            Ok(Reply::Error(e)) => Some(Row::Failed(format!("process {pid}: {e}"))),
            Ok(other) => Some(Row::Failed(format!(
                "process {pid} answered {other:?} to a live request"
            ))),
            Err(e) => Some(Row::Failed(cuprof_analysis::io::console::one_line(&e))),
        })
        .collect()
}
