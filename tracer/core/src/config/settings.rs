//! [`Settings`]: what the `CUPROF_*` variables say, one typed field per variable, before the
//! defaults and the step-source rules make a [`Config`] of them ([`Settings::resolve`]).
//!
//! The parser reads the environment into settings (`env`), and `Settings::to_env` is its
//! inverse, which the launcher uses to turn its options into variables. Settings keep what the
//! variables say even where they conflict (a step source and a time window, say): the library
//! decides, and warns, when it resolves them, with or without the launcher.

use std::path::PathBuf;
use std::time::Duration;

use super::model::*;
use super::vars;
use crate::window::{Capture, RangeSource, Schedule};

/// The `CUPROF_*` variables of a traced process, typed. `None`: unset (or invalid, when
/// parsed), so the default applies.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// `CUPROF_DIR` (parsed: else `CACHE_DIT_TORCH_PROFILER_DIR`).
    pub dir: Option<PathBuf>,
    pub name: Option<String>,
    /// `CUPROF_RUN_ID`: the run every rank's traces share.
    pub run_id: Option<String>,
    pub activities: Option<Activities>,
    pub api: Option<ApiFilter>,
    pub with_stack: Option<bool>,
    pub queued: Option<bool>,
    pub torch_ops: Option<bool>,
    pub record_shapes: Option<bool>,
    pub all_threads: Option<bool>,
    pub with_flops: Option<bool>,
    pub with_modules: Option<bool>,
    pub tensorboard: Option<bool>,
    pub quiet: Option<bool>,
    pub steps: StepSettings,
    pub ranks: Option<Vec<u32>>,
    pub cupti_path: Option<PathBuf>,
    pub max_mem_events: Option<u64>,
    pub dump_buffers: Option<PathBuf>,
    /// Bytes, a multiple of 8 from [`MIN_BUFFER_SIZE`] to [`MAX_BUFFER_SIZE`].
    pub buffer_size: Option<usize>,
    pub buffers: Option<usize>,
    pub flush_ms: Option<u64>,
    pub gzip_level: Option<u32>,
    /// Positive.
    pub shutdown_wait: Option<Duration>,
    pub report_file: Option<PathBuf>,
}

/// The variables that choose what is recorded. A schedule variable that was set but invalid
/// is `Some(its default)`: the user meant a schedule, and gets the default one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepSettings {
    pub wait: Option<u64>,
    pub warmup: Option<u64>,
    /// At least 1.
    pub active: Option<u64>,
    pub repeat: Option<u64>,
    pub skip_first: Option<u64>,
    pub skip_first_wait: Option<bool>,
    pub step_nvtx: Option<String>,
    pub capture_range: Option<RangeSource>,
    pub delay: Option<Duration>,
    /// Zero: until exit.
    pub duration: Option<Duration>,
    /// `CUPROF_ON_DEMAND`: idle until `cuprof capture` asks.
    pub on_demand: Option<bool>,
}

impl Settings {
    /// The configuration of a traced process of this `rank` started at `start_unix` (which
    /// names the files when no name is set), and one warning per conflict between step sources.
    pub fn resolve(&self, rank: RankInfo, start_unix: u64) -> (Config, Vec<String>) {
        let (capture, step_nvtx, warnings) = self.steps.resolve();
        let defaults = Config::default();
        let config = Config {
            enabled: true,
            dir: self.dir.clone().unwrap_or(defaults.dir),
            name: self
                .name
                .clone()
                .unwrap_or_else(|| format!("profile_{start_unix}")),
            run_id: self.run_id.clone(),
            activities: self.activities.unwrap_or(defaults.activities),
            api: self.api.unwrap_or(defaults.api),
            with_stack: self.with_stack.unwrap_or(defaults.with_stack),
            queued: self.queued.unwrap_or(defaults.queued),
            torch_ops: self.torch_ops.unwrap_or(defaults.torch_ops),
            record_shapes: self.record_shapes.unwrap_or(defaults.record_shapes),
            all_threads: self.all_threads.unwrap_or(defaults.all_threads),
            with_flops: self.with_flops.unwrap_or(defaults.with_flops),
            with_modules: self.with_modules.unwrap_or(defaults.with_modules),
            tensorboard: self.tensorboard.unwrap_or(defaults.tensorboard),
            capture,
            step_nvtx,
            ranks: self.ranks.clone(),
            rank,
            cupti_path: self.cupti_path.clone(),
            max_mem_events: self.max_mem_events.unwrap_or(defaults.max_mem_events),
            dump_buffers: self.dump_buffers.clone(),
            buffer_size: self.buffer_size.unwrap_or(defaults.buffer_size),
            buffers: self.buffers.unwrap_or(defaults.buffers),
            flush_interval: self
                .flush_ms
                .map_or(defaults.flush_interval, Duration::from_millis),
            gzip_level: self.gzip_level.unwrap_or(defaults.gzip_level),
            shutdown_wait: self.shutdown_wait.unwrap_or(defaults.shutdown_wait),
            report_file: self.report_file.clone(),
            quiet: self.quiet.unwrap_or(defaults.quiet),
        };
        (config, warnings)
    }
}

impl StepSettings {
    /// The schedule variables that were set, but for `CUPROF_REPEAT` (which also counts
    /// capture ranges).
    fn schedule_vars(&self) -> Vec<&'static str> {
        [
            (vars::WAIT, self.wait.is_some()),
            (vars::WARMUP, self.warmup.is_some()),
            (vars::ACTIVE, self.active.is_some()),
            (vars::SKIP_FIRST, self.skip_first.is_some()),
            (vars::SKIP_FIRST_WAIT, self.skip_first_wait.is_some()),
        ]
        .into_iter()
        .filter_map(|(var, set)| set.then_some(var))
        .collect()
    }

    /// The step source and its window (with the NVTX pattern for NVTX steps), by the
    /// precedence of the module `config`'s documentation; one warning per source ignored.
    fn resolve(&self) -> (Capture, Option<String>, Vec<String>) {
        let mut warnings = Vec::new();
        let step_vars = self.schedule_vars();
        let any_schedule = !step_vars.is_empty() || self.repeat.is_some();
        let repeat = self.repeat.unwrap_or(DEFAULT_REPEAT);
        let schedule = Schedule::new(
            self.wait.unwrap_or(DEFAULT_WAIT),
            self.warmup.unwrap_or(DEFAULT_WARMUP),
            // The parser and the launcher accept 1 and up.
            self.active.unwrap_or(DEFAULT_ACTIVE).max(1),
        )
        .expect("active >= 1 by construction")
        .with_repeat(repeat)
        .with_skip_first(self.skip_first.unwrap_or(0))
        .with_skip_first_wait(self.skip_first_wait.unwrap_or(false));
        let time_var = match (self.delay.is_some(), self.duration.is_some()) {
            (true, true) => Some("CUPROF_DELAY/CUPROF_DURATION"),
            (true, false) => Some(vars::DELAY),
            (false, true) => Some(vars::DURATION),
            (false, false) => None,
        };

        if self.on_demand == Some(true) {
            let others = [
                self.step_nvtx.as_ref().map(|_| vars::STEP_NVTX),
                self.capture_range.map(|_| vars::CAPTURE_RANGE),
                time_var,
            ];
            let mut others: Vec<&str> = others.into_iter().flatten().collect();
            others.extend(step_vars);
            if self.repeat.is_some() {
                others.push(vars::REPEAT);
            }
            if !others.is_empty() {
                warnings.push(format!(
                    "cuprof: {} ignored with {}=1 (each cuprof capture says what to record)",
                    others.join(", "),
                    vars::ON_DEMAND
                ));
            }
            return (Capture::OnDemand, None, warnings);
        }
        let mut conflict = |winner: &str, loser: Option<&str>| {
            if let Some(loser) = loser {
                warnings.push(format!(
                    "cuprof: {winner} and {loser} both choose what to record; {winner} wins and {loser} is ignored"
                ));
            }
        };
        if let Some(pattern) = &self.step_nvtx {
            conflict(
                vars::STEP_NVTX,
                self.capture_range.map(|_| vars::CAPTURE_RANGE),
            );
            conflict(vars::STEP_NVTX, time_var);
            return (Capture::Steps(schedule), Some(pattern.clone()), warnings);
        }
        if let Some(source) = self.capture_range {
            conflict(vars::CAPTURE_RANGE, time_var);
            if !step_vars.is_empty() {
                warnings.push(format!(
                    "cuprof: {} {} ignored with {} (each start..stop range is recorded whole; only CUPROF_REPEAT applies)",
                    step_vars.join(", "),
                    if step_vars.len() == 1 { "is" } else { "are" },
                    vars::CAPTURE_RANGE
                ));
            }
            return (Capture::Range { source, repeat }, None, warnings);
        }
        if let Some(time_var) = time_var {
            if any_schedule {
                let mut all = step_vars;
                if self.repeat.is_some() {
                    all.push(vars::REPEAT);
                }
                conflict(time_var, Some(&all.join(", ")));
            }
            let capture = Capture::Time {
                delay: self.delay.unwrap_or(Duration::ZERO),
                duration: self.duration.filter(|d| !d.is_zero()),
            };
            return (capture, None, warnings);
        }
        if any_schedule {
            return (Capture::Steps(schedule), None, warnings);
        }
        (Capture::WholeRun, None, warnings)
    }
}
