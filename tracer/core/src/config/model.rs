//! The configuration model: what the library does, with the defaults of everything it does
//! not read from its environment.

use std::path::PathBuf;
use std::time::Duration;

use super::file_names::trace_file_name;
use crate::window::{Capture, RangeSource};

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
/// How long the exit path waits for the writer to finish the trace, by default.
pub const DEFAULT_SHUTDOWN_WAIT: Duration = Duration::from_secs(10);
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
    /// `CUPROF_RUN_ID`, else `None`: the library derives one from the job's identity
    /// ([`super::run_id::derive`]).
    pub run_id: Option<String>,
    pub activities: Activities,
    pub api: ApiFilter,
    pub with_stack: bool,
    /// `CUPROF_QUEUED`: ask CUPTI for kernels' queued/submitted times (Kineto's `queued`
    /// argument); it costs time on every launch, so it is off by default.
    pub queued: bool,
    /// `CUPROF_TORCH_OPS`: record PyTorch operators in a PyTorch process (with CPU activity).
    pub torch_ops: bool,
    /// `CUPROF_RECORD_SHAPES`: operators carry their inputs' shapes, dtypes, strides and scalar
    /// values (`Input Dims`, `Input type`, `Input Strides`, `Concrete Inputs`), as torch's
    /// `record_shapes`.
    pub record_shapes: bool,
    /// `CUPROF_ALL_THREADS`: every thread's operators, not only the thread that started
    /// collecting (torch.profiler's `profile_all_threads`).
    pub all_threads: bool,
    /// `CUPROF_WITH_FLOPS`: a `flops` arg on the operators torch counts (its `with_flops`).
    pub with_flops: bool,
    /// `CUPROF_WITH_MODULES`: each `nn.Module` forward call becomes a `python_function` event
    /// with its path, as torch.profiler's `with_stack` writes module calls.
    pub with_modules: bool,
    /// `CUPROF_TENSORBOARD`: name the traces as TensorBoard's profiler plugin finds them
    /// ([`trace_file_name`]).
    pub tensorboard: bool,
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
    /// `CUPROF_SHUTDOWN_WAIT`: how long the exit path waits for the writer to finish the
    /// trace (a heavily loaded machine may need more than the default).
    pub shutdown_wait: Duration,
    /// `CUPROF_REPORT_FILE` (set by the launcher): append one [`super::report::ReportLine`] per file
    /// opened, then one per file written.
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
            run_id: None,
            activities: Activities::default(),
            api: ApiFilter::default(),
            with_stack: false,
            queued: false,
            torch_ops: true,
            all_threads: false,
            with_flops: false,
            with_modules: false,
            tensorboard: false,
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
            shutdown_wait: DEFAULT_SHUTDOWN_WAIT,
            report_file: None,
            quiet: false,
        }
    }
}

impl Config {
    /// Tracing is on and this process's rank is among `CUPROF_RANKS` (if given).
    pub fn traces_this_process(&self) -> bool {
        self.enabled
            && self
                .ranks
                .as_ref()
                .is_none_or(|r| r.contains(&self.rank.rank))
    }

    /// The window as the trace header's `cuprof.window` says it (docs/trace-format.md): a
    /// schedule `wait=1 warmup=1 active=2 repeat=2 source=nvtx:step` (`skip_first=N` and
    /// `skip_first_wait=1` when set; `source=cuprof_step` for `cuprof_step()` calls), a capture
    /// range `capture_range=cudaProfilerApi repeat=1` (or `cuprof`; `repeat=0`: no limit), a
    /// time window `delay=30s duration=5s` (`duration=exit`: until exit), `whole run` or
    /// `on demand`.
    pub fn window_text(&self) -> String {
        let secs = |d: Duration| format!("{}s", d.as_secs_f64());
        match &self.capture {
            Capture::WholeRun => "whole run".to_string(),
            Capture::OnDemand => "on demand".to_string(),
            Capture::Range { source, repeat } => {
                let source = match source {
                    RangeSource::CudaProfilerApi => "cudaProfilerApi",
                    RangeSource::Cuprof => "cuprof",
                };
                format!("capture_range={source} repeat={repeat}")
            }
            Capture::Time { delay, duration } => format!(
                "delay={} duration={}",
                secs(*delay),
                duration.map_or("exit".to_string(), secs)
            ),
            Capture::Steps(s) => {
                let mut text = format!(
                    "wait={} warmup={} active={} repeat={}",
                    s.wait(),
                    s.warmup(),
                    s.active(),
                    s.repeat()
                );
                if s.skip_first() > 0 {
                    text.push_str(&format!(" skip_first={}", s.skip_first()));
                }
                if s.skip_first_wait() {
                    text.push_str(" skip_first_wait=1");
                }
                match &self.step_nvtx {
                    Some(pattern) => text.push_str(&format!(" source=nvtx:{pattern}")),
                    None => text.push_str(" source=cuprof_step"),
                }
                text
            }
        }
    }

    /// The trace file name for a cycle: with a `-cycleC` suffix when the capture can write
    /// more than one cycle.
    pub fn trace_file_name(&self, cycle: u32) -> String {
        let cycle = self.capture.multi_cycle().then_some(cycle);
        trace_file_name(&self.name, self.rank.rank, cycle, self.tensorboard)
    }
}
