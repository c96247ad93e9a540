//! `cuprof report` on inputs that are not traces, on malformed events and on traces of other
//! shapes (older Kineto categories, other accelerators): one table over generated files, each
//! case with its exact exit status, the one line it must print and the counts in summary.json.

use crate::analysis_support::*;
use serde_json::Value;

/// What a case must produce.
enum Expect {
    /// Exit status 1 and exactly this line on stderr (`{P}` is the file's path).
    Error(&'static str),
    /// Exit status 0, this line in stdout and these summary.json `files[0]` members.
    Report {
        line: &'static str,
        file: &'static [(&'static str, i64)],
        /// (kernel name, count) of `top_kernels`, in order.
        kernels: &'static [(&'static str, u64)],
    },
}

const PASS: &str = "pass a cuprof `*.trace.json.gz` or another Kineto/Chrome JSON trace";

/// A plain JSON trace with a header and these events.
fn trace(events: &[String]) -> String {
    format!(
        "{{\"schemaVersion\": 1, \"traceEvents\": [\n{}\n]}}\n",
        events.join(",\n")
    )
}

fn x(cat: &str, name: &str, pid: i64, ts: &str, dur: &str) -> String {
    format!(
        "{{\"ph\": \"X\", \"cat\": {}, \"name\": {}, \"pid\": {pid}, \"tid\": 7, \"ts\": {ts}, \"dur\": {dur}, \"args\": {{\"device\": {pid}, \"correlation\": 1}}}}",
        q(cat),
        q(name)
    )
}

fn malformed() -> String {
    trace(&[
        x("kernel", "good", 0, "10.000", "2.000"),
        x("kernel", "negative", 0, "20.000", "-3.000"),
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"no_ts\", \"pid\": 0, \"tid\": 7, \"dur\": 1.0}".into(),
        x("kernel", "string_ts", 0, "\"30.0\"", "1.000"),
        x("kernel", "string_dur", 0, "40.000", "\"1\""),
        x("kernel", "huge_dur", 0, "50.000", "1e999"),
        x("cuda_runtime", "null_ts", 1234, "null", "1.000"),
    ])
}

fn old_kineto() -> String {
    trace(&[
        x("Runtime", "cudaLaunchKernel", 1234, "1.000", "1.000"),
        x("Kernel", "gemm", 0, "10.000", "4.000"),
        x("Kernel", "gemm", 0, "20.000", "4.000"),
        x("Kernel", "relu", 0, "30.000", "1.000"),
        x("Kernel", "gemm", 0, "40.000", "4.000"),
        x(
            "Memcpy",
            "Memcpy HtoD (Pageable -> Device)",
            0,
            "50.000",
            "2.000",
        ),
        x("Memset", "Memset (Device)", 0, "60.000", "1.000"),
    ])
}

fn other_accelerator() -> String {
    trace(&[
        x("cpu_op", "aten::mm", 1234, "1.000", "10.000"),
        x("python_function", "forward", 1234, "0.000", "20.000"),
        x("mtia_ccp_events", "op0", 0, "2.000", "1.000"),
        x("mtia_ccp_events", "op1", 0, "4.000", "1.000"),
        x("mtia_ccp_events", "op2", 0, "6.000", "1.000"),
        x("hpu_op", "matmul", 1, "2.000", "3.000"),
        x("hpu_op", "add", 1, "6.000", "1.000"),
    ])
}

fn cases() -> Vec<(&'static str, String, Expect)> {
    vec![
        (
            "empty_object.json",
            "{}".into(),
            Expect::Error(
                "cuprof: {P}: a JSON object without `traceEvents` (0 other member(s)), not a \
                 Chrome trace; {PASS}",
            ),
        ),
        (
            "other_object.json",
            "{\"a\": 1, \"b\": [1, 2]}".into(),
            Expect::Error(
                "cuprof: {P}: a JSON object without `traceEvents` (2 other member(s)), not a \
                 Chrome trace; {PASS}",
            ),
        ),
        (
            "empty_array.json",
            "[]".into(),
            Expect::Error("cuprof: {P}: an empty JSON array, with no trace events; {PASS}"),
        ),
        (
            "execution_trace.json",
            "{\"schema\": \"1.0.1\", \"pid\": 7, \"time\": \"2024-01-01\", \"start_ts\": 5, \
             \"nodes\": [{\"id\": 1, \"name\": \"[pytorch|profiler|execution_trace|thread]\"}]}"
                .into(),
            Expect::Error(
                "cuprof: {P}: a PyTorch execution trace (`nodes`, no `traceEvents`), not a \
                 Chrome trace; pass the Kineto trace of the same run (`*.pt.trace.json`) or \
                 cuprof's `*.trace.json.gz`",
            ),
        ),
        (
            "events_not_array.json",
            "{\"traceEvents\": 5}".into(),
            Expect::Error(
                "cuprof: {P}: not a Chrome trace: `traceEvents` is not an array at uncompressed \
                 byte 16; {PASS} (gzip or plain)",
            ),
        ),
        (
            "malformed.json",
            malformed(),
            Expect::Report {
                line: "warning: {P}: 5 malformed event(s) skipped (ts or dur missing, not a \
                       number, not finite or beyond ±2^62 ns), 1 clamped (negative dur read as 0)",
                file: &[
                    ("events", 7),
                    ("malformed_events_skipped", 5),
                    ("malformed_events_clamped", 1),
                    ("gpu_ops", 2),
                    ("ignored_events", 0),
                ],
                kernels: &[("good", 1), ("negative", 1)],
            },
        ),
        (
            "old_kineto.json",
            old_kineto(),
            Expect::Report {
                line: "gemm",
                file: &[
                    ("events", 7),
                    ("malformed_events_skipped", 0),
                    ("malformed_events_clamped", 0),
                    ("gpu_ops", 6),
                    ("ignored_events", 0),
                ],
                kernels: &[("gemm", 3), ("relu", 1)],
            },
        ),
        (
            "other_accelerator.json",
            other_accelerator(),
            Expect::Report {
                line: "note: {P}: 5 event(s) of categories `hpu_op`, `mtia_ccp_events` \
                       ignored: not CUDA activity (kernel, gpu_memcpy, gpu_memset), which is \
                       what the figures cover",
                file: &[
                    ("events", 7),
                    ("malformed_events_skipped", 0),
                    ("gpu_ops", 0),
                    ("ignored_events", 5),
                ],
                kernels: &[],
            },
        ),
    ]
}

#[test]
fn bad_inputs_table() {
    let dir = tempdir("bad-inputs");
    let mut failures = Vec::new();
    for (name, text, expect) in cases() {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let p = path.display().to_string();
        let out = dir.join(format!("{name}.out"));
        let o = cuprof(&["report", &p, "-o", &out.display().to_string()]);
        let stdout = String::from_utf8_lossy(&o.stdout).to_string();
        let stderr = String::from_utf8_lossy(&o.stderr).to_string();
        match expect {
            Expect::Error(line) => {
                let want = format!("{}\n", line.replace("{PASS}", PASS).replace("{P}", &p));
                if o.status.code() != Some(1) || stderr != want {
                    failures.push(format!(
                        "{name}: exit {:?}\n  stderr: {stderr:?}\n  wanted: {want:?}\n  stdout: {stdout:?}",
                        o.status.code()
                    ));
                }
            }
            Expect::Report {
                line,
                file,
                kernels,
            } => {
                let want = line.replace("{P}", &p);
                if !o.status.success() || !stdout.lines().any(|l| l.contains(&want)) {
                    failures.push(format!(
                        "{name}: exit {:?}, no line {want:?}\n  stdout: {stdout}\n  stderr: {stderr}",
                        o.status.code()
                    ));
                    continue;
                }
                if stdout.contains("no kernels") != kernels.is_empty() {
                    failures.push(format!(
                        "{name}: `no kernels` wrongly (not) said:\n{stdout}"
                    ));
                }
                let s: Value = read_json(&out.join("summary.json"));
                let f = &s["files"][0];
                for (key, v) in file {
                    if f[key].as_i64() != Some(*v) {
                        failures.push(format!("{name}: files[0].{key} = {}, want {v}", f[key]));
                    }
                }
                let got: Vec<(String, u64)> = s["top_kernels"]
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
                let want: Vec<(String, u64)> =
                    kernels.iter().map(|(n, c)| (n.to_string(), *c)).collect();
                if got != want {
                    failures.push(format!("{name}: top_kernels {got:?}, want {want:?}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Not in the table (it passes today too): an empty `traceEvents` list is a valid empty trace.
#[test]
fn empty_event_list_is_a_valid_empty_trace() {
    let dir = tempdir("bad-inputs-empty");
    let path = dir.join("empty.json");
    std::fs::write(&path, "{\"traceEvents\": []}").unwrap();
    let stdout = cuprof_ok(&["report", &path.display().to_string()]);
    assert!(
        stdout.contains("1 file(s), 1 rank(s), 0 events"),
        "{stdout}"
    );
    assert!(stdout.contains("no GPU activity"), "{stdout}");
    assert!(
        !stdout.contains("malformed") && !stdout.contains("ignored"),
        "{stdout}"
    );
}
