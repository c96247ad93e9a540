//! The profiling window, driven from application threads: step boundaries (NVTX step ranges,
//! `cuprof_step()`), capture ranges (`cudaProfilerStart/Stop`, `cuprof_start/stop`), time.
//!
//! Each boundary asks the window (plain Rust, `cuprof_core::window`) what to do, then does it
//! outside the window's lock: tell the writer (channel), switch CUPTI's activity kinds.
//!
//! Callers pass the running tracer ([`crate::pipe::tracer::running`]): nothing here runs without one.

use crate::cupti::libcupti::Correlated;
use crate::host::process::{now_ns, pid, tid};
use crate::pipe::tracer::Tracer;
use cuprof_core::block::Block;
use cuprof_core::capture_options::CaptureOptions;
use cuprof_core::event::Range;
use cuprof_core::figures::{FigureError, StepFigures};
use cuprof_core::on_demand::{DemandState, OnDemandWindow};
use cuprof_core::session::Input;
use cuprof_core::window::{
    BlockWindow, Capture, Collection, RangeSource, RangeWindow, StepPattern, TimeWindow,
    Transition, Window,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

enum Driver {
    WholeRun,
    Steps(Window),
    Range(RangeWindow, RangeSource),
    /// `since`/`since_ns`: CUDA initialisation, on the monotonic and on the trace's clock.
    Time {
        window: TimeWindow,
        since: Instant,
        since_ns: u64,
    },
    /// `--on-demand`: `until` ends a duration capture.
    OnDemand {
        window: OnDemandWindow,
        until: Option<Instant>,
    },
    /// A Python `profile()` block ended ([`end_block`]): nothing is recorded until the next
    /// block begins.
    Ended,
    /// A Python `profile()` block without a schedule.
    Block(BlockWindow),
}

/// How [`begin_block`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockStart {
    /// The block records now.
    Began,
    /// The block records now, and what the earlier window was recording ended where it began.
    BeganAfterRecording,
    /// The process is traced on demand: `cuprof capture` chooses what is recorded.
    OnDemand,
}

struct State {
    driver: Driver,
    /// When the step now running began, and on which thread (for `ProfilerStep#N`).
    step_start: u64,
    step_tid: u32,
    /// Figures reported for the running step: its work (`cuprof_step_tokens`, NVTX payloads)
    /// and named figures (`cuprof_step_figure`).
    step_figures: StepFigures,
    cycle: u32,
    /// The cycles of the blocks before this window's (a schedule numbers its own from 1).
    cycle_base: u32,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
/// CUPTI kinds are on (warm-up or recording): NVTX pushes external correlation ids only then.
pub(crate) static COLLECTING: AtomicBool = AtomicBool::new(false);
static STEP_PATTERN: Mutex<Option<StepPattern>> = Mutex::new(None);
static HAS_STEP_PATTERN: AtomicBool = AtomicBool::new(false);
static STEPS_SEEN: AtomicU64 = AtomicU64::new(0);
/// The window is made of steps (for the "no step was recorded" message).
static STEPS_EXPECTED: AtomicBool = AtomicBool::new(false);
/// The window waits for `cuprof capture` (for the "nothing was captured" message).
static ON_DEMAND: AtomicBool = AtomicBool::new(false);

/// Sets up the window at CUDA initialisation and applies its first transition.
pub fn start(t: &Tracer, capture: &Capture, step_pattern: Option<StepPattern>) {
    STEPS_EXPECTED.store(matches!(capture, Capture::Steps(_)), Relaxed);
    ON_DEMAND.store(matches!(capture, Capture::OnDemand), Relaxed);
    let pending = PENDING_BLOCK.lock().ok().and_then(|mut p| p.take());
    if let Some(block) = pending {
        if begin_block(t, block, PENDING_STEPS.swap(0, Relaxed)) != BlockStart::OnDemand {
            return;
        }
    }
    if let Some(p) = step_pattern {
        if let Ok(mut s) = STEP_PATTERN.lock() {
            *s = Some(p);
            HAS_STEP_PATTERN.store(true, Relaxed);
        }
    }
    let now = now_ns();
    let (driver, first) = match capture {
        Capture::WholeRun => (Driver::WholeRun, None),
        Capture::Steps(schedule) => {
            if HAS_STEP_PATTERN.load(Relaxed) {
                (Driver::Steps(Window::before_first_step(*schedule)), None)
            } else {
                let w = Window::new(*schedule);
                let first = w.initial();
                (Driver::Steps(w), Some(first))
            }
        }
        Capture::Range { repeat, source } => {
            (Driver::Range(RangeWindow::new(*repeat), *source), None)
        }
        Capture::Time { delay, duration } => (
            Driver::Time {
                window: TimeWindow::new(*delay, *duration),
                since: Instant::now(),
                since_ns: now,
            },
            None,
        ),
        Capture::OnDemand => (
            Driver::OnDemand {
                window: OnDemandWindow::new(),
                until: None,
            },
            None,
        ),
    };
    let whole_run = matches!(driver, Driver::WholeRun);
    if let Ok(mut s) = STATE.lock() {
        *s = Some(State {
            driver,
            step_start: now,
            step_tid: tid(),
            step_figures: StepFigures::default(),
            // The whole run is cycle 1 (sent below).
            cycle: u32::from(whole_run),
            cycle_base: 0,
        });
    }
    if whole_run {
        set_collecting(t, true, false);
        t.channel
            .send_window(Input::BeginRecording { ts: now, cycle: 1 });
    } else if let Some(first) = first {
        apply(t, first, now);
    }
}

/// Collection on or off; `capture_over`: an on-demand capture's recording ended. The flag the
/// NVTX path reads is raised after what it reads with it is set, and lowered first.
fn set_collecting(t: &Tracer, on: bool, capture_over: bool) {
    if on {
        crate::window::collect::start(t);
        COLLECTING.store(true, Relaxed);
    } else {
        COLLECTING.store(false, Relaxed);
        crate::window::collect::stop(t, capture_over);
    }
}

/// Acts on one transition of the window at time `ts`.
fn apply(t: &Tracer, tr: Transition, ts: u64) {
    apply_after_call(t, tr, ts, None)
}

/// [`apply`] for a transition made by an API call (`cudaProfilerStop`) with correlation id
/// `call`.
fn apply_after_call(t: &Tracer, tr: Transition, ts: u64, call: Option<u32>) {
    tracing::debug!(?tr, ts, "window transition");
    // The operators that ended before the transition belong before it.
    crate::pipe::op_batch::flush_at_transition(t);
    let (step_start, step_tid, figures, cycle, on_demand) = {
        let Ok(mut g) = STATE.lock() else { return };
        let Some(s) = g.as_mut() else { return };
        let out = (
            s.step_start,
            s.step_tid,
            std::mem::take(&mut s.step_figures),
            s.cycle,
        );
        s.step_start = ts;
        s.step_tid = tid();
        if tr.record_starts {
            s.cycle = match (&s.driver, tr.step) {
                (Driver::Steps(w), Some(step)) => w
                    .schedule()
                    .cycle_of(step)
                    .map_or(s.cycle + 1, |c| s.cycle_base + c),
                (Driver::OnDemand { window, .. }, _) => window.captures(),
                _ => s.cycle + 1,
            };
        }
        let on_demand = matches!(s.driver, Driver::OnDemand { .. });
        (out.0, out.1, out.2, s.cycle, on_demand)
    };
    if tr.ended_step.is_some() {
        crate::state::live::step(ts.saturating_sub(step_start));
    }
    if let Some(n) = tr.recorded_step {
        t.channel.send_window(Input::Step {
            number: n,
            pid: pid(),
            tid: step_tid,
            start: step_start,
            end: ts,
            figures,
        });
    }
    if let Some(saved) = &tr.save {
        t.channel.send_window(Input::EndRecording {
            ts,
            last_call: call,
        });
        if on_demand {
            t.channel.send_capture_ended(saved.number);
        }
    }
    if tr.record_starts {
        let number = cycle_number(cycle);
        t.channel
            .send_window(Input::BeginRecording { ts, cycle: number });
    }
    match tr.collection {
        Collection::Enable => set_collecting(t, true, false),
        Collection::Disable => set_collecting(t, false, on_demand),
        Collection::Keep => {}
    }
}

fn cycle_number(c: u32) -> u32 {
    c.max(1)
}

fn with_driver<R>(f: impl FnOnce(&mut Driver) -> R) -> Option<R> {
    let mut g = STATE.lock().ok()?;
    Some(f(&mut g.as_mut()?.driver))
}

/// A step boundary from `cuprof_step()`: the running step ends, the next begins.
pub fn api_step(t: &Tracer) {
    if HAS_STEP_PATTERN.load(Relaxed) {
        return;
    }
    let ts = now_ns();
    if let Some(tr) = with_driver(|d| match d {
        Driver::Steps(w) => Some(w.step()),
        Driver::OnDemand { window, .. } => Some(window.step()),
        Driver::Block(w) => Some(w.step()),
        _ => None,
    })
    .flatten()
    {
        STEPS_SEEN.fetch_add(1, Relaxed);
        apply(t, tr, ts);
    }
}

/// Adds units of work (tokens, samples) to the running step, for throughput in reports.
pub fn add_work(n: f64) {
    if let Ok(mut g) = STATE.lock() {
        if let Some(s) = g.as_mut() {
            s.step_figures.add_work(n);
        }
    }
}

/// Attaches `name = value` to the running step (`tokens` adds to its work); refused when the
/// figure is malformed or one too many. Outside a window (not tracing yet) it is dropped.
pub fn add_figure(name: &str, value: f64) -> Result<(), FigureError> {
    match STATE.lock() {
        Ok(mut g) => match g.as_mut() {
            Some(s) => s.step_figures.set(name, value),
            None => cuprof_core::figures::check(name, value),
        },
        Err(_) => Ok(()),
    }
}

pub fn is_step_range(name: &str) -> bool {
    HAS_STEP_PATTERN.load(Relaxed)
        && STEP_PATTERN
            .lock()
            .ok()
            .and_then(|p| p.as_ref().map(|p| p.matches(name)))
            .unwrap_or(false)
}

/// A matching NVTX range begins: the first one begins step 0; each one starts its step's
/// `ProfilerStep#N` span.
pub fn step_begin(t: &Tracer, ts: u64) {
    let first = with_driver(|d| match d {
        Driver::Steps(w) if w.current_step().is_none() => Some(w.step()),
        _ => None,
    })
    .flatten();
    match first {
        Some(tr) => apply(t, tr, ts),
        None => {
            if let Ok(mut g) = STATE.lock() {
                if let Some(s) = g.as_mut() {
                    s.step_start = ts;
                    s.step_tid = tid();
                }
            }
        }
    }
}

/// A matching NVTX range ends: its step ends, the next begins.
pub fn step_end(t: &Tracer, ts: u64) {
    if let Some(tr) = with_driver(|d| match d {
        Driver::Steps(w) if w.current_step().is_some() => Some(w.step()),
        _ => None,
    })
    .flatten()
    {
        STEPS_SEEN.fetch_add(1, Relaxed);
        apply(t, tr, ts);
    }
}

/// `cudaProfilerStart` / `cuprof_start()`.
pub fn range_start(t: &Tracer, from: RangeSource) {
    if let Some(tr) = with_driver(|d| match d {
        Driver::Range(w, source) if *source == from => Some(w.start()),
        _ => None,
    })
    .flatten()
    {
        apply(t, tr, now_ns());
    }
}

/// `cudaProfilerStop` / `cuprof_stop()`: the range's records are flushed before it closes.
/// `call`: the correlation id of the `cudaProfilerStop` call, when it is one.
pub fn range_stop(t: &Tracer, from: RangeSource, call: Option<u32>) {
    if let Some(tr) = with_driver(|d| match d {
        Driver::Range(w, source) if *source == from => Some(w.stop()),
        _ => None,
    })
    .flatten()
    {
        apply_after_call(t, tr, now_ns(), call);
    }
}

/// Time-driven windows advance from the writer thread, which wakes at [`time_deadline`]; the
/// transition is stamped with the deadline itself, not the (slightly later) wake-up.
pub fn poll_time(t: &Tracer) {
    let polled = with_driver(|d| match d {
        Driver::Time {
            window,
            since,
            since_ns,
        } => {
            let due = window.next_deadline()?;
            let elapsed = since.elapsed();
            if elapsed < due {
                return None;
            }
            Some((window.poll(elapsed), *since_ns + due.as_nanos() as u64))
        }
        Driver::OnDemand { window, until } => {
            let due = (*until)?;
            if Instant::now() < due {
                return None;
            }
            *until = None;
            Some((window.stop(), now_ns()))
        }
        _ => None,
    })
    .flatten();
    if let Some((tr, ts)) = polled {
        apply(t, tr, ts);
    }
}

/// When the time window next changes phase.
pub fn time_deadline() -> Option<Instant> {
    with_driver(|d| match d {
        Driver::Time { window, since, .. } => window.next_deadline().map(|due| *since + due),
        Driver::OnDemand { until, .. } => *until,
        _ => None,
    })
    .flatten()
}

/// Ends what is being recorded at `ts`: the running step (with steps) and the partial cycle.
/// `then` changes the driver under the same lock. Whether a cycle was being recorded.
fn end_recording(t: &Tracer, ts: u64, then: impl FnOnce(&mut Driver)) -> bool {
    // `Some(running step)` when a cycle is being recorded (the step is `None` without steps).
    let mut capture_ended = None;
    let recording = with_driver(|d| {
        let recording = match d {
            Driver::WholeRun => Some(None),
            Driver::Steps(w) => w.at_exit().map(|_| w.current_step()),
            Driver::Range(w, _) => w.at_exit().map(|_| None),
            Driver::Time { window, .. } => window.at_exit().map(|_| None),
            Driver::OnDemand { window, .. } => window.at_exit().map(|(cycle, step)| {
                capture_ended = Some(cycle.number);
                step
            }),
            Driver::Ended => None,
            Driver::Block(w) => Some(w.at_exit().1),
        };
        then(d);
        recording
    })
    .flatten();
    let Some(running_step) = recording else {
        return false;
    };
    if let Some(n) = running_step {
        let (start, stid, figures) = STATE
            .lock()
            .ok()
            .and_then(|mut g| {
                g.as_mut().map(|s| {
                    (
                        s.step_start,
                        s.step_tid,
                        std::mem::take(&mut s.step_figures),
                    )
                })
            })
            .unwrap_or_else(|| (ts, tid(), StepFigures::default()));
        t.channel.send_window(Input::Step {
            number: n,
            pid: pid(),
            tid: stid,
            start,
            end: ts,
            figures,
        });
    }
    t.channel.send_window(Input::EndRecording {
        ts,
        last_call: None,
    });
    if let Some(cycle) = capture_ended {
        t.channel.send_capture_ended(cycle);
    }
    true
}

/// At exit: close the running step and the partial cycle, if one is being recorded.
pub fn at_exit(t: &Tracer) {
    end_recording(t, now_ns(), |_| {});
    if let Ok(mut g) = STATE.lock() {
        *g = None;
    }
    COLLECTING.store(false, Relaxed);
}

/// A Python `profile()` block asked before CUDA initialised: it begins with tracing.
static PENDING_BLOCK: Mutex<Option<Block>> = Mutex::new(None);
/// The steps that block's program ended before CUDA initialised.
static PENDING_STEPS: AtomicU64 = AtomicU64::new(0);

/// Keeps `block` (or forgets the kept one) until tracing starts, when it replaces the
/// process's own window.
pub fn set_pending_block(block: Option<Block>) {
    if let Ok(mut p) = PENDING_BLOCK.lock() {
        PENDING_STEPS.store(0, Relaxed);
        *p = block;
    }
}

/// A step ended before CUDA initialised (`cuprof_step()` while armed): a kept block's window
/// begins that many steps in, so its steps are the program's.
pub fn pending_step() {
    if PENDING_BLOCK.lock().is_ok_and(|p| p.is_some()) {
        PENDING_STEPS.fetch_add(1, Relaxed);
    }
}

/// A Python `profile()` block begins (`cuprof_begin_window`): what an earlier window records
/// ends here (its file is written), and the block's window replaces it, its cycles numbered
/// after the earlier ones. `steps_done`: the steps the block ended before tracing started.
pub fn begin_block(t: &Tracer, block: Block, steps_done: u64) -> BlockStart {
    if ON_DEMAND.load(Relaxed) {
        return BlockStart::OnDemand;
    }
    crate::pipe::op_batch::flush_at_transition(t);
    let ts = now_ns();
    let ended = end_recording(t, ts, |_| {});
    if COLLECTING.load(Relaxed) {
        set_collecting(t, false, true);
    }
    crate::window::collect::ask(block.options);
    let (driver, first) = match block.schedule {
        Some(schedule) => {
            let mut w = Window::new(schedule);
            for _ in 0..steps_done {
                w.step();
            }
            let first = w.initial();
            (Driver::Steps(w), first)
        }
        None => {
            let (mut w, first) = BlockWindow::start();
            for _ in 0..steps_done {
                w.step();
            }
            (Driver::Block(w), first)
        }
    };
    STEPS_EXPECTED.store(block.schedule.is_some(), Relaxed);
    if let Ok(mut g) = STATE.lock() {
        let s = g.get_or_insert(State {
            driver: Driver::Ended,
            step_start: ts,
            step_tid: tid(),
            step_figures: StepFigures::default(),
            cycle: 0,
            cycle_base: 0,
        });
        s.driver = driver;
        s.cycle_base = s.cycle;
        s.step_start = ts;
        s.step_tid = tid();
        s.step_figures = StepFigures::default();
    }
    apply(t, first, ts);
    if ended {
        BlockStart::BeganAfterRecording
    } else {
        BlockStart::Began
    }
}

/// A Python `profile()` block ends (`cuprof_end_window`): what it records ends now, and
/// nothing more is recorded until the next block. Whether a cycle was being recorded.
pub fn end_block(t: &Tracer) -> bool {
    if ON_DEMAND.load(Relaxed) {
        return false;
    }
    crate::pipe::op_batch::flush_at_transition(t);
    let recorded = end_recording(t, now_ns(), |d| *d = Driver::Ended);
    set_collecting(t, false, true);
    recorded
}

const NOT_ON_DEMAND: &str =
    "this process was not started with --on-demand (CUPROF_ON_DEMAND=1), or its tracing has ended";

/// `cuprof capture --steps`: record `count` steps from step `start` (or the next boundary),
/// collecting with `options`. `asked(cycle)` runs before anything is recorded. Returns the
/// cycle and its first step.
pub fn demand_steps(
    start: u64,
    count: u64,
    options: CaptureOptions,
    asked: impl FnOnce(u32),
) -> Result<(u32, u64), String> {
    // Under the window's lock: the first recorded step cannot begin before the options are in.
    let r = with_driver(|d| match d {
        Driver::OnDemand { window, .. } => Some(
            window
                .request_steps(start, count)
                .inspect(|_| crate::window::collect::ask(options)),
        ),
        _ => None,
    })
    .flatten()
    .ok_or(NOT_ON_DEMAND)?
    .map_err(|e| e.to_string())?;
    asked(r.0);
    Ok(r)
}

/// `cuprof capture --duration`: record from now for `d` (zero: until [`demand_stop`]),
/// collecting with `options`. `asked(cycle)` runs before the recording begins.
pub fn demand_duration(
    t: &Tracer,
    d: std::time::Duration,
    options: CaptureOptions,
    asked: impl FnOnce(u32),
) -> Result<u32, String> {
    let (cycle, tr) = with_driver(|drv| match drv {
        Driver::OnDemand { window, until } => Some(window.request_timed().inspect(|_| {
            *until = (!d.is_zero()).then(|| Instant::now() + d);
            crate::window::collect::ask(options);
        })),
        _ => None,
    })
    .flatten()
    .ok_or(NOT_ON_DEMAND)?
    .map_err(|e| e.to_string())?;
    asked(cycle);
    apply(t, tr, now_ns());
    Ok(cycle)
}

/// `cuprof capture --duration 0` is stopped: the timed capture running ends now. Returns its
/// cycle.
pub fn demand_stop(t: &Tracer) -> Result<u32, String> {
    let (tr, pending) = with_driver(|drv| match drv {
        Driver::OnDemand { window, until } => {
            *until = None;
            Some((window.stop(), window.pending()))
        }
        _ => None,
    })
    .ok_or(NOT_ON_DEMAND)?
    .ok_or(NOT_ON_DEMAND)?;
    let Some(cycle) = tr.save.as_ref().map(|c| c.number) else {
        return Err(match pending {
            Some((cycle, first)) => format!("capture {cycle} waits for step {first}, it does not run by duration: cancel it with cuprof capture --cancel"),
            None => "no capture by duration runs in this process: nothing to stop".into(),
        });
    };
    apply(t, tr, now_ns());
    Ok(cycle)
}

/// `cuprof capture --cancel`, or the asking command's Ctrl-C: the step capture waiting for its
/// first step (`cycle`: only if it is that one) is dropped before anything is recorded, its
/// options with it. `cancelled(cycle, first_step)` runs after. Returns its cycle and the step it
/// was to begin at.
pub fn demand_cancel(
    cycle: Option<u32>,
    cancelled: impl FnOnce(u32, u64),
) -> Result<(u32, u64), String> {
    // Under the window's lock: the step that would begin it cannot come in between.
    let r = with_driver(|d| match d {
        Driver::OnDemand { window, .. } => Some(
            window
                .cancel(cycle)
                .inspect(|_| crate::window::collect::forget_asked()),
        ),
        _ => None,
    })
    .flatten()
    .ok_or(NOT_ON_DEMAND)?
    .map_err(|e| e.to_string())?;
    cancelled(r.0, r.1);
    Ok(r)
}

/// The on-demand window's state, for `cuprof ps`.
pub fn demand_state() -> &'static str {
    match with_driver(|d| match d {
        Driver::OnDemand { window, .. } => Some(window.state()),
        _ => None,
    })
    .flatten()
    {
        Some(DemandState::Ready) => "ready",
        Some(DemandState::Pending) => "pending",
        Some(DemandState::Recording) => "recording",
        None => "stopped",
    }
}

/// Number of step boundaries seen (for the "no step matched" message).
pub fn steps_seen() -> u64 {
    STEPS_SEEN.load(Relaxed)
}

/// Whether the window waits for `cuprof capture`.
pub fn is_on_demand() -> bool {
    ON_DEMAND.load(Relaxed)
}

/// Whether the window is made of steps.
pub fn expects_steps() -> bool {
    STEPS_EXPECTED.load(Relaxed)
}

/// Pushes an NVTX range's (or operator's) id as CUPTI's external correlation id while
/// collecting.
pub fn push_correlation(t: &Tracer, what: Correlated, id: u64) -> bool {
    COLLECTING.load(Relaxed) && crate::window::collect::cpu() && t.cupti.push_correlation(what, id)
}

pub fn pop_correlation(t: &Tracer, what: Correlated) {
    t.cupti.pop_correlation(what);
}

/// In a forked child, which never traces: the window collects nothing (an atomic store only,
/// as the fork handler allows).
pub fn stop_collecting_in_child() {
    COLLECTING.store(false, Relaxed);
}

/// The window collects (warm-up or recording).
pub fn collecting() -> bool {
    COLLECTING.load(Relaxed)
}

/// Python call stacks are wanted for operators (`--with-stack`), and the window collects.
pub fn wants_stacks() -> bool {
    COLLECTING.load(Relaxed) && crate::window::collect::stacks()
}

/// The window collects ranges (CPU activity on): operators' ranges are kept.
pub fn records_ranges() -> bool {
    COLLECTING.load(Relaxed) && crate::window::collect::cpu()
}

/// Sends a finished NVTX range to the writer while collecting (ranges outside the window are
/// worth nothing and cost a channel slot).
pub fn send_range(t: &Tracer, r: Range) {
    if COLLECTING.load(Relaxed) && crate::window::collect::cpu() {
        t.channel.send_range(r);
    }
}
