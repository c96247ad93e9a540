//! Parsing the environment into a [`Config`]: a pure function over a lookup
//! ([`Config::from_lookup`], [`Config::from_vars`]); only [`Config::from_env`] reads the real
//! environment. Every problem is one warning line and a documented fallback.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::model::*;
use super::vars;
use crate::window::{Capture, RangeSource, Schedule};

impl Config {
    /// Read the real environment; the default name uses the current time (call this once,
    /// early, at library load).
    pub fn from_env() -> (Config, Vec<String>) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Config::from_lookup(|k| std::env::var_os(k), now)
    }

    /// Parse from `(name, value)` pairs (later pairs win), as a test or a launcher would.
    pub fn from_vars<I, K, V>(vars: I, process_start_unix: u64) -> (Config, Vec<String>)
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let map: std::collections::HashMap<OsString, OsString> = vars
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
            .collect();
        Config::from_lookup(|k| map.get(OsStr::new(k)).cloned(), process_start_unix)
    }

    /// Parse through `lookup(name)`. `process_start_unix` makes the default name
    /// `profile_UNIXTIME`. Returns the configuration and one line per problem found, each
    /// starting with `cuprof: `.
    pub fn from_lookup<F>(lookup: F, process_start_unix: u64) -> (Config, Vec<String>)
    where
        F: Fn(&str) -> Option<OsString>,
    {
        let mut p = Parser {
            lookup: &lookup,
            warnings: Vec::new(),
        };
        let config = p.config(process_start_unix);
        (config, p.warnings)
    }
}

/// A comma (or whitespace) separated list of ranks and inclusive ranges: `0,3`, `0-3,8`.
/// The error says what is wrong.
pub fn parse_ranks(list: &str) -> Result<Vec<u32>, String> {
    let mut ranks = Vec::new();
    for item in list
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
    {
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("{item:?} is not a rank or a range like 0-3"))
        };
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return Err(format!("{item:?} is an empty range"));
                }
                if b - a > 1_000_000 {
                    return Err(format!("{item:?} is too large a range"));
                }
                ranks.extend(a..=b);
            }
            None => ranks.push(num(item)?),
        }
    }
    if ranks.is_empty() {
        return Err("the list is empty".into());
    }
    ranks.sort_unstable();
    ranks.dedup();
    Ok(ranks)
}

const BOOL_ACCEPTED: &str = "expected 1/true/yes/on or 0/false/no/off";

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// `8388608`, `8M`, `8MiB`, `512k`, `512KiB` (binary multiples, case-insensitive).
fn parse_size(v: &str) -> Option<usize> {
    let lower = v.to_ascii_lowercase();
    let (digits, mult) = if let Some(d) = lower
        .strip_suffix("mib")
        .or_else(|| lower.strip_suffix("mb"))
        .or_else(|| lower.strip_suffix('m'))
    {
        (d, 1usize << 20)
    } else if let Some(d) = lower
        .strip_suffix("kib")
        .or_else(|| lower.strip_suffix("kb"))
        .or_else(|| lower.strip_suffix('k'))
    {
        (d, 1usize << 10)
    } else {
        (lower.strip_suffix('b').unwrap_or(&lower), 1)
    };
    digits.trim().parse::<usize>().ok()?.checked_mul(mult)
}

fn parse_seconds(v: &str) -> Option<Duration> {
    let s: f64 = v.parse().ok()?;
    if !s.is_finite() || s < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(s).ok()
}

struct Parser<'a> {
    lookup: &'a dyn Fn(&str) -> Option<OsString>,
    warnings: Vec<String>,
}

impl Parser<'_> {
    fn warn(&mut self, var: &str, value: &str, accepted: &str, fallback: &str) {
        self.warnings.push(format!(
            "cuprof: {var}={value:?} is invalid ({accepted}); {fallback}"
        ));
    }

    /// The value, trimmed; `None` if unset or empty. A value that is not UTF-8 is invalid.
    fn text(&mut self, var: &str, fallback: &str) -> Option<String> {
        let raw = (self.lookup)(var)?;
        match raw.into_string() {
            Ok(s) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
            Err(raw) => {
                let shown = raw.to_string_lossy().into_owned();
                self.warn(var, &shown, "not valid UTF-8", fallback);
                None
            }
        }
    }

    /// A path: any bytes, `None` if unset or empty.
    fn path(&self, var: &str) -> Option<PathBuf> {
        (self.lookup)(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    fn boolean(&mut self, var: &str) -> bool {
        self.boolean_or(var, false)
    }

    /// A `1`/`0` switch with the given default when unset, empty or invalid.
    fn boolean_or(&mut self, var: &str, default: bool) -> bool {
        let fallback = if default {
            "using the default (on)"
        } else {
            "using the default (off)"
        };
        let Some(v) = self.text(var, fallback) else {
            return default;
        };
        parse_bool(&v).unwrap_or_else(|| {
            self.warn(var, &v, BOOL_ACCEPTED, fallback);
            default
        })
    }

    /// One of `choices`, by name, ignoring case; `None` if unset, empty or invalid (with a
    /// warning naming the choices).
    fn choice<T: Copy>(&mut self, var: &str, choices: &[(&str, T)], fallback: &str) -> Option<T> {
        let v = self.text(var, fallback)?;
        if let Some(&(_, t)) = choices
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&v))
        {
            return Some(t);
        }
        let names: Vec<&str> = choices.iter().map(|&(name, _)| name).collect();
        let accepted = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => {
                format!("expected {} or {last}", rest.join(", "))
            }
            _ => format!("expected {}", names.concat()),
        };
        self.warn(var, &v, &accepted, fallback);
        None
    }

    /// An integer in `min..=max`; `None` if unset, empty or invalid (with a warning).
    fn integer(&mut self, var: &str, min: u64, max: u64, default: &str) -> Option<u64> {
        let fallback = format!("using the default ({default})");
        let v = self.text(var, &fallback)?;
        match v.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                let accepted = match (min, max) {
                    (0, u64::MAX) => "expected a non-negative integer".to_owned(),
                    (1, u64::MAX) => "expected a positive integer".to_owned(),
                    (lo, hi) => format!("expected an integer from {lo} to {hi}"),
                };
                self.warn(var, &v, &accepted, &fallback);
                None
            }
        }
    }

    fn seconds(&mut self, var: &str, default: &str) -> Option<Duration> {
        let fallback = format!("using the default ({default})");
        let v = self.text(var, &fallback)?;
        let d = parse_seconds(&v);
        if d.is_none() {
            self.warn(
                var,
                &v,
                "expected a non-negative number of seconds, like 10 or 2.5",
                &fallback,
            );
        }
        d
    }

    fn config(&mut self, start_unix: u64) -> Config {
        let mut c = Config::default();
        let off = "tracing is off";
        c.enabled = match self.text(vars::ENABLED, off) {
            None => false,
            Some(v) => parse_bool(&v).unwrap_or_else(|| {
                self.warn(
                    vars::ENABLED,
                    &v,
                    "expected 1/true/yes to trace, or 0/false/no",
                    off,
                );
                false
            }),
        };
        if !c.enabled {
            // The library stays inert; the other variables are not even looked at.
            return c;
        }

        if let Some(v) = self.text(vars::RANKS, off) {
            match parse_ranks(&v) {
                Ok(r) => c.ranks = Some(r),
                Err(why) => {
                    let accepted = format!("expected ranks like 0,3 or 0-3; {why}");
                    self.warn(vars::RANKS, &v, &accepted, off);
                    c.enabled = false;
                }
            }
        }
        c.rank = self.rank_info();

        c.dir = self
            .path(vars::DIR)
            .or_else(|| self.path(vars::CACHE_DIT_DIR))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
        let default_name = format!("profile_{start_unix}");
        let name_fallback = format!("using the default ({default_name})");
        c.name = match self.text(vars::NAME, &name_fallback) {
            Some(n) if n.contains('/') || n == "." || n == ".." => {
                let accepted = "a file name prefix: no '/', not '.' or '..'";
                self.warn(vars::NAME, &n, accepted, &name_fallback);
                default_name
            }
            Some(n) => n,
            None => default_name,
        };

        let act_fallback = "using the default (CPU,GPU)";
        if let Some(v) = self.text(vars::ACTIVITIES, act_fallback) {
            match Activities::parse(&v) {
                Ok(a) => c.activities = a,
                Err(why) => {
                    let accepted =
                        format!("expected CPU, GPU, MEM separated by commas or spaces; {why}");
                    self.warn(vars::ACTIVITIES, &v, &accepted, act_fallback);
                }
            }
        }
        let api = [
            ("filtered", ApiFilter::Filtered),
            ("runtime", ApiFilter::Runtime),
            ("all", ApiFilter::All),
        ];
        if let Some(a) = self.choice(vars::API, &api, "using the default (filtered)") {
            c.api = a;
        }
        c.with_stack = self.boolean(vars::WITH_STACK);
        c.queued = self.boolean(vars::QUEUED);
        c.torch_ops = self.boolean_or(vars::TORCH_OPS, true);
        c.record_shapes = self.boolean_or(vars::RECORD_SHAPES, true);
        c.quiet = self.boolean(vars::QUIET);

        self.capture(&mut c);

        c.cupti_path = self.path(vars::CUPTI_PATH);
        c.dump_buffers = self.path(vars::DUMP_BUFFERS);
        c.report_file = self.path(vars::REPORT_FILE);
        c.max_mem_events = self
            .integer(vars::MAX_MEM_EVENTS, 1, u64::MAX, "100000")
            .unwrap_or(DEFAULT_MAX_MEM_EVENTS);
        let size_fallback = "using the default (2 MiB)";
        if let Some(v) = self.text(vars::BUFFER_SIZE, size_fallback) {
            match parse_size(&v) {
                Some(n) if (MIN_BUFFER_SIZE..=MAX_BUFFER_SIZE).contains(&n) => {
                    c.buffer_size = n & !7;
                }
                _ => {
                    let accepted = "expected bytes from 1 MiB to 64 MiB, like 8388608, 8M or 8MiB";
                    self.warn(vars::BUFFER_SIZE, &v, accepted, size_fallback);
                }
            }
        }
        c.buffers = self
            .integer(vars::BUFFERS, 1, MAX_BUFFERS as u64, "32")
            .map_or(DEFAULT_BUFFERS, |n| n as usize);
        c.flush_interval = Duration::from_millis(
            self.integer(vars::FLUSH_MS, 1, u64::MAX, "1000")
                .unwrap_or(DEFAULT_FLUSH_MS),
        );
        c.gzip_level = self
            .integer(vars::GZIP_LEVEL, 0, 9, "1")
            .map_or(DEFAULT_GZIP_LEVEL, |n| n as u32);
        c
    }

    /// The step source and its window.
    fn capture(&mut self, c: &mut Config) {
        let wait = self.integer(vars::WAIT, 0, u64::MAX, "0");
        let warmup = self.integer(vars::WARMUP, 0, u64::MAX, "0");
        let active = self.integer(vars::ACTIVE, 1, u64::MAX, "1");
        let repeat = self.integer(vars::REPEAT, 0, u64::MAX, "1");
        let skip_first = self.integer(vars::SKIP_FIRST, 0, u64::MAX, "0");
        let skip_first_wait = self.boolean(vars::SKIP_FIRST_WAIT);
        // Schedule variables present (even if invalid: the user meant a schedule).
        let set = |p: &Self, var: &str| (p.lookup)(var).is_some_and(|v| !v.is_empty());
        let step_vars: Vec<&str> = [
            vars::WAIT,
            vars::WARMUP,
            vars::ACTIVE,
            vars::SKIP_FIRST,
            vars::SKIP_FIRST_WAIT,
        ]
        .into_iter()
        .filter(|v| set(self, v))
        .collect();
        let any_schedule = !step_vars.is_empty() || set(self, vars::REPEAT);
        let schedule = Schedule::new(
            wait.unwrap_or(DEFAULT_WAIT),
            warmup.unwrap_or(DEFAULT_WARMUP),
            active.unwrap_or(DEFAULT_ACTIVE),
        )
        .expect("active >= 1 by construction")
        .with_repeat(repeat.unwrap_or(DEFAULT_REPEAT))
        .with_skip_first(skip_first.unwrap_or(0))
        .with_skip_first_wait(skip_first_wait);

        let nvtx = self.text(vars::STEP_NVTX, "NVTX ranges do not mark steps");
        let ranges = [
            ("cudaProfilerApi", RangeSource::CudaProfilerApi),
            ("cuprof", RangeSource::Cuprof),
        ];
        let range = self.choice(vars::CAPTURE_RANGE, &ranges, "no capture range");
        let delay = self.seconds(vars::DELAY, "0: from CUDA initialisation");
        let duration = self.seconds(vars::DURATION, "0: until exit");
        let time_var = match (delay.is_some(), duration.is_some()) {
            (true, true) => Some("CUPROF_DELAY/CUPROF_DURATION"),
            (true, false) => Some(vars::DELAY),
            (false, true) => Some(vars::DURATION),
            (false, false) => None,
        };

        let conflict = |p: &mut Self, winner: &str, loser: Option<&str>| {
            if let Some(loser) = loser {
                p.warnings.push(format!(
                    "cuprof: {winner} and {loser} both choose what to record; {winner} wins and {loser} is ignored"
                ));
            }
        };
        if let Some(pattern) = nvtx {
            conflict(self, vars::STEP_NVTX, range.map(|_| vars::CAPTURE_RANGE));
            conflict(self, vars::STEP_NVTX, time_var);
            c.capture = Capture::Steps(schedule);
            c.step_nvtx = Some(pattern);
        } else if let Some(source) = range {
            conflict(self, vars::CAPTURE_RANGE, time_var);
            if !step_vars.is_empty() {
                self.warnings.push(format!(
                    "cuprof: {} {} ignored with {} (each start..stop range is recorded whole; only CUPROF_REPEAT applies)",
                    step_vars.join(", "),
                    if step_vars.len() == 1 { "is" } else { "are" },
                    vars::CAPTURE_RANGE
                ));
            }
            c.capture = Capture::Range {
                source,
                repeat: repeat.unwrap_or(DEFAULT_REPEAT),
            };
        } else if let Some(time_var) = time_var {
            if any_schedule {
                let mut all = step_vars.clone();
                if set(self, vars::REPEAT) {
                    all.push(vars::REPEAT);
                }
                conflict(self, time_var, Some(&all.join(", ")));
            }
            c.capture = Capture::Time {
                delay: delay.unwrap_or(Duration::ZERO),
                duration: duration.filter(|d| !d.is_zero()),
            };
        } else if any_schedule {
            c.capture = Capture::Steps(schedule);
        }
    }

    fn first_u32(&mut self, names: &[&str], positive: bool) -> Option<u32> {
        for var in names {
            let fallback = "ignoring it";
            let Some(v) = self.text(var, fallback) else {
                continue;
            };
            match v.parse::<u32>() {
                Ok(n) if !positive || n > 0 => return Some(n),
                _ => {
                    let accepted = if positive {
                        "expected a positive integer"
                    } else {
                        "expected a non-negative integer"
                    };
                    self.warn(var, &v, accepted, fallback);
                }
            }
        }
        None
    }

    fn rank_info(&mut self) -> RankInfo {
        let rank = self.first_u32(&vars::RANK_VARS, false).unwrap_or(0);
        let world_size = self.first_u32(&vars::WORLD_SIZE_VARS, true).unwrap_or(1);
        let local_rank = self
            .first_u32(&vars::LOCAL_RANK_VARS, false)
            .unwrap_or(rank);
        RankInfo {
            rank,
            world_size,
            local_rank,
        }
    }
}

#[cfg(test)]
mod tests;
