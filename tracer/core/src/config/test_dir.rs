//! Test support: a fresh temporary directory per test, for the tests of the files and the report.

/// A fresh (removed if present) temporary directory path for one test.
pub(super) fn test_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cuprof-config-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}
