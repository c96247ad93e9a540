//! Writing output files without ever destroying one.
//!
//! Every file a command writes is first written to a new file with a unique name in the
//! target's directory (created with `O_CREAT | O_EXCL`, so it can never be an existing file or
//! a symlink planted there), and renamed over the target only once it is complete and synced.
//! An error or Ctrl-C leaves the target as it was, and removes the temporary file: once a
//! program asks for it ([`remove_temporaries_on_signal`]; the `cuprof` binary does), SIGINT,
//! SIGTERM and SIGHUP are caught by a thread (started with the first output) that removes every
//! temporary file still open, then ends the process as the signal would have. The rename
//! replaces a symlink at the target rather than writing through it. A target that is one of the
//! command's inputs is refused.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};

use crate::escape::terminal::Shown;
use anyhow::{bail, Context, Result};

/// Suffix of the temporary files (`.NAME.PID-N.cuprof-tmp` beside NAME).
pub const TMP_SUFFIX: &str = ".cuprof-tmp";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// The temporary files being written, for the signal thread to remove.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

static ON_SIGNAL: AtomicBool = AtomicBool::new(false);

/// From now on, the first output written starts a thread that removes the temporary files
/// still open on SIGINT, SIGTERM or SIGHUP, then lets the signal end the process. A program
/// (the `cuprof` binary) asks for it; the library alone leaves the process's signals as they
/// are (a test using it in-process keeps the test harness's).
pub fn remove_temporaries_on_signal() {
    ON_SIGNAL.store(true, Ordering::Relaxed);
}

/// Starts, once and where asked ([`remove_temporaries_on_signal`]), the thread that removes
/// the live temporary files on SIGINT, SIGTERM or SIGHUP and then lets the signal end the
/// process.
fn remove_on_signal() {
    if !ON_SIGNAL.load(Ordering::Relaxed) {
        return;
    }
    static START: Once = Once::new();
    START.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("cuprof-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
                    for tmp in live.iter() {
                        let _ = std::fs::remove_file(tmp);
                    }
                    let _ = signal_hook::low_level::emulate_default_handler(sig);
                    // A signal whose default does not end the process: end it as Ctrl-C would.
                    std::process::exit(128 + sig);
                }
            });
    });
}

fn forget(tmp: &Path) {
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = live.iter().position(|p| p == tmp) {
        live.swap_remove(i);
    }
}

/// An output being written: the temporary file is removed unless [`Staged::commit`] renamed it.
#[derive(Debug)]
pub struct Staged {
    target: PathBuf,
    tmp: PathBuf,
    done: bool,
}

impl Staged {
    /// Creates the temporary file for `target` and returns it, opened for writing.
    pub fn create(target: &Path) -> Result<(Staged, File)> {
        let name = target
            .file_name()
            .with_context(|| format!("{}: not a file name", target.shown()))?
            .to_string_lossy()
            .into_owned();
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        remove_on_signal();
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let tmp = dir.join(format!(".{name}.{}-{n}{TMP_SUFFIX}", std::process::id()));
            // Known before it exists: the signal thread, which holds the list until the process
            // ends, then removes it or stops it from being created.
            LIVE.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(tmp.clone());
            let created = OpenOptions::new().write(true).create_new(true).open(&tmp);
            if created.is_err() {
                forget(&tmp);
            }
            match created {
                Ok(f) => {
                    let staged = Staged {
                        target: target.to_owned(),
                        tmp,
                        done: false,
                    };
                    return Ok((staged, f));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1_000_000 => continue,
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!(
                            "{}: cannot create a file in {}; pick a writable output path",
                            target.shown(),
                            dir.shown()
                        )
                    })
                }
            }
        }
    }

    /// The temporary file's path.
    pub fn tmp_path(&self) -> &Path {
        &self.tmp
    }

    /// Syncs `file` (the one [`Staged::create`] returned) and renames it over the target.
    pub fn commit(mut self, file: File) -> Result<()> {
        file.sync_all()
            .with_context(|| format!("{}: cannot write", self.target.shown()))?;
        drop(file);
        std::fs::rename(&self.tmp, &self.target)
            .with_context(|| format!("{}: cannot replace it", self.target.shown()))?;
        self.done = true;
        forget(&self.tmp);
        // The rename itself is durable once the directory is synced; failing that is harmless.
        if let Some(dir) = self.target.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
            forget(&self.tmp);
        }
    }
}

/// Writes what `f` writes (buffered) to `target` through a temporary file and a rename: for
/// an output made piece by piece, never whole in memory.
pub fn write_with(target: &Path, f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let (staged, file) = Staged::create(target)?;
    let mut w = io::BufWriter::with_capacity(1 << 16, file);
    f(&mut w)
        .and_then(|()| w.flush())
        .with_context(|| format!("{}: cannot write", target.shown()))?;
    let file = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("{}: cannot write", target.shown()))?;
    staged.commit(file)
}

/// Writes `bytes` to `target` through a temporary file and a rename.
pub fn write(target: &Path, bytes: &[u8]) -> Result<()> {
    let (staged, mut f) = Staged::create(target)?;
    f.write_all(bytes)
        .with_context(|| format!("{}: cannot write", target.shown()))?;
    staged.commit(f)
}

/// `a` and `b` are the same existing file (same device and inode, symlinks followed).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Refuses an output path that is one of `inputs`.
pub fn refuse_input(out: &Path, inputs: &[PathBuf]) -> Result<()> {
    if let Some(i) = inputs.iter().find(|i| same_file(out, i)) {
        bail!(
            "{}: the output is one of the inputs ({}); pick another output path",
            out.shown(),
            i.shown()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cuprof-output-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn listing(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// The library alone leaves the process's signals as they are: a test (or any program) that
    /// writes outputs through it keeps its own Ctrl-C, unless it asks
    /// ([`remove_temporaries_on_signal`]; nothing in these tests does).
    #[test]
    fn writing_outputs_leaves_the_signals_alone() {
        let d = scratch("signals");
        write(&d.join("out.txt"), b"x").unwrap();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: a zeroed sigaction is a valid output buffer.
            let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: a null new action only reads the current one into `old`.
            let read = unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) };
            assert_eq!(read, 0);
            // As the process was started: a shell starts a background job with SIGINT ignored.
            assert!(
                [libc::SIG_DFL, libc::SIG_IGN].contains(&old.sa_sigaction),
                "signal {sig} has a handler"
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_write_replaces_the_target_and_leaves_nothing_else() {
        let d = scratch("write");
        let t = d.join("out.txt");
        std::fs::write(&t, "old").unwrap();
        write(&t, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "new");
        assert_eq!(listing(&d), ["out.txt"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_abandoned_write_keeps_the_target() {
        let d = scratch("abandon");
        let t = d.join("out.txt");
        std::fs::write(&t, "old").unwrap();
        let (staged, mut f) = Staged::create(&t).unwrap();
        f.write_all(b"half").unwrap();
        assert_eq!(listing(&d).len(), 2, "out.txt and the temporary file");
        drop(staged);
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "old");
        assert_eq!(listing(&d), ["out.txt"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_target_is_replaced_not_followed() {
        let d = scratch("link");
        let outside = d.join("outside.txt");
        std::fs::write(&outside, "keep").unwrap();
        let t = d.join("summary.json");
        std::os::unix::fs::symlink(&outside, &t).unwrap();
        write(&t, b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&t).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "{}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn same_file_sees_through_names_and_links() {
        let d = scratch("same");
        let a = d.join("a");
        std::fs::write(&a, "x").unwrap();
        std::os::unix::fs::symlink(&a, d.join("l")).unwrap();
        std::fs::write(d.join("b"), "x").unwrap();
        assert!(same_file(&a, &d.join("l")));
        assert!(same_file(&a, &d.join(".").join("a")));
        assert!(!same_file(&a, &d.join("b")));
        assert!(!same_file(&a, &d.join("missing")));
        let e = refuse_input(&d.join("l"), &[d.join("b"), a.clone()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: the output is one of the inputs ({}); pick another output path",
                d.join("l").shown(),
                a.shown()
            )
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
