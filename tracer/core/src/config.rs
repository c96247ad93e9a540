//! The injected library's configuration, read from `CUPROF_*` environment variables
//! (documented, one row each, in README.md, "Configuration"), plus the naming of the files it writes and
//! the report file through which it tells the launcher what it wrote ([`report`]).
//!
//! Parsing is a pure function over a lookup ([`Config::from_lookup`], [`Config::from_vars`]);
//! only [`Config::from_env`] reads the real environment. An invalid value never stops the
//! program: it gives one warning line (naming the variable, the value, what is accepted and
//! the fallback) and the documented fallback: tracing off for `CUPROF_ENABLED` and
//! `CUPROF_RANKS`, the default for every other variable. An empty value counts as unset.
//!
//! Step source, when several are given (each conflict gives a warning naming both):
//! `CUPROF_STEP_NVTX` > `CUPROF_CAPTURE_RANGE` > `CUPROF_DELAY`/`CUPROF_DURATION` > a schedule
//! alone (`CUPROF_WAIT`/`WARMUP`/`ACTIVE`/`REPEAT`/`SKIP_FIRST`[`_WAIT`], steps from
//! `cuprof_step()` calls) > nothing (record from CUDA init to exit).

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::window::{Capture, RangeSource, Schedule};

/// The variables' names.
pub mod vars {
    pub const ENABLED: &str = "CUPROF_ENABLED";
    pub const DIR: &str = "CUPROF_DIR";
    /// cache-dit's directory variable, used when `CUPROF_DIR` is unset.
    pub const CACHE_DIT_DIR: &str = "CACHE_DIT_TORCH_PROFILER_DIR";
    pub const NAME: &str = "CUPROF_NAME";
    pub const ACTIVITIES: &str = "CUPROF_ACTIVITIES";
    pub const API: &str = "CUPROF_API";
    pub const WITH_STACK: &str = "CUPROF_WITH_STACK";
    pub const QUEUED: &str = "CUPROF_QUEUED";
    pub const TORCH_OPS: &str = "CUPROF_TORCH_OPS";
    pub const RECORD_SHAPES: &str = "CUPROF_RECORD_SHAPES";
    pub const WAIT: &str = "CUPROF_WAIT";
    pub const WARMUP: &str = "CUPROF_WARMUP";
    pub const ACTIVE: &str = "CUPROF_ACTIVE";
    pub const REPEAT: &str = "CUPROF_REPEAT";
    pub const SKIP_FIRST: &str = "CUPROF_SKIP_FIRST";
    pub const SKIP_FIRST_WAIT: &str = "CUPROF_SKIP_FIRST_WAIT";
    pub const STEP_NVTX: &str = "CUPROF_STEP_NVTX";
    pub const CAPTURE_RANGE: &str = "CUPROF_CAPTURE_RANGE";
    pub const DELAY: &str = "CUPROF_DELAY";
    pub const DURATION: &str = "CUPROF_DURATION";
    pub const RANKS: &str = "CUPROF_RANKS";
    pub const CUPTI_PATH: &str = "CUPROF_CUPTI_PATH";
    pub const MAX_MEM_EVENTS: &str = "CUPROF_MAX_MEM_EVENTS";
    pub const DUMP_BUFFERS: &str = "CUPROF_DUMP_BUFFERS";
    pub const BUFFER_SIZE: &str = "CUPROF_BUFFER_SIZE";
    pub const BUFFERS: &str = "CUPROF_BUFFERS";
    pub const FLUSH_MS: &str = "CUPROF_FLUSH_MS";
    pub const GZIP_LEVEL: &str = "CUPROF_GZIP_LEVEL";
    pub const REPORT_FILE: &str = "CUPROF_REPORT_FILE";
    pub const QUIET: &str = "CUPROF_QUIET";

    /// Rank, in order of preference (torchrun, Slurm, Open MPI, MPICH/PMI).
    pub const RANK_VARS: [&str; 4] = ["RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"];
    pub const WORLD_SIZE_VARS: [&str; 4] = [
        "WORLD_SIZE",
        "SLURM_NTASKS",
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
    ];
    pub const LOCAL_RANK_VARS: [&str; 3] =
        ["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"];
}

pub const DEFAULT_DIR: &str = "/tmp/cache_dit_profiles";
pub const DEFAULT_MAX_MEM_EVENTS: u64 = 100_000;
/// 2 MiB: the most one buffer holds before CUPTI hands it back. With CUPTI 13's per-thread
/// buffers every CUDA thread holds one, but a buffer costs only the pages CUPTI wrote; at 1 M
/// records/s, 1 to 16 MiB lose nothing (BENCHMARKS.md, "Buffer size").
pub const DEFAULT_BUFFER_SIZE: usize = 2 << 20;
pub const MIN_BUFFER_SIZE: usize = 1 << 20;
pub const MAX_BUFFER_SIZE: usize = 64 << 20;
/// The pool's bound on recorded data, in buffers: 32 x 2 MiB = 64 MiB, reclaimed (flushed) from
/// half of it; buffers out at once are capped at 64 per unit (2,048 threads by default). 1,024
/// threads launching at once lose nothing and add under 128 MiB of RSS (BENCHMARKS.md,
/// "Threads").
pub const DEFAULT_BUFFERS: usize = 32;
pub const MAX_BUFFERS: usize = 1024;
pub const DEFAULT_FLUSH_MS: u64 = 1000;
pub const DEFAULT_GZIP_LEVEL: u32 = 1;
/// Schedule defaults when some but not all schedule variables are given.
pub const DEFAULT_WAIT: u64 = 0;
pub const DEFAULT_WARMUP: u64 = 0;
pub const DEFAULT_ACTIVE: u64 = 1;
/// Also the default number of capture ranges (like `nsys`, which stops after the first).
pub const DEFAULT_REPEAT: u64 = 1;

/// Which activity groups are traced (cache-dit's `--profile-activities CPU GPU MEM`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activities {
    /// Runtime and driver API calls, NVTX ranges.
    pub cpu: bool,
    /// Kernels, memcpy, memset, synchronisation.
    pub gpu: bool,
    /// Device memory allocations and frees (the memory snapshot).
    pub mem: bool,
}

impl Default for Activities {
    fn default() -> Activities {
        Activities {
            cpu: true,
            gpu: true,
            mem: false,
        }
    }
}

impl Activities {
    /// A list of `CPU`, `GPU` (alias `CUDA`), `MEM` separated by commas and/or whitespace,
    /// case-insensitive. The error names the offending item.
    pub fn parse(list: &str) -> Result<Activities, String> {
        let mut a = Activities {
            cpu: false,
            gpu: false,
            mem: false,
        };
        let mut any = false;
        for item in list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
        {
            match item.to_ascii_uppercase().as_str() {
                "CPU" => a.cpu = true,
                "GPU" | "CUDA" => a.gpu = true,
                "MEM" | "MEMORY" => a.mem = true,
                _ => return Err(format!("{item:?} is not one of CPU, GPU, MEM")),
            }
            any = true;
        }
        if !any {
            return Err("the list is empty".into());
        }
        Ok(a)
    }

    /// The canonical form, e.g. `CPU,GPU`.
    pub fn to_list(&self) -> String {
        let mut v = Vec::new();
        for (on, name) in [(self.cpu, "CPU"), (self.gpu, "GPU"), (self.mem, "MEM")] {
            if on {
                v.push(name);
            }
        }
        v.join(",")
    }
}

/// Which runtime/driver API records are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiFilter {
    /// Only launches, graph launches, copies, memsets, synchronisations, allocations and
    /// event record/wait: what links CPU to GPU work.
    #[default]
    Filtered,
    /// Every runtime and driver API call.
    All,
    /// The filtered runtime calls only, no driver API records: cheapest for programs that make
    /// many driver calls (cuBLAS, cuDNN), at the cost of the flows from direct driver launches
    /// (Triton kernels).
    Runtime,
}

/// This process's place in a distributed job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankInfo {
    pub rank: u32,
    pub world_size: u32,
    /// The rank within the node (selects the device).
    pub local_rank: u32,
}

impl Default for RankInfo {
    fn default() -> RankInfo {
        RankInfo {
            rank: 0,
            world_size: 1,
            local_rank: 0,
        }
    }
}

/// Everything the library reads from its environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `CUPROF_ENABLED`: false makes the library inert (see also [`Config::traces_this_process`]).
    pub enabled: bool,
    /// `CUPROF_DIR`, else `CACHE_DIT_TORCH_PROFILER_DIR`, else [`DEFAULT_DIR`].
    pub dir: PathBuf,
    /// `CUPROF_NAME`, else `profile_UNIXTIME` (process start).
    pub name: String,
    pub activities: Activities,
    pub api: ApiFilter,
    pub with_stack: bool,
    /// `CUPROF_QUEUED`: ask CUPTI for kernels' queued/submitted times (Kineto's `queued`
    /// argument); it costs time on every launch, so it is off by default.
    pub queued: bool,
    /// `CUPROF_TORCH_OPS`: record PyTorch operators in a PyTorch process (with CPU activity).
    pub torch_ops: bool,
    /// `CUPROF_RECORD_SHAPES`: operators carry their input shapes (`Input Dims`).
    pub record_shapes: bool,
    /// The step source and window.
    pub capture: Capture,
    /// With [`Capture::Steps`]: the NVTX pattern whose range starts are the steps; `None`:
    /// steps are `cuprof_step()` calls. Always `None` with the other captures.
    pub step_nvtx: Option<String>,
    /// `CUPROF_RANKS`: only these ranks trace (`None` = all).
    pub ranks: Option<Vec<u32>>,
    pub rank: RankInfo,
    /// `CUPROF_CUPTI_PATH`: an explicit libcupti to load.
    pub cupti_path: Option<PathBuf>,
    pub max_mem_events: u64,
    /// `CUPROF_DUMP_BUFFERS`: also write raw CUPTI buffers into this directory (debugging).
    pub dump_buffers: Option<PathBuf>,
    /// Bytes per CUPTI activity buffer (a multiple of 8).
    pub buffer_size: usize,
    /// The activity buffer pool's bound on recorded data, in buffers of `buffer_size` bytes
    /// (`buffers * buffer_size` bytes of records; up to 64 buffers out per unit).
    pub buffers: usize,
    /// Interval between sync-flushes of the trace file being written.
    pub flush_interval: Duration,
    pub gzip_level: u32,
    /// `CUPROF_REPORT_FILE` (set by the launcher): append one [`report::ReportLine`] per file
    /// written.
    pub report_file: Option<PathBuf>,
    /// `CUPROF_QUIET`: no informational stderr lines (warnings still print).
    pub quiet: bool,
}

impl Default for Config {
    /// The inert configuration (what an unset `CUPROF_ENABLED` gives), defaults elsewhere.
    fn default() -> Config {
        Config {
            enabled: false,
            dir: PathBuf::from(DEFAULT_DIR),
            name: String::from("profile"),
            activities: Activities::default(),
            api: ApiFilter::default(),
            with_stack: false,
            queued: false,
            torch_ops: true,
            record_shapes: true,
            capture: Capture::WholeRun,
            step_nvtx: None,
            ranks: None,
            rank: RankInfo::default(),
            cupti_path: None,
            max_mem_events: DEFAULT_MAX_MEM_EVENTS,
            dump_buffers: None,
            buffer_size: DEFAULT_BUFFER_SIZE,
            buffers: DEFAULT_BUFFERS,
            flush_interval: Duration::from_millis(DEFAULT_FLUSH_MS),
            gzip_level: DEFAULT_GZIP_LEVEL,
            report_file: None,
            quiet: false,
        }
    }
}

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

    /// Tracing is on and this process's rank is among `CUPROF_RANKS` (if given).
    pub fn traces_this_process(&self) -> bool {
        self.enabled
            && self
                .ranks
                .as_ref()
                .is_none_or(|r| r.contains(&self.rank.rank))
    }

    /// The trace file name for a cycle: with a `-cycleC` suffix when the capture can write
    /// more than one cycle.
    pub fn trace_file_name(&self, cycle: u32) -> String {
        let cycle = self.capture.multi_cycle().then_some(cycle);
        trace_file_name(&self.name, self.rank.rank, cycle)
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

/// `NAME-rankR.trace.json.gz`, or `NAME-rankR-cycleC.trace.json.gz` with a cycle.
pub fn trace_file_name(name: &str, rank: u32, cycle: Option<u32>) -> String {
    match cycle {
        Some(c) => format!("{name}-rank{rank}-cycle{c}.trace.json.gz"),
        None => format!("{name}-rank{rank}.trace.json.gz"),
    }
}

/// `NAME-rankR-memory-UNIXTIME.pickle` (cache-dit's memory snapshot name).
pub fn memory_file_name(name: &str, rank: u32, unix_time: u64) -> String {
    format!("{name}-rank{rank}-memory-{unix_time}.pickle")
}

/// A file created by [`unique_path`].
#[derive(Debug)]
pub struct UniqueFile {
    /// Opened for writing, new and empty.
    pub file: File,
    pub path: PathBuf,
    /// The wanted name was taken: the pid (and maybe a counter) was added. Say so.
    pub pid_added: bool,
}

impl UniqueFile {
    /// The line to tell the user when the pid was added (`None` otherwise).
    pub fn renamed_note(&self, wanted: &str) -> Option<String> {
        self.pid_added.then(|| {
            format!(
                "{wanted} already exists (another process with the same rank?): wrote {} instead",
                self.path.display()
            )
        })
    }
}

/// Suffixes the pid goes in front of.
const KNOWN_SUFFIXES: [&str; 3] = [".trace.json.gz", ".trace.json", ".pickle"];

/// `file_name` with `-pidPID` (and `-N` for N >= 2) inserted before its suffix
/// (`.trace.json.gz`, `.pickle`, else the last extension).
fn with_pid(file_name: &str, pid: u32, n: u32) -> String {
    let cut = KNOWN_SUFFIXES
        .iter()
        .find(|s| file_name.len() > s.len() && file_name.ends_with(*s))
        .map(|s| file_name.len() - s.len())
        .or_else(|| file_name.rfind('.').filter(|&i| i > 0))
        .unwrap_or(file_name.len());
    let (stem, suffix) = file_name.split_at(cut);
    if n <= 1 {
        format!("{stem}-pid{pid}{suffix}")
    } else {
        format!("{stem}-pid{pid}-{n}{suffix}")
    }
}

/// Create `dir/file_name` (and `dir`, if missing), never overwriting: when the name is taken,
/// `NAME-rankR-pidPID.trace.json.gz` (then `...-pidPID-2...`, `-3`...). Race-free: each
/// candidate is created with `O_EXCL` (`create_new`), so two processes never get one file.
pub fn unique_path(dir: &Path, file_name: &str, pid: u32) -> io::Result<UniqueFile> {
    std::fs::create_dir_all(dir)?;
    let create = |name: &str| {
        let path = dir.join(name);
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map(|file| (file, path))
    };
    match create(file_name) {
        Ok((file, path)) => {
            return Ok(UniqueFile {
                file,
                path,
                pid_added: false,
            })
        }
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        Err(_) => {}
    }
    for n in 1..=1000 {
        match create(&with_pid(file_name, pid, n)) {
            Ok((file, path)) => {
                return Ok(UniqueFile {
                    file,
                    path,
                    pid_added: true,
                })
            }
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            Err(_) => {}
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{}: 1000 names with pid {pid} are all taken",
            dir.join(file_name).display()
        ),
    ))
}

/// The report file: how the library tells the launcher what it wrote.
///
/// One line per record, UTF-8, fields separated by one tab, ending in `\n`:
///
/// ```text
/// file<TAB>PATH<TAB>EVENTS<TAB>BYTES
/// note<TAB>TEXT
/// ```
///
/// `PATH` is the absolute path of a file written (it may itself contain tabs: the last two
/// fields are split off from the right); `EVENTS` the number of trace events in it (records,
/// for a memory snapshot), `BYTES` its size. `TEXT` is a message for the user (why nothing
/// was traced, a renamed file); tabs and newlines in it become spaces. Each line is appended
/// with one `write` on an `O_APPEND` file, so lines from several processes (ranks) never
/// interleave. Lines that do not parse are ignored by the reader.
pub mod report {
    use std::fs::OpenOptions;
    use std::io::{self, Write};
    use std::path::{Path, PathBuf};

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum ReportLine {
        File {
            path: PathBuf,
            events: u64,
            bytes: u64,
        },
        Note(String),
    }

    impl ReportLine {
        /// The line, with its `\n`.
        pub fn to_line(&self) -> String {
            let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
            match self {
                ReportLine::File {
                    path,
                    events,
                    bytes,
                } => {
                    let path = path.to_string_lossy().replace(['\n', '\r'], "?");
                    format!("file\t{path}\t{events}\t{bytes}\n")
                }
                ReportLine::Note(text) => format!("note\t{}\n", clean(text)),
            }
        }

        /// One line (with or without its `\n`); `None` if it is not a report line.
        pub fn parse(line: &str) -> Option<ReportLine> {
            let line = line.strip_suffix('\n').unwrap_or(line);
            if let Some(text) = line.strip_prefix("note\t") {
                return Some(ReportLine::Note(text.to_owned()));
            }
            let rest = line.strip_prefix("file\t")?;
            let mut it = rest.rsplitn(3, '\t');
            let bytes = it.next()?.parse().ok()?;
            let events = it.next()?.parse().ok()?;
            let path = it.next().filter(|p| !p.is_empty())?;
            Some(ReportLine::File {
                path: PathBuf::from(path),
                events,
                bytes,
            })
        }
    }

    /// Append one line to the report file (created if missing).
    pub fn append(report_file: &Path, line: &ReportLine) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .append(true)
            .create(true)
            .open(report_file)?;
        f.write_all(line.to_line().as_bytes())
    }

    /// Every report line of `text`, in order, skipping what does not parse.
    pub fn parse_all(text: &str) -> Vec<ReportLine> {
        text.lines().filter_map(ReportLine::parse).collect()
    }

    /// Read and parse a report file.
    pub fn read(report_file: &Path) -> io::Result<Vec<ReportLine>> {
        let bytes = std::fs::read(report_file)?;
        Ok(parse_all(&String::from_utf8_lossy(&bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::report::ReportLine;
    use super::*;

    const START: u64 = 1_700_000_000;

    fn parse(vars: &[(&str, &str)]) -> (Config, Vec<String>) {
        Config::from_vars(vars.iter().copied(), START)
    }

    fn on(extra: &[(&str, &str)]) -> (Config, Vec<String>) {
        let mut v = vec![("CUPROF_ENABLED", "1")];
        v.extend_from_slice(extra);
        parse(&v)
    }

    #[test]
    fn api_choices_by_name_ignoring_case() {
        for (v, want) in [
            ("filtered", ApiFilter::Filtered),
            ("Runtime", ApiFilter::Runtime),
            ("ALL", ApiFilter::All),
        ] {
            let (c, w) = on(&[("CUPROF_API", v)]);
            assert!(w.is_empty(), "{w:#?}");
            assert_eq!(c.api, want, "{v}");
        }
    }

    fn one_warning(w: &[String], needles: &[&str]) {
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(!w[0].contains('\n'));
        assert!(w[0].starts_with("cuprof: "), "{}", w[0]);
        for n in needles {
            assert!(w[0].contains(n), "{:?} lacks {n:?}", w[0]);
        }
    }

    #[test]
    fn enabled_values() {
        for v in ["1", "true", "YES", "on", " 1 "] {
            let (c, w) = parse(&[("CUPROF_ENABLED", v)]);
            assert!(c.enabled && c.traces_this_process(), "{v}");
            assert!(w.is_empty());
        }
        for v in ["0", "false", "no", "off", ""] {
            let (c, w) = parse(&[("CUPROF_ENABLED", v)]);
            assert!(!c.enabled, "{v}");
            assert!(w.is_empty());
        }
        let (c, w) = parse(&[]);
        assert_eq!(c, Config::default());
        assert!(w.is_empty());
        let (c, w) = parse(&[("CUPROF_ENABLED", "maybe")]);
        assert!(!c.enabled);
        one_warning(
            &w,
            &[
                "CUPROF_ENABLED",
                "\"maybe\"",
                "1/true/yes",
                "tracing is off",
            ],
        );
        // Disabled: the other variables are not looked at, even invalid ones.
        let (_, w) = parse(&[("CUPROF_WAIT", "abc")]);
        assert!(w.is_empty());
    }

    #[test]
    fn defaults_when_enabled() {
        let (c, w) = on(&[]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.dir, PathBuf::from("/tmp/cache_dit_profiles"));
        assert_eq!(c.name, "profile_1700000000");
        assert_eq!(
            c.activities,
            Activities {
                cpu: true,
                gpu: true,
                mem: false
            }
        );
        assert_eq!(c.api, ApiFilter::Filtered);
        assert!(!c.with_stack && !c.quiet);
        assert!(c.torch_ops && c.record_shapes);
        assert_eq!(c.capture, Capture::WholeRun);
        assert_eq!(c.step_nvtx, None);
        assert_eq!(
            c.rank,
            RankInfo {
                rank: 0,
                world_size: 1,
                local_rank: 0
            }
        );
        assert_eq!(c.max_mem_events, 100_000);
        assert_eq!(c.buffer_size, 2 << 20);
        assert_eq!(c.buffers, 32);
        assert_eq!(c.flush_interval, Duration::from_secs(1));
        assert_eq!(c.gzip_level, 1);
        assert_eq!(
            (&c.cupti_path, &c.dump_buffers, &c.report_file),
            (&None, &None, &None)
        );
        assert_eq!(
            c.trace_file_name(1),
            "profile_1700000000-rank0.trace.json.gz"
        );
    }

    #[test]
    fn every_variable_valid() {
        let (c, w) = on(&[
            ("CUPROF_DIR", "/data/prof"),
            ("CACHE_DIT_TORCH_PROFILER_DIR", "/ignored"),
            ("CUPROF_NAME", "run1"),
            ("CUPROF_ACTIVITIES", "cpu gpu,MEM"),
            ("CUPROF_API", "ALL"),
            ("CUPROF_WITH_STACK", "yes"),
            ("CUPROF_QUIET", "1"),
            ("CUPROF_WAIT", "1"),
            ("CUPROF_WARMUP", "2"),
            ("CUPROF_ACTIVE", "3"),
            ("CUPROF_REPEAT", "4"),
            ("CUPROF_SKIP_FIRST", "5"),
            ("CUPROF_SKIP_FIRST_WAIT", "1"),
            ("CUPROF_STEP_NVTX", "ProfilerStep*"),
            ("CUPROF_RANKS", "0,3"),
            ("CUPROF_CUPTI_PATH", "/opt/cuda/libcupti.so.12"),
            ("CUPROF_MAX_MEM_EVENTS", "500"),
            ("CUPROF_DUMP_BUFFERS", "/tmp/dump"),
            ("CUPROF_BUFFER_SIZE", "4MiB"),
            ("CUPROF_BUFFERS", "16"),
            ("CUPROF_FLUSH_MS", "250"),
            ("CUPROF_GZIP_LEVEL", "6"),
            ("CUPROF_REPORT_FILE", "/tmp/report"),
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "1"),
        ]);
        assert!(w.is_empty(), "{w:#?}");
        assert_eq!(c.dir, PathBuf::from("/data/prof"));
        assert_eq!(c.name, "run1");
        assert_eq!(
            c.activities,
            Activities {
                cpu: true,
                gpu: true,
                mem: true
            }
        );
        assert_eq!(c.api, ApiFilter::All);
        assert!(c.with_stack && c.quiet);
        let s = Schedule::new(1, 2, 3)
            .unwrap()
            .with_repeat(4)
            .with_skip_first(5)
            .with_skip_first_wait(true);
        assert_eq!(c.capture, Capture::Steps(s));
        assert_eq!(c.step_nvtx.as_deref(), Some("ProfilerStep*"));
        assert_eq!(c.ranks, Some(vec![0, 3]));
        assert_eq!(
            c.rank,
            RankInfo {
                rank: 3,
                world_size: 4,
                local_rank: 1
            }
        );
        assert!(c.traces_this_process());
        assert_eq!(
            c.cupti_path,
            Some(PathBuf::from("/opt/cuda/libcupti.so.12"))
        );
        assert_eq!(c.max_mem_events, 500);
        assert_eq!(c.dump_buffers, Some(PathBuf::from("/tmp/dump")));
        assert_eq!(c.buffer_size, 4 << 20);
        assert_eq!(c.buffers, 16);
        assert_eq!(c.flush_interval, Duration::from_millis(250));
        assert_eq!(c.gzip_level, 6);
        assert_eq!(c.report_file, Some(PathBuf::from("/tmp/report")));
        assert_eq!(c.trace_file_name(2), "run1-rank3-cycle2.trace.json.gz");
    }

    #[test]
    fn operator_switches_turn_off() {
        let (c, w) = on(&[("CUPROF_TORCH_OPS", "0"), ("CUPROF_RECORD_SHAPES", "off")]);
        assert!(w.is_empty(), "{w:?}");
        assert!(!c.torch_ops && !c.record_shapes);
    }

    #[test]
    fn directory_fallbacks() {
        let (c, _) = on(&[("CACHE_DIT_TORCH_PROFILER_DIR", "/cd")]);
        assert_eq!(c.dir, PathBuf::from("/cd"));
        let (c, _) = on(&[("CUPROF_DIR", ""), ("CACHE_DIT_TORCH_PROFILER_DIR", "/cd")]);
        assert_eq!(c.dir, PathBuf::from("/cd"));
    }

    #[test]
    fn invalid_values_warn_and_fall_back() {
        // (variable, value, words the warning must hold, check of the fallback)
        type Check = fn(&Config) -> bool;
        let cases: &[(&str, &str, &[&str], Check)] = &[
            (
                "CUPROF_WAIT",
                "abc",
                &["non-negative integer", "default (0)"],
                |c| c.capture == Capture::Steps(Schedule::new(0, 0, 1).unwrap().with_repeat(1)),
            ),
            (
                "CUPROF_WARMUP",
                "-1",
                &["non-negative integer"],
                |c| matches!(c.capture, Capture::Steps(s) if s.warmup() == 0),
            ),
            (
                "CUPROF_ACTIVE",
                "0",
                &["positive integer", "default (1)"],
                |c| matches!(c.capture, Capture::Steps(s) if s.active() == 1),
            ),
            (
                "CUPROF_REPEAT",
                "x",
                &["default (1)"],
                |c| matches!(c.capture, Capture::Steps(s) if s.repeat() == 1),
            ),
            (
                "CUPROF_SKIP_FIRST",
                "1.5",
                &["non-negative integer"],
                |c| matches!(c.capture, Capture::Steps(s) if s.skip_first() == 0),
            ),
            (
                "CUPROF_ACTIVITIES",
                "CPU,GPX",
                &["\"GPX\"", "CPU, GPU, MEM", "default (CPU,GPU)"],
                |c| c.activities == Activities::default(),
            ),
            (
                "CUPROF_ACTIVITIES",
                ",",
                &["empty", "default (CPU,GPU)"],
                |c| c.activities == Activities::default(),
            ),
            ("CUPROF_API", "some", &["filtered, runtime or all"], |c| {
                c.api == ApiFilter::Filtered
            }),
            ("CUPROF_WITH_STACK", "maybe", &["1/true/yes/on"], |c| {
                !c.with_stack
            }),
            ("CUPROF_QUIET", "2", &["default (off)"], |c| !c.quiet),
            ("CUPROF_TORCH_OPS", "sometimes", &["default (on)"], |c| {
                c.torch_ops
            }),
            ("CUPROF_RECORD_SHAPES", "2", &["default (on)"], |c| {
                c.record_shapes
            }),
            (
                "CUPROF_CAPTURE_RANGE",
                "nvtx",
                &["cudaProfilerApi or cuprof", "no capture range"],
                |c| c.capture == Capture::WholeRun,
            ),
            ("CUPROF_DELAY", "soon", &["seconds"], |c| {
                c.capture == Capture::WholeRun
            }),
            (
                "CUPROF_DURATION",
                "-3",
                &["non-negative number of seconds"],
                |c| c.capture == Capture::WholeRun,
            ),
            ("CUPROF_DURATION", "inf", &["seconds"], |c| {
                c.capture == Capture::WholeRun
            }),
            (
                "CUPROF_RANKS",
                "0,x",
                &["\"x\"", "0,3", "tracing is off"],
                |c| !c.enabled && !c.traces_this_process(),
            ),
            (
                "CUPROF_RANKS",
                "3-1",
                &["empty range", "tracing is off"],
                |c| !c.traces_this_process(),
            ),
            (
                "CUPROF_NAME",
                "a/b",
                &["no '/'", "default (profile_1700000000)"],
                |c| c.name == "profile_1700000000",
            ),
            (
                "CUPROF_MAX_MEM_EVENTS",
                "0",
                &["positive integer", "default (100000)"],
                |c| c.max_mem_events == 100_000,
            ),
            (
                "CUPROF_BUFFER_SIZE",
                "128M",
                &["1 MiB to 64 MiB", "default (2 MiB)"],
                |c| c.buffer_size == 2 << 20,
            ),
            ("CUPROF_BUFFER_SIZE", "lots", &["1 MiB to 64 MiB"], |c| {
                c.buffer_size == 2 << 20
            }),
            (
                "CUPROF_BUFFERS",
                "0",
                &["from 1 to 1024", "default (32)"],
                |c| c.buffers == 32,
            ),
            (
                "CUPROF_FLUSH_MS",
                "0",
                &["positive integer", "default (1000)"],
                |c| c.flush_interval == Duration::from_secs(1),
            ),
            (
                "CUPROF_GZIP_LEVEL",
                "10",
                &["from 0 to 9", "default (1)"],
                |c| c.gzip_level == 1,
            ),
            ("RANK", "zero", &["RANK", "ignoring it"], |c| {
                c.rank.rank == 0
            }),
            ("WORLD_SIZE", "0", &["positive integer"], |c| {
                c.rank.world_size == 1
            }),
        ];
        for (var, value, needles, check) in cases {
            let (c, w) = on(&[(var, value)]);
            let mut needles = needles.to_vec();
            needles.push(var);
            let quoted = format!("{value:?}");
            needles.push(&quoted);
            one_warning(&w, &needles);
            assert!(check(&c), "{var}={value}: {c:#?}");
        }
    }

    #[test]
    fn non_utf8_value_is_invalid() {
        use std::os::unix::ffi::OsStrExt;
        let bad = OsStr::from_bytes(b"\xff1");
        let (c, w) = Config::from_vars(
            [
                (OsStr::new("CUPROF_ENABLED"), OsStr::new("1")),
                (OsStr::new("CUPROF_WAIT"), bad),
            ],
            START,
        );
        one_warning(&w, &["CUPROF_WAIT", "UTF-8"]);
        assert!(c.enabled);
        // A path may be any bytes.
        let (c, w) = Config::from_vars(
            [
                (OsStr::new("CUPROF_ENABLED"), OsStr::new("1")),
                (OsStr::new("CUPROF_DIR"), bad),
            ],
            START,
        );
        assert!(w.is_empty());
        assert_eq!(c.dir.as_os_str(), bad);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8388608"), Some(8 << 20));
        assert_eq!(parse_size("8M"), Some(8 << 20));
        assert_eq!(parse_size("8mib"), Some(8 << 20));
        assert_eq!(parse_size("2048K"), Some(2 << 20));
        assert_eq!(parse_size("1048576B"), Some(1 << 20));
        assert_eq!(parse_size("M"), None);
        let (c, _) = on(&[("CUPROF_BUFFER_SIZE", "1048580")]);
        assert_eq!(c.buffer_size, 1048576, "rounded down to a multiple of 8");
    }

    #[test]
    fn step_sources() {
        let sched = |w, u, a, r| Capture::Steps(Schedule::new(w, u, a).unwrap().with_repeat(r));
        // A schedule alone: steps from cuprof_step().
        let (c, w) = on(&[("CUPROF_ACTIVE", "3")]);
        assert!(w.is_empty());
        assert_eq!(c.capture, sched(0, 0, 3, 1));
        assert_eq!(c.step_nvtx, None);
        let (c, _) = on(&[("CUPROF_REPEAT", "0")]);
        assert_eq!(c.capture, sched(0, 0, 1, 0));
        // NVTX with the default schedule.
        let (c, w) = on(&[("CUPROF_STEP_NVTX", "train_step")]);
        assert!(w.is_empty());
        assert_eq!(c.capture, sched(0, 0, 1, 1));
        assert_eq!(c.step_nvtx.as_deref(), Some("train_step"));
        // Capture ranges.
        let (c, w) = on(&[("CUPROF_CAPTURE_RANGE", "cudaProfilerApi")]);
        assert!(w.is_empty());
        assert_eq!(
            c.capture,
            Capture::Range {
                source: RangeSource::CudaProfilerApi,
                repeat: 1
            }
        );
        let (c, w) = on(&[("CUPROF_CAPTURE_RANGE", "CUPROF"), ("CUPROF_REPEAT", "0")]);
        assert!(w.is_empty());
        assert_eq!(
            c.capture,
            Capture::Range {
                source: RangeSource::Cuprof,
                repeat: 0
            }
        );
        assert_eq!(
            c.trace_file_name(3),
            "profile_1700000000-rank0-cycle3.trace.json.gz"
        );
        // Time.
        let (c, w) = on(&[("CUPROF_DELAY", "2.5"), ("CUPROF_DURATION", "10")]);
        assert!(w.is_empty());
        assert_eq!(
            c.capture,
            Capture::Time {
                delay: Duration::from_millis(2500),
                duration: Some(Duration::from_secs(10))
            }
        );
        let (c, _) = on(&[("CUPROF_DELAY", "5"), ("CUPROF_DURATION", "0")]);
        assert_eq!(
            c.capture,
            Capture::Time {
                delay: Duration::from_secs(5),
                duration: None
            }
        );
        let (c, _) = on(&[("CUPROF_DURATION", "3")]);
        assert_eq!(
            c.capture,
            Capture::Time {
                delay: Duration::ZERO,
                duration: Some(Duration::from_secs(3))
            }
        );
        assert_eq!(
            c.trace_file_name(1),
            "profile_1700000000-rank0.trace.json.gz"
        );
    }

    #[test]
    fn conflicting_step_sources() {
        let (c, w) = on(&[("CUPROF_STEP_NVTX", "step"), ("CUPROF_DELAY", "3")]);
        one_warning(
            &w,
            &["CUPROF_STEP_NVTX", "CUPROF_DELAY", "CUPROF_STEP_NVTX wins"],
        );
        assert!(matches!(c.capture, Capture::Steps(_)));
        let (c, w) = on(&[
            ("CUPROF_STEP_NVTX", "step"),
            ("CUPROF_CAPTURE_RANGE", "cuprof"),
        ]);
        one_warning(&w, &["CUPROF_CAPTURE_RANGE", "CUPROF_STEP_NVTX wins"]);
        assert_eq!(c.step_nvtx.as_deref(), Some("step"));
        let (c, w) = on(&[("CUPROF_CAPTURE_RANGE", "cuprof"), ("CUPROF_DURATION", "3")]);
        one_warning(&w, &["CUPROF_CAPTURE_RANGE wins", "CUPROF_DURATION"]);
        assert!(matches!(c.capture, Capture::Range { .. }));
        let (c, w) = on(&[
            ("CUPROF_CAPTURE_RANGE", "cuprof"),
            ("CUPROF_ACTIVE", "3"),
            ("CUPROF_REPEAT", "2"),
        ]);
        one_warning(&w, &["CUPROF_ACTIVE is ignored", "CUPROF_CAPTURE_RANGE"]);
        assert_eq!(
            c.capture,
            Capture::Range {
                source: RangeSource::Cuprof,
                repeat: 2
            }
        );
        let (c, w) = on(&[
            ("CUPROF_DELAY", "1"),
            ("CUPROF_DURATION", "2"),
            ("CUPROF_ACTIVE", "3"),
        ]);
        one_warning(
            &w,
            &[
                "CUPROF_DELAY/CUPROF_DURATION wins",
                "CUPROF_ACTIVE is ignored",
            ],
        );
        assert!(matches!(c.capture, Capture::Time { .. }));
    }

    #[test]
    fn rank_detection() {
        let rank = |v: &[(&str, &str)]| on(v).0.rank;
        assert_eq!(
            rank(&[
                ("SLURM_PROCID", "5"),
                ("SLURM_NTASKS", "8"),
                ("SLURM_LOCALID", "1")
            ]),
            RankInfo {
                rank: 5,
                world_size: 8,
                local_rank: 1
            }
        );
        assert_eq!(
            rank(&[
                ("OMPI_COMM_WORLD_RANK", "2"),
                ("OMPI_COMM_WORLD_SIZE", "4"),
                ("OMPI_COMM_WORLD_LOCAL_RANK", "0")
            ]),
            RankInfo {
                rank: 2,
                world_size: 4,
                local_rank: 0
            }
        );
        assert_eq!(
            rank(&[("PMI_RANK", "7"), ("PMI_SIZE", "9")]),
            RankInfo {
                rank: 7,
                world_size: 9,
                local_rank: 7
            }
        );
        // RANK wins over the launcher-specific ones.
        assert_eq!(
            rank(&[
                ("RANK", "1"),
                ("SLURM_PROCID", "5"),
                ("WORLD_SIZE", "2"),
                ("SLURM_NTASKS", "8")
            ]),
            RankInfo {
                rank: 1,
                world_size: 2,
                local_rank: 1
            }
        );
        // An invalid one is skipped (with a warning) for the next.
        let (c, w) = on(&[("RANK", "x"), ("SLURM_PROCID", "4")]);
        assert_eq!(c.rank.rank, 4);
        one_warning(&w, &["RANK=\"x\""]);
    }

    #[test]
    fn rank_filter() {
        let (c, _) = on(&[("CUPROF_RANKS", "0,3"), ("RANK", "1")]);
        assert!(c.enabled && !c.traces_this_process());
        let (c, _) = on(&[("CUPROF_RANKS", "0-2, 5"), ("RANK", "2")]);
        assert_eq!(c.ranks, Some(vec![0, 1, 2, 5]));
        assert!(c.traces_this_process());
        assert_eq!(parse_ranks("3,1,1"), Ok(vec![1, 3]));
        assert!(parse_ranks("").is_err());
        assert!(parse_ranks("-1").is_err());
    }

    #[test]
    fn activities_parse() {
        assert_eq!(
            Activities::parse("CPU"),
            Ok(Activities {
                cpu: true,
                gpu: false,
                mem: false
            })
        );
        assert_eq!(
            Activities::parse(" gpu  mem "),
            Ok(Activities {
                cpu: false,
                gpu: true,
                mem: true
            })
        );
        assert_eq!(
            Activities::parse("CUDA,cpu").map(|a| a.to_list()),
            Ok("CPU,GPU".to_owned())
        );
        assert!(Activities::parse("CPU;GPU").is_err());
    }

    #[test]
    fn file_names() {
        assert_eq!(trace_file_name("run", 0, None), "run-rank0.trace.json.gz");
        assert_eq!(
            trace_file_name("run", 12, Some(3)),
            "run-rank12-cycle3.trace.json.gz"
        );
        assert_eq!(
            memory_file_name("run", 1, 1_700_000_123),
            "run-rank1-memory-1700000123.pickle"
        );
        assert_eq!(
            with_pid("run-rank0.trace.json.gz", 42, 1),
            "run-rank0-pid42.trace.json.gz"
        );
        assert_eq!(
            with_pid("run-rank0-cycle2.trace.json.gz", 42, 3),
            "run-rank0-cycle2-pid42-3.trace.json.gz"
        );
        assert_eq!(
            with_pid("a.b-rank1-memory-5.pickle", 7, 1),
            "a.b-rank1-memory-5-pid7.pickle"
        );
        assert_eq!(with_pid("x.bin", 7, 1), "x-pid7.bin");
        assert_eq!(with_pid("noext", 7, 1), "noext-pid7");
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cuprof-config-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn unique_path_never_overwrites() {
        use std::io::Write;
        let root = temp_dir("unique");
        let dir = root.join("created/if/missing");
        let name = trace_file_name("run", 0, None);
        let mut a = unique_path(&dir, &name, 100).unwrap();
        assert!(!a.pid_added);
        assert_eq!(a.path, dir.join("run-rank0.trace.json.gz"));
        assert_eq!(a.renamed_note(&name), None);
        a.file.write_all(b"first").unwrap();
        let b = unique_path(&dir, &name, 200).unwrap();
        assert!(b.pid_added);
        assert_eq!(b.path, dir.join("run-rank0-pid200.trace.json.gz"));
        let note = b.renamed_note(&name).unwrap();
        assert!(note.contains("run-rank0.trace.json.gz already exists") && note.contains("pid200"));
        let c = unique_path(&dir, &name, 200).unwrap();
        assert_eq!(c.path, dir.join("run-rank0-pid200-2.trace.json.gz"));
        assert_eq!(std::fs::read(&a.path).unwrap(), b"first");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn unique_path_is_race_free() {
        let dir = temp_dir("race");
        let paths: Vec<PathBuf> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let dir = &dir;
                    s.spawn(move || {
                        unique_path(dir, "r-rank0.trace.json.gz", 1000 + i)
                            .unwrap()
                            .path
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut uniq = paths.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), 8);
        assert_eq!(
            paths
                .iter()
                .filter(|p| p.ends_with("r-rank0.trace.json.gz"))
                .count(),
            1
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn report_lines_round_trip() {
        let lines = [
            ReportLine::File {
                path: "/tmp/a b/run-rank0.trace.json.gz".into(),
                events: 12,
                bytes: 3456,
            },
            ReportLine::File {
                path: "/tmp/odd\tname.gz".into(),
                events: 0,
                bytes: 1,
            },
            ReportLine::Note("nothing traced:\tno CUDA\nat all".into()),
        ];
        assert_eq!(
            lines[0].to_line(),
            "file\t/tmp/a b/run-rank0.trace.json.gz\t12\t3456\n"
        );
        assert_eq!(lines[2].to_line(), "note\tnothing traced: no CUDA at all\n");
        let text: String =
            lines.iter().map(ReportLine::to_line).collect::<String>() + "garbage\nfile\tx\ty\t1\n";
        let back = report::parse_all(&text);
        assert_eq!(back[..2], lines[..2]);
        assert_eq!(
            back[2],
            ReportLine::Note("nothing traced: no CUDA at all".into())
        );
        assert_eq!(back.len(), 3);

        let dir = temp_dir("report");
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("report");
        for l in &lines {
            report::append(&f, l).unwrap();
        }
        assert_eq!(report::read(&f).unwrap().len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
