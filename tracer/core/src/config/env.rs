//! The environment and the configuration, both ways. Parsing is a pure function over a lookup
//! ([`Config::from_lookup`], [`Config::from_vars`]; only [`Config::from_env`] reads the real
//! environment) that reads the variables into [`Settings`] (every problem one warning line and
//! a documented fallback), then resolves them into a [`Config`]. [`Settings::to_env`] is its
//! inverse: the variables that the parser reads back as the same settings.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::model::*;
use super::settings::{Settings, StepSettings};
use super::vars;
use crate::window::RangeSource;

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
        let Some(parsed) = p.parse(process_start_unix) else {
            return (Config::default(), p.warnings);
        };
        let (mut config, conflicts) = parsed.settings.resolve(parsed.rank, process_start_unix);
        config.enabled = parsed.ranks_valid;
        let mut warnings = p.warnings;
        // Conflicts are told where the step-source variables were read, like the other lines.
        let at = parsed.conflicts_at;
        warnings.splice(at..at, conflicts);
        (config, warnings)
    }
}

impl Settings {
    /// The variables that make a process trace with these settings: `CUPROF_ENABLED=1`, then
    /// one variable per field set, spelled so that the parser reads the same settings back.
    /// The rank is no setting: it comes from the job's launcher (`RANK`, ...).
    pub fn to_env(&self) -> Vec<(&'static str, OsString)> {
        let mut env: Vec<(&'static str, OsString)> = vec![(vars::ENABLED, "1".into())];
        let mut put = |var: &'static str, value: Option<String>| {
            if let Some(v) = value {
                env.push((var, v.into()));
            }
        };
        let number = |n: Option<u64>| n.map(|n| n.to_string());
        let switch = |b: Option<bool>| b.map(|b| if b { "1" } else { "0" }.to_owned());
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.as_os_str().to_owned());
        let steps = &self.steps;
        put(vars::NAME, self.name.clone());
        put(vars::RUN_ID, self.run_id.clone());
        put(
            vars::ACTIVITIES,
            self.activities.as_ref().map(Activities::to_list),
        );
        put(
            vars::API,
            self.api.map(|a| name_of(&API_NAMES, a).to_owned()),
        );
        put(vars::WITH_STACK, switch(self.with_stack));
        put(vars::QUEUED, switch(self.queued));
        put(vars::TORCH_OPS, switch(self.torch_ops));
        put(vars::RECORD_SHAPES, switch(self.record_shapes));
        put(vars::ALL_THREADS, switch(self.all_threads));
        put(vars::WITH_FLOPS, switch(self.with_flops));
        put(vars::WITH_MODULES, switch(self.with_modules));
        put(vars::TENSORBOARD, switch(self.tensorboard));
        put(vars::QUIET, switch(self.quiet));
        put(vars::WAIT, number(steps.wait));
        put(vars::WARMUP, number(steps.warmup));
        put(vars::ACTIVE, number(steps.active));
        put(vars::REPEAT, number(steps.repeat));
        put(vars::SKIP_FIRST, number(steps.skip_first));
        put(vars::SKIP_FIRST_WAIT, switch(steps.skip_first_wait));
        put(vars::STEP_NVTX, steps.step_nvtx.clone());
        put(
            vars::CAPTURE_RANGE,
            steps
                .capture_range
                .map(|r| name_of(&RANGE_NAMES, r).to_owned()),
        );
        put(vars::DELAY, steps.delay.map(seconds_text));
        put(vars::DURATION, steps.duration.map(seconds_text));
        put(vars::ON_DEMAND, switch(steps.on_demand));
        put(
            vars::RANKS,
            self.ranks.as_ref().map(|r| {
                let r: Vec<String> = r.iter().map(u32::to_string).collect();
                r.join(",")
            }),
        );
        put(vars::MAX_MEM_EVENTS, number(self.max_mem_events));
        put(
            vars::BUFFER_SIZE,
            number(self.buffer_size.map(|n| n as u64)),
        );
        put(vars::BUFFERS, number(self.buffers.map(|n| n as u64)));
        put(vars::FLUSH_MS, number(self.flush_ms));
        put(vars::GZIP_LEVEL, number(self.gzip_level.map(u64::from)));
        put(vars::SHUTDOWN_WAIT, self.shutdown_wait.map(seconds_text));
        // Paths may be any bytes: not through `put`'s `String`.
        for (var, p) in [
            (vars::DIR, path(&self.dir)),
            (vars::CUPTI_PATH, path(&self.cupti_path)),
            (vars::DUMP_BUFFERS, path(&self.dump_buffers)),
            (vars::REPORT_FILE, path(&self.report_file)),
        ] {
            if let Some(p) = p {
                env.push((var, p));
            }
        }
        env
    }
}

/// `CUPROF_API`'s values, in the order the warning lists them.
const API_NAMES: [(&str, ApiFilter); 3] = [
    ("filtered", ApiFilter::Filtered),
    ("runtime", ApiFilter::Runtime),
    ("all", ApiFilter::All),
];

/// `CUPROF_CAPTURE_RANGE`'s values.
const RANGE_NAMES: [(&str, RangeSource); 2] = [
    ("cudaProfilerApi", RangeSource::CudaProfilerApi),
    ("cuprof", RangeSource::Cuprof),
];

fn name_of<T: PartialEq>(names: &[(&'static str, T)], value: T) -> &'static str {
    names
        .iter()
        .find(|(_, t)| *t == value)
        .map(|&(name, _)| name)
        .expect("every value has a name")
}

/// Seconds as the parser reads them back exactly: `2`, `2.5`, `0.000000001`.
fn seconds_text(d: Duration) -> String {
    match d.subsec_nanos() {
        0 => d.as_secs().to_string(),
        n => {
            let text = format!("{}.{n:09}", d.as_secs());
            text.trim_end_matches('0').to_owned()
        }
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

/// A non-negative number of seconds, like `10` or `2.5`.
pub fn parse_seconds(v: &str) -> Option<Duration> {
    let s: f64 = v.parse().ok()?;
    if !s.is_finite() || s < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(s).ok()
}

/// What [`Parser::parse`] read from an enabled process's environment.
struct Parsed {
    settings: Settings,
    rank: RankInfo,
    /// An invalid `CUPROF_RANKS` turns tracing off.
    ranks_valid: bool,
    /// How many warnings came before the step-source conflicts are known.
    conflicts_at: usize,
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

    /// A `1`/`0` switch; `None` when unset, empty or invalid (with a warning naming the
    /// default).
    fn switch(&mut self, var: &str, default: bool) -> Option<bool> {
        let fallback = if default {
            "using the default (on)"
        } else {
            "using the default (off)"
        };
        let v = self.text(var, fallback)?;
        let b = parse_bool(&v);
        if b.is_none() {
            self.warn(var, &v, BOOL_ACCEPTED, fallback);
        }
        b
    }

    /// Set to something, even invalid or blank: the user meant it.
    fn is_set(&self, var: &str) -> bool {
        (self.lookup)(var).is_some_and(|v| !v.is_empty())
    }

    /// A schedule variable: `None` when unset, its default when set but invalid.
    fn schedule_integer(&mut self, var: &str, min: u64, default: u64) -> Option<u64> {
        let n = self.integer(var, min, u64::MAX, &default.to_string());
        self.is_set(var).then(|| n.unwrap_or(default))
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

    /// A number of seconds, zero allowed unless `positive`; `None` if unset, empty or invalid
    /// (with a warning).
    fn seconds(&mut self, var: &str, positive: bool, default: &str) -> Option<Duration> {
        let fallback = format!("using the default ({default})");
        let v = self.text(var, &fallback)?;
        match parse_seconds(&v) {
            Some(d) if !(positive && d.is_zero()) => Some(d),
            _ => {
                let accepted = if positive {
                    "expected a positive number of seconds, like 30 or 2.5"
                } else {
                    "expected a non-negative number of seconds, like 10 or 2.5"
                };
                self.warn(var, &v, accepted, &fallback);
                None
            }
        }
    }

    /// `None` when `CUPROF_ENABLED` does not turn tracing on: the other variables are not
    /// even looked at, and the library stays inert.
    fn parse(&mut self, start_unix: u64) -> Option<Parsed> {
        let off = "tracing is off";
        let enabled = match self.text(vars::ENABLED, off) {
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
        if !enabled {
            return None;
        }
        let mut s = Settings::default();

        let mut ranks_valid = true;
        if let Some(v) = self.text(vars::RANKS, off) {
            match parse_ranks(&v) {
                Ok(r) => s.ranks = Some(r),
                Err(why) => {
                    let accepted = format!("expected ranks like 0,3 or 0-3; {why}");
                    self.warn(vars::RANKS, &v, &accepted, off);
                    ranks_valid = false;
                }
            }
        }
        let rank = self.rank_info();

        s.dir = self
            .path(vars::DIR)
            .or_else(|| self.path(vars::CACHE_DIT_DIR));
        let name_fallback = format!("using the default (profile_{start_unix})");
        s.name = match self.text(vars::NAME, &name_fallback) {
            Some(n) if n.contains('/') || n == "." || n == ".." => {
                let accepted = "a file name prefix: no '/', not '.' or '..'";
                self.warn(vars::NAME, &n, accepted, &name_fallback);
                None
            }
            name => name,
        };
        s.run_id = self.text(vars::RUN_ID, "one is derived from the job");

        let act_fallback = "using the default (CPU,GPU)";
        if let Some(v) = self.text(vars::ACTIVITIES, act_fallback) {
            match Activities::parse(&v) {
                Ok(a) => s.activities = Some(a),
                Err(why) => {
                    let accepted =
                        format!("expected CPU, GPU, MEM separated by commas or spaces; {why}");
                    self.warn(vars::ACTIVITIES, &v, &accepted, act_fallback);
                }
            }
        }
        s.api = self.choice(vars::API, &API_NAMES, "using the default (filtered)");
        s.with_stack = self.switch(vars::WITH_STACK, false);
        s.queued = self.switch(vars::QUEUED, false);
        s.torch_ops = self.switch(vars::TORCH_OPS, true);
        s.record_shapes = self.switch(vars::RECORD_SHAPES, true);
        s.all_threads = self.switch(vars::ALL_THREADS, false);
        s.with_flops = self.switch(vars::WITH_FLOPS, false);
        s.with_modules = self.switch(vars::WITH_MODULES, false);
        s.tensorboard = self.switch(vars::TENSORBOARD, false);
        s.quiet = self.switch(vars::QUIET, false);

        s.steps = self.steps();
        let conflicts_at = self.warnings.len();

        s.cupti_path = self.path(vars::CUPTI_PATH);
        s.dump_buffers = self.path(vars::DUMP_BUFFERS);
        s.report_file = self.path(vars::REPORT_FILE);
        s.max_mem_events = self.integer(vars::MAX_MEM_EVENTS, 1, u64::MAX, "100000");
        let size_fallback = "using the default (2 MiB)";
        if let Some(v) = self.text(vars::BUFFER_SIZE, size_fallback) {
            match parse_size(&v) {
                Some(n) if (MIN_BUFFER_SIZE..=MAX_BUFFER_SIZE).contains(&n) => {
                    s.buffer_size = Some(n & !7);
                }
                _ => {
                    let accepted = "expected bytes from 1 MiB to 64 MiB, like 8388608, 8M or 8MiB";
                    self.warn(vars::BUFFER_SIZE, &v, accepted, size_fallback);
                }
            }
        }
        s.buffers = self
            .integer(vars::BUFFERS, 1, MAX_BUFFERS as u64, "32")
            .map(|n| n as usize);
        s.flush_ms = self.integer(vars::FLUSH_MS, 1, u64::MAX, "1000");
        s.gzip_level = self.integer(vars::GZIP_LEVEL, 0, 9, "1").map(|n| n as u32);
        s.shutdown_wait = self.seconds(
            vars::SHUTDOWN_WAIT,
            true,
            &seconds_text(DEFAULT_SHUTDOWN_WAIT),
        );
        Some(Parsed {
            settings: s,
            rank,
            ranks_valid,
            conflicts_at,
        })
    }

    /// The variables that choose what is recorded; which one wins is [`Settings::resolve`]'s.
    fn steps(&mut self) -> StepSettings {
        let wait = self.schedule_integer(vars::WAIT, 0, DEFAULT_WAIT);
        let warmup = self.schedule_integer(vars::WARMUP, 0, DEFAULT_WARMUP);
        let active = self.schedule_integer(vars::ACTIVE, 1, DEFAULT_ACTIVE);
        let repeat = self.schedule_integer(vars::REPEAT, 0, DEFAULT_REPEAT);
        let skip_first = self.schedule_integer(vars::SKIP_FIRST, 0, 0);
        let skip_first_wait = self.switch(vars::SKIP_FIRST_WAIT, false);
        let skip_first_wait = self
            .is_set(vars::SKIP_FIRST_WAIT)
            .then(|| skip_first_wait.unwrap_or(false));
        StepSettings {
            wait,
            warmup,
            active,
            repeat,
            skip_first,
            skip_first_wait,
            step_nvtx: self.text(vars::STEP_NVTX, "NVTX ranges do not mark steps"),
            capture_range: self.choice(vars::CAPTURE_RANGE, &RANGE_NAMES, "no capture range"),
            delay: self.seconds(vars::DELAY, false, "0: from CUDA initialisation"),
            duration: self.seconds(vars::DURATION, false, "0: until exit"),
            on_demand: self.switch(vars::ON_DEMAND, false),
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
