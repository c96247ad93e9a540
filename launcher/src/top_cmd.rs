//! `cuprof top`: the on-demand processes of this user on this host, live, refreshed once a
//! second: each process's figures come from the process itself (`live` request of the control
//! protocol, aggregated by its writer thread), never from its trace files.
//!
//! The node's view shows one line per rank (`top_view::table`), in `--sort`'s order; `--detail`
//! a block per process. On a terminal the view is redrawn in place until `q` (or Ctrl-C): `r`,
//! `b`, `s` sort by rank, busy share, step time; `d` switches views; up/down (j/k) and page
//! keys scroll what does not fit, a last line counting what is not shown. Otherwise each
//! refresh is printed as plain lines, every one, a blank line after each, until `--count`
//! refreshes or until no process is left.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use cuprof_core::control::{self as proto, Reply, Request};

use crate::control_cmd::{ask, no_process, reach, socket_dir};
use crate::terminal::{Key, Screen};
use crate::top_view::{render, table, viewport, History, Row, SortBy};

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

    /// The order of the ranks (on a terminal: keys r, b, s)
    #[arg(long, value_enum, default_value = "rank")]
    sort: SortBy,

    /// A block per process (kernels and operators of the last second and of the capture)
    /// instead of one line per rank (on a terminal: key d)
    #[arg(long)]
    detail: bool,
}

/// What the view shows now: the keys change it between refreshes.
struct View {
    sort: SortBy,
    detail: bool,
    /// The first rank line shown, when they do not all fit.
    offset: usize,
}

impl View {
    /// The lines of one refresh: the header, then the rows as the view shows them; and how
    /// many of them stay on screen when the others scroll.
    fn lines(&self, rows: &[Row], history: &History, terminal: bool) -> (Vec<String>, usize) {
        let mut lines = vec![header(
            rows.len(),
            terminal,
            (!self.detail).then_some(self.sort),
        )];
        if self.detail {
            lines.extend(render(rows));
            (lines, 1)
        } else {
            lines.extend(table(rows, history, self.sort));
            (lines, 2)
        }
    }

    /// Applies `key`; `false` when it quits.
    fn key(&mut self, key: Key, page: usize) -> bool {
        match key {
            Key::Char(b'q' | b'Q') => return false,
            Key::Char(b'r') => self.sort = SortBy::Rank,
            Key::Char(b'b') => self.sort = SortBy::Busy,
            Key::Char(b's') => self.sort = SortBy::Step,
            Key::Char(b'd') => {
                self.detail = !self.detail;
                self.offset = 0;
            }
            Key::Up | Key::Char(b'k') => self.offset = self.offset.saturating_sub(1),
            Key::Down | Key::Char(b'j') => self.offset += 1,
            Key::PageUp => self.offset = self.offset.saturating_sub(page),
            Key::PageDown => self.offset += page,
            Key::Char(_) => {}
        }
        true
    }
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
    let mut view = View {
        sort: a.sort,
        detail: a.detail,
        offset: 0,
    };
    let mut history = History::default();
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
        history.note(&rows);
        if screen.is_none() {
            let (lines, _) = view.lines(&rows, &history, false);
            cuprof_analysis::io::console::print_line(&(lines.join("\n") + "\n"));
        }
        refreshes += 1;
        let until = started + REFRESH;
        // A key redraws at once, from the figures of this refresh.
        let mut redraw = true;
        loop {
            if let Some(s) = &screen {
                if redraw {
                    let (lines, fixed) = view.lines(&rows, &history, true);
                    let (shown, offset) = viewport(&lines, fixed, s.height(), view.offset);
                    view.offset = offset;
                    s.draw(&shown);
                    redraw = false;
                }
            }
            if a.count.is_some_and(|n| refreshes >= n) || interrupted.load(Relaxed) {
                return Ok(());
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match &screen {
                Some(s) => {
                    if let Some(k) = s.key(left) {
                        if !view.key(k, s.height().saturating_sub(3).max(1)) {
                            return Ok(());
                        }
                        redraw = true;
                    }
                }
                None => std::thread::sleep(left.min(NAP)),
            }
        }
    }
}

fn header(processes: usize, terminal: bool, sort: Option<SortBy>) -> String {
    let s = if processes == 1 { "" } else { "es" };
    let Some(sort) = sort else {
        let quit = if terminal { ", q quits" } else { "" };
        return format!("cuprof top: {processes} process{s}, refreshed every second{quit}");
    };
    let by = match sort {
        SortBy::Rank => "by rank",
        SortBy::Busy => "busiest first",
        SortBy::Step => "slowest step first",
    };
    let keys = if terminal {
        "; keys r b s sort, d detail, q quits"
    } else {
        ""
    };
    format!("cuprof top: {processes} process{s}, {by}{keys}")
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
