//! `report`, `flame`, `compare` and `merge` over a directory read one file per worker; what they
//! write must not depend on how many workers there are: each output with `-j 3` is byte for
//! byte the one with `-j 1`. The ranks share some names and not others, in different orders, so
//! that names met in another order would change ids, tables and their ties.

use std::path::Path;

use crate::analysis_support::*;

const MS: i64 = 1_000_000;

/// Rank `r`: its own kernels, ranges and operators, and ones every rank has, met in an order that
/// differs by rank; equal totals, so that ties are broken by name.
fn rank(r: i64) -> Trace {
    let mut t = Trace::new(r, 5);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    let names = [
        format!("own_kernel_{r}"),
        "gemm".to_string(),
        format!("z_kernel_{}", 4 - r),
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL".to_string(),
    ];
    let mut at = 0;
    for step in 0..3 {
        t.step(step, MAIN, at, 10 * MS, None);
        t.range(&format!("phase_{}", (r + step) % 3), MAIN, at, 9 * MS);
        for k in 0..4 {
            let name = &names[((r + step) as usize + k) % names.len()];
            let ext = 100 * step + k as i64 + 1;
            let op_start = at + k as i64 * 2 * MS;
            t.cpu_op(
                &format!("aten::op_{}", (k as i64 + r) % 3),
                MAIN,
                op_start,
                MS,
                ext,
                Some("[[8, 64]]"),
                None,
            );
            t.launch_in(
                ext,
                "cudaLaunchKernel",
                "kernel",
                name,
                MAIN,
                op_start + 1000,
                op_start + 100_000,
                MS,
                true,
            );
        }
        at += 10 * MS;
    }
    t
}

fn run(args: &[&str]) -> Vec<u8> {
    let o = cuprof(args);
    assert!(
        o.status.success(),
        "cuprof {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn outputs_do_not_depend_on_the_number_of_workers() {
    let dir = tempdir("parallel");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    for r in 0..5 {
        rank(r).write_gz(&traces.join(format!("job-rank{r}.trace.json.gz")));
    }
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    for r in [3, 1, 4] {
        rank(r).write_gz(&other.join(format!("job-rank{r}.trace.json.gz")));
    }
    let t = traces.display().to_string();
    let o = other.display().to_string();
    let mut outputs: Vec<Vec<Vec<u8>>> = Vec::new();
    for jobs in ["1", "3"] {
        let out = dir.join(format!("j{jobs}"));
        let d = out.display().to_string();
        // Standard outputs name the output files, which differ: those names become OUT.
        let run = |args: &[&str]| {
            String::from_utf8(run(args))
                .unwrap()
                .replace(&d, "OUT")
                .into_bytes()
        };
        let mut got = vec![run(&["report", &t, "-o", &d, "-j", jobs])];
        for f in ["summary.json", "report.md", "report.html"] {
            got.push(read(&out.join(f)));
        }
        let svg = out.join("flame.svg");
        got.push(run(&[
            "flame",
            &t,
            "-o",
            &svg.display().to_string(),
            "-j",
            jobs,
        ]));
        got.push(read(&svg));
        got.push(run(&["compare", &t, &o, "-j", jobs]));
        got.push(run(&["compare", &t, &o, "--json", "-j", jobs]));
        let merged = out.join("merged.trace.json.gz");
        let m = merged.display().to_string();
        got.push(run(&["merge", &t, "-o", &m, "-j", jobs]));
        got.push(read(&merged));
        outputs.push(got);
    }
    let names = [
        "report stdout",
        "summary.json",
        "report.md",
        "report.html",
        "flame stdout",
        "flame.svg",
        "compare",
        "compare --json",
        "merge stdout",
        "merged trace",
    ];
    for (i, name) in names.iter().enumerate() {
        assert!(
            outputs[0][i] == outputs[1][i],
            "{name} differs between -j 1 and -j 3"
        );
    }
    // The figures are those of the five ranks, and the merged trace holds every event.
    let s = read_json(&dir.join("j3/summary.json"));
    assert_eq!(s["cross_rank"]["ranks"], 5);
    assert_eq!(s["top_kernels"][0]["name"], "gemm");
    assert_eq!(s["top_kernels"][0]["count"], 15);
    let merged = read_gz_json(&dir.join("j3/merged.trace.json.gz"));
    let ranks = merged["cuprof"]["merged"]["ranks"].as_array().unwrap();
    let events: Vec<i64> = ranks
        .iter()
        .map(|r| r["events"].as_i64().unwrap())
        .collect();
    let per_rank = events[0];
    assert_eq!(events, [per_rank; 5]);
    // 3 steps, 3 ranges, 12 operators, 12 launches, 12 kernels and 7 metadata events.
    assert_eq!(per_rank, 49);
}
