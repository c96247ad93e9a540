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
//!
//! One file per job: `options` (the options, and the settings they make), `library` (finding
//! and preloading libcuprof.so), `child` (the program as a child process: signals, exit),
//! `end_of_run` (the report file and what is printed after the program), `torch_profiler`
//! (`--as-torch-profiler`'s sitecustomize folder).

mod child;
pub(crate) mod end_of_run;
mod library;
mod options;
mod torch_profiler;

pub use options::RunArgs;
pub(crate) use options::{activities_of, Activity};

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use cuprof_analysis::escape::terminal::Shown;

pub fn run(a: RunArgs) -> Result<()> {
    let lib = library::find_library(std::env::var_os("CUPROF_LIB"), std::env::current_exe())?;
    let preload = library::ld_preload(&lib, std::env::var_os("LD_PRELOAD").as_deref())?;
    let report_file = match end_of_run::create_report_file() {
        Ok(p) => Some(p),
        Err(e) => {
            cuprof_analysis::io::console::eprint_line(&format!(
                "cuprof: cannot create a report file in {} ({e}); the program runs, without the summary of files written",
                std::env::temp_dir().shown()
            ));
            None
        }
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let lookup = |k: &str| std::env::var_os(k);
    let launch = options::Launch {
        now_unix: now,
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default(),
        pid: std::process::id(),
        env: &lookup,
    };
    let mut env = options::child_env(&a.opts, preload, report_file.as_deref(), &launch)?;
    // Removed when it drops, before the launcher ends like the program.
    let site = if a.opts.as_torch_profiler {
        let site = torch_profiler::SiteFolder::create(&std::env::temp_dir())?;
        env.push((
            "PYTHONPATH",
            site.python_path(std::env::var_os("PYTHONPATH").as_deref()),
        ));
        Some(site)
    } else {
        None
    };

    let mut child = match child::spawn(&a.command, env) {
        Ok(c) => c,
        Err(e) => {
            if let Some(r) = &report_file {
                let _ = std::fs::remove_file(r);
            }
            drop(site);
            child::exit_cannot_run(&a.command[0], &e);
        }
    };
    let status = child.wait().context("waiting for the program");
    drop(site);
    let status = status?;
    if let Some(r) = &report_file {
        use std::os::unix::process::ExitStatusExt;
        let ended = match status.signal() {
            Some(sig) => end_of_run::Ended::Killed(sig),
            None => end_of_run::Ended::Exited,
        };
        // Each capture's report is written once, by the `cuprof capture` that asked for it:
        // a rank's run analysing its own files would overwrite it with one rank's steps.
        end_of_run::print(r, !a.opts.no_report && !a.opts.on_demand(), ended);
    }
    child::exit_like(status)
}
