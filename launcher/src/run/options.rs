//! `cuprof run`'s options, and the library settings they make. The variables are spelled by
//! core's [`Settings::to_env`], the inverse of the library's own parser.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use cuprof_analysis::escape::terminal::Shown;
use cuprof_core::config::run_id::{job_run_id, launcher_run_id};
use cuprof_core::config::{
    parse_ranks, parse_seconds, Activities, ApiFilter, Settings, StepSettings,
};
use cuprof_core::window::RangeSource;

const EXAMPLES: &str = "\
Examples:
  cuprof run --active 3 --step-nvtx 'train_step' -- python train.py
      record 3 steps, a step being each torch.cuda.nvtx.range(\"train_step\")
  cuprof run --wait 1 --warmup 1 --active 2 --repeat 2 --step-nvtx 'ProfilerStep*' -- python train.py
      two cycles, written as NAME-rankR-cycle1/2.trace.json.gz
  cuprof run --capture-range cudaProfilerApi -- python train.py
      record between torch.cuda.profiler.start() and stop()
  cuprof run --delay 30 --duration 5 -- torchrun --nproc_per_node=2 train.py
      record 5 s starting 30 s after CUDA initialisation, in every rank

With no step source, everything from CUDA initialisation to exit is recorded.
Files go to --dir (default $CACHE_DIT_TORCH_PROFILER_DIR, else /tmp/cache_dit_profiles).
Every option has a CUPROF_* environment variable equivalent (see the Configuration section of README.md).";

#[derive(Args, Debug)]
#[command(after_help = EXAMPLES, override_usage = "cuprof run [OPTIONS] -- <CMD> [ARGS]...")]
pub struct RunArgs {
    /// Boxed: the options are large, and `RunArgs` is one variant of the command enum.
    #[command(flatten)]
    pub(super) opts: Box<Options>,

    /// The program to run, and its arguments (after `--`)
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub(super) command: Vec<OsString>,
}

#[derive(Args, Debug)]
pub(super) struct Options {
    /// Trace file name prefix [default: profile_UNIXTIME, the same for every rank; under
    /// `srun`: profile_slurm-JOB.STEP, the same in every task]
    #[arg(long, value_name = "NAME", value_parser = file_prefix)]
    name: Option<String>,

    /// Output directory [default: $CACHE_DIT_TORCH_PROFILER_DIR, else /tmp/cache_dit_profiles]
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// What to trace: CPU (runtime/driver API, NVTX), GPU (kernels, copies, memsets, syncs),
    /// MEM (device memory) [default: CPU GPU]
    #[arg(long, num_args = 1.., value_delimiter = ',', value_enum, ignore_case = true)]
    activities: Vec<Activity>,

    /// Record call stacks: the Python call chain of PyTorch operators, and the native, operator
    /// and Python frames of device allocations in the memory snapshot
    #[arg(long)]
    with_stack: bool,

    /// PyTorch operators without their input shapes (shapes are recorded by default)
    #[arg(long)]
    no_record_shapes: bool,

    /// No PyTorch operators in the trace (recorded by default in a PyTorch program)
    #[arg(long)]
    no_torch_ops: bool,

    /// PyTorch operators of every thread, not only of the thread that started collecting
    /// (torch.profiler's profile_all_threads)
    #[arg(long)]
    all_threads: bool,

    /// A `flops` arg on the PyTorch operators torch counts (matrix multiplies, convolutions),
    /// as torch.profiler's with_flops; `cuprof report` shows their achieved TFLOP/s
    #[arg(long)]
    with_flops: bool,

    /// Each nn.Module forward call as a range with its module path
    /// (`GPT2LMHeadModel.transformer.h.3.attn`), written as torch.profiler's with_stack writes
    /// module calls; `cuprof report` gives time per module
    #[arg(long)]
    with_modules: bool,

    /// Do not analyse the traces when the program ends (by default: a short summary, and
    /// summary.json + report.md in NAME-report/ beside the traces)
    #[arg(long)]
    pub(super) no_report: bool,

    /// Kernels' queued/submitted times (the `queued` arg); costs time on every launch
    #[arg(long)]
    queued: bool,

    /// The program's torch.profiler.profile(...) calls become cuprof.profile's: tools built on
    /// torch.profiler (cache-dit's ProfilerContext) write cuprof's traces where they would
    /// have written torch's. Needs the cuprof Python package in the program's environment
    #[arg(long)]
    pub(super) as_torch_profiler: bool,

    /// Name the traces as TensorBoard's profiler plugin finds them, NAME-rankR.pt.trace.json.gz
    /// (a cycle C: NAME-rankR.C.pt.trace.json.gz), so that `tensorboard --logdir DIR` lists the
    /// run, a worker per rank
    #[arg(long)]
    tensorboard: bool,

    /// Start ready and idle: nothing is recorded until `cuprof capture` asks (steps are
    /// cuprof_step() calls); the other step options do not apply. Each capture's report is
    /// written by the `cuprof capture` that asked for it, not when the program ends
    #[arg(long, conflicts_with_all = ["wait", "warmup", "active", "repeat", "skip_first", "skip_first_wait", "step_nvtx", "capture_range", "delay", "duration"])]
    on_demand: bool,

    /// Idle steps at the start of each cycle [default: 0]
    #[arg(long, value_name = "N")]
    wait: Option<u64>,

    /// Steps collected and discarded before recording, in each cycle [default: 0]
    #[arg(long, value_name = "N")]
    warmup: Option<u64>,

    /// Steps recorded in each cycle [default: 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    active: Option<u64>,

    /// Cycles (or capture ranges) to record; 0 = until exit [default: 1]
    #[arg(long, value_name = "N")]
    repeat: Option<u64>,

    /// Idle steps before the first cycle [default: 0]
    #[arg(long, value_name = "N")]
    skip_first: Option<u64>,

    /// Skip the first cycle's wait steps (torch.profiler.schedule's skip_first_wait)
    #[arg(long)]
    skip_first_wait: bool,

    /// Steps are the starts of NVTX ranges whose name matches PATTERN (* and ? wildcards,
    /// whole name, case-sensitive). Without it, a schedule is driven by cuprof_step() calls
    #[arg(long, value_name = "PATTERN")]
    step_nvtx: Option<String>,

    /// Record only between start and stop calls: cudaProfilerStart/Stop
    /// (torch.cuda.profiler.start/stop) or cuprof_start/cuprof_stop
    #[arg(long, value_enum, ignore_case = true, value_name = "SOURCE")]
    capture_range: Option<CaptureRange>,

    /// Start recording this many seconds after CUDA initialisation
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    delay: Option<Duration>,

    /// Record for this many seconds (0 = until exit)
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    duration: Option<Duration>,

    /// Trace only these ranks, e.g. 0,3 or 0-3 (the others run untraced)
    #[arg(long, value_name = "LIST", value_parser = ranks)]
    ranks: Option<Ranks>,

    /// Which API calls to keep: filtered (launches, copies, syncs, allocations...), runtime
    /// (the same without driver API records: cheaper, but Triton's direct launches lose their
    /// CPU side) or all
    #[arg(long, value_enum, ignore_case = true)]
    api: Option<Api>,

    /// Maximum device-memory events kept [default: 100000]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_mem_events: Option<u64>,

    /// Load this libcupti instead of searching for it
    #[arg(long, value_name = "PATH")]
    cupti: Option<PathBuf>,
}

/// The activity groups of a list of `--activities` values.
pub(crate) fn activities_of(list: &[Activity]) -> Activities {
    let mut a = Activities {
        cpu: false,
        gpu: false,
        mem: false,
    };
    for activity in list {
        match activity {
            Activity::Cpu => a.cpu = true,
            Activity::Gpu => a.gpu = true,
            Activity::Mem => a.mem = true,
        }
    }
    a
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Activity {
    #[value(name = "CPU")]
    Cpu,
    #[value(name = "GPU")]
    Gpu,
    #[value(name = "MEM")]
    Mem,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum CaptureRange {
    #[value(name = "cudaProfilerApi")]
    CudaProfilerApi,
    #[value(name = "cuprof")]
    Cuprof,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Api {
    #[value(name = "filtered")]
    Filtered,
    #[value(name = "all")]
    All,
    #[value(name = "runtime")]
    Runtime,
}

fn file_prefix(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains('/') || s == "." || s == ".." {
        return Err("a file name prefix: not empty, no '/', not '.' or '..'".into());
    }
    Ok(s.to_owned())
}

fn seconds(s: &str) -> Result<Duration, String> {
    parse_seconds(s.trim()).ok_or_else(|| "a non-negative number of seconds, like 10 or 2.5".into())
}

/// `--ranks`: the ranks listed, sorted and once each.
#[derive(Clone, Debug)]
struct Ranks(Vec<u32>);

fn ranks(s: &str) -> Result<Ranks, String> {
    parse_ranks(s).map(Ranks)
}

/// The launch the run id and the default name are chosen from: when and where the launcher
/// started, and its environment.
pub(super) struct Launch<'a> {
    pub now_unix: u64,
    pub hostname: String,
    pub pid: u32,
    pub env: &'a dyn Fn(&str) -> Option<OsString>,
}

impl Launch<'_> {
    /// The program's name unless `--name`: `profile_JOB` where the job has an identity of its
    /// own (a Slurm step, a torchrun rendezvous id: every task of `srun cuprof run` chooses the
    /// same), else `profile_NOW`. Characters other than letters, digits, `.`, `-` and `_`
    /// become `_`.
    fn default_name(&self) -> String {
        match job_run_id(self.env) {
            Some(job) => format!(
                "profile_{}",
                job.chars()
                    .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '_'
                    })
                    .collect::<String>()
            ),
            None => format!("profile_{}", self.now_unix),
        }
    }

    /// `CUPROF_RUN_ID` for the program (core's `run_id::launcher_run_id`).
    fn run_id(&self) -> String {
        launcher_run_id(self.env, &self.hostname, self.pid, self.now_unix)
    }
}

impl Options {
    /// `--on-demand`: the program records only what `cuprof capture` asks.
    pub(super) fn on_demand(&self) -> bool {
        self.on_demand
    }

    /// An option chooses what is recorded (a schedule, ranges, time, on demand).
    fn window_given(&self) -> bool {
        self.wait.is_some()
            || self.warmup.is_some()
            || self.active.is_some()
            || self.repeat.is_some()
            || self.skip_first.is_some()
            || self.skip_first_wait
            || self.step_nvtx.is_some()
            || self.capture_range.is_some()
            || self.delay.is_some()
            || self.duration.is_some()
            || self.on_demand
    }

    /// What the options ask of the library. The program's name is `--name`, else the
    /// launch's default, and its run id the launch's: chosen here so that every rank shares
    /// them.
    fn settings(&self, report_file: Option<&Path>, launch: &Launch<'_>) -> Result<Settings> {
        // Absolute, so that a program that changes directory still finds them.
        let absolute = |p: &Path, option: &str| {
            std::path::absolute(p).with_context(|| format!("{option} {}", p.shown()))
        };
        let activities = (!self.activities.is_empty()).then(|| activities_of(&self.activities));
        // Flags ask for what is not the default; without them, the library's default holds.
        let flag = |on: bool, value: bool| on.then_some(value);
        Ok(Settings {
            dir: self
                .dir
                .as_deref()
                .map(|d| absolute(d, "--dir"))
                .transpose()?,
            name: Some(self.name.clone().unwrap_or_else(|| launch.default_name())),
            run_id: Some(launch.run_id()),
            activities,
            api: self.api.map(|api| match api {
                Api::Filtered => ApiFilter::Filtered,
                Api::All => ApiFilter::All,
                Api::Runtime => ApiFilter::Runtime,
            }),
            with_stack: flag(self.with_stack, true),
            queued: flag(self.queued, true),
            torch_ops: flag(self.no_torch_ops, false),
            record_shapes: flag(self.no_record_shapes, false),
            all_threads: flag(self.all_threads, true),
            with_flops: flag(self.with_flops, true),
            with_modules: flag(self.with_modules, true),
            tensorboard: flag(self.tensorboard, true),
            steps: StepSettings {
                wait: self.wait,
                warmup: self.warmup,
                active: self.active,
                repeat: self.repeat,
                skip_first: self.skip_first,
                skip_first_wait: flag(self.skip_first_wait, true),
                step_nvtx: self.step_nvtx.clone(),
                // --as-torch-profiler alone: the program's profile() blocks are the ranges.
                capture_range: self
                    .capture_range
                    .map(|r| match r {
                        CaptureRange::CudaProfilerApi => RangeSource::CudaProfilerApi,
                        CaptureRange::Cuprof => RangeSource::Cuprof,
                    })
                    .or((self.as_torch_profiler && !self.window_given())
                        .then_some(RangeSource::Cuprof)),
                delay: self.delay,
                duration: self.duration,
                on_demand: flag(self.on_demand, true),
            },
            ranks: self.ranks.as_ref().map(|r| r.0.clone()),
            cupti_path: self
                .cupti
                .as_deref()
                .map(|c| absolute(c, "--cupti"))
                .transpose()?,
            max_mem_events: self.max_mem_events,
            report_file: report_file.map(Path::to_owned),
            ..Settings::default()
        })
    }
}

/// The variables the program gets (on top of the launcher's own environment).
pub(super) fn child_env(
    a: &Options,
    preload: OsString,
    report_file: Option<&Path>,
    launch: &Launch<'_>,
) -> Result<Vec<(&'static str, OsString)>> {
    let mut env = vec![("LD_PRELOAD", preload)];
    env.extend(a.settings(report_file, launch)?.to_env());
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn no_env(_: &str) -> Option<OsString> {
        None
    }

    /// A launch at 1234 on host `n1`, pid 10, with no job variables.
    fn launch() -> Launch<'static> {
        Launch {
            now_unix: 1234,
            hostname: "n1".into(),
            pid: 10,
            env: &no_env,
        }
    }

    fn args(v: &[&str]) -> RunArgs {
        Cli::try_parse_from(std::iter::once("run").chain(v.iter().copied()))
            .unwrap()
            .run
    }

    #[test]
    fn operator_switches_become_variables() {
        let a = args(&[
            "--no-record-shapes",
            "--no-torch-ops",
            "--",
            "python",
            "x.py",
        ]);
        let env = child_env(&a.opts, "/l.so".into(), None, &launch()).unwrap();
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_str().unwrap())
        };
        assert_eq!(get("CUPROF_RECORD_SHAPES"), Some("0"));
        assert_eq!(get("CUPROF_TORCH_OPS"), Some("0"));
        assert_eq!(get("CUPROF_ON_DEMAND"), None);
        let a = args(&["--on-demand", "--name", "job", "--", "python", "x.py"]);
        let env = child_env(&a.opts, "/l.so".into(), None, &launch()).unwrap();
        let on_demand = env.iter().find(|(n, _)| *n == "CUPROF_ON_DEMAND");
        assert_eq!(on_demand.map(|(_, v)| v.to_str().unwrap()), Some("1"));
    }

    #[test]
    fn env_from_options() {
        let a = args(&[
            "--activities",
            "gpu",
            "CPU,mem",
            "--active",
            "3",
            "--ranks",
            "3,0-1",
            "--delay",
            "2.50",
            "--",
            "python",
            "-c",
            "x",
        ]);
        assert_eq!(a.command, ["python", "-c", "x"]);
        let env = child_env(&a.opts, "/l.so".into(), None, &launch()).unwrap();
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_str().unwrap())
        };
        assert_eq!(get("CUPROF_NAME"), Some("profile_1234"));
        assert_eq!(get("CUPROF_RUN_ID"), Some("n1-10-1234"));
        // The set given, in core's canonical order (Activities::to_list).
        assert_eq!(get("CUPROF_ACTIVITIES"), Some("CPU,GPU,MEM"));
        assert_eq!(get("CUPROF_ACTIVE"), Some("3"));
        assert_eq!(get("CUPROF_RANKS"), Some("0,1,3"));
        assert_eq!(get("CUPROF_DELAY"), Some("2.5"));
        assert_eq!(get("CUPROF_WAIT"), None);
        assert_eq!(get("CUPROF_REPORT_FILE"), None);
        assert_eq!(get("CUPROF_RECORD_SHAPES"), None);
        assert_eq!(get("CUPROF_TORCH_OPS"), None);
    }

    /// `srun cuprof run`: each task's launcher starts on its own host, with its own pid, at its
    /// own second, and all choose the same name and run id, from the Slurm step.
    #[test]
    fn srun_tasks_share_name_and_run_id() {
        fn srun(k: &str) -> Option<OsString> {
            match k {
                "SLURM_JOB_ID" => Some("4711".into()),
                "SLURM_STEP_ID" => Some("3".into()),
                "SLURM_PROCID" => Some("1".into()),
                _ => None,
            }
        }
        let a = args(&["--", "python", "x.py"]);
        let task = |host: &str, pid: u32, now: u64| {
            let launch = Launch {
                now_unix: now,
                hostname: host.into(),
                pid,
                env: &srun,
            };
            let env = child_env(&a.opts, "/l.so".into(), None, &launch).unwrap();
            let get = |k: &str| {
                env.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_str().unwrap().to_owned())
            };
            (get("CUPROF_NAME"), get("CUPROF_RUN_ID"))
        };
        let first = task("node1", 100, 1700000000);
        assert_eq!(
            first,
            (
                Some("profile_slurm-4711.3".to_owned()),
                Some("slurm-4711.3".to_owned())
            )
        );
        assert_eq!(task("node2", 555, 1700000002), first);
        // `--name` names the files; the run id stays the step's.
        let named = args(&["--name", "job", "--", "python", "x.py"]);
        let launch = Launch {
            now_unix: 1,
            hostname: "node1".into(),
            pid: 1,
            env: &srun,
        };
        let env = child_env(&named.opts, "/l.so".into(), None, &launch).unwrap();
        let name = env.iter().find(|(n, _)| *n == "CUPROF_NAME").unwrap();
        assert_eq!(name.1, "job");
    }

    #[test]
    fn command_without_double_dash() {
        let a = args(&["--active", "2", "python", "train.py", "--active", "5"]);
        assert_eq!(a.opts.active, Some(2));
        assert_eq!(a.command, ["python", "train.py", "--active", "5"]);
    }

    #[test]
    fn invalid_options_rejected() {
        for bad in [
            &["--active", "0", "--", "x"][..],
            &["--delay", "-1", "--", "x"],
            &["--ranks", "a", "--", "x"],
            &["--name", "a/b", "--", "x"],
            &["--capture-range", "nvtx", "--", "x"],
            &["--activities", "DISK", "--", "x"],
            &["--wait", "1"],
            &["--on-demand", "--active", "2", "--", "x"],
            &["--on-demand", "--step-nvtx", "s", "--", "x"],
            &["--on-demand", "--duration", "2", "--", "x"],
        ] {
            assert!(
                Cli::try_parse_from(std::iter::once("run").chain(bad.iter().copied())).is_err(),
                "{bad:?}"
            );
        }
        let a = args(&[
            "--capture-range",
            "CUDAPROFILERAPI",
            "--api",
            "ALL",
            "--",
            "x",
        ]);
        assert!(matches!(
            a.opts.capture_range,
            Some(CaptureRange::CudaProfilerApi)
        ));
        assert!(matches!(a.opts.api, Some(Api::All)));
    }

    #[test]
    fn as_torch_profiler_records_the_programs_blocks_unless_a_window_is_given() {
        let var = |v: &[&str], k: &str| {
            let a = args(v);
            child_env(&a.opts, "/l.so".into(), None, &launch())
                .unwrap()
                .into_iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_str().unwrap().to_string())
        };
        assert_eq!(
            var(
                &["--as-torch-profiler", "--", "python"],
                "CUPROF_CAPTURE_RANGE"
            )
            .as_deref(),
            Some("cuprof")
        );
        assert_eq!(var(&["--", "python"], "CUPROF_CAPTURE_RANGE"), None);
        let with_window = ["--as-torch-profiler", "--active", "2", "--", "python"];
        assert_eq!(var(&with_window, "CUPROF_CAPTURE_RANGE"), None);
        assert_eq!(var(&with_window, "CUPROF_ACTIVE").as_deref(), Some("2"));
    }
}
