//! What clap refuses before any library call: the binary's own.

use crate::analysis_support::*;

/// `flame --memory --cpu`: refused, one line. Moved unchanged from the figure tests
/// (analysis_operators.rs, `allocations_by_operator_and_python_line`), which now call the
/// library in-process, past the argument parser.
#[test]
fn flame_memory_with_cpu_is_refused() {
    let dir = tempdir("ops-memory-args");
    let trace = dir.join("run-rank0.trace.json.gz");
    with_allocations().write_gz(&trace);
    let o = cuprof(&["flame", trace.to_str().unwrap(), "--memory", "--cpu"]);
    assert!(!o.status.success());
    assert!(
        stderr_of(&o).contains("cannot be used with"),
        "{}",
        stderr_of(&o)
    );
}
