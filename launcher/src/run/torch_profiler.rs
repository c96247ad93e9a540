//! `cuprof run --as-torch-profiler`: the program's `torch.profiler.profile(...)` calls become
//! `cuprof.profile`'s, with no change to the program. A private folder holding the package's
//! `sitecustomize.py` (python/cuprof/_site) goes first on the program's PYTHONPATH, so every
//! Python process of the run calls `cuprof.install()` at start; the folder is removed when the
//! program ends.

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cuprof_analysis::escape::terminal::Shown;

/// The `sitecustomize.py` the folder holds.
const SITECUSTOMIZE: &str = include_str!("../../../python/cuprof/_site/sitecustomize.py");

/// The folder put on PYTHONPATH; removed with its file when dropped.
pub(super) struct SiteFolder(PathBuf);

impl SiteFolder {
    /// Creates the folder (mode 0700, a new name under `tmp`) and its `sitecustomize.py`.
    pub(super) fn create(tmp: &Path) -> Result<SiteFolder> {
        let mut last = None;
        for attempt in 0..16u32 {
            let dir = tmp.join(format!("cuprof-site-{}-{attempt}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => {
                    let folder = SiteFolder(dir);
                    let file = folder.0.join("sitecustomize.py");
                    let mut f = std::fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&file)
                        .with_context(|| {
                            format!("--as-torch-profiler: creating {}", file.shown())
                        })?;
                    std::io::Write::write_all(&mut f, SITECUSTOMIZE.as_bytes()).with_context(
                        || format!("--as-torch-profiler: writing {}", file.shown()),
                    )?;
                    return Ok(folder);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("--as-torch-profiler: creating a folder in {}", tmp.shown())
                    })
                }
            }
        }
        Err(last.expect("16 attempts"))
            .with_context(|| format!("--as-torch-profiler: creating a folder in {}", tmp.shown()))
    }

    /// The program's PYTHONPATH with the folder first.
    pub(super) fn python_path(&self, existing: Option<&std::ffi::OsStr>) -> OsString {
        let mut v = self.0.clone().into_os_string();
        if let Some(rest) = existing.filter(|e| !e.is_empty()) {
            v.push(":");
            v.push(rest);
        }
        v
    }
}

impl Drop for SiteFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0.join("sitecustomize.py"));
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_holds_the_packages_sitecustomize_and_goes_first_then_away() {
        let tmp = std::env::temp_dir().join(format!("cuprof-site-test-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let folder = SiteFolder::create(&tmp).unwrap();
        let dir = folder.0.clone();
        assert_eq!(
            dir.file_name().unwrap().to_str().unwrap(),
            format!("cuprof-site-{}-0", std::process::id())
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("sitecustomize.py")).unwrap(),
            SITECUSTOMIZE
        );
        assert!(SITECUSTOMIZE.contains("cuprof.install()"));
        assert_eq!(folder.python_path(None), dir.clone().into_os_string());
        assert_eq!(
            folder.python_path(Some("/a:/b".as_ref())),
            OsString::from(format!("{}:/a:/b", dir.to_string_lossy()))
        );
        // A second run's folder gets the next name.
        let second = SiteFolder::create(&tmp).unwrap();
        assert_eq!(
            second.0.file_name().unwrap().to_str().unwrap(),
            format!("cuprof-site-{}-1", std::process::id())
        );
        drop(folder);
        drop(second);
        assert!(!dir.exists());
        std::fs::remove_dir(&tmp).unwrap();
    }
}
