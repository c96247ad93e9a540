//! A time window of one rank's timeline at a screen's resolution (`cuprof serve`'s
//! `/api/window`): the rank's events in [t0, t1), those narrower than a pixel that share their
//! lane and pixel with another merged into one mark.
//!
//! An event is in the window when it overlaps it: `start < t1` and `end > t0`, an event of no
//! duration when `t0 <= start < t1`. Times are nanoseconds on the trace's clock (its `ts` in
//! microseconds times 1,000). The events are those the analysis loads: GPU operations, CUDA
//! API calls, NVTX ranges and labels, steps, PyTorch operators and `nn.Module` calls. A pixel
//! is `ceil((t1 - t0) / px)` ns; an event at least a pixel long is always returned as itself,
//! and so is a narrower one alone in its lane and pixel: a window small enough for its events
//! returns each of them exactly.

use std::collections::BTreeMap;

use serde::Serialize;
use thiserror::Error;

use crate::load::{FileData, OpKind, TIME_LIMIT_NS};
use crate::model::Analysis;

/// The most pixels a window may be asked at: wider than any screen.
pub const MAX_PX: u64 = 20_000;
/// The most marks (events and merged groups) one answer holds.
pub const MAX_MARKS: usize = 100_000;

/// What a window is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowQuery {
    pub rank: i64,
    pub t0: i64,
    pub t1: i64,
    /// The window's width in pixels.
    pub px: u64,
}

/// Why a window cannot be answered: each a request to change, never a fault of the traces.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WindowError {
    #[error("no rank {0} in the traces: ask one of the ranks /api/summary lists")]
    NoRank(i64),
    #[error("the window [{0}, {1}) is empty or outside the trace clock: ask t0 < t1, both within ±2^62 ns")]
    Empty(i64, i64),
    #[error("px={0} is not a width: ask 1 to {MAX_PX} pixels")]
    Pixels(u64),
    #[error("the window holds {0} marks at this resolution, over {MAX_MARKS}: ask a narrower window or fewer pixels")]
    TooLarge(usize),
}

/// One event of the window, as it is in the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mark {
    pub kind: &'static str,
    /// The row it is drawn on: `device D stream S`, `thread PID/TID`, or `steps`.
    pub lane: String,
    pub name: String,
    pub start: i64,
    pub end: i64,
}

/// Events narrower than a pixel sharing one lane and pixel: their number, the time they
/// cover (summed, each cut to the window), their span and the longest one's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Merged {
    pub kind: &'static str,
    pub lane: String,
    pub count: u64,
    pub busy_ns: i64,
    pub start: i64,
    pub end: i64,
    pub longest: String,
}

/// The answer: every event of the window, as itself or in a merged group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Window {
    pub rank: i64,
    pub t0: i64,
    pub t1: i64,
    pub px: u64,
    pub pixel_ns: i64,
    /// Events in the window, merged ones included.
    pub total: u64,
    /// By start, then lane, then name.
    pub events: Vec<Mark>,
    /// By lane, kind and pixel.
    pub merged: Vec<Merged>,
}

/// A loaded event before it is placed.
struct Raw {
    kind: &'static str,
    lane: Lane,
    name: RawName,
    start: i64,
    end: i64,
}

/// An event's name: interned, or a step's number (`ProfilerStep#N`).
#[derive(Clone, Copy)]
enum RawName {
    Id(u32),
    Step(i64),
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    Steps,
    Stream(i64, i64),
    /// A file's thread index: file, thread.
    Thread(usize, u32),
}

fn gpu_kind(k: OpKind) -> &'static str {
    match k {
        OpKind::Compute | OpKind::Comm => "kernel",
        OpKind::Memcpy => "memcpy",
        OpKind::Memset => "memset",
    }
}

/// Every event of file `fi` that overlaps [t0, t1).
fn events_of(fi: usize, f: &FileData, t0: i64, t1: i64, out: &mut Vec<Raw>) {
    let inside = |s: i64, e: i64| s < t1 && e.max(s.saturating_add(1)) > t0;
    let mut push = |kind, lane, name, start, end| {
        if inside(start, end) {
            out.push(Raw {
                kind,
                lane,
                name,
                start,
                end,
            });
        }
    };
    for o in &f.ops {
        let lane = Lane::Stream(o.device, o.stream);
        push(gpu_kind(o.kind), lane, RawName::Id(o.name), o.start, o.end);
    }
    for a in &f.apis {
        let lane = Lane::Thread(fi, a.thread);
        push("cuda_api", lane, RawName::Id(a.name), a.start, a.end);
    }
    for r in &f.ranges {
        let lane = Lane::Thread(fi, r.thread);
        push("range", lane, RawName::Id(r.name), r.start, r.end);
    }
    for c in &f.cpu_ops {
        let lane = Lane::Thread(fi, c.thread);
        push("cpu_op", lane, RawName::Id(c.name), c.start, c.end);
    }
    for m in &f.modules {
        let lane = Lane::Thread(fi, m.thread);
        push("module", lane, RawName::Id(m.name), m.start, m.end);
    }
    for s in &f.steps {
        let end = s.start.saturating_add(s.dur);
        push("step", Lane::Steps, RawName::Step(s.number), s.start, end);
    }
}

/// The window `q` of the analysed traces.
pub fn window(an: &Analysis, q: WindowQuery) -> Result<Window, WindowError> {
    if q.px == 0 || q.px > MAX_PX {
        return Err(WindowError::Pixels(q.px));
    }
    if q.t0 >= q.t1 || q.t0 <= -TIME_LIMIT_NS || q.t1 >= TIME_LIMIT_NS {
        return Err(WindowError::Empty(q.t0, q.t1));
    }
    let files: Vec<usize> = (0..an.files.len())
        .filter(|&i| an.ranks[i] == q.rank)
        .collect();
    if files.is_empty() {
        return Err(WindowError::NoRank(q.rank));
    }
    let span = q.t1 - q.t0;
    // Both positive: the window is non-empty and at most 2^63 ns, px at least 1.
    let pixel_ns = (span as u64).div_ceil(q.px) as i64;
    let mut raw = Vec::new();
    for &fi in &files {
        events_of(fi, &an.files[fi], q.t0, q.t1, &mut raw);
    }
    let total = raw.len() as u64;
    // Narrow events by lane, kind and pixel; wide ones as they are.
    let mut groups: BTreeMap<(Lane, &'static str, i64), Vec<Raw>> = BTreeMap::new();
    let mut exact = Vec::new();
    for r in raw {
        if r.end - r.start >= pixel_ns {
            exact.push(r);
        } else {
            let pixel = (r.start.max(q.t0) - q.t0) / pixel_ns;
            groups.entry((r.lane, r.kind, pixel)).or_default().push(r);
        }
    }
    let mut merged_raw = Vec::new();
    for (_, mut g) in groups {
        if g.len() == 1 {
            exact.extend(g.pop());
        } else {
            merged_raw.push(g);
        }
    }
    let marks = exact.len() + merged_raw.len();
    if marks > MAX_MARKS {
        return Err(WindowError::TooLarge(marks));
    }
    let lane_name = |l: Lane| match l {
        Lane::Steps => "steps".to_string(),
        Lane::Stream(d, s) => format!("device {d} stream {s}"),
        Lane::Thread(fi, t) => {
            let (pid, tid) = &an.files[fi].threads[t as usize];
            format!("thread {pid}/{tid}")
        }
    };
    let name = |r: &Raw| match r.name {
        RawName::Step(n) => format!("ProfilerStep#{n}"),
        RawName::Id(id) => an.names.name(id).to_string(),
    };
    let mut events: Vec<Mark> = exact
        .iter()
        .map(|r| Mark {
            kind: r.kind,
            lane: lane_name(r.lane),
            name: name(r),
            start: r.start,
            end: r.end,
        })
        .collect();
    events.sort_by(|a, b| (a.start, &a.lane, &a.name).cmp(&(b.start, &b.lane, &b.name)));
    let merged = merged_raw
        .iter()
        .map(|g| {
            let longest = g
                .iter()
                .max_by_key(|r| (r.end - r.start, std::cmp::Reverse(r.start)))
                .expect("a merged group holds two events or more");
            Merged {
                kind: g[0].kind,
                lane: lane_name(g[0].lane),
                count: g.len() as u64,
                busy_ns: g
                    .iter()
                    .map(|r| r.end.min(q.t1) - r.start.max(q.t0))
                    .fold(0i64, |sum, d| sum.saturating_add(d.max(0))),
                start: g.iter().map(|r| r.start).min().unwrap_or(q.t0),
                end: g.iter().map(|r| r.end).max().unwrap_or(q.t0),
                longest: name(longest),
            }
        })
        .collect();
    Ok(Window {
        rank: q.rank,
        t0: q.t0,
        t1: q.t1,
        px: q.px,
        pixel_ns,
        total,
        events,
        merged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{ApiCall, GpuOp, Interner, Step};
    use cuprof_core::reader::Id;

    /// Rank 0: a step [0, 1000), an API call [10, 20) launching kernel `k` [30, 530), and
    /// kernels `a` [600, 601), `b` [602, 604) on the same stream.
    fn analysis() -> Analysis {
        let mut names = Interner::default();
        let (k, a, b, launch) = (
            names.id("k"),
            names.id("a"),
            names.id("b"),
            names.id("cudaLaunchKernel"),
        );
        let op = |name, start, end| GpuOp {
            start,
            end,
            device: 0,
            stream: 7,
            name,
            kind: OpKind::Compute,
            corr: -1,
            bytes: 0,
        };
        let file = FileData {
            rank: Some(0),
            ops: vec![op(k, 30, 530), op(a, 600, 601), op(b, 602, 604)],
            apis: vec![ApiCall {
                thread: 0,
                start: 10,
                end: 20,
                name: launch,
                corr: -1,
                sync: false,
            }],
            steps: vec![Step {
                number: 3,
                start: 0,
                dur: 1000,
                ..Step::default()
            }],
            threads: vec![(Id::Int(1), Id::Int(2))],
            ..FileData::default()
        };
        Analysis::new(names, vec![file])
    }

    fn names(w: &Window) -> Vec<(&str, &str, i64, i64)> {
        w.events
            .iter()
            .map(|m| (m.kind, m.name.as_str(), m.start, m.end))
            .collect()
    }

    #[test]
    fn a_fine_window_returns_each_overlapping_event_as_it_is() {
        let an = analysis();
        let q = WindowQuery {
            rank: 0,
            t0: 15,
            t1: 602,
            px: 1000,
        };
        let w = window(&an, q).unwrap();
        assert_eq!(w.pixel_ns, 1);
        assert_eq!(w.total, 4);
        assert!(w.merged.is_empty());
        // `b` starts at t1: outside.
        assert_eq!(
            names(&w),
            [
                ("step", "ProfilerStep#3", 0, 1000),
                ("cuda_api", "cudaLaunchKernel", 10, 20),
                ("kernel", "k", 30, 530),
                ("kernel", "a", 600, 601),
            ]
        );
        assert_eq!(w.events[1].lane, "thread 1/2");
        assert_eq!(w.events[2].lane, "device 0 stream 7");
    }

    #[test]
    fn events_narrower_than_a_pixel_sharing_it_are_merged() {
        let an = analysis();
        // 10 pixels of 100 ns: `a` and `b` share pixel 6 of stream 7; the API call is alone in
        // its lane and pixel, so stays itself.
        let q = WindowQuery {
            rank: 0,
            t0: 0,
            t1: 1000,
            px: 10,
        };
        let w = window(&an, q).unwrap();
        assert_eq!(w.total, 5);
        assert_eq!(
            names(&w),
            [
                ("step", "ProfilerStep#3", 0, 1000),
                ("cuda_api", "cudaLaunchKernel", 10, 20),
                ("kernel", "k", 30, 530),
            ]
        );
        assert_eq!(
            w.merged,
            [Merged {
                kind: "kernel",
                lane: "device 0 stream 7".into(),
                count: 2,
                busy_ns: 3,
                start: 600,
                end: 604,
                longest: "b".into(),
            }]
        );
    }

    #[test]
    fn a_window_of_more_marks_than_an_answer_holds_is_refused() {
        let mut an = analysis();
        let k = an.files[0].ops[0];
        // 11 ns each, a pixel of 11 ns at the widest resolution: each event is its own mark.
        an.files[0].ops = (0..MAX_MARKS as i64 + 1)
            .map(|i| GpuOp {
                start: 2 * i,
                end: 2 * i + 11,
                ..k
            })
            .collect();
        let q = WindowQuery {
            rank: 0,
            t0: 0,
            t1: 11 * MAX_PX as i64,
            px: MAX_PX,
        };
        assert_eq!(window(&an, q), Err(WindowError::TooLarge(MAX_MARKS + 3)));
    }

    #[test]
    fn bad_windows_are_refused() {
        let an = analysis();
        let q = |rank, t0, t1, px| window(&an, WindowQuery { rank, t0, t1, px });
        assert_eq!(q(1, 0, 10, 10), Err(WindowError::NoRank(1)));
        assert_eq!(q(0, 10, 10, 10), Err(WindowError::Empty(10, 10)));
        assert_eq!(
            q(0, 0, TIME_LIMIT_NS, 10),
            Err(WindowError::Empty(0, TIME_LIMIT_NS))
        );
        assert_eq!(q(0, 0, 10, 0), Err(WindowError::Pixels(0)));
        assert_eq!(
            q(0, 0, 10, MAX_PX + 1),
            Err(WindowError::Pixels(MAX_PX + 1))
        );
    }
}
