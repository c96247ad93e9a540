//! Inputs made to hurt the offline commands: pickles that claim lengths they do not hold, nest
//! 20,000 deep or reference one list 2^40 times; devices, FIFOs and directories where a file
//! is expected; times near the 64-bit limit. One table over generated files, each row with the
//! exact line it must print and its exit status. A command still running after a minute (a
//! FIFO that blocks `open`, a decoder copying 2^40 lists) fails its row, and is killed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::analysis_support::*;

/// `cuprof ARGS` with `{P}` replaced by `path`: (exit status, stdout, stderr), or `None` when it
/// was still running after `limit` (then killed).
fn run_guarded(args: &[&str], path: &Path, limit: Duration) -> Option<(i32, String, String)> {
    let p = path.display().to_string();
    let args: Vec<String> = args.iter().map(|a| a.replace("{P}", &p)).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cuprof"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cuprof");
    let t0 = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            let out = child.wait_with_output().expect("output");
            return Some((
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ));
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A protocol-2 pickle: `body` then STOP.
fn pickle(body: &[u8]) -> Vec<u8> {
    let mut p = b"\x80\x02".to_vec();
    p.extend_from_slice(body);
    p.push(b'.');
    p
}

/// `{"segments": L}` where L holds two references to a list that holds two references to ...,
/// 40 levels: 2^40 lists once every reference is copied.
fn shared_lists() -> Vec<u8> {
    let mut b = b"}q\x00\x8c\x08segmentsq\x01]q\x020".to_vec();
    for i in 3..43u8 {
        // A new list of two references to the previous one, memoized, then popped.
        b.extend_from_slice(&[b']', b'(', b'h', i - 1, b'h', i - 1, b'e', b'q', i, b'0']);
    }
    b.extend_from_slice(b"h\x2as");
    pickle(&b)
}

/// `{"segments": [{"device": 2^62, "total_size": 1, "blocks": []}], "device_traces": []}`.
fn huge_device() -> Vec<u8> {
    let mut b = b"}(\x8c\x08segments](}(\x8c\x06device\x8a\x08".to_vec();
    b.extend_from_slice(&(1u64 << 62).to_le_bytes());
    b.extend_from_slice(b"\x8c\x0atotal_sizeK\x01\x8c\x06blocks]ue\x8c\x0ddevice_traces]u");
    pickle(&b)
}

fn nested_lists(n: usize) -> Vec<u8> {
    let mut b = vec![b']'; n];
    b.extend(std::iter::repeat_n(b'a', n - 1));
    pickle(&b)
}

/// Three kernels of 4e18 ns on three devices (their sum passes 2^63), one starting past 2^62
/// ns and one before -2^62 ns.
fn huge_times() -> String {
    let k = |name: &str, dev: i64, ts: &str, dur: &str| {
        format!(
            "{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{name}\", \"pid\": {dev}, \"tid\": 7, \"ts\": {ts}, \"dur\": {dur}, \"args\": {{\"device\": {dev}}}}}"
        )
    };
    let events = [
        k("k", 0, "0.000", "4000000000000000.000"),
        k("k", 1, "1.000", "4000000000000000.000"),
        k("k", 2, "2.000", "4000000000000000.000"),
        k("late", 0, "9223372036854775.000", "9223372036854775.000"),
        k("early", 0, "-9223372036854775.000", "1.000"),
    ];
    format!("{{\"traceEvents\": [\n{}\n]}}\n", events.join(",\n"))
}

/// How a row's input is made in the scratch directory; the path to pass.
enum Input {
    File(&'static str, Vec<u8>),
    Fifo(&'static str),
    Dir(&'static str),
    Existing(&'static str),
}

fn make(input: &Input, dir: &Path) -> PathBuf {
    match input {
        Input::File(name, bytes) => {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        }
        Input::Fifo(name) => {
            let p = dir.join(name);
            let ok = Command::new("mkfifo").arg(&p).status().unwrap().success();
            assert!(ok, "mkfifo {}", p.display());
            p
        }
        Input::Dir(name) => {
            let p = dir.join(name);
            std::fs::create_dir_all(&p).unwrap();
            p
        }
        Input::Existing(p) => PathBuf::from(p),
    }
}

const FIFO_LINE: &str =
    "cuprof: {P}: a named pipe (FIFO), not a regular file; pass the trace file itself";

#[test]
fn hostile_inputs_table() {
    let dir = tempdir("hostile");
    let out = dir.join("out");
    let o = out.display().to_string();
    let snapshot = "cuprof: {P} is not a memory snapshot";
    // (row, input, command, exit status, the one stderr line)
    let rows: Vec<(&str, Input, Vec<&str>, i32, String)> = vec![
        (
            "4 GiB string claimed by a 12-byte pickle",
            Input::File("claims.pickle", pickle(b"X\xff\xff\xff\xffab")),
            vec!["memory", "{P}"],
            1,
            format!(
                "{snapshot}: cannot unpickle it: a length of 4294967295 bytes, more than the \
                 3 left in the file at byte 2"
            ),
        ),
        (
            "2^40 references to shared lists",
            Input::File("shared.pickle", shared_lists()),
            vec!["memory", "{P}"],
            1,
            format!("{snapshot}: segments[0] has no 'blocks'"),
        ),
        (
            "a segment on device 2^62",
            Input::File("device.pickle", huge_device()),
            vec!["memory", "{P}"],
            1,
            format!(
                "{snapshot}: segments[0]['device'] = 4611686018427387904 is not a device index \
                 (0 to 65535)"
            ),
        ),
        (
            "20,000 nested lists",
            Input::File("nested.pickle", nested_lists(20_000)),
            vec!["memory", "{P}"],
            1,
            format!(
                "{snapshot}: cannot unpickle it: containers nested more than 1000 deep (the \
                 limit) at byte 21002"
            ),
        ),
        (
            "memory of /dev/zero",
            Input::Existing("/dev/zero"),
            vec!["memory", "{P}"],
            1,
            "cuprof: /dev/zero: a character device, not a regular file; pass the file itself"
                .into(),
        ),
        (
            "memory of a FIFO",
            Input::Fifo("m.fifo"),
            vec!["memory", "{P}"],
            1,
            "cuprof: {P}: a named pipe (FIFO), not a regular file; pass the file itself".into(),
        ),
        (
            "memory of a directory",
            Input::Dir("snapdir"),
            vec!["memory", "{P}"],
            1,
            "cuprof: {P}: a directory, not a regular file; pass the file itself".into(),
        ),
        (
            "repair of /dev/zero",
            Input::Existing("/dev/zero"),
            vec!["repair", "{P}", "-o", &o],
            1,
            "cuprof: /dev/zero: a character device, not a regular file; pass the trace file \
             itself"
                .into(),
        ),
        (
            "repair of a directory",
            Input::Dir("tracedir"),
            vec!["repair", "{P}"],
            1,
            "cuprof: {P}: a directory, not a regular file; pass the trace file itself".into(),
        ),
        (
            "report of a FIFO",
            Input::Fifo("r.fifo"),
            vec!["report", "{P}"],
            1,
            FIFO_LINE.into(),
        ),
        (
            "flame of a FIFO",
            Input::Fifo("f.fifo"),
            vec!["flame", "{P}", "-o", &o],
            1,
            FIFO_LINE.into(),
        ),
        (
            "compare of a FIFO",
            Input::Fifo("c.fifo"),
            vec!["compare", "{P}", "{P}"],
            1,
            FIFO_LINE.into(),
        ),
        (
            "merge of a FIFO",
            Input::Fifo("g.fifo"),
            vec!["merge", "{P}", "-o", &o],
            1,
            FIFO_LINE.into(),
        ),
        (
            "repair of a FIFO",
            Input::Fifo("p.fifo"),
            vec!["repair", "{P}", "-o", &o],
            1,
            FIFO_LINE.into(),
        ),
        (
            "export of a FIFO",
            Input::Fifo("e.fifo"),
            vec!["export", "{P}", "-o", &o],
            1,
            FIFO_LINE.into(),
        ),
    ];
    let mut failures = Vec::new();
    for (row, input, args, status, line) in &rows {
        let path = make(input, &dir);
        let want = format!("{}\n", line.replace("{P}", &path.display().to_string()));
        match run_guarded(args, &path, Duration::from_secs(60)) {
            None => failures.push(format!("{row}: still running after 60 s (killed)")),
            Some((code, stdout, stderr)) => {
                if code != *status || stderr != want {
                    failures.push(format!(
                        "{row}: exit {code}\n  stderr: {stderr:?}\n  wanted: {want:?}\n  stdout: {stdout:?}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Times near the 64-bit limit: events past ±2^62 ns are skipped and counted, and the totals
/// of the others stop at 2^63 - 1 instead of wrapping to negative figures.
#[test]
fn times_near_the_64_bit_limit() {
    let dir = tempdir("hostile-times");
    let path = dir.join("huge.json");
    std::fs::write(&path, huge_times()).unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = run_guarded(
        &["report", "{P}", "-o", &out.display().to_string()],
        &path,
        Duration::from_secs(60),
    )
    .expect("report ends");
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let s = read_json(&out.join("summary.json"));
    let f = &s["files"][0];
    assert_eq!(f["malformed_events_skipped"], 2);
    assert_eq!(f["gpu_ops"], 3);
    let k = &s["top_kernels"][0];
    assert_eq!(
        (k["name"].as_str(), k["count"].as_i64()),
        (Some("k"), Some(3))
    );
    assert_eq!(k["total_ns"].as_i64(), Some(i64::MAX));
    assert_eq!(s["gpu"]["wall_ns"].as_i64(), Some(i64::MAX));
    assert_eq!(s["gpu"]["compute_ns"].as_i64(), Some(i64::MAX));
    let devices: Vec<i64> = s["ranks"][0]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["wall_ns"].as_i64().unwrap())
        .collect();
    assert_eq!(devices, [4_000_000_000_000_000_000; 3]);
    assert_eq!(s["nvtx_buckets"][0]["total_ns"].as_i64(), Some(i64::MAX));
}

/// `merge` of ranks whose pids, flow ids, times and base times sit at the 64-bit limit: the
/// sums that place them saturate instead of overflowing (a panic, or a wrap onto another
/// rank's ids), and the merged file is written.
#[test]
fn merge_near_the_64_bit_limit() {
    let dir = tempdir("hostile-merge");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let trace = |base: i64, events: &[&str]| {
        format!(
            "{{\"baseTimeNanoseconds\": {base}, \"traceEvents\": [\n{}\n]}}\n",
            events.join(",\n")
        )
    };
    std::fs::write(
        traces.join("job-rank0.trace.json"),
        trace(
            i64::MIN,
            &[r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.000, "dur": 1.000}"#],
        ),
    )
    .unwrap();
    std::fs::write(
        traces.join("job-rank1.trace.json"),
        trace(
            i64::MAX,
            &[
                r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 9223372036854775807, "tid": 7, "ts": 9223372036854775.000, "dur": 1.000}"#,
                r#"{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 9223372036854775807, "pid": 1, "tid": 1, "ts": 1.000}"#,
            ],
        ),
    )
    .unwrap();
    let out = dir.join("merged.trace.json.gz");
    let stdout = cuprof_ok(&[
        "merge",
        traces.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(stdout.contains("(2 ranks, 3 events)"), "{stdout}");
    let m = read_gz_json(&out);
    let events = m["traceEvents"].as_array().unwrap();
    let kernel = events
        .iter()
        .find(|e| e["cat"] == "kernel" && e["pid"] == i64::MAX)
        .expect("rank 1's kernel, its pid saturated");
    assert_eq!(kernel["tid"], 7);
    let text = read_gz_text(&out);
    assert!(
        text.contains(r#""pid": 9223372036854775807, "tid": 7, "ts": 9223372036854775.807,"#),
        "{text}"
    );
    let flow = events.iter().find(|e| e["ph"] == "s").unwrap();
    assert_eq!(flow["id"], i64::MAX);
    assert_eq!(flow["pid"], 10_000_001);
    let ranks = m["cuprof"]["merged"]["ranks"].as_array().unwrap();
    assert_eq!(ranks[1]["shift_ns"], i64::MAX);
}

/// Every command over two ranks whose rank, base times, pids, ids and times sit at the 64-bit
/// limit ends normally (each of these once overflowed: a panic in a debug build, a wrapped
/// figure in a release one).
#[test]
fn every_command_survives_values_at_the_64_bit_limit() {
    let dir = tempdir("hostile-limits");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    std::fs::write(
        traces.join("job-rank0.trace.json"),
        concat!(
            "{\"baseTimeNanoseconds\": -9223372036854775808, \"traceEvents\": [\n",
            "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 1.000, \"dur\": 1.000},\n",
            "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 9223372036854775807, \"tid\": 9223372036854775807, \"ts\": -9223372036854775.000, \"dur\": 1.000, \"args\": {\"correlation\": 9223372036854775807, \"External id\": -9223372036854775808}}\n",
            "]}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        traces.join("job-rank1.trace.json"),
        concat!(
            "{\"baseTimeNanoseconds\": 9223372036854775807, \"distributedInfo\": {\"rank\": 9223372036854775807, \"world_size\": -1}, \"traceEvents\": [\n",
            "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 9223372036854775807, \"tid\": 7, \"ts\": 9223372036854775.000, \"dur\": 1.000, \"args\": {\"device\": 9223372036854775807}},\n",
            "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"pid\": 0, \"tid\": 7, \"ts\": 2.000, \"dur\": 1.000},\n",
            "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 1, \"tid\": 1, \"ts\": 1.0, \"dur\": 9223372036854775.000, \"args\": {\"External id\": 9223372036854775807}}\n",
            "]}\n"
        ),
    )
    .unwrap();
    let t = traces.to_str().unwrap().to_string();
    let o = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (r0, r1) = (
        format!("{t}/job-rank0.trace.json"),
        format!("{t}/job-rank1.trace.json"),
    );
    let commands: [Vec<String>; 7] = [
        vec!["report".into(), t.clone(), "-o".into(), o("out")],
        vec!["report".into(), t.clone(), "--html".into(), o("r.html")],
        vec!["flame".into(), t.clone(), "-o".into(), o("f.svg")],
        vec!["compare".into(), r0.clone(), r1.clone()],
        vec!["merge".into(), t.clone(), "-o".into(), o("m.trace.json.gz")],
        vec!["export".into(), t.clone(), "-o".into(), o("tables")],
        vec![
            "repair".into(),
            r1.clone(),
            "-o".into(),
            o("r.trace.json.gz"),
        ],
    ];
    for c in &commands {
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        cuprof_ok(&args);
    }
    let s = read_json(&dir.join("out").join("summary.json"));
    let ranks: Vec<i64> = s["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rank"].as_i64().unwrap())
        .collect();
    assert_eq!(ranks, [0, i64::MAX]);
    let skipped: Vec<i64> = s["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["malformed_events_skipped"].as_i64().unwrap())
        .collect();
    assert_eq!(skipped, [1, 2]);
}
