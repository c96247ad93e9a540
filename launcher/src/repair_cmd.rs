//! `cuprof repair FILE [-o OUT]`: turns a trace cut short into a valid, closed one.

use anyhow::Context;
use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct RepairArgs {
    /// The trace (`.trace.json.gz` or `.json`) to repair.
    file: PathBuf,
    /// Where to write the repaired trace (default: replace FILE).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub fn run(a: RepairArgs) -> anyhow::Result<()> {
    let bytes = std::fs::read(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let r = cuprof_core::repair::repair(&bytes)
        .with_context(|| format!("{} cannot be repaired", a.file.display()))?;
    let out = a.output.clone().unwrap_or_else(|| a.file.clone());
    if r.was_complete && a.output.is_none() {
        eprintln!(
            "{}: already complete ({} events); left as it is",
            a.file.display(),
            r.events
        );
        return Ok(());
    }
    let gz = out.extension().is_some_and(|e| e == "gz");
    let tmp = out.with_extension("repair-tmp");
    {
        let f =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        if gz {
            let mut e = GzEncoder::new(f, Compression::new(6));
            e.write_all(r.json.as_bytes())?;
            e.finish()?;
        } else {
            let mut f = f;
            f.write_all(r.json.as_bytes())?;
        }
    }
    std::fs::rename(&tmp, &out).with_context(|| format!("replacing {}", out.display()))?;
    eprintln!(
        "{}: repaired: {} events kept, {} bytes of a partial event dropped",
        out.display(),
        r.events,
        r.dropped_bytes
    );
    Ok(())
}
