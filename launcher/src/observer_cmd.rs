//! `cuprof observer build [--python PYTHON]`: builds the native PyTorch operator observer ahead
//! of time, for the torch that PYTHON imports, into the cache the traced programs read
//! (`CUPROF_CACHE`, default `~/.cache/cuprof`): for clusters whose compute nodes have no
//! compiler, build once where there is one and share the cache. It runs the very builder the
//! traced program runs at first use (the preload's `ops/build.py`), with the observer's source.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use cuprof_analysis::escape::terminal::Shown;

const BUILDER: &str = include_str!("../../tracer/preload/src/sources/ops/build.py");
const OBSERVER_SOURCE: &str = include_str!("../../tracer/preload/src/sources/ops/observer.cpp");

#[derive(clap::Args)]
pub struct ObserverArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Build (or find already built) the observer for the torch PYTHON imports; prints its
    /// path.
    Build {
        /// The Python interpreter of the programs to trace.
        #[arg(long, default_value = "python3")]
        python: PathBuf,
    },
}

pub fn run(args: ObserverArgs) -> Result<()> {
    let Action::Build { python } = args.action;
    let status = Command::new(&python)
        .arg("-c")
        .arg(BUILDER)
        .env("CUPROF_OBSERVER_SOURCE", OBSERVER_SOURCE)
        .status()
        .with_context(|| format!("{}: cannot run it (give --python PYTHON)", python.shown()))?;
    if !status.success() {
        // The builder said why, in one `cuprof:` line (or Python did: torch not importable).
        bail!("no observer was built for {}", python.shown());
    }
    Ok(())
}
