//! The names of the files the library writes, and creating them without ever overwriting one.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// `NAME-rankR.trace.json.gz`, or `NAME-rankR-cycleC.trace.json.gz` with a cycle. With
/// `tensorboard`, the layout TensorBoard's profiler plugin finds (`WORKER[.SPAN].pt.trace.json[.gz]`
/// in a folder, the folder being the run): `NAME-rankR.pt.trace.json.gz`, and
/// `NAME-rankR.C.pt.trace.json.gz` with a cycle, so that each rank is a worker and each cycle
/// one of its spans.
pub fn trace_file_name(name: &str, rank: u32, cycle: Option<u32>, tensorboard: bool) -> String {
    match (cycle, tensorboard) {
        (Some(c), false) => format!("{name}-rank{rank}-cycle{c}.trace.json.gz"),
        (None, false) => format!("{name}-rank{rank}.trace.json.gz"),
        (Some(c), true) => format!("{name}-rank{rank}.{c}{TENSORBOARD_SUFFIX}"),
        (None, true) => format!("{name}-rank{rank}{TENSORBOARD_SUFFIX}"),
    }
}

/// The end of the names TensorBoard's profiler plugin lists.
const TENSORBOARD_SUFFIX: &str = ".pt.trace.json.gz";

/// The endings a trace file's name may have, longest first (`.pt.trace.json.gz`: TensorBoard's
/// names, `cuprof run --tensorboard`).
pub const TRACE_SUFFIXES: [&str; 7] = [
    ".pt.trace.json.gz",
    ".pt.trace.json",
    ".trace.json.gz",
    ".trace.json",
    ".json.gz",
    ".json",
    ".gz",
];

/// `name` split into its stem and its trace ending ([`TRACE_SUFFIXES`]; `""` when none ends it,
/// or when it would leave no stem).
pub fn split_trace_suffix(name: &str) -> (&str, &str) {
    TRACE_SUFFIXES
        .iter()
        .find_map(|s| {
            name.strip_suffix(s)
                .filter(|stem| !stem.is_empty())
                .map(|stem| (stem, *s))
        })
        .unwrap_or((name, ""))
}

/// `NAME-rankR-memory-UNIXTIME.pickle` (cache-dit's memory snapshot name).
pub fn memory_file_name(name: &str, rank: u32, unix_time: u64) -> String {
    format!("{name}-rank{rank}-memory-{unix_time}.pickle")
}

/// A file created by [`unique_path`].
#[derive(Debug)]
pub struct UniqueFile {
    /// Opened for writing, new and empty.
    pub file: File,
    pub path: PathBuf,
    /// The wanted name was taken: the pid (and maybe a counter) was added. Say so.
    pub pid_added: bool,
}

impl UniqueFile {
    /// The line to tell the user when the pid was added (`None` otherwise).
    pub fn renamed_note(&self, wanted: &str) -> Option<String> {
        self.pid_added.then(|| {
            format!(
                "{wanted} already exists (another process with the same rank?): wrote {} instead",
                crate::text::path_line(&self.path)
            )
        })
    }
}

/// Suffixes the pid goes in front of.
const KNOWN_SUFFIXES: [&str; 4] = [
    TENSORBOARD_SUFFIX,
    ".trace.json.gz",
    ".trace.json",
    ".pickle",
];

/// `file_name` with `-pidPID` (and `-N` for N >= 2) inserted before its suffix
/// (`.pt.trace.json.gz` and TensorBoard's span `.C` before it, `.trace.json.gz`, `.pickle`, else
/// the last extension): the worker TensorBoard sees gets the pid, its span stays.
fn with_pid(file_name: &str, pid: u32, n: u32) -> String {
    let mut cut = KNOWN_SUFFIXES
        .iter()
        .find(|s| file_name.len() > s.len() && file_name.ends_with(*s))
        .map(|s| file_name.len() - s.len())
        .or_else(|| file_name.rfind('.').filter(|&i| i > 0))
        .unwrap_or(file_name.len());
    if file_name[cut..] == *TENSORBOARD_SUFFIX {
        let stem = &file_name[..cut];
        let digits = stem.len() - stem.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 && stem[..stem.len() - digits].ends_with('.') {
            cut -= digits + 1;
        }
    }
    let (stem, suffix) = file_name.split_at(cut);
    if n <= 1 {
        format!("{stem}-pid{pid}{suffix}")
    } else {
        format!("{stem}-pid{pid}-{n}{suffix}")
    }
}

/// Create `dir/file_name` (and `dir`, if missing), never overwriting: when the name is taken,
/// `NAME-rankR-pidPID.trace.json.gz` (then `...-pidPID-2...`, `-3`...). Race-free: each
/// candidate is created with `O_EXCL` (`create_new`), so two processes never get one file.
pub fn unique_path(dir: &Path, file_name: &str, pid: u32) -> io::Result<UniqueFile> {
    std::fs::create_dir_all(dir)?;
    let candidates = std::iter::once((file_name.to_string(), false))
        .chain((1..=1000).map(|n| (with_pid(file_name, pid, n), true)));
    for (name, pid_added) in candidates {
        let path = dir.join(name);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => {
                return Ok(UniqueFile {
                    file,
                    path,
                    pid_added,
                })
            }
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            Err(_) => {}
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{}: 1000 names with pid {pid} are all taken",
            crate::text::path_line(&dir.join(file_name))
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_name_splits_into_its_stem_and_ending() {
        assert_eq!(
            split_trace_suffix("t-rank0.trace.json.gz"),
            ("t-rank0", ".trace.json.gz")
        );
        assert_eq!(
            split_trace_suffix("t-rank0.2.pt.trace.json.gz"),
            ("t-rank0.2", ".pt.trace.json.gz")
        );
        assert_eq!(split_trace_suffix("x.json"), ("x", ".json"));
        assert_eq!(split_trace_suffix(".json"), (".json", ""));
        assert_eq!(split_trace_suffix("notes.txt"), ("notes.txt", ""));
    }
    use crate::config::test_dir::test_dir as temp_dir;

    #[test]
    fn file_names() {
        assert_eq!(
            trace_file_name("run", 0, None, false),
            "run-rank0.trace.json.gz"
        );
        assert_eq!(
            trace_file_name("run", 3, None, true),
            "run-rank3.pt.trace.json.gz"
        );
        assert_eq!(
            trace_file_name("run", 3, Some(2), true),
            "run-rank3.2.pt.trace.json.gz"
        );
        assert_eq!(
            trace_file_name("run", 12, Some(3), false),
            "run-rank12-cycle3.trace.json.gz"
        );
        assert_eq!(
            memory_file_name("run", 1, 1_700_000_123),
            "run-rank1-memory-1700000123.pickle"
        );
        assert_eq!(
            with_pid("run-rank0.trace.json.gz", 42, 1),
            "run-rank0-pid42.trace.json.gz"
        );
        assert_eq!(
            with_pid("run-rank0-cycle2.trace.json.gz", 42, 3),
            "run-rank0-cycle2-pid42-3.trace.json.gz"
        );
        // TensorBoard's worker gets the pid, its span stays.
        assert_eq!(
            with_pid("run-rank0.pt.trace.json.gz", 42, 1),
            "run-rank0-pid42.pt.trace.json.gz"
        );
        assert_eq!(
            with_pid("run-rank0.12.pt.trace.json.gz", 42, 2),
            "run-rank0-pid42-2.12.pt.trace.json.gz"
        );
        assert_eq!(
            with_pid("a.b-rank1-memory-5.pickle", 7, 1),
            "a.b-rank1-memory-5-pid7.pickle"
        );
        assert_eq!(with_pid("x.bin", 7, 1), "x-pid7.bin");
        assert_eq!(with_pid("noext", 7, 1), "noext-pid7");
    }

    #[test]
    fn unique_path_never_overwrites() {
        use std::io::Write;
        let root = temp_dir("unique");
        let dir = root.join("created/if/missing");
        let name = trace_file_name("run", 0, None, false);
        let mut a = unique_path(&dir, &name, 100).unwrap();
        assert!(!a.pid_added);
        assert_eq!(a.path, dir.join("run-rank0.trace.json.gz"));
        assert_eq!(a.renamed_note(&name), None);
        a.file.write_all(b"first").unwrap();
        let b = unique_path(&dir, &name, 200).unwrap();
        assert!(b.pid_added);
        assert_eq!(b.path, dir.join("run-rank0-pid200.trace.json.gz"));
        let note = b.renamed_note(&name).unwrap();
        assert!(note.contains("run-rank0.trace.json.gz already exists") && note.contains("pid200"));
        let c = unique_path(&dir, &name, 200).unwrap();
        assert_eq!(c.path, dir.join("run-rank0-pid200-2.trace.json.gz"));
        assert_eq!(std::fs::read(&a.path).unwrap(), b"first");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn unique_path_is_race_free() {
        let dir = temp_dir("race");
        let paths: Vec<PathBuf> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let dir = &dir;
                    s.spawn(move || {
                        unique_path(dir, "r-rank0.trace.json.gz", 1000 + i)
                            .unwrap()
                            .path
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut uniq = paths.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), 8);
        assert_eq!(
            paths
                .iter()
                .filter(|p| p.ends_with("r-rank0.trace.json.gz"))
                .count(),
            1
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
