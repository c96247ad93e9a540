//! The on-demand window (`cuprof run --on-demand`): idle until `cuprof capture` asks, then one
//! cycle per capture, either `count` steps from a given step (so that the ranks of a job record
//! the same step numbers) or until [`OnDemandWindow::stop`] (a duration the caller times).
//!
//! Steps are `cuprof_step()` calls, numbered as [`crate::window::Window::new`] numbers them:
//! step 0 runs from CUDA initialisation, each call ends one step and begins the next. A step
//! capture starts at a step boundary, so that every recorded step is recorded whole.
//!
//! A step capture still waiting for its first step can be cancelled
//! ([`OnDemandWindow::cancel`]): nothing was recorded, the window is ready again, and the
//! cancelled capture keeps its number (the next one is numbered after it).
//!
//! Like the other windows it answers with [`Transition`]s and is not thread-safe by itself.

use crate::window::{Collection, Cycle, Phase, Transition};
use thiserror::Error;

/// A capture the window cannot take now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DemandError {
    #[error("a capture is already running in this process (capture {0}); wait for it to end")]
    Busy(u32),
    #[error("a step capture needs at least 1 step")]
    NoSteps,
    #[error("no capture waits in this process: nothing to cancel")]
    NothingWaits,
    #[error("capture {0} records already, so it is not cancelled: it ends after its steps or its duration")]
    Recording(u32),
    #[error("capture {waits} waits in this process, not capture {asked}: left as it is")]
    NotThisOne { waits: u32, asked: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ready,
    /// Asked for steps `start..start + count`; `start` has not begun yet.
    Pending {
        start: u64,
        count: u64,
    },
    /// Recording steps `start..end`.
    Steps {
        start: u64,
        end: u64,
    },
    /// Recording until [`OnDemandWindow::stop`].
    Timed,
}

/// What `cuprof ps` shows for a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemandState {
    Ready,
    /// A step capture waits for its first step.
    Pending,
    Recording,
}

#[derive(Debug, Clone)]
pub struct OnDemandWindow {
    /// The step now running.
    current: u64,
    /// Captures asked so far (the running one included): the cycle number of the last one.
    captures: u32,
    state: State,
}

impl Default for OnDemandWindow {
    fn default() -> Self {
        OnDemandWindow::new()
    }
}

impl OnDemandWindow {
    pub fn new() -> OnDemandWindow {
        OnDemandWindow {
            current: 0,
            captures: 0,
            state: State::Ready,
        }
    }

    /// The step now running.
    pub fn current_step(&self) -> u64 {
        self.current
    }

    /// The cycle number of the last capture asked (0: none yet).
    pub fn captures(&self) -> u32 {
        self.captures
    }

    pub fn state(&self) -> DemandState {
        match self.state {
            State::Ready => DemandState::Ready,
            State::Pending { .. } => DemandState::Pending,
            State::Steps { .. } | State::Timed => DemandState::Recording,
        }
    }

    pub fn phase(&self) -> Phase {
        match self.state() {
            DemandState::Recording => Phase::Record,
            DemandState::Ready | DemandState::Pending => Phase::Idle,
        }
    }

    fn take(&mut self) -> Result<u32, DemandError> {
        if self.state != State::Ready {
            return Err(DemandError::Busy(self.captures));
        }
        self.captures = self.captures.saturating_add(1);
        Ok(self.captures)
    }

    /// Asks for `count` steps from step `start`, or from the next step boundary if `start`
    /// has already begun. Returns the capture's cycle number and its first step.
    pub fn request_steps(&mut self, start: u64, count: u64) -> Result<(u32, u64), DemandError> {
        if count == 0 {
            return Err(DemandError::NoSteps);
        }
        let cycle = self.take()?;
        let start = start.max(self.current + 1);
        self.state = State::Pending { start, count };
        Ok((cycle, start))
    }

    /// Starts recording now, until [`OnDemandWindow::stop`]. Returns the cycle number and
    /// what to do now.
    pub fn request_timed(&mut self) -> Result<(u32, Transition), DemandError> {
        let cycle = self.take()?;
        self.state = State::Timed;
        Ok((
            cycle,
            Transition {
                record_starts: true,
                collection: Collection::Enable,
                ..Transition::none(Phase::Record)
            },
        ))
    }

    /// Cancels the step capture waiting for its first step (`cycle`: only if it is that one):
    /// nothing was recorded and the window is ready again. Returns the capture's cycle and the
    /// step it was to begin at. A capture already recording is not cancelled.
    pub fn cancel(&mut self, cycle: Option<u32>) -> Result<(u32, u64), DemandError> {
        let waits = self.captures;
        match self.state {
            State::Pending { .. } if cycle.is_some_and(|c| c != waits) => {
                Err(DemandError::NotThisOne {
                    waits,
                    asked: cycle.unwrap_or_default(),
                })
            }
            State::Pending { start, .. } => {
                self.state = State::Ready;
                Ok((waits, start))
            }
            State::Ready => Err(DemandError::NothingWaits),
            State::Steps { .. } | State::Timed => Err(DemandError::Recording(waits)),
        }
    }

    /// The step capture waiting for its first step: its cycle and that step.
    pub fn pending(&self) -> Option<(u32, u64)> {
        match self.state {
            State::Pending { start, .. } => Some((self.captures, start)),
            _ => None,
        }
    }

    /// A timed capture ends: its cycle is written. Changes nothing otherwise.
    pub fn stop(&mut self) -> Transition {
        if self.state != State::Timed {
            return Transition::none(self.phase());
        }
        self.state = State::Ready;
        Transition {
            save: Some(Cycle {
                number: self.captures,
                steps: 0..0,
            }),
            collection: Collection::Disable,
            ..Transition::none(Phase::Idle)
        }
    }

    /// The step now running ends and the next one begins.
    pub fn step(&mut self) -> Transition {
        let prev = self.current;
        let next = prev + 1;
        self.current = next;
        let base = Transition {
            ended_step: Some(prev),
            step: Some(next),
            ..Transition::none(Phase::Idle)
        };
        match self.state {
            State::Pending { start, count } if next == start => {
                self.state = State::Steps {
                    start,
                    end: start + count,
                };
                Transition {
                    record_starts: true,
                    collection: Collection::Enable,
                    phase: Phase::Record,
                    ..base
                }
            }
            State::Steps { start, end } if next == end => {
                self.state = State::Ready;
                Transition {
                    recorded_step: Some(prev),
                    save: Some(Cycle {
                        number: self.captures,
                        steps: start..end,
                    }),
                    collection: Collection::Disable,
                    ..base
                }
            }
            State::Steps { .. } => Transition {
                recorded_step: Some(prev),
                phase: Phase::Record,
                ..base
            },
            State::Timed => Transition {
                phase: Phase::Record,
                ..base
            },
            State::Ready | State::Pending { .. } => base,
        }
    }

    /// The capture being recorded at exit, with the step now running when it records steps
    /// (the caller closes that step's `ProfilerStep#N`).
    pub fn at_exit(&self) -> Option<(Cycle, Option<u64>)> {
        let number = self.captures;
        match self.state {
            State::Steps { start, .. } => Some((
                Cycle {
                    number,
                    steps: start..self.current + 1,
                },
                Some(self.current),
            )),
            State::Timed => Some((
                Cycle {
                    number,
                    steps: 0..0,
                },
                None,
            )),
            State::Ready | State::Pending { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(w: &mut OnDemandWindow, n: usize) -> Vec<Transition> {
        (0..n).map(|_| w.step()).collect()
    }

    #[test]
    fn idle_until_asked() {
        let mut w = OnDemandWindow::new();
        for t in steps(&mut w, 5) {
            assert_eq!(t.collection, Collection::Keep);
            assert!(!t.record_starts && t.save.is_none() && t.recorded_step.is_none());
        }
        assert_eq!(w.current_step(), 5);
        assert_eq!(w.state(), DemandState::Ready);
        assert!(w.at_exit().is_none());
    }

    #[test]
    fn step_capture_records_exactly_the_steps_asked() {
        let mut w = OnDemandWindow::new();
        steps(&mut w, 3); // step 3 runs
        assert_eq!(w.request_steps(5, 3), Ok((1, 5)));
        assert_eq!(w.state(), DemandState::Pending);
        let t = w.step(); // 3 ends, 4 begins
        assert_eq!(t.collection, Collection::Keep);
        let t = w.step(); // 4 ends, 5 begins
        assert!(t.record_starts);
        assert_eq!(t.collection, Collection::Enable);
        assert_eq!(t.recorded_step, None);
        assert_eq!(w.state(), DemandState::Recording);
        assert_eq!(w.step().recorded_step, Some(5));
        assert_eq!(w.step().recorded_step, Some(6));
        let t = w.step(); // 7 ends, 8 begins
        assert_eq!(t.recorded_step, Some(7));
        assert_eq!(
            t.save,
            Some(Cycle {
                number: 1,
                steps: 5..8
            })
        );
        assert_eq!(t.collection, Collection::Disable);
        assert_eq!(w.state(), DemandState::Ready);
    }

    #[test]
    fn a_start_already_begun_moves_to_the_next_boundary() {
        let mut w = OnDemandWindow::new();
        steps(&mut w, 10);
        assert_eq!(w.request_steps(4, 2), Ok((1, 11)));
        assert_eq!(w.request_steps(0, 0), Err(DemandError::NoSteps));
    }

    #[test]
    fn a_second_capture_is_refused_then_numbered_after_the_first() {
        let mut w = OnDemandWindow::new();
        assert_eq!(w.request_steps(1, 1), Ok((1, 1)));
        assert_eq!(w.request_timed().map(|r| r.0), Err(DemandError::Busy(1)));
        assert_eq!(w.request_steps(2, 1), Err(DemandError::Busy(1)));
        w.step();
        assert_eq!(w.step().save.map(|c| c.number), Some(1));
        let (cycle, t) = w.request_timed().unwrap();
        assert_eq!(cycle, 2);
        assert!(t.record_starts);
        assert_eq!(w.step().recorded_step, None);
        let t = w.stop();
        assert_eq!(
            t.save,
            Some(Cycle {
                number: 2,
                steps: 0..0
            })
        );
        assert_eq!(t.collection, Collection::Disable);
        assert_eq!(w.stop().save, None);
    }

    #[test]
    fn a_waiting_step_capture_is_cancelled_and_the_next_one_numbered_after_it() {
        let mut w = OnDemandWindow::new();
        assert_eq!(w.cancel(None), Err(DemandError::NothingWaits));
        steps(&mut w, 2); // step 2 runs
        assert_eq!(w.request_steps(4, 2), Ok((1, 4)));
        assert_eq!(w.pending(), Some((1, 4)));
        assert_eq!(
            w.cancel(Some(2)),
            Err(DemandError::NotThisOne { waits: 1, asked: 2 })
        );
        assert_eq!(w.cancel(Some(1)), Ok((1, 4)));
        assert_eq!(w.state(), DemandState::Ready);
        assert_eq!(w.pending(), None);
        // Step 4 comes and goes: nothing records.
        for t in steps(&mut w, 4) {
            assert!(!t.record_starts && t.save.is_none() && t.recorded_step.is_none());
            assert_eq!(t.collection, Collection::Keep);
        }
        assert!(w.at_exit().is_none());
        // Cancelled without a cycle named; then a capture recording is not cancelled.
        assert_eq!(w.request_steps(0, 1), Ok((2, 7)));
        assert_eq!(w.cancel(None), Ok((2, 7)));
        assert_eq!(w.request_steps(0, 1), Ok((3, 7)));
        assert!(w.step().record_starts);
        assert_eq!(w.cancel(None), Err(DemandError::Recording(3)));
        assert_eq!(w.cancel(Some(3)), Err(DemandError::Recording(3)));
        assert_eq!(w.step().save.map(|c| c.number), Some(3));
        let (cycle, _) = w.request_timed().unwrap();
        assert_eq!(w.cancel(None), Err(DemandError::Recording(cycle)));
    }

    #[test]
    fn exit_mid_capture_writes_the_steps_so_far() {
        let mut w = OnDemandWindow::new();
        w.request_steps(1, 100).unwrap();
        steps(&mut w, 3); // steps 1, 2 recorded; 3 runs
        assert_eq!(
            w.at_exit(),
            Some((
                Cycle {
                    number: 1,
                    steps: 1..4
                },
                Some(3)
            ))
        );
    }
}
