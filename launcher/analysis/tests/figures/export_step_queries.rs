//! docs/tables.md's two kernel-time-per-step queries, taken from the document itself and run in
//! DuckDB on an exported trace whose GPU runs behind the host: the one that cuts by GPU time
//! moves each step's late kernel into the next step and loses the last one; the one that joins
//! kernels to their launch calls on `correlation` gives every step its own kernels.
//!
//! Needs the `duckdb` Python package: `bash scripts/test.sh` installs
//! scripts/python-requirements.txt into a virtual environment and puts it first on PATH.

use crate::analysis_support::*;
use crate::export_support::{duckdb, query_after};

const US: i64 = 1000;

#[test]
fn kernel_time_per_step_by_gpu_time_and_by_launch() {
    let dir = tempdir("export-step-queries");
    let mut t = Trace::new(0, 1);
    // Three steps of 100 µs; in each, two launches (at 10 and 20 µs) of 40 µs kernels that the
    // GPU runs at 90 and 130 µs into the step: the second starts after its step has ended.
    for k in 0..3 {
        let s = 1_000 * US + k * 100 * US;
        t.step(k, MAIN, s, 100 * US, None);
        t.launch("gemm", MAIN, s + 10 * US, 0, 7, s + 90 * US, 40 * US);
        t.launch("gemm", MAIN, s + 20 * US, 0, 7, s + 130 * US, 40 * US);
    }
    let trace = dir.join("job-rank0.trace.json.gz");
    t.write_gz(&trace);
    let out = dir.join("dataset");
    cuprof_ok(&[
        "export",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);

    let by_gpu = query_after("Kernel time per step and rank, each kernel counted in the step it");
    assert_eq!(
        duckdb::<Vec<[i64; 3]>>(&out, &by_gpu),
        [[0, 0, 40 * US], [0, 1, 80 * US], [0, 2, 80 * US]]
    );
    let by_launch = query_after("Steps are host time: when the GPU runs behind the host");
    assert!(by_launch.contains("JOIN api_calls"), "{by_launch}");
    assert_eq!(
        duckdb::<Vec<[i64; 3]>>(&out, &by_launch),
        [[0, 0, 80 * US], [0, 1, 80 * US], [0, 2, 80 * US]]
    );
}
