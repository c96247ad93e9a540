//! Output paths of the offline commands: written through a temporary file and a rename, never
//! one of the inputs, never through a symlink.

use std::path::Path;

use crate::analysis_support::*;

/// The command fails with exit status 1, one line on stderr starting `cuprof: ` and holding
/// `says`, and `kept` still holds the bytes it held before.
fn refused(args: &[&str], says: &str, kept: &Path) {
    let before = std::fs::read(kept).unwrap();
    let o = cuprof(args);
    let err = stderr_of(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("cuprof: "), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
    assert_eq!(
        std::fs::read(kept).unwrap(),
        before,
        "{args:?}: {kept:?} changed"
    );
}

#[test]
fn an_output_that_is_an_input_is_refused() {
    let dir = tempdir("out-inputs");
    let t = dir.join("job-rank0.trace.json.gz");
    sample().write_gz(&t);
    let ts = t.to_str().unwrap();
    let d = dir.to_str().unwrap();
    let link = dir.join("link.svg");
    std::os::unix::fs::symlink(&t, &link).unwrap();
    let as_summary = dir.join("r").join("summary.json");
    std::fs::create_dir_all(as_summary.parent().unwrap()).unwrap();
    std::fs::write(&as_summary, sample().json()).unwrap();
    let rd = dir.join("r");

    let table: [(&[&str], &Path); 7] = [
        (&["flame", ts, "-o", ts], &t),
        (&["flame", ts, "-o", link.to_str().unwrap()], &t),
        (&["flame", ts, "--folded", ts], &t),
        (&["merge", ts, "-o", ts], &t),
        // Found by listing the directory, and not a merged trace: refused, not overwritten.
        (&["merge", d, "-o", ts], &t),
        (
            &[
                "report",
                as_summary.to_str().unwrap(),
                "-o",
                rd.to_str().unwrap(),
            ],
            &as_summary,
        ),
        (&["flame", d, "-o", ts], &t),
    ];
    for (args, kept) in table {
        refused(args, "the output is one of the inputs", kept);
    }
    assert_eq!(
        listing(&dir),
        ["job-rank0.trace.json.gz", "link.svg", "r"],
        "no temporary files left"
    );
}

#[test]
fn report_replaces_a_symlinked_summary_instead_of_following_it() {
    let dir = tempdir("out-link");
    let t = dir.join("t.trace.json.gz");
    sample().write_gz(&t);
    let outside = dir.join("outside.json");
    std::fs::write(&outside, "keep me").unwrap();
    let rd = dir.join("report");
    std::fs::create_dir_all(&rd).unwrap();
    std::os::unix::fs::symlink(&outside, rd.join("summary.json")).unwrap();
    std::os::unix::fs::symlink(&outside, rd.join("report.md")).unwrap();
    std::os::unix::fs::symlink(&outside, rd.join("report.html")).unwrap();
    cuprof_ok(&["report", t.to_str().unwrap(), "-o", rd.to_str().unwrap()]);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    for name in ["summary.json", "report.md", "report.html"] {
        let md = std::fs::symlink_metadata(rd.join(name)).unwrap();
        assert!(md.is_file(), "{name} is a regular file now");
    }
    let s = read_json(&rd.join("summary.json"));
    assert_eq!(s["steps"]["count"], 4);
    assert_eq!(listing(&rd), ["report.html", "report.md", "summary.json"]);
}

#[test]
fn a_failed_merge_keeps_the_existing_output() {
    let dir = tempdir("out-merge-fail");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let mut r0 = Trace::new(0, 2);
    r0.launch("gemm", MAIN, 1_000, 0, 7, 1_000_000, 5_000);
    r0.write_gz(&traces.join("job-rank0.trace.json.gz"));
    // Rank 1 is corrupt after its header: the merge fails once it reaches it.
    let mut r1 = Trace::new(1, 2);
    r1.launch("gemm", MAIN, 1_000, 0, 7, 1_000_000, 5_000);
    r1.events.push("{\"ph\": \"X\", \"ts\": NaN}".into());
    r1.write_gz(&traces.join("job-rank1.trace.json.gz"));
    let out = dir.join("merged.trace.json.gz");
    std::fs::write(&out, "an earlier merge").unwrap();
    refused(
        &[
            "merge",
            traces.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        "not valid JSON",
        &out,
    );
    assert_eq!(listing(&dir), ["merged.trace.json.gz", "traces"]);
}

#[test]
fn merge_counts_each_ranks_events() {
    let dir = tempdir("out-merge-counts");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let mut r0 = Trace::new(0, 2);
    r0.metadata(&[0], &[(0, 7)], &[MAIN]);
    r0.launch("gemm", MAIN, 1_000, 0, 7, 1_000_000, 5_000);
    r0.launch("gemm", MAIN, 9_000, 0, 7, 2_000_000, 5_000);
    r0.write_gz(&traces.join("job-rank0.trace.json.gz"));
    let mut r1 = Trace::new(1, 2);
    r1.launch("gemm", MAIN, 1_000, 0, 7, 1_000_000, 5_000);
    r1.launch("gemm", MAIN, 9_000, 0, 7, 2_000_000, 5_000);
    r1.write_cut(&traces.join("job-rank1.trace.json.gz"), 4);
    let out = dir.join("merged.trace.json.gz");
    // An earlier merge sitting in the directory is skipped and replaced.
    let stale = traces.join("merged.trace.json.gz");
    cuprof_ok(&[
        "merge",
        traces.to_str().unwrap(),
        "-o",
        stale.to_str().unwrap(),
    ]);
    cuprof_ok(&[
        "merge",
        traces.to_str().unwrap(),
        "-o",
        stale.to_str().unwrap(),
    ]);
    cuprof_ok(&[
        "merge",
        traces.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    for path in [&out, &stale] {
        let m = read_gz_json(path);
        let ranks = m["cuprof"]["merged"]["ranks"].as_array().unwrap();
        let counts: Vec<(i64, u64, bool)> = ranks
            .iter()
            .map(|r| {
                (
                    r["rank"].as_i64().unwrap(),
                    r["events"].as_u64().unwrap(),
                    r["truncated"].is_string(),
                )
            })
            .collect();
        // rank 0: 7 metadata + 2 x (API call, kernel, 2 flow events); rank 1 cut after 4.
        assert_eq!(counts, [(0, 15, false), (1, 4, true)], "{path:?}");
        assert_eq!(
            m["cuprofMerged"],
            serde_json::json!({"run_id": null, "name": "job", "ranks": [0, 1]})
        );
        assert_eq!(m["cuprof"]["merged"]["reference_rank"], 0);
    }
    // The merged file is a trace `report` reads, with its rank table.
    let stdout = cuprof_ok(&["report", out.to_str().unwrap()]);
    assert!(stdout.contains("gemm"), "{stdout}");
    assert_eq!(
        listing(&traces),
        [
            "job-rank0.trace.json.gz",
            "job-rank1.trace.json.gz",
            "merged.trace.json.gz"
        ]
    );
}
