//! `cuprof run [options] -- CMD ARGS...`: run a program with libcuprof.so preloaded.
//!
//! The options become `CUPROF_*` variables (the library reads only its environment, so the
//! same works without the launcher; see README.md, "Configuration"). The program runs as a child process
//! (`fork` + `exec`, through `std::process::Command`): it is the program itself, with its own
//! signals and exit status. The launcher stays to:
//!
//! * forward SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to the launcher alone (by `kill`) to the
//!   program. Signals the kernel sends to the whole foreground process group (Ctrl-C, Ctrl-\,
//!   terminal hang-up) already reached the program and are not sent twice;
//! * print, once the program has ended, one line per file the library wrote (the library
//!   appends them to the report file named by `CUPROF_REPORT_FILE`; format in
//!   `cuprof_core::config::report`), or why nothing was traced;
//! * end like the program: its exit code, or death by the same signal.

use std::ffi::{OsStr, OsString};
use std::fs::OpenOptions;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use cuprof_core::config::report::{self, ReportLine};
use cuprof_core::config::{parse_ranks, vars};

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
    opts: Box<Options>,

    /// The program to run, and its arguments (after `--`)
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

#[derive(Args, Debug)]
struct Options {
    /// Trace file name prefix [default: profile_UNIXTIME, the same for every rank]
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

    /// Do not analyse the traces when the program ends (by default: a short summary, and
    /// summary.json + report.md in NAME-report/ beside the traces)
    #[arg(long)]
    no_report: bool,

    /// Kernels' queued/submitted times (the `queued` arg); costs time on every launch
    #[arg(long)]
    queued: bool,

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
    delay: Option<f64>,

    /// Record for this many seconds (0 = until exit)
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    duration: Option<f64>,

    /// Trace only these ranks, e.g. 0,3 or 0-3 (the others run untraced)
    #[arg(long, value_name = "LIST", value_parser = ranks)]
    ranks: Option<String>,

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

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Activity {
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

fn seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err("a non-negative number of seconds, like 10 or 2.5".into()),
    }
}

fn ranks(s: &str) -> Result<String, String> {
    let r = parse_ranks(s)?;
    Ok(r.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
}

/// `libcuprof.so`: `$CUPROF_LIB`, else beside this executable, else in `../lib` from it.
fn find_library(cuprof_lib: Option<OsString>, exe: io::Result<PathBuf>) -> Result<PathBuf> {
    if let Some(lib) = cuprof_lib.filter(|v| !v.is_empty()) {
        let lib = PathBuf::from(lib);
        if !lib.is_file() {
            bail!(
                "CUPROF_LIB={} is not a file: point it at libcuprof.so, or unset it to use the one installed beside cuprof",
                lib.display()
            );
        }
        return lib
            .canonicalize()
            .with_context(|| format!("CUPROF_LIB={}", lib.display()));
    }
    let exe = exe.context("cannot find libcuprof.so: cannot locate the cuprof executable")?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let candidates = [
        dir.join("libcuprof.so"),
        dir.join("..").join("lib").join("libcuprof.so"),
    ];
    for c in &candidates {
        if c.is_file() {
            return c.canonicalize().with_context(|| c.display().to_string());
        }
    }
    bail!(
        "cannot find libcuprof.so: looked for {} and {}; build it (cargo build -p cuprof-preload) or set CUPROF_LIB=/path/to/libcuprof.so",
        candidates[0].display(),
        candidates[1].display()
    )
}

/// `lib` in front of an existing `LD_PRELOAD` (ld.so separates entries by ':' or space).
fn ld_preload(lib: &Path, existing: Option<&OsStr>) -> Result<OsString> {
    let bytes = lib.as_os_str().as_encoded_bytes();
    if bytes.iter().any(|&b| b == b':' || b == b' ' || b == b'\t') {
        bail!(
            "libcuprof.so's path {} holds a ':' or a space, which LD_PRELOAD cannot express; set CUPROF_LIB to a path without them (a symlink will do)",
            lib.display()
        );
    }
    let mut v = lib.as_os_str().to_owned();
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        v.push(":");
        v.push(existing);
    }
    Ok(v)
}

/// The variables the program gets (on top of the launcher's own environment).
fn child_env(
    a: &Options,
    preload: OsString,
    report_file: Option<&Path>,
    now_unix: u64,
) -> Result<Vec<(&'static str, OsString)>> {
    let mut env: Vec<(&'static str, OsString)> =
        vec![("LD_PRELOAD", preload), (vars::ENABLED, "1".into())];
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("profile_{now_unix}"));
    env.push((vars::NAME, name.into()));
    if let Some(dir) = &a.dir {
        // Absolute, so that a program that changes directory still writes where asked.
        let dir = std::path::absolute(dir).with_context(|| format!("--dir {}", dir.display()))?;
        env.push((vars::DIR, dir.into()));
    }
    if !a.activities.is_empty() {
        let mut names: Vec<&str> = Vec::new();
        for act in &a.activities {
            let n = match act {
                Activity::Cpu => "CPU",
                Activity::Gpu => "GPU",
                Activity::Mem => "MEM",
            };
            if !names.contains(&n) {
                names.push(n);
            }
        }
        env.push((vars::ACTIVITIES, names.join(",").into()));
    }
    if a.queued {
        env.push((vars::QUEUED, "1".into()));
    }
    if a.with_stack {
        env.push((vars::WITH_STACK, "1".into()));
    }
    if a.no_record_shapes {
        env.push((vars::RECORD_SHAPES, "0".into()));
    }
    if a.no_torch_ops {
        env.push((vars::TORCH_OPS, "0".into()));
    }
    let numbers = [
        (vars::WAIT, a.wait),
        (vars::WARMUP, a.warmup),
        (vars::ACTIVE, a.active),
        (vars::REPEAT, a.repeat),
        (vars::SKIP_FIRST, a.skip_first),
        (vars::MAX_MEM_EVENTS, a.max_mem_events),
    ];
    for (var, v) in numbers {
        if let Some(v) = v {
            env.push((var, v.to_string().into()));
        }
    }
    if a.skip_first_wait {
        env.push((vars::SKIP_FIRST_WAIT, "1".into()));
    }
    if let Some(p) = &a.step_nvtx {
        env.push((vars::STEP_NVTX, p.into()));
    }
    if let Some(r) = a.capture_range {
        let v = match r {
            CaptureRange::CudaProfilerApi => "cudaProfilerApi",
            CaptureRange::Cuprof => "cuprof",
        };
        env.push((vars::CAPTURE_RANGE, v.into()));
    }
    if let Some(d) = a.delay {
        env.push((vars::DELAY, d.to_string().into()));
    }
    if let Some(d) = a.duration {
        env.push((vars::DURATION, d.to_string().into()));
    }
    if let Some(r) = &a.ranks {
        env.push((vars::RANKS, r.into()));
    }
    if let Some(api) = a.api {
        let v = match api {
            Api::Filtered => "filtered",
            Api::All => "all",
            Api::Runtime => "runtime",
        };
        env.push((vars::API, v.into()));
    }
    if let Some(c) = &a.cupti {
        let c = std::path::absolute(c).with_context(|| format!("--cupti {}", c.display()))?;
        env.push((vars::CUPTI_PATH, c.into()));
    }
    if let Some(r) = report_file {
        env.push((vars::REPORT_FILE, r.into()));
    }
    Ok(env)
}

/// An empty, new report file in the temporary directory.
fn create_report_file() -> io::Result<PathBuf> {
    let dir = std::env::temp_dir();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for i in 0..100u32 {
        let p = dir.join(format!(
            "cuprof-report-{}-{nanos}-{i}.tsv",
            std::process::id()
        ));
        match OpenOptions::new().write(true).create_new(true).open(&p) {
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free report file name")))
}

fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

const NOTHING_TRACED: &str = "cuprof: nothing traced: the program never initialised CUDA (or no step matched / libcupti missing: see messages above)";

/// The summary lines printed after the program ends.
fn summary(lines: &[ReportLine]) -> Vec<String> {
    let mut out = Vec::new();
    let mut files = 0;
    for l in lines {
        match l {
            ReportLine::File {
                path,
                events,
                bytes,
            } => {
                files += 1;
                let s = if *events == 1 { "" } else { "s" };
                out.push(format!(
                    "cuprof: wrote {} ({events} event{s}, {})",
                    path.display(),
                    human_size(*bytes)
                ));
            }
            ReportLine::Note(text) => out.push(format!("cuprof: {text}")),
        }
    }
    if files == 0 {
        out.push(NOTHING_TRACED.to_owned());
    }
    out
}

/// The trace files the library reported writing (not the memory snapshots).
fn traces_written(lines: &[ReportLine]) -> Vec<PathBuf> {
    lines
        .iter()
        .filter_map(|l| match l {
            ReportLine::File { path, .. } if path.to_string_lossy().contains(".trace.json") => {
                Some(path.clone())
            }
            _ => None,
        })
        .collect()
}

/// The child's pid, for the signal handler (0 = none yet).
static CHILD: AtomicI32 = AtomicI32::new(0);

const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // Only async-signal-safe calls here. si_code <= 0: sent by kill/sigqueue/tgkill to the
    // launcher; > 0 (SI_KERNEL): the terminal signalled the whole process group, the child
    // included.
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let code = unsafe { (*info).si_code };
    let pid = CHILD.load(Ordering::SeqCst);
    if code <= 0 && pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

fn signal_set(sigs: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before sigaddset uses it.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        for &s in sigs {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn mask(how: libc::c_int, sigs: &[libc::c_int]) {
    let set = signal_set(sigs);
    // SAFETY: a valid set; the launcher is single-threaded.
    unsafe {
        libc::sigprocmask(how, &set, std::ptr::null_mut());
    }
}

/// Forward the signals, except those the launcher was started with ignored (`nohup`, a
/// background job of a non-interactive shell): the program inherited them ignored too.
fn install_forwarding() {
    for sig in FORWARDED {
        // SAFETY: a zeroed sigaction with a valid handler and flags.
        unsafe {
            let mut old = std::mem::zeroed::<libc::sigaction>();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            let mut sa = std::mem::zeroed::<libc::sigaction>();
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                forward;
            sa.sa_sigaction = handler as libc::sighandler_t;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Die of `sig`, as the program did, so the launcher's status is the program's.
fn die_of_signal(sig: libc::c_int) -> ! {
    // SAFETY: plain libc calls on the launcher's own process.
    unsafe {
        // No core dump of the launcher for the program's SIGSEGV/SIGABRT/SIGQUIT.
        let mut rl = std::mem::zeroed::<libc::rlimit>();
        if libc::getrlimit(libc::RLIMIT_CORE, &mut rl) == 0 {
            rl.rlim_cur = 0;
            libc::setrlimit(libc::RLIMIT_CORE, &rl);
        }
        libc::signal(sig, libc::SIG_DFL);
    }
    mask(libc::SIG_UNBLOCK, &[sig]);
    // SAFETY: as above.
    unsafe {
        libc::kill(libc::getpid(), sig);
    }
    // A signal whose default action is not to terminate: end with the shell's convention.
    std::process::exit(128 + sig)
}

pub fn run(a: RunArgs) -> Result<()> {
    let lib = find_library(std::env::var_os("CUPROF_LIB"), std::env::current_exe())?;
    let preload = ld_preload(&lib, std::env::var_os("LD_PRELOAD").as_deref())?;
    let report_file = match create_report_file() {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!(
                "cuprof: cannot create a report file in {} ({e}); the program runs, without the summary of files written",
                std::env::temp_dir().display()
            );
            None
        }
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let env = child_env(&a.opts, preload, report_file.as_deref(), now)?;

    let mut cmd = Command::new(&a.command[0]);
    cmd.args(&a.command[1..]).envs(env);

    // Signals that come before the child's pid is known wait (blocked) until it is. The child
    // unblocks them between fork and exec (std does not always reset the mask: its
    // posix_spawn path keeps the parent's); exec resets the handlers, installed only after.
    mask(libc::SIG_BLOCK, &FORWARDED);
    // SAFETY: only async-signal-safe calls (sigemptyset, sigprocmask) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut empty = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut empty);
            if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            mask(libc::SIG_UNBLOCK, &FORWARDED);
            if let Some(r) = &report_file {
                let _ = std::fs::remove_file(r);
            }
            let program = a.command[0].to_string_lossy();
            let (why, code) = match e.kind() {
                io::ErrorKind::NotFound => ("command not found".to_owned(), 127),
                io::ErrorKind::PermissionDenied => ("permission denied".to_owned(), 126),
                _ => (e.to_string(), 126),
            };
            eprintln!("cuprof: cannot run {program}: {why}");
            std::process::exit(code);
        }
    };
    CHILD.store(child.id() as i32, Ordering::SeqCst);
    install_forwarding();
    mask(libc::SIG_UNBLOCK, &FORWARDED);

    let status = child.wait().context("waiting for the program")?;

    if let Some(r) = &report_file {
        let lines = report::read(r).unwrap_or_default();
        let _ = std::fs::remove_file(r);
        for line in summary(&lines) {
            eprintln!("{line}");
        }
        if !a.opts.no_report {
            let (lines, _) = crate::analysis::after_run(&traces_written(&lines), true);
            for line in lines {
                eprintln!("{line}");
            }
        }
    }

    if let Some(code) = status.code() {
        std::process::exit(code);
    }
    if let Some(sig) = status.signal() {
        die_of_signal(sig);
    }
    std::process::exit(1)
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

    fn args(v: &[&str]) -> RunArgs {
        Cli::try_parse_from(std::iter::once("run").chain(v.iter().copied()))
            .unwrap()
            .run
    }

    #[test]
    fn preload_prepends() {
        let lib = Path::new("/opt/cuprof/lib/libcuprof.so");
        assert_eq!(
            ld_preload(lib, None).unwrap(),
            "/opt/cuprof/lib/libcuprof.so"
        );
        assert_eq!(
            ld_preload(lib, Some(OsStr::new(""))).unwrap(),
            "/opt/cuprof/lib/libcuprof.so"
        );
        assert_eq!(
            ld_preload(lib, Some(OsStr::new("/a.so /b.so"))).unwrap(),
            "/opt/cuprof/lib/libcuprof.so:/a.so /b.so"
        );
        assert!(ld_preload(Path::new("/my dir/libcuprof.so"), None).is_err());
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
        let env = child_env(&a.opts, "/l.so".into(), None, 1234).unwrap();
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_str().unwrap())
        };
        assert_eq!(get("CUPROF_RECORD_SHAPES"), Some("0"));
        assert_eq!(get("CUPROF_TORCH_OPS"), Some("0"));
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
        let env = child_env(&a.opts, "/l.so".into(), None, 1234).unwrap();
        let get = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_str().unwrap())
        };
        assert_eq!(get("CUPROF_NAME"), Some("profile_1234"));
        assert_eq!(get("CUPROF_ACTIVITIES"), Some("GPU,CPU,MEM"));
        assert_eq!(get("CUPROF_ACTIVE"), Some("3"));
        assert_eq!(get("CUPROF_RANKS"), Some("0,1,3"));
        assert_eq!(get("CUPROF_DELAY"), Some("2.5"));
        assert_eq!(get("CUPROF_WAIT"), None);
        assert_eq!(get("CUPROF_REPORT_FILE"), None);
        assert_eq!(get("CUPROF_RECORD_SHAPES"), None);
        assert_eq!(get("CUPROF_TORCH_OPS"), None);
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
    fn library_search() {
        let dir = std::env::temp_dir().join(format!("cuprof-run-lib-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        let exe = dir.join("bin").join("cuprof");
        assert!(find_library(None, Ok(exe.clone())).is_err());
        std::fs::write(dir.join("lib/libcuprof.so"), b"").unwrap();
        let found = find_library(None, Ok(exe.clone())).unwrap();
        assert_eq!(found, dir.join("lib/libcuprof.so").canonicalize().unwrap());
        std::fs::write(dir.join("bin/libcuprof.so"), b"").unwrap();
        assert_eq!(
            find_library(None, Ok(exe.clone())).unwrap(),
            dir.join("bin/libcuprof.so").canonicalize().unwrap()
        );
        let err = find_library(Some("/nonexistent/libcuprof.so".into()), Ok(exe)).unwrap_err();
        assert!(err
            .to_string()
            .contains("CUPROF_LIB=/nonexistent/libcuprof.so"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn summary_lines() {
        let lines = report::parse_all(
            "file\t/d/r-rank0.trace.json.gz\t1\t100\nnote\tsomething\nfile\t/d/r-rank1.trace.json.gz\t5000\t3145728\n",
        );
        assert_eq!(
            summary(&lines),
            [
                "cuprof: wrote /d/r-rank0.trace.json.gz (1 event, 100 B)",
                "cuprof: something",
                "cuprof: wrote /d/r-rank1.trace.json.gz (5000 events, 3.0 MiB)",
            ]
        );
        assert_eq!(summary(&[]), [NOTHING_TRACED]);
        assert_eq!(
            summary(&[ReportLine::Note("why".into())]),
            ["cuprof: why", NOTHING_TRACED]
        );
        assert_eq!(human_size(1536), "1.5 KiB");
    }
}
