//! Ctrl-C (or SIGTERM) while a command writes its output: the temporary file it was writing
//! is removed, the target is not created, and the process ends by the signal (issue 26).

use crate::analysis_support::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A rank with enough kernels that merging or repairing it takes a while.
fn big_rank(path: &Path) {
    let mut t = Trace::new(0, 1);
    for i in 0..300_000i64 {
        t.launch(
            "gemm_kernel_with_a_long_name",
            MAIN,
            i * 2_000,
            0,
            7,
            i * 2_000 + 500,
            1_000,
        );
    }
    t.write_gz(path);
}

/// The files under `dir`, at any depth (`export` writes into a tree of directories).
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            found.extend(files_under(&e.path()));
        } else {
            found.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    found
}

fn temporaries(dir: &Path) -> Vec<String> {
    files_under(dir)
        .into_iter()
        .filter(|n| n.ends_with(".cuprof-tmp"))
        .collect()
}

/// Runs `cuprof ARGS`, sends `signal` once a temporary output file exists in `out_dir`, and
/// checks what is left.
fn interrupt(args: &[&str], out_dir: &Path, target: &Path, signal: i32) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cuprof"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while temporaries(out_dir).is_empty() {
        assert!(
            Instant::now() < deadline,
            "no temporary file appeared for {args:?}"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "{args:?} ended before it was interrupted"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: a plain kill(2) to our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(signal), "{args:?}: {status:?}");
    assert_eq!(temporaries(out_dir), Vec::<String>::new(), "{args:?}");
    assert!(!target.exists(), "{args:?}");
}

#[test]
fn interrupted_merge_and_repair_leave_no_file_behind() {
    let dir = tempdir("interrupted");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let rank = traces.join("job-rank0.trace.json.gz");
    big_rank(&rank);
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();

    let merged = out_dir.join("merged.trace.json.gz");
    let m = [
        "merge",
        traces.to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ];
    interrupt(&m, &out_dir, &merged, libc::SIGINT);
    interrupt(&m, &out_dir, &merged, libc::SIGTERM);

    let repaired = out_dir.join("repaired.trace.json.gz");
    let r = [
        "repair",
        rank.to_str().unwrap(),
        "-o",
        repaired.to_str().unwrap(),
    ];
    interrupt(&r, &out_dir, &repaired, libc::SIGINT);
    // The input is untouched, and the same commands still run to completion.
    cuprof_ok(&m);
    assert!(merged.exists());
    assert_eq!(temporaries(&out_dir), Vec::<String>::new());
}

#[test]
fn interrupted_export_leaves_no_file_behind() {
    let dir = tempdir("interrupted-export");
    let rank = dir.join("job-rank0.trace.json.gz");
    big_rank(&rank);
    let out = dir.join("dataset");
    let e = [
        "export",
        rank.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    let kernels = out.join("kernels/rank=0/cycle=0/job-rank0.parquet");
    interrupt(&e, &out, &kernels, libc::SIGINT);
    interrupt(&e, &out, &kernels, libc::SIGTERM);
    // Not one file of the dataset: every table is written under a temporary name until the
    // whole input has been read.
    assert_eq!(files_under(&out), Vec::<String>::new());
    cuprof_ok(&e);
    let mut written = files_under(&out);
    written.sort();
    assert_eq!(
        written,
        [
            "files.parquet",
            "job-rank0.parquet",
            "job-rank0.parquet",
            "job-rank0.parquet",
            "job-rank0.parquet",
            "job-rank0.parquet",
            "job-rank0.parquet",
            "job-rank0.parquet",
            "job-rank0.parquet",
        ]
    );
}
