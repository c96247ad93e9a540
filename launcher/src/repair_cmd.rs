//! `cuprof repair FILE [-o OUT | --in-place]`: turns a trace cut short into a valid, closed one.
//!
//! FILE is never replaced unless `--in-place` asks for it; even then only once the new file has
//! been read back and holds at least as many events as FILE (a new file beside FILE is not
//! read back: FILE stays as it was). Memory stays within the reader's
//! buffer and at most 16 compression blocks in flight whatever the file's size (see
//! [`cuprof_core::repair`] and [`cuprof_analysis::io::gzip_out`]); a gzip output is compressed on every core.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cuprof_core::reader::TraceReader;
use cuprof_core::repair::{rewrite, survey, Rewritten, Survey};
use flate2::Compression;

use cuprof_analysis::escape::terminal::Shown;
use cuprof_analysis::io::gzip_out::ParGzWriter;
use cuprof_analysis::io::output::{same_file, Staged};
use cuprof_analysis::load::progress;

#[derive(clap::Args)]
pub struct RepairArgs {
    /// The trace (`.trace.json.gz` or `.json`) to repair.
    file: PathBuf,
    /// Where to write the repaired trace (gzip if it ends in `.gz`). Default: beside FILE, with
    /// `.repaired` before the suffix (`run-rank0.trace.json.gz` ->
    /// `run-rank0.repaired.trace.json.gz`); refused if that file exists.
    #[arg(short, long, value_name = "OUT", conflicts_with = "in_place")]
    output: Option<PathBuf>,
    /// Replace FILE with the repaired trace, once it has been read back and holds at least as
    /// many events. Refused for a symlink or a read-only file.
    #[arg(long)]
    in_place: bool,
}

/// The default output: `NAME.repaired.SUFFIX` beside `file`; TensorBoard's span (a cycle,
/// `NAME.C.pt.trace.json.gz`) stays before the suffix, so that the plugin sees the repaired
/// file as worker `NAME.repaired` and the same span.
pub fn repaired_name(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Its trace ending stays at the end.
    let (mut stem, suffix) = cuprof_core::config::split_trace_suffix(&name);
    let mut span = "";
    if suffix.starts_with(".pt.") {
        if let Some(dot) = stem.rfind('.').filter(|&i| i > 0) {
            let digits = &stem[dot + 1..];
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                (stem, span) = stem.split_at(dot);
            }
        }
    }
    file.with_file_name(format!("{stem}.repaired{span}{suffix}"))
}

/// One pass over `path` by `f`, with a progress bar when it takes more than a second.
fn pass<T>(path: &Path, f: impl FnOnce(&mut TraceReader<'static>) -> Result<T>) -> Result<T> {
    let mut r = TraceReader::open(path)?;
    let bar = progress(&mut r, path);
    let out = f(&mut r);
    if let Some(pb) = bar.borrow_mut().take() {
        pb.finish_and_clear();
    }
    out
}

/// `--in-place` only replaces a regular, writable file that is not a symlink.
fn check_replaceable(file: &Path) -> Result<std::fs::Permissions> {
    let md = std::fs::symlink_metadata(file)
        .with_context(|| format!("{}: cannot read it", file.shown()))?;
    if md.file_type().is_symlink() {
        bail!(
            "{}: is a symlink; --in-place would replace the link, not its target: repair to a \
             new file (without --in-place) or name the target itself",
            file.shown()
        );
    }
    if !md.is_file() {
        bail!(
            "{}: not a regular file; --in-place cannot replace it",
            file.shown()
        );
    }
    if md.permissions().readonly() {
        bail!(
            "{}: is read-only; --in-place will not override that: repair to a new file \
             (without --in-place) or make it writable first",
            file.shown()
        );
    }
    Ok(md.permissions())
}

/// Writes the repaired trace of `input` to `staged`'s file.
fn write_repaired(input: &Path, out: &Path, f: File) -> Result<(Rewritten, File)> {
    let wr =
        |e: std::io::Error| anyhow::Error::new(e).context(format!("{}: cannot write", out.shown()));
    let buf = BufWriter::with_capacity(1 << 20, f);
    let (done, mut buf) = if out.extension().is_some_and(|e| e == "gz") {
        let mut gz = ParGzWriter::new(buf, Compression::fast()).map_err(wr)?;
        let done = pass(input, |r| Ok(rewrite(r, &mut gz)?))?;
        (done, gz.finish().map_err(wr)?)
    } else {
        let mut buf = buf;
        let done = pass(input, |r| Ok(rewrite(r, &mut buf)?))?;
        (done, buf)
    };
    buf.flush().map_err(wr)?;
    Ok((done, buf.into_inner().map_err(|e| wr(e.into_error()))?))
}

/// Reads the written file back: it must be a complete trace holding `want` events or more.
fn verify(tmp: &Path, out: &Path, want: u64) -> Result<()> {
    let back = survey(&mut TraceReader::open(tmp)?)
        .with_context(|| format!("{}: the repaired trace does not read back", out.shown()))?;
    if !back.is_complete() || back.events < want {
        bail!(
            "{}: the repaired trace reads back with {} events ({}), fewer than the {want} read; \
             nothing was replaced",
            out.shown(),
            back.events,
            if back.is_complete() {
                "complete"
            } else {
                "incomplete"
            }
        );
    }
    Ok(())
}

fn describe(s: &Survey, r: &Rewritten) -> String {
    match (&s.truncation, r.dropped_bytes) {
        (Some(t), 0) if t.inside == "traceEvents" => "the trace was cut between events".into(),
        (Some(t), n) if t.inside == "traceEvents" => {
            format!("{n} bytes of a partial event dropped")
        }
        (Some(_), 0) => "the trace was cut after its events".into(),
        (Some(_), n) => format!("the trace was cut after its events ({n} bytes dropped)"),
        (None, _) if s.rest.bytes > 0 => {
            format!("{} bytes after the end of the trace dropped", s.rest.bytes)
        }
        (None, _) => format!(
            "the gzip stream did not end cleanly ({})",
            s.rest.stream_error.as_deref().unwrap_or("?")
        ),
    }
}

pub fn run(a: RepairArgs) -> Result<()> {
    let perms = if a.in_place {
        Some(check_replaceable(&a.file)?)
    } else {
        None
    };
    let out = match (&a.output, a.in_place) {
        (_, true) => a.file.clone(),
        (Some(o), false) => o.clone(),
        (None, false) => repaired_name(&a.file),
    };
    if !a.in_place {
        if same_file(&out, &a.file) {
            bail!(
                "{}: the output is the input; pass --in-place to replace it",
                out.shown()
            );
        }
        if a.output.is_none() && std::fs::symlink_metadata(&out).is_ok() {
            bail!(
                "{}: exists already; pass -o OUT to choose where the repaired trace goes",
                out.shown()
            );
        }
    }

    // The survey and the rewrite read the file at once, on two workers: the rewrite is thrown
    // away (its temporary file removed) when the survey finds the trace complete.
    let (s, written) = rayon::join(
        || pass(&a.file, |r| Ok(survey(r)?)),
        || {
            let (staged, f) = Staged::create(&out)?;
            write_repaired(&a.file, &out, f).map(|(r, f)| (staged, r, f))
        },
    );
    let s = s?;
    if s.is_complete() {
        cuprof_analysis::io::console::eprint_line(&format!(
            "{}: already complete ({} events); nothing written",
            a.file.shown(),
            s.events
        ));
        return Ok(());
    }
    let (staged, r, f) = written?;
    if let Some(p) = perms {
        f.set_permissions(std::fs::Permissions::from_mode(p.mode()))
            .with_context(|| format!("{}: cannot set its permissions", out.shown()))?;
    }
    // Replacing FILE is what needs proof that nothing is lost; a new file beside it leaves FILE
    // as it was, and the rewrite's own count is exact, so reading it back again would only
    // cost a third pass.
    if a.in_place {
        verify(staged.tmp_path(), &out, s.events.max(r.events))?;
    }
    staged.commit(f)?;
    cuprof_analysis::io::console::eprint_line(&format!(
        "{}: repaired: {} events kept, {}{}",
        out.shown(),
        r.events,
        describe(&s, &r),
        if a.in_place {
            String::new()
        } else {
            format!("; {} is unchanged", a.file.shown())
        }
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repaired_names() {
        let cases = [
            (
                "d/run-rank0.trace.json.gz",
                "d/run-rank0.repaired.trace.json.gz",
            ),
            ("x.trace.json", "x.repaired.trace.json"),
            (
                "d/run-rank0.pt.trace.json.gz",
                "d/run-rank0.repaired.pt.trace.json.gz",
            ),
            (
                "d/run-rank1.12.pt.trace.json.gz",
                "d/run-rank1.repaired.12.pt.trace.json.gz",
            ),
            ("x.json.gz", "x.repaired.json.gz"),
            ("x.json", "x.repaired.json"),
            ("x.gz", "x.repaired.gz"),
            ("trace", "trace.repaired"),
            (".json", ".json.repaired"),
        ];
        for (file, want) in cases {
            assert_eq!(repaired_name(Path::new(file)), Path::new(want), "{file}");
        }
    }
}
