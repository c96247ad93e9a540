//! The profiling window: which steps are recorded, and when a trace is written.
//!
//! The step-driven window ([`Window`]) follows `torch.profiler.schedule` and
//! `torch.profiler.profile`'s transitions exactly (torch 2.x `torch/profiler/profiler.py`):
//!
//! * step numbers are global and count from 0 at the first step (`ProfilerStep#N` uses them);
//! * the first `skip_first` steps are idle; then, with `n = wait + warmup + active` and `s` the
//!   step counted after `skip_first` (plus `wait` when `skip_first_wait` is set), step `s` is
//!   idle once `repeat > 0 && s / n >= repeat`; otherwise, with `m = s % n`: `m < wait` idle,
//!   `m < wait + warmup` warm-up (collected, then discarded), else recorded; the last recorded
//!   step of a cycle is torch's `RECORD_AND_SAVE`;
//! * a cycle's trace is written when its last recorded step ends (when the next step begins);
//! * at exit, a cycle whose recording has begun but not finished is written (torch's
//!   `(RECORD, None)` transition); a cycle still in warm-up at exit writes nothing (torch's
//!   `(WARMUP, None)` starts and stops the trace but never hands it to `on_trace_ready`).
//!
//! The other step sources either reduce to small machines of the same shape ([`RangeWindow`]
//! for `cudaProfilerStart`/`Stop` and `cuprof_start`/`stop`, [`TimeWindow`] for
//! `--delay`/`--duration`) or bypass the window ([`Capture::WholeRun`]: record from CUDA init
//! to exit, one cycle). Every machine answers with a [`Transition`], which tells the caller,
//! in this order: close the `ProfilerStep#N` annotation of the step that ended
//! ([`Transition::recorded_step`]), write a finished cycle ([`Transition::save`]), drop what
//! warm-up collected and start a new cycle ([`Transition::record_starts`]), and switch CUPTI's
//! activity kinds on or off ([`Transition::collection`]).
//!
//! None of these types is thread-safe by itself: the caller serialises calls (one mutex).

use std::ops::Range;
use std::time::Duration;

use thiserror::Error;

/// A schedule that `torch.profiler.schedule` would reject.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScheduleError {
    #[error("active must be at least 1 (torch.profiler.schedule requires active > 0)")]
    ZeroActive,
}

/// `torch.profiler.schedule(wait=, warmup=, active=, repeat=, skip_first=, skip_first_wait=)`.
///
/// Built with [`Schedule::new`] and the `with_*` methods, so an invalid schedule cannot exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    skip_first: u64,
    wait: u64,
    warmup: u64,
    active: u64,
    repeat: u64,
    skip_first_wait: bool,
}

/// What `torch.profiler.schedule` returns for one step (`ProfilerAction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    Warmup,
    Record,
    RecordAndSave,
}

impl Action {
    /// The step's events are kept (RECORD or RECORD_AND_SAVE).
    pub fn is_record(self) -> bool {
        matches!(self, Action::Record | Action::RecordAndSave)
    }

    /// CUPTI activity kinds are enabled during the step (warm-up or recording).
    pub fn collects(self) -> bool {
        !matches!(self, Action::None)
    }
}

impl Schedule {
    /// `wait` idle steps, `warmup` collected-and-discarded steps, `active` recorded steps per
    /// cycle; `repeat = 0` (cycles until exit), `skip_first = 0`, `skip_first_wait = false`.
    pub fn new(wait: u64, warmup: u64, active: u64) -> Result<Schedule, ScheduleError> {
        if active == 0 {
            return Err(ScheduleError::ZeroActive);
        }
        Ok(Schedule {
            skip_first: 0,
            wait,
            warmup,
            active,
            repeat: 0,
            skip_first_wait: false,
        })
    }

    /// Number of cycles; 0 = cycles go on until exit.
    pub fn with_repeat(self, repeat: u64) -> Schedule {
        Schedule { repeat, ..self }
    }

    /// Steps that are idle before the first cycle begins.
    pub fn with_skip_first(self, skip_first: u64) -> Schedule {
        Schedule { skip_first, ..self }
    }

    /// Skip the first cycle's `wait` steps (torch's `skip_first_wait != 0`).
    pub fn with_skip_first_wait(self, skip_first_wait: bool) -> Schedule {
        Schedule {
            skip_first_wait,
            ..self
        }
    }

    pub fn skip_first(&self) -> u64 {
        self.skip_first
    }
    pub fn wait(&self) -> u64 {
        self.wait
    }
    pub fn warmup(&self) -> u64 {
        self.warmup
    }
    pub fn active(&self) -> u64 {
        self.active
    }
    pub fn repeat(&self) -> u64 {
        self.repeat
    }
    pub fn skip_first_wait(&self) -> bool {
        self.skip_first_wait
    }

    /// `wait + warmup + active`.
    pub fn cycle_len(&self) -> u64 {
        self.wait + self.warmup + self.active
    }

    /// More than one cycle can be written (`repeat != 1`): files get a `-cycleC` suffix.
    pub fn multi_cycle(&self) -> bool {
        self.repeat != 1
    }

    /// The step counted after `skip_first` (shifted by `wait` with `skip_first_wait`), or
    /// `None` while skipping.
    fn shifted(&self, step: u64) -> Option<u64> {
        let s = step.checked_sub(self.skip_first)?;
        Some(if self.skip_first_wait {
            s + self.wait
        } else {
            s
        })
    }

    /// `torch.profiler.schedule(...)(step)`, for the global step number `step`.
    pub fn action(&self, step: u64) -> Action {
        let Some(s) = self.shifted(step) else {
            return Action::None;
        };
        let n = self.cycle_len();
        // Python's `s / n >= repeat` is true division; for non-negative integers it is
        // equivalent to the floor division below.
        if self.repeat > 0 && s / n >= self.repeat {
            return Action::None;
        }
        let m = s % n;
        if m < self.wait {
            Action::None
        } else if m < self.wait + self.warmup {
            Action::Warmup
        } else if m < n - 1 {
            Action::Record
        } else {
            Action::RecordAndSave
        }
    }

    /// The step's phase: [`Phase::Done`] once every cycle of a `repeat > 0` schedule is over.
    pub fn phase(&self, step: u64) -> Phase {
        match self.action(step) {
            Action::None => match self.shifted(step) {
                Some(s) if self.repeat > 0 && s / self.cycle_len() >= self.repeat => Phase::Done,
                _ => Phase::Idle,
            },
            Action::Warmup => Phase::Warmup,
            Action::Record | Action::RecordAndSave => Phase::Record,
        }
    }

    /// 1-based cycle that `step` belongs to (`None` while skipping or once done).
    pub fn cycle_of(&self, step: u64) -> Option<u32> {
        let s = self.shifted(step)?;
        let c = s / self.cycle_len();
        if self.repeat > 0 && c >= self.repeat {
            return None;
        }
        Some(u32::try_from(c + 1).unwrap_or(u32::MAX))
    }
}

/// Where the process stands in its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Nothing collected (waiting, skipping, or before the first step / range / delay).
    Idle,
    /// Activity kinds enabled; what is collected is discarded when recording begins.
    Warmup,
    /// Activity kinds enabled; what is collected is kept in the current cycle.
    Record,
    /// Every cycle is written; nothing more will be collected.
    Done,
}

impl Phase {
    /// CUPTI activity kinds must be enabled.
    pub fn collects(self) -> bool {
        matches!(self, Phase::Warmup | Phase::Record)
    }
}

/// What the caller does with CUPTI's activity kinds at a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collection {
    /// Leave them as they are.
    Keep,
    /// Switch them on (entering warm-up or recording).
    Enable,
    /// Switch them off (after flushing what was recorded).
    Disable,
}

/// One recorded cycle, to be written to one trace file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// 1-based; the `C` of `-cycleC` file names.
    pub number: u32,
    /// Global step numbers it recorded (`ProfilerStep#N`), contiguous. Empty for the sources
    /// that have no steps (whole run, ranges, time).
    pub steps: Range<u64>,
}

/// What the caller must do at one boundary (a step boundary, a range start/stop, a time
/// deadline). Act on the fields in the order they are declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The global number of the step that just ended (`None` before the first step and for
    /// sources without steps).
    pub ended_step: Option<u64>,
    /// `Some(N)` if the step that just ended was recorded: emit its `ProfilerStep#N`.
    pub recorded_step: Option<u64>,
    /// A cycle that just ended: write it.
    pub save: Option<Cycle>,
    /// Recording of a new cycle begins now: drop what warm-up collected, start a new cycle.
    pub record_starts: bool,
    /// Switch CUPTI's activity kinds on or off.
    pub collection: Collection,
    /// The phase from now on (of the step now beginning, for step sources).
    pub phase: Phase,
    /// The global number of the step now beginning (`None` for sources without steps).
    pub step: Option<u64>,
}

/// The name the design notes use for a [`Window::step`] answer.
pub type StepTransition = Transition;

impl Transition {
    pub(crate) fn none(phase: Phase) -> Transition {
        Transition {
            ended_step: None,
            recorded_step: None,
            save: None,
            record_starts: false,
            collection: Collection::Keep,
            phase,
            step: None,
        }
    }
}

pub(crate) fn collection(before: bool, after: bool) -> Collection {
    match (before, after) {
        (false, true) => Collection::Enable,
        (true, false) => Collection::Disable,
        _ => Collection::Keep,
    }
}

/// The step-driven window: a [`Schedule`] advanced by step boundaries (NVTX range starts
/// matching the step pattern, or `cuprof_step()` calls).
#[derive(Debug, Clone)]
pub struct Window {
    schedule: Schedule,
    /// The step now running; `None` before the first step.
    current: Option<u64>,
    /// First step of the cycle being recorded, if one is.
    cycle_start: Option<u64>,
}

impl Window {
    /// Step 0 is running (torch's `profile.start()`): use for `cuprof_step()`, where the
    /// first call ends step 0. The caller applies [`Window::initial`] first.
    pub fn new(schedule: Schedule) -> Window {
        let cycle_start = schedule.action(0).is_record().then_some(0);
        Window {
            schedule,
            current: Some(0),
            cycle_start,
        }
    }

    /// No step is running yet: use for NVTX steps, where the first matching range start
    /// begins step 0 (the first [`Window::step`] call then ends nothing).
    pub fn before_first_step(schedule: Schedule) -> Window {
        Window {
            schedule,
            current: None,
            cycle_start: None,
        }
    }

    /// What to do when the window is set up (for [`Window::new`]: enter step 0; for
    /// [`Window::before_first_step`]: nothing).
    pub fn initial(&self) -> Transition {
        let Some(step) = self.current else {
            return Transition::none(Phase::Idle);
        };
        let action = self.schedule.action(step);
        Transition {
            record_starts: action.is_record(),
            collection: collection(false, action.collects()),
            step: Some(step),
            ..Transition::none(self.schedule.phase(step))
        }
    }

    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The phase of the step now running ([`Phase::Idle`] before the first step).
    pub fn phase(&self) -> Phase {
        self.current.map_or(Phase::Idle, |s| self.schedule.phase(s))
    }

    /// The global number of the step now running.
    pub fn current_step(&self) -> Option<u64> {
        self.current
    }

    /// The step now running ends and the next one begins (torch's `profile.step()`).
    pub fn step(&mut self) -> Transition {
        let prev = self.current;
        let next = prev.map_or(0, |s| s + 1);
        let before = prev.map_or(Action::None, |s| self.schedule.action(s));
        let after = self.schedule.action(next);

        let recorded_step = prev.filter(|_| before.is_record());
        // A cycle ends after its RECORD_AND_SAVE step. (RECORD followed by something that is
        // not a recorded step cannot come out of a valid schedule; torch would stop the trace
        // without saving it, and so does this.)
        let save = match (prev, before) {
            (Some(p), Action::RecordAndSave) => Some(Cycle {
                number: self.schedule.cycle_of(p).unwrap_or(1),
                steps: self.cycle_start.unwrap_or(p)..p + 1,
            }),
            _ => None,
        };
        if before.is_record() && !after.is_record() || save.is_some() {
            self.cycle_start = None;
        }
        let record_starts = after.is_record() && self.cycle_start.is_none();
        if record_starts {
            self.cycle_start = Some(next);
        }
        self.current = Some(next);
        Transition {
            ended_step: prev,
            recorded_step,
            save,
            record_starts,
            collection: collection(before.collects(), after.collects()),
            phase: self.schedule.phase(next),
            step: Some(next),
        }
    }

    /// The partial cycle to write at exit: the cycle being recorded, its steps including the
    /// one running now (whose `ProfilerStep#N` the caller closes at exit). `None` when idle,
    /// done, or still in warm-up (as torch).
    pub fn at_exit(&self) -> Option<Cycle> {
        let step = self.current?;
        if !self.schedule.action(step).is_record() {
            return None;
        }
        Some(Cycle {
            number: self.schedule.cycle_of(step).unwrap_or(1),
            steps: self.cycle_start.unwrap_or(step)..step + 1,
        })
    }
}

/// Which calls delimit a [`Capture::Range`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeSource {
    /// `cudaProfilerStart`/`cudaProfilerStop` (and the driver's `cuProfilerStart`/`Stop`),
    /// which `torch.cuda.profiler.start()/stop()` call; like `nsys --capture-range=cudaProfilerApi`.
    CudaProfilerApi,
    /// The exported `cuprof_start()`/`cuprof_stop()`.
    Cuprof,
}

/// How the window is driven.
#[derive(Debug, Clone, PartialEq)]
pub enum Capture {
    /// Record from CUDA initialisation to exit: one cycle, written at exit.
    WholeRun,
    /// Each start..stop is one recorded cycle ([`RangeWindow`]); at most `repeat` of them
    /// (0 = no limit).
    Range { source: RangeSource, repeat: u64 },
    /// Record from `delay` after CUDA initialisation, for `duration` (`None` = until exit):
    /// one cycle ([`TimeWindow`]).
    Time {
        delay: Duration,
        duration: Option<Duration>,
    },
    /// A torch schedule over steps ([`Window`]).
    Steps(Schedule),
    /// Idle until `cuprof capture` asks ([`crate::on_demand::OnDemandWindow`]): each capture is
    /// one cycle.
    OnDemand,
}

impl Capture {
    /// More than one cycle may be written: trace files get a `-cycleC` suffix.
    pub fn multi_cycle(&self) -> bool {
        match self {
            Capture::WholeRun | Capture::Time { .. } => false,
            Capture::Range { repeat, .. } => *repeat != 1,
            Capture::Steps(s) => s.multi_cycle(),
            Capture::OnDemand => true,
        }
    }
}

/// The window for `start`/`stop` ranges: each start..stop is one recorded cycle.
#[derive(Debug, Clone)]
pub struct RangeWindow {
    repeat: u64,
    completed: u64,
    recording: bool,
}

impl RangeWindow {
    /// At most `repeat` ranges are recorded (0 = no limit).
    pub fn new(repeat: u64) -> RangeWindow {
        RangeWindow {
            repeat,
            completed: 0,
            recording: false,
        }
    }

    pub fn phase(&self) -> Phase {
        if self.recording {
            Phase::Record
        } else if self.repeat > 0 && self.completed >= self.repeat {
            Phase::Done
        } else {
            Phase::Idle
        }
    }

    fn cycle(&self) -> Cycle {
        Cycle {
            number: u32::try_from(self.completed + 1).unwrap_or(u32::MAX),
            steps: 0..0,
        }
    }

    /// A start call. A start while recording, or once done, changes nothing.
    pub fn start(&mut self) -> Transition {
        if self.phase() != Phase::Idle {
            return Transition::none(self.phase());
        }
        self.recording = true;
        Transition {
            record_starts: true,
            collection: Collection::Enable,
            ..Transition::none(Phase::Record)
        }
    }

    /// A stop call: the range's cycle is written. A stop while not recording changes nothing.
    pub fn stop(&mut self) -> Transition {
        if !self.recording {
            return Transition::none(self.phase());
        }
        let save = self.cycle();
        self.recording = false;
        self.completed += 1;
        Transition {
            save: Some(save),
            collection: Collection::Disable,
            ..Transition::none(self.phase())
        }
    }

    /// A range started and never stopped is written at exit.
    pub fn at_exit(&self) -> Option<Cycle> {
        self.recording.then(|| self.cycle())
    }
}

/// The window of a Python `profile()` block without a schedule: it records from the block's
/// start to its end, as torch.profiler without a schedule does. Each `step()` ends a step and
/// marks it (`ProfilerStep#N`; torch marks none there, but cuprof's figures are per step); the
/// step running at the end is marked too once a step was.
#[derive(Debug, Clone, Default)]
pub struct BlockWindow {
    /// The step now running.
    step: u64,
}

impl BlockWindow {
    /// The block begins: recording starts (cycle 1 of the block).
    pub fn start() -> (BlockWindow, Transition) {
        let tr = Transition {
            record_starts: true,
            collection: Collection::Enable,
            step: Some(0),
            ..Transition::none(Phase::Record)
        };
        (BlockWindow::default(), tr)
    }

    /// `step()`: the running step ends, recorded, and the next begins.
    pub fn step(&mut self) -> Transition {
        let ended = self.step;
        self.step += 1;
        Transition {
            ended_step: Some(ended),
            recorded_step: Some(ended),
            step: Some(self.step),
            ..Transition::none(Phase::Record)
        }
    }

    /// At the block's end: its one cycle, and the running step to close when steps were
    /// marked.
    pub fn at_exit(&self) -> (Cycle, Option<u64>) {
        let cycle = Cycle {
            number: 1,
            steps: 0..if self.step > 0 { self.step + 1 } else { 0 },
        };
        (cycle, (self.step > 0).then_some(self.step))
    }
}

/// The window for `--delay`/`--duration`, measured from CUDA initialisation.
#[derive(Debug, Clone)]
pub struct TimeWindow {
    delay: Duration,
    duration: Option<Duration>,
    phase: Phase,
}

impl TimeWindow {
    /// `duration = None` records until exit.
    pub fn new(delay: Duration, duration: Option<Duration>) -> TimeWindow {
        TimeWindow {
            delay,
            duration,
            phase: Phase::Idle,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The elapsed time at which [`TimeWindow::poll`] will next change something (`None`:
    /// nothing left to do).
    pub fn next_deadline(&self) -> Option<Duration> {
        match self.phase {
            Phase::Idle => Some(self.delay),
            Phase::Record => self.duration.map(|d| self.delay.saturating_add(d)),
            Phase::Warmup | Phase::Done => None,
        }
    }

    /// Called with the time elapsed since CUDA initialisation (at initialisation with zero,
    /// then at each deadline). Makes at most one transition per call: if a late call has
    /// passed both deadlines, call again.
    pub fn poll(&mut self, elapsed: Duration) -> Transition {
        match self.next_deadline() {
            Some(deadline) if elapsed >= deadline => {}
            _ => return Transition::none(self.phase),
        }
        if self.phase == Phase::Idle {
            self.phase = Phase::Record;
            Transition {
                record_starts: true,
                collection: Collection::Enable,
                ..Transition::none(Phase::Record)
            }
        } else {
            self.phase = Phase::Done;
            Transition {
                save: Some(Cycle {
                    number: 1,
                    steps: 0..0,
                }),
                collection: Collection::Disable,
                ..Transition::none(Phase::Done)
            }
        }
    }

    /// Recording still on at exit (duration to exit, or not yet elapsed): write it.
    pub fn at_exit(&self) -> Option<Cycle> {
        (self.phase == Phase::Record).then_some(Cycle {
            number: 1,
            steps: 0..0,
        })
    }
}

/// Glob match for NVTX step patterns: the whole `name` must match the whole `pattern`;
/// `*` matches any run of characters (including none), `?` exactly one character (a Unicode
/// scalar value), every other character only itself, case-sensitively. There is no escape
/// and there are no character classes: `[` is literal.
///
/// Examples: `ProfilerStep*` matches `ProfilerStep#12` and `ProfilerStep`; `train_step`
/// matches only `train_step`; `step?` matches `step1` but not `step10`.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p = pattern.as_bytes();
    let t = name.as_bytes();
    let (mut pi, mut ti) = (0usize, 0usize);
    // Where to resume after the last `*`: pattern index after it, text index it matched to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'?' {
            pi += 1;
            ti += utf8_len(t[ti]);
        } else if pi < p.len() && p[pi] == b'*' {
            pi += 1;
            star = Some((pi, ti));
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            // Let the last `*` swallow one more character and retry.
            let st = st + utf8_len(t[st]);
            star = Some((sp, st));
            pi = sp;
            ti = st;
        } else {
            return false;
        }
    }
    p[pi.min(p.len())..].iter().all(|&b| b == b'*')
}

/// Length of the UTF-8 sequence that starts with `b` (1 for a stray continuation byte, which
/// a `&str` never starts a character with).
fn utf8_len(b: u8) -> usize {
    match b {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// A compiled step pattern: [`glob_match`] semantics, with fast paths for patterns without
/// wildcards (string equality) and with one trailing `*` (prefix), which are the usual ones
/// and are checked on every NVTX range push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepPattern {
    pattern: String,
    kind: PatternKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PatternKind {
    Exact,
    Prefix(usize),
    Glob,
}

impl StepPattern {
    pub fn new(pattern: &str) -> StepPattern {
        let wild = |c: char| c == '*' || c == '?';
        let kind = if !pattern.contains(wild) {
            PatternKind::Exact
        } else if let Some(prefix) = pattern.strip_suffix('*').filter(|p| !p.contains(wild)) {
            PatternKind::Prefix(prefix.len())
        } else {
            PatternKind::Glob
        };
        StepPattern {
            pattern: pattern.to_owned(),
            kind,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    pub fn matches(&self, name: &str) -> bool {
        match self.kind {
            PatternKind::Exact => name == self.pattern,
            PatternKind::Prefix(n) => name.as_bytes().starts_with(&self.pattern.as_bytes()[..n]),
            PatternKind::Glob => glob_match(&self.pattern, name),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_block_without_schedule_records_throughout_and_marks_its_steps() {
        let (mut w, first) = BlockWindow::start();
        assert!(first.record_starts);
        assert_eq!(first.collection, Collection::Enable);
        assert_eq!(first.step, Some(0));
        // No step(): one cycle, no step marked.
        assert_eq!(
            w.at_exit(),
            (
                Cycle {
                    number: 1,
                    steps: 0..0
                },
                None
            )
        );
        let tr = w.step();
        assert_eq!(
            (tr.ended_step, tr.recorded_step, tr.step, tr.save.is_none()),
            (Some(0), Some(0), Some(1), true)
        );
        assert!(!tr.record_starts);
        assert_eq!(tr.collection, Collection::Keep);
        w.step();
        assert_eq!(
            w.at_exit(),
            (
                Cycle {
                    number: 1,
                    steps: 0..3
                },
                Some(2)
            )
        );
    }

    use super::*;

    /// One schedule and torch's answer for steps 0..20, one letter per step:
    /// `.` NONE, `w` WARMUP, `r` RECORD, `S` RECORD_AND_SAVE.
    /// Each row was computed by hand from torch's `schedule_fn` (quoted in the module docs).
    struct Row {
        skip_first: u64,
        wait: u64,
        warmup: u64,
        active: u64,
        repeat: u64,
        skip_first_wait: bool,
        torch: &'static str,
    }

    const fn row(
        skip_first: u64,
        wait: u64,
        warmup: u64,
        active: u64,
        repeat: u64,
        skip_first_wait: bool,
        torch: &'static str,
    ) -> Row {
        Row {
            skip_first,
            wait,
            warmup,
            active,
            repeat,
            skip_first_wait,
            torch,
        }
    }

    #[rustfmt::skip]
    const TABLE: &[Row] = &[
        //   skip wait warm act rep  sfw    steps 0..20
        row(0, 0, 0, 1, 0, false, "SSSSSSSSSSSSSSSSSSSS"),
        row(0, 0, 0, 1, 1, false, "S..................."),
        row(0, 0, 0, 3, 0, false, "rrSrrSrrSrrSrrSrrSrr"),
        row(0, 0, 0, 3, 1, false, "rrS................."),
        row(0, 1, 1, 2, 2, false, ".wrS.wrS............"),
        row(0, 1, 1, 2, 0, false, ".wrS.wrS.wrS.wrS.wrS"),
        row(0, 2, 1, 3, 2, false, "..wrrS..wrrS........"),
        row(0, 0, 1, 1, 3, false, "wSwSwS.............."),
        row(0, 5, 0, 2, 0, false, ".....rS.....rS.....r"),
        row(3, 1, 1, 2, 1, false, "....wrS............."),
        row(2, 0, 2, 2, 2, false, "..wwrSwwrS.........."),
        row(5, 2, 2, 3, 0, false, ".......wwrrS..wwrrS."),
        row(0, 3, 1, 1, 0, false, "...wS...wS...wS...wS"),
        row(1, 0, 0, 1, 4, false, ".SSSS..............."),
        row(0, 2, 2, 1, 2, true,  "wwS..wwS............"),
        row(10, 20, 1, 2, 1, true, "..........wrS......."),
        row(4, 1, 0, 3, 0, true,  "....rrS.rrS.rrS.rrS."),
        row(0, 1, 1, 2, 1, true,  "wrS................."),
        row(0, 0, 0, 20, 1, false, "rrrrrrrrrrrrrrrrrrrS"),
        row(0, 0, 0, 25, 0, false, "rrrrrrrrrrrrrrrrrrrr"),
    ];

    fn schedule_of(r: &Row) -> Schedule {
        Schedule::new(r.wait, r.warmup, r.active)
            .unwrap()
            .with_repeat(r.repeat)
            .with_skip_first(r.skip_first)
            .with_skip_first_wait(r.skip_first_wait)
    }

    fn letter(a: Action) -> char {
        match a {
            Action::None => '.',
            Action::Warmup => 'w',
            Action::Record => 'r',
            Action::RecordAndSave => 'S',
        }
    }

    /// torch's `schedule_fn`, transcribed as literally as Python allows (true division).
    fn torch_schedule_fn(r: &Row, step: u64) -> Action {
        let mut step = step as i64;
        if step < r.skip_first as i64 {
            return Action::None;
        }
        step -= r.skip_first as i64;
        if r.skip_first_wait {
            step += r.wait as i64;
        }
        let num_steps = (r.wait + r.warmup + r.active) as i64;
        if r.repeat > 0 && step as f64 / num_steps as f64 >= r.repeat as f64 {
            return Action::None;
        }
        let mod_step = step % num_steps;
        if mod_step < r.wait as i64 {
            Action::None
        } else if mod_step < (r.wait + r.warmup) as i64 {
            Action::Warmup
        } else if mod_step < num_steps - 1 {
            Action::Record
        } else {
            Action::RecordAndSave
        }
    }

    #[test]
    fn schedule_matches_torch_table() {
        for r in TABLE {
            let s = schedule_of(r);
            let got: String = (0..20).map(|i| letter(s.action(i))).collect();
            assert_eq!(got, r.torch, "schedule {s:?}");
            let literal: String = (0..20).map(|i| letter(torch_schedule_fn(r, i))).collect();
            assert_eq!(literal, r.torch, "literal transcription, schedule {s:?}");
        }
    }

    /// Drive the window with `cuprof_step()` semantics (step 0 running from the start) and
    /// reconstruct, from the transitions alone, what torch's profile() would do: which steps
    /// are recorded, which cycles are saved when, what is saved at exit.
    #[test]
    fn window_follows_torch_profile_transitions() {
        for r in TABLE {
            let s = schedule_of(r);
            let torch: Vec<char> = r.torch.chars().collect();
            let mut w = Window::new(s);
            let init = w.initial();
            let mut collecting = init.collection == Collection::Enable;
            assert_eq!(collecting, torch[0] != '.', "{s:?}");
            assert_eq!(init.record_starts, matches!(torch[0], 'r' | 'S'));
            let mut saved = Vec::new();
            let mut recorded = Vec::new();
            for i in 0..torch.len() - 1 {
                assert_eq!(w.current_step(), Some(i as u64));
                assert_eq!(w.phase().collects(), torch[i] != '.', "{s:?} step {i}");
                let t = w.step();
                assert_eq!(t.ended_step, Some(i as u64));
                assert_eq!(t.step, Some(i as u64 + 1));
                match t.collection {
                    Collection::Enable => {
                        assert!(!collecting);
                        collecting = true
                    }
                    Collection::Disable => {
                        assert!(collecting);
                        collecting = false
                    }
                    Collection::Keep => {}
                }
                assert_eq!(collecting, torch[i + 1] != '.', "{s:?} step {}", i + 1);
                if let Some(n) = t.recorded_step {
                    recorded.push(n);
                }
                // torch saves exactly when the step that ended was RECORD_AND_SAVE.
                assert_eq!(t.save.is_some(), torch[i] == 'S', "{s:?} step {i}");
                if let Some(c) = t.save {
                    assert_eq!(c.steps.end, i as u64 + 1);
                    saved.push(c);
                }
                let starts =
                    matches!(torch[i + 1], 'r' | 'S') && matches!(torch[i], '.' | 'w' | 'S');
                assert_eq!(t.record_starts, starts, "{s:?} step {}", i + 1);
            }
            let want_recorded: Vec<u64> = (0..torch.len() as u64 - 1)
                .filter(|&i| matches!(torch[i as usize], 'r' | 'S'))
                .collect();
            assert_eq!(recorded, want_recorded, "{s:?}");
            // Each saved cycle covers exactly the recorded steps of one cycle, numbered 1, 2...
            for (k, c) in saved.iter().enumerate() {
                assert!(c
                    .steps
                    .clone()
                    .all(|i| matches!(torch[i as usize], 'r' | 'S')));
                assert_eq!(c.steps.clone().count() as u64, s.active());
                assert_eq!(c.number as usize, k + 1, "{s:?}");
            }
            // At exit (while step 19 runs): a partial cycle iff step 19 is recording.
            let exit = w.at_exit();
            assert_eq!(exit.is_some(), matches!(torch[19], 'r' | 'S'), "{s:?}");
            if let Some(c) = exit {
                assert_eq!(c.steps.end, 20);
                assert!(c
                    .steps
                    .clone()
                    .all(|i| matches!(torch[i as usize], 'r' | 'S')));
            }
        }
    }

    #[test]
    fn cycles_numbered_and_files_named_per_cycle() {
        // wait 1, warmup 1, active 2, repeat 2 over 10 steps: the GPU check's scenario.
        let s = Schedule::new(1, 1, 2).unwrap().with_repeat(2);
        let mut w = Window::new(s);
        let mut saved = Vec::new();
        let mut recorded = Vec::new();
        for _ in 0..10 {
            let t = w.step();
            recorded.extend(t.recorded_step);
            saved.extend(t.save);
        }
        assert_eq!(recorded, vec![2, 3, 6, 7]);
        assert_eq!(
            saved,
            vec![
                Cycle {
                    number: 1,
                    steps: 2..4
                },
                Cycle {
                    number: 2,
                    steps: 6..8
                }
            ]
        );
        assert_eq!(w.phase(), Phase::Done);
        assert_eq!(w.at_exit(), None);
        assert!(Capture::Steps(s).multi_cycle());
        assert!(!Capture::Steps(s.with_repeat(1)).multi_cycle());
    }

    #[test]
    fn partial_cycle_at_exit() {
        let s = Schedule::new(0, 1, 3).unwrap().with_repeat(1);
        let mut w = Window::new(s);
        // Step 0 warm-up: nothing at exit (torch's (WARMUP, None) saves nothing).
        assert_eq!(w.phase(), Phase::Warmup);
        assert_eq!(w.at_exit(), None);
        let t = w.step();
        assert!(t.record_starts);
        assert_eq!(t.collection, Collection::Keep);
        w.step();
        // Steps 1 and 2 recorded, exit during step 2.
        assert_eq!(
            w.at_exit(),
            Some(Cycle {
                number: 1,
                steps: 1..3
            })
        );
    }

    #[test]
    fn nvtx_window_starts_before_the_first_step() {
        let s = Schedule::new(0, 0, 2).unwrap().with_repeat(1);
        let mut w = Window::before_first_step(s);
        assert_eq!(w.phase(), Phase::Idle);
        assert_eq!(w.initial(), Transition::none(Phase::Idle));
        assert_eq!(w.at_exit(), None);
        let t = w.step();
        assert_eq!(t.ended_step, None);
        assert_eq!(t.recorded_step, None);
        assert_eq!(t.step, Some(0));
        assert!(t.record_starts);
        assert_eq!(t.collection, Collection::Enable);
        let t = w.step();
        assert_eq!(t.recorded_step, Some(0));
        assert_eq!(t.save, None);
        let t = w.step();
        assert_eq!(t.recorded_step, Some(1));
        assert_eq!(
            t.save,
            Some(Cycle {
                number: 1,
                steps: 0..2
            })
        );
        assert_eq!(t.collection, Collection::Disable);
        assert_eq!(t.phase, Phase::Done);
    }

    #[test]
    fn back_to_back_cycles_restart_recording() {
        // wait 0, warmup 0: RECORD_AND_SAVE followed by RECORD: save and restart, kinds stay on.
        let s = Schedule::new(0, 0, 2).unwrap();
        let mut w = Window::new(s);
        assert!(w.initial().record_starts);
        w.step();
        let t = w.step();
        assert_eq!(
            t.save,
            Some(Cycle {
                number: 1,
                steps: 0..2
            })
        );
        assert!(t.record_starts);
        assert_eq!(t.collection, Collection::Keep);
        assert_eq!(t.phase, Phase::Record);
    }

    #[test]
    fn zero_active_is_invalid() {
        assert_eq!(Schedule::new(1, 1, 0), Err(ScheduleError::ZeroActive));
        assert!(ScheduleError::ZeroActive.to_string().contains("active"));
    }

    #[test]
    fn done_versus_idle() {
        let s = Schedule::new(1, 0, 1)
            .unwrap()
            .with_repeat(1)
            .with_skip_first(1);
        assert_eq!(s.phase(0), Phase::Idle);
        assert_eq!(s.phase(1), Phase::Idle);
        assert_eq!(s.phase(2), Phase::Record);
        assert_eq!(s.phase(3), Phase::Done);
        assert_eq!(s.cycle_of(0), None);
        assert_eq!(s.cycle_of(2), Some(1));
        assert_eq!(s.cycle_of(3), None);
    }

    #[test]
    fn range_window() {
        let mut w = RangeWindow::new(2);
        assert_eq!(w.phase(), Phase::Idle);
        assert_eq!(w.stop().save, None);
        let t = w.start();
        assert!(t.record_starts);
        assert_eq!(t.collection, Collection::Enable);
        assert_eq!(w.start().collection, Collection::Keep);
        assert_eq!(
            w.at_exit(),
            Some(Cycle {
                number: 1,
                steps: 0..0
            })
        );
        let t = w.stop();
        assert_eq!(t.save.map(|c| c.number), Some(1));
        assert_eq!(t.collection, Collection::Disable);
        assert_eq!(w.at_exit(), None);
        w.start();
        assert_eq!(w.stop().save.map(|c| c.number), Some(2));
        assert_eq!(w.phase(), Phase::Done);
        let t = w.start();
        assert!(!t.record_starts);
        assert_eq!(t.collection, Collection::Keep);
        assert_eq!(t.phase, Phase::Done);

        let mut unlimited = RangeWindow::new(0);
        for n in 1..=5 {
            unlimited.start();
            assert_eq!(unlimited.stop().save.map(|c| c.number), Some(n));
        }
        assert_eq!(unlimited.phase(), Phase::Idle);
        assert!(Capture::Range {
            source: RangeSource::Cuprof,
            repeat: 0
        }
        .multi_cycle());
        assert!(!Capture::Range {
            source: RangeSource::CudaProfilerApi,
            repeat: 1
        }
        .multi_cycle());
    }

    #[test]
    fn time_window() {
        let sec = Duration::from_secs;
        let mut w = TimeWindow::new(sec(2), Some(sec(3)));
        assert_eq!(w.next_deadline(), Some(sec(2)));
        assert_eq!(w.poll(sec(1)).collection, Collection::Keep);
        let t = w.poll(sec(2));
        assert!(t.record_starts);
        assert_eq!(t.collection, Collection::Enable);
        assert_eq!(w.next_deadline(), Some(sec(5)));
        assert_eq!(w.at_exit().map(|c| c.number), Some(1));
        assert_eq!(w.poll(sec(4)).save, None);
        let t = w.poll(sec(6));
        assert_eq!(t.save.map(|c| c.number), Some(1));
        assert_eq!(t.collection, Collection::Disable);
        assert_eq!(w.phase(), Phase::Done);
        assert_eq!(w.next_deadline(), None);
        assert_eq!(w.at_exit(), None);

        // Duration until exit, no delay.
        let mut w = TimeWindow::new(Duration::ZERO, None);
        assert!(w.poll(Duration::ZERO).record_starts);
        assert_eq!(w.next_deadline(), None);
        assert_eq!(w.poll(sec(1000)).save, None);
        assert!(w.at_exit().is_some());
        assert!(!Capture::Time {
            delay: sec(1),
            duration: None
        }
        .multi_cycle());
        assert!(!Capture::WholeRun.multi_cycle());

        // A late poll past both deadlines: two transitions, one per call.
        let mut w = TimeWindow::new(sec(1), Some(sec(1)));
        assert!(w.poll(sec(10)).record_starts);
        assert!(w.poll(sec(10)).save.is_some());
    }

    #[test]
    fn glob() {
        let cases: &[(&str, &str, bool)] = &[
            ("ProfilerStep*", "ProfilerStep#0", true),
            ("ProfilerStep*", "ProfilerStep#123", true),
            ("ProfilerStep*", "ProfilerStep", true),
            ("ProfilerStep*", "profilerStep#1", false),
            ("ProfilerStep*", "xProfilerStep#1", false),
            ("train_step", "train_step", true),
            ("train_step", "train_step2", false),
            ("train_step", "a train_step", false),
            ("step?", "step1", true),
            ("step?", "step10", false),
            ("step?", "step", false),
            ("step?", "stepé", true),
            ("*", "", true),
            ("*", "anything", true),
            ("", "", true),
            ("", "x", false),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXXbYY", false),
            ("*step*", "my_step_3", true),
            ("*.forward", "Linear.forward", true),
            ("*a", "aaaa", true),
            ("a**", "a", true),
            ("?*?", "é", false),
            ("?*?", "éé", true),
            ("[x]", "[x]", true),
            ("[x]", "x", false),
        ];
        for &(p, t, want) in cases {
            assert_eq!(glob_match(p, t), want, "glob_match({p:?}, {t:?})");
            assert_eq!(
                StepPattern::new(p).matches(t),
                want,
                "StepPattern({p:?}) on {t:?}"
            );
        }
        assert_eq!(
            StepPattern::new("ProfilerStep*").kind,
            PatternKind::Prefix(12)
        );
        assert_eq!(StepPattern::new("step").kind, PatternKind::Exact);
        assert_eq!(StepPattern::new("*x*").kind, PatternKind::Glob);
    }
}
