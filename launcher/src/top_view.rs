//! What `cuprof top` shows, as lines: the same lines on a terminal (redrawn in place) and in
//! plain mode (printed one refresh after another). Names from the processes are escaped.

use cuprof_analysis::escape::terminal::printable_line;
use cuprof_analysis::format::{bytes, dur, pct};
use cuprof_core::control::Live;
use cuprof_core::live::{Top, WINDOW_NS};

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
}
