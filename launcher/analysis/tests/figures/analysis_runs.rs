//! Runs: `report`, `compare` and `merge` read one run of the files they are given, the newest
//! unless `--run` names another; a merged trace is never counted beside its rank files; other
//! tools' traces and cuprof's are separate runs.

use crate::analysis_support::*;
use crate::command::cuprof;
use serde_json::Value;
use std::path::Path;

const S: i64 = 1_000_000_000;

/// A rank of run `(name, id)` (`None`: a trace written before run ids) with `n` launches of
/// `kernel`, its clock anchor `secs` after [`BASE`].
fn rank(
    rank: i64,
    world: i64,
    run: Option<(&str, &str)>,
    kernel: &str,
    n: i64,
    secs: i64,
) -> Trace {
    let mut t = Trace::new(rank, world);
    t.run = run.map(|(name, id)| (name.to_string(), id.to_string()));
    t.clock.0 = BASE + secs * S;
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    for k in 0..n {
        t.launch(
            kernel,
            MAIN,
            1_000 + k * 10_000,
            0,
            7,
            100_000 + k * 10_000,
            5_000,
        );
    }
    t
}

/// `cuprof ARGS`, asserting success: stdout and stderr.
fn run(args: &[&str]) -> (String, String) {
    let o = cuprof(args);
    assert!(o.status.success(), "{args:?}: {}", stderr_of(&o));
    (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

/// `cuprof report PATH -o OUT [ARGS]`: stderr, and summary.json's kernels (name, count), files
/// and ranks.
fn reported(path: &Path, out: &Path, args: &[&str]) -> (String, Vec<(String, u64)>, usize, usize) {
    let mut all = vec![
        "report",
        path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let (_, stderr) = run(&all);
    let s = read_json(&out.join("summary.json"));
    let kernels = s["top_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["name"].as_str().unwrap().to_string(),
                k["count"].as_u64().unwrap(),
            )
        })
        .collect();
    let len = |v: &Value| v.as_array().unwrap().len();
    (stderr, kernels, len(&s["files"]), len(&s["ranks"]))
}

fn kernels(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

/// Two programs written into one folder: the newest is reported, `--run` picks the other by
/// name or id, and their kernels are never added together.
#[test]
fn two_runs_in_one_folder() {
    let dir = tempdir("runs-two");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let train = Some(("train", "n1-10-1700000001"));
    rank(0, 2, train, "gemm_a", 3, 1).write_gz(&traces.join("train-rank0.trace.json.gz"));
    rank(1, 2, train, "gemm_a", 3, 1).write_gz(&traces.join("train-rank1.trace.json.gz"));
    let eval = Some(("eval", "n1-20-1700000009"));
    rank(0, 1, eval, "gemm_b", 2, 9).write_gz(&traces.join("eval-rank0.trace.json.gz"));

    let t = traces.display();
    let (stderr, k, files, ranks) = reported(&traces, &dir.join("newest"), &[]);
    assert_eq!(
        stderr,
        format!(
            "2 runs in {t}; reading the newest (choose another with --run NAME or --run ID):\n  \
             * eval (run n1-20-1700000009): 1 file(s), 1 rank(s), 2023-11-14 22:13:29 UTC\n    \
             train (run n1-10-1700000001): 2 file(s), 2 rank(s), 2023-11-14 22:13:21 UTC\n"
        )
    );
    assert_eq!((k, files, ranks), (kernels(&[("gemm_b", 2)]), 1, 1));

    for pick in ["train", "n1-10-1700000001"] {
        let (stderr, k, files, ranks) = reported(&traces, &dir.join(pick), &["--run", pick]);
        assert!(
            stderr.starts_with(&format!("2 runs in {t}; reading the one --run names:\n")),
            "{stderr}"
        );
        assert!(
            stderr.contains("\n  * train (run n1-10-1700000001): 2 file(s)"),
            "{stderr}"
        );
        assert_eq!((k, files, ranks), (kernels(&[("gemm_a", 6)]), 2, 2));
    }
    let o = cuprof(&["report", traces.to_str().unwrap(), "--run", "test"]);
    assert_eq!(
        stderr_of(&o),
        format!(
            "cuprof: --run test: no run of that name or id in {t}; pick one of: eval (run \
             n1-20-1700000009), train (run n1-10-1700000001)\n"
        )
    );

    // compare: the newest of a side holding several, said so.
    let (_, stderr) = run(&[
        "compare",
        traces.to_str().unwrap(),
        traces.join("eval-rank0.trace.json.gz").to_str().unwrap(),
    ]);
    assert!(
        stderr.starts_with(&format!(
            "2 runs in A ({t}); reading the newest (choose another with --run NAME or --run ID):\n"
        )),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 3, "{stderr}");

    // merge: the newest, or the run named.
    let merged = dir.join("train.trace.json.gz");
    run(&[
        "merge",
        traces.to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
        "--run",
        "train",
    ]);
    let m = read_gz_json(&merged);
    assert_eq!(
        m["cuprofMerged"],
        serde_json::json!({"run_id": "n1-10-1700000001", "name": "train", "ranks": [0, 1]})
    );
}

/// A folder holding the ranks and their merged file: the ranks are read once, the merged file
/// skipped with one line; alone, the merged file is read.
#[test]
fn ranks_and_their_merged_file() {
    let dir = tempdir("runs-merged");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let job = Some(("job", "n1-7-1700000001"));
    rank(0, 2, job, "gemm", 3, 1).write_gz(&traces.join("job-rank0.trace.json.gz"));
    rank(1, 2, job, "gemm", 3, 1).write_gz(&traces.join("job-rank1.trace.json.gz"));
    let merged = traces.join("merged.trace.json.gz");
    run(&[
        "merge",
        traces.to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);

    let (stderr, k, files, ranks) = reported(&traces, &dir.join("all"), &[]);
    assert_eq!(
        stderr,
        format!(
            "skipping {}: a merged trace of run job, whose rank files are among the inputs\n",
            merged.display()
        )
    );
    assert_eq!((k, files, ranks), (kernels(&[("gemm", 6)]), 2, 2));

    let (stderr, k, files, _) = reported(&merged, &dir.join("merged"), &[]);
    assert_eq!(stderr, "");
    assert_eq!((k, files), (kernels(&[("gemm", 6)]), 1));
}

/// A copy of a rank's trace beside it (torch.profiler's `export_chrome_trace` of cuprof's file
/// under `cuprof run --as-torch-profiler`, into the same folder): one trace, read once.
#[test]
fn a_copy_of_a_trace_beside_it_is_read_once() {
    let dir = tempdir("runs-copy");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let own = traces.join("job-rank0.trace.json.gz");
    rank(0, 1, Some(("job", "n1-7-1700000001")), "gemm", 3, 1).write_gz(&own);
    let copy = traces.join("flux.trace.json.gz");
    std::fs::copy(&own, &copy).unwrap();
    let (stderr, k, files, ranks) = reported(&traces, &dir.join("out"), &[]);
    assert_eq!(
        stderr,
        format!(
            "skipping {}: a copy of {} (the same run, process and cycle)\n",
            copy.display(),
            own.display()
        )
    );
    assert_eq!((k, files, ranks), (kernels(&[("gemm", 3)]), 1, 1));
}

/// A program traced by torch.profiler beside cuprof's traces of it: separate runs, never
/// ranks of one. cuprof's traces without a run id (written before run ids) are one run by
/// their shared name.
#[test]
fn other_tools_traces_are_runs_of_their_own() {
    let dir = tempdir("runs-tools");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let prog = Some(("prog", "n1-5-1700000002"));
    rank(0, 1, prog, "k_cuprof", 1, 2).write_gz(&traces.join("prog-rank0.trace.json.gz"));
    rank(0, 2, None, "k_old", 1, 1).write_gz(&traces.join("old-rank0.trace.json.gz"));
    rank(1, 2, None, "k_old", 1, 1).write_gz(&traces.join("old-rank1.trace.json.gz"));
    // torch.profiler's: no `cuprof` member, its own name; dated by its modification time.
    let torch = traces.join("node1_4242.1700000000000.pt.trace.json");
    let text: String = rank(0, 1, None, "k_torch", 2, 0)
        .json()
        .lines()
        .filter(|l| !l.starts_with(" \"cuprof\": "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&torch, text).unwrap();
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_nanos((BASE + 5 * S) as u64);
    std::fs::File::options()
        .write(true)
        .open(&torch)
        .unwrap()
        .set_modified(when)
        .unwrap();

    let (stderr, k, files, ranks) = reported(&traces, &dir.join("newest"), &[]);
    assert_eq!(
        stderr,
        format!(
            "3 runs in {}; reading the newest (choose another with --run NAME or --run ID):\n  \
             * node1_4242.1700000000000.pt: 1 file(s), 1 rank(s), 2023-11-14 22:13:25 UTC\n    \
             prog (run n1-5-1700000002): 1 file(s), 1 rank(s), 2023-11-14 22:13:22 UTC\n    \
             old: 2 file(s), 2 rank(s), 2023-11-14 22:13:21 UTC\n",
            traces.display()
        )
    );
    assert_eq!((k, files, ranks), (kernels(&[("k_torch", 2)]), 1, 1));
    let (_, k, files, ranks) = reported(&traces, &dir.join("prog"), &["--run", "prog"]);
    assert_eq!((k, files, ranks), (kernels(&[("k_cuprof", 1)]), 1, 1));
    let (_, k, files, ranks) = reported(&traces, &dir.join("old"), &["--run", "old"]);
    assert_eq!((k, files, ranks), (kernels(&[("k_old", 2)]), 2, 2));
}
