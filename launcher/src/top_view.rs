//! What `cuprof top` shows, as lines: the same lines on a terminal (redrawn in place) and in
//! plain mode (printed one refresh after another). Names from the processes are escaped.
//!
//! Two views: the node's, one line per rank ([`table`]: busy share and its recent history,
//! step time, device memory, top kernel), which fits 8 ranks in 80x24 and scrolls past the
//! screen ([`viewport`]); and `--detail`'s, a block per process ([`render`]).

use std::collections::{BTreeMap, VecDeque};

use cuprof_analysis::escape::terminal::printable_line;
use cuprof_analysis::format::{bytes, dur, pct};
use cuprof_core::control::Live;
use cuprof_core::live::{Top, WINDOW_NS};

/// How the node's view orders its ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SortBy {
    /// By rank (then pid)
    Rank,
    /// The busiest GPU first
    Busy,
    /// The slowest median step first
    Step,
}

/// Refreshes a rank's busy history remembers (its sparkline's width).
pub const HISTORY: usize = 8;

/// Each process's busy share (per mille) at the last [`HISTORY`] refreshes, oldest first,
/// `None` where it was not recording; by pid.
#[derive(Debug, Default)]
pub struct History(BTreeMap<u32, VecDeque<Option<u64>>>);

impl History {
    /// Notes this refresh's figures; forgets the processes gone.
    pub fn note(&mut self, rows: &[Row]) {
        let mut next = BTreeMap::new();
        for row in rows {
            let Row::Live(l) = row else { continue };
            let mut h = self.0.remove(&l.status.pid).unwrap_or_default();
            if h.len() == HISTORY {
                h.pop_front();
            }
            h.push_back(l.snapshot.since.map(|_| permille(l.snapshot.busy_ns)));
            next.insert(l.status.pid, h);
        }
        self.0 = next;
    }

    /// `pid`'s sparkline, [`HISTORY`] characters, the newest on the right.
    fn sparkline(&self, pid: u32) -> String {
        const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
        let h = self.0.get(&pid);
        let len = h.map_or(0, VecDeque::len);
        let mut out = " ".repeat(HISTORY - len);
        for b in h.into_iter().flatten() {
            out.push(match b {
                None => ' ',
                Some(b) => BARS[(*b as usize * BARS.len() / 1001).min(BARS.len() - 1)],
            });
        }
        out
    }
}

fn permille(busy_ns: u64) -> u64 {
    (busy_ns.min(WINDOW_NS) * 1000 + WINDOW_NS / 2) / WINDOW_NS
}

/// The node view's column titles.
pub const TABLE_HEADER: &str =
    "RANK     PID STATE    BUSY HISTORY     STEP  STEP P50    MEMORY  TOP KERNEL";

/// The node's view: [`TABLE_HEADER`], then one line per process in `sort`'s order, then one
/// per process that gave no figures.
pub fn table(rows: &[Row], history: &History, sort: SortBy) -> Vec<String> {
    let mut live: Vec<&Live> = rows
        .iter()
        .filter_map(|r| match r {
            Row::Live(l) => Some(&**l),
            Row::Failed(_) => None,
        })
        .collect();
    let busy = |l: &Live| l.snapshot.since.map(|_| l.snapshot.busy_ns);
    match sort {
        SortBy::Rank => live.sort_by_key(|l| (l.status.rank, l.status.pid)),
        SortBy::Busy => {
            live.sort_by_key(|l| (std::cmp::Reverse(busy(l)), l.status.rank, l.status.pid))
        }
        SortBy::Step => live.sort_by_key(|l| {
            (
                std::cmp::Reverse(l.snapshot.step_p50_ns),
                l.status.rank,
                l.status.pid,
            )
        }),
    }
    let mut out = vec![TABLE_HEADER.to_owned()];
    for l in live {
        let (s, f) = (&l.status, &l.snapshot);
        let pid = match s.pid {
            0 => "-".to_string(),
            p => p.to_string(),
        };
        let state = match (f.since, s.state.as_str()) {
            (Some(_), _) => "rec".into(),
            (None, "pending") => "wait".into(),
            (None, "stepped-aside") => "aside".into(),
            (None, other) => printable_line(other).into_owned(),
        };
        let busy = busy(l).map_or("-".into(), |b| pct(b as f64 / WINDOW_NS as f64));
        // The last second's, while recording (as the busy share).
        let kernel = f
            .kernels_last
            .first()
            .filter(|_| f.since.is_some())
            .map_or("-".into(), |k| printable_line(&k.name).into_owned());
        out.push(format!(
            "{:>4} {pid:>7} {state:<5} {busy:>7} {} {:>7} {:>9} {:>9}  {kernel}",
            s.rank,
            history.sparkline(s.pid),
            s.step,
            optional_dur(f.step_p50_ns),
            f.memory_bytes
                .map_or("-".into(), |b| bytes(i64::try_from(b).unwrap_or(i64::MAX))),
        ));
    }
    for row in rows {
        if let Row::Failed(error) = row {
            out.push(printable_line(error).into_owned());
        }
    }
    out
}

/// The part of `lines` a screen of `height` lines shows: the first `fixed` lines always, then
/// the others from `offset` on; when they do not all fit, the last line says how many are not
/// shown. Returns the lines and the offset, kept where the last line is shown.
pub fn viewport(
    lines: &[String],
    fixed: usize,
    height: usize,
    offset: usize,
) -> (Vec<String>, usize) {
    let (head, body) = lines.split_at(fixed.min(lines.len()));
    let room = height.saturating_sub(head.len());
    let mut out = head.to_vec();
    if body.len() <= room {
        out.extend_from_slice(body);
        return (out, 0);
    }
    let shown = room.saturating_sub(1);
    let offset = offset.min(body.len() - shown);
    out.extend_from_slice(&body[offset..offset + shown]);
    let hidden = body.len() - shown;
    let above = if offset > 0 {
        format!(", {offset} above")
    } else {
        String::new()
    };
    out.push(format!("{hidden} more{above} (up/down or j/k scroll)"));
    (out, offset)
}

/// One process of a refresh: its figures, or why it gave none (one line naming it).
pub enum Row {
    Live(Box<Live>),
    Failed(String),
}

/// The lines of one refresh.
pub fn render(rows: &[Row]) -> Vec<String> {
    let mut out = Vec::new();
    for row in rows {
        match row {
            Row::Live(l) => process(l, &mut out),
            Row::Failed(error) => out.push(printable_line(error).into_owned()),
        }
    }
    out
}

fn optional_dur(ns: Option<u64>) -> String {
    ns.map_or("-".into(), |n| dur(n as f64))
}

fn process(l: &Live, out: &mut Vec<String>) {
    let s = &l.status;
    let f = &l.snapshot;
    let recording = match f.since {
        Some(_) => "recording".to_string(),
        None => printable_line(&s.state).into_owned(),
    };
    // 0: a process whose PID namespace this one cannot see has no pid here.
    let pid = match s.pid {
        0 => "-".to_string(),
        p => p.to_string(),
    };
    out.push(format!(
        "{pid}  rank {}  {}  {recording}  step {}  step time p50 {} last {}  device memory {}",
        s.rank,
        printable_line(&s.name),
        s.step,
        optional_dur(f.step_p50_ns),
        optional_dur(f.step_last_ns),
        f.memory_bytes
            .map_or("-".into(), |b| bytes(i64::try_from(b).unwrap_or(i64::MAX))),
    ));
    if f.since.is_none() {
        let which = match s.pid {
            0 => format!("--name {}", printable_line(&s.name)),
            p => format!("--pid {p}"),
        };
        out.push(format!(
            "  not recording (cuprof capture {which} --duration 0 records until stopped)"
        ));
        return;
    }
    out.push(format!(
        "  GPU busy {} of the last second",
        pct(f.busy_ns as f64 / WINDOW_NS as f64)
    ));
    list("kernels, last second", &f.kernels_last, out);
    list("kernels, since the capture began", &f.kernels_total, out);
    list("operators, last second", &f.ops_last, out);
    list("operators, since the capture began", &f.ops_total, out);
}

fn list(title: &str, tops: &[Top], out: &mut Vec<String>) {
    if tops.is_empty() {
        out.push(format!("  {title}: none"));
        return;
    }
    out.push(format!("  {title}:"));
    for t in tops {
        out.push(format!(
            "  {:>8}  {:>12}  {}",
            t.count,
            dur(t.ns as f64),
            printable_line(&t.name)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuprof_core::control::Status;
    use cuprof_core::live::Snapshot;

    fn status(state: &str) -> Status {
        Status {
            pid: 42,
            rank: 1,
            name: "train\x1b[2J".into(),
            state: state.into(),
            step: 7,
            files: 0,
            captures_done: 0,
        }
    }

    #[test]
    fn a_recording_process_shows_its_figures_with_names_escaped() {
        let snapshot = Snapshot {
            since: Some(1),
            gpu_to: 5,
            busy_ns: 375_000_000,
            kernels_last: vec![Top {
                name: "gemm\x07()".into(),
                count: 48,
                ns: 1_920_000,
            }],
            kernels_total: vec![],
            ops_to: 0,
            ops_last: vec![],
            ops_total: vec![],
            step_last_ns: Some(20_400_000),
            step_p50_ns: Some(20_100_000),
            memory_bytes: Some(3 << 29),
        };
        let rows = [
            Row::Live(Box::new(Live {
                status: status("recording"),
                snapshot,
            })),
            Row::Failed("process 9: the other side speaks control protocol 1".into()),
        ];
        assert_eq!(
            render(&rows),
            [
                "42  rank 1  train\\u{1b}[2J  recording  step 7  step time p50 20.100 ms last 20.400 ms  device memory 1.50 GiB",
                "  GPU busy 37.5% of the last second",
                "  kernels, last second:",
                "        48      1.920 ms  gemm\\u{7}()",
                "  kernels, since the capture began: none",
                "  operators, last second: none",
                "  operators, since the capture began: none",
                "process 9: the other side speaks control protocol 1",
            ]
        );
    }

    #[test]
    fn a_ready_process_says_how_to_record_it() {
        let rows = [Row::Live(Box::new(Live {
            status: status("ready"),
            snapshot: Snapshot::default(),
        }))];
        assert_eq!(
            render(&rows),
            [
                "42  rank 1  train\\u{1b}[2J  ready  step 7  step time p50 - last -  device memory -",
                "  not recording (cuprof capture --pid 42 --duration 0 records until stopped)",
            ]
        );
    }

    /// A recording rank's figures.
    fn rank(rank: u32, pid: u32, busy_ns: u64, p50_ms: Option<u64>, kernel: &str) -> Row {
        Row::Live(Box::new(Live {
            status: Status {
                pid,
                rank,
                name: "job".into(),
                state: "recording".into(),
                step: 40 + u64::from(rank),
                files: 0,
                captures_done: 0,
            },
            snapshot: Snapshot {
                since: Some(1),
                busy_ns,
                step_p50_ns: p50_ms.map(|m| m * 1_000_000),
                memory_bytes: Some(3 << 20),
                kernels_last: vec![Top {
                    name: kernel.into(),
                    count: 1,
                    ns: 1,
                }],
                ..Snapshot::default()
            },
        }))
    }

    #[test]
    fn the_node_view_is_one_line_per_rank_in_the_order_asked_with_its_busy_history() {
        let mut rows = vec![
            rank(1, 11, 500_000_000, Some(20), "gemm()"),
            rank(0, 10, 125_000_000, Some(35), "softmax\x1b()"),
            Row::Live(Box::new(Live {
                status: status("pending"),
                snapshot: Snapshot::default(),
            })),
            Row::Failed("process 9: gone".into()),
        ];
        let mut history = History::default();
        history.note(&rows);
        // Rank 0 busier at the next refresh.
        rows[1] = rank(0, 10, 1_000_000_000, Some(35), "softmax\x1b()");
        history.note(&rows);
        let rank_order = table(&rows, &history, SortBy::Rank);
        assert_eq!(
            rank_order,
            [
                TABLE_HEADER,
                "   0      10 rec    100.0%       ▁█      40 35.000 ms   3.0 MiB  softmax\\u{1b}()",
                "   1      11 rec     50.0%       ▄▄      41 20.000 ms   3.0 MiB  gemm()",
                "   1      42 wait        -                7         -         -  -",
                "process 9: gone",
            ]
        );
        assert!(
            rank_order.iter().all(|l| l.chars().count() <= 80),
            "{rank_order:#?}"
        );
        let order = |rows: &[Row], sort| -> Vec<String> {
            table(rows, &history, sort)[1..4]
                .iter()
                .map(|l| l.split_whitespace().nth(1).unwrap().to_owned())
                .collect()
        };
        assert_eq!(order(&rows, SortBy::Busy), ["10", "11", "42"]);
        assert_eq!(order(&rows, SortBy::Step), ["10", "11", "42"]);
        rows[1] = rank(0, 10, 0, Some(5), "-");
        assert_eq!(order(&rows, SortBy::Step), ["11", "10", "42"]);
        assert_eq!(order(&rows, SortBy::Busy), ["11", "10", "42"]);
        // Past HISTORY refreshes the oldest goes; a process gone is forgotten.
        for _ in 0..HISTORY {
            history.note(&rows[..1]);
        }
        assert_eq!(history.sparkline(11), "▄▄▄▄▄▄▄▄");
        assert_eq!(history.sparkline(10), "        ");
    }

    #[test]
    fn what_does_not_fit_is_counted_in_a_last_line_and_scrolls() {
        let lines: Vec<String> = ["title", "columns"]
            .into_iter()
            .map(String::from)
            .chain((0..10).map(|i| format!("rank {i}")))
            .collect();
        // 8 ranks in 80x24 (23 lines drawn): all of them.
        assert_eq!(viewport(&lines[..10], 2, 23, 5), (lines[..10].to_vec(), 0));
        let (shown, offset) = viewport(&lines, 2, 8, 0);
        assert_eq!(
            shown,
            [
                "title",
                "columns",
                "rank 0",
                "rank 1",
                "rank 2",
                "rank 3",
                "rank 4",
                "5 more (up/down or j/k scroll)"
            ]
        );
        assert_eq!(offset, 0);
        let (shown, offset) = viewport(&lines, 2, 8, 3);
        assert_eq!(shown[2], "rank 3");
        assert_eq!(shown[7], "5 more, 3 above (up/down or j/k scroll)");
        assert_eq!(offset, 3);
        // Scrolled past the end: the last rank stays on the last line but one.
        let (shown, offset) = viewport(&lines, 2, 8, 99);
        assert_eq!((shown[6].as_str(), offset), ("rank 9", 5));
    }
}
