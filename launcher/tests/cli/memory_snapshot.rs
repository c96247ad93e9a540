//! Snapshot pickles written by `cuprof_core::memory` checked the way the viewer needs them:
//! `tests/apps/check_snapshot.py` (Python's `pickle`, `pickletools` opcodes, key sets and
//! types against torch 2.11's reference snapshot, peak from `device_traces`), and
//! `cuprof memory` printing the same peak.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use cuprof_core::event::{Memory, MemoryOp};
use cuprof_core::memory::{Frame, Frames, MemoryTimeline, DEVICE_MEMORY_KIND};

const MIB: u64 = 1 << 20;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

fn checker() -> PathBuf {
    workspace().join("tests/apps/check_snapshot.py")
}

/// torch 2.11's own snapshot, kept in the repository's test data.
fn reference() -> PathBuf {
    workspace().join("tests/data/torch-2.11-memory-snapshot.pickle")
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("memory_snapshot");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn rec(op: MemoryOp, address: u64, bytes: u64, timestamp: u64, device: u32) -> Memory {
    Memory {
        op,
        memory_kind: DEVICE_MEMORY_KIND,
        correlation: 0,
        address,
        bytes,
        timestamp,
        pid: 4242,
        device,
        context: 1,
        stream: 0,
        is_async: false,
        pool_address: 0,
    }
}

fn alloc(address: u64, bytes: u64, timestamp: u64) -> Memory {
    rec(MemoryOp::Alloc, address, bytes, timestamp, 0)
}

fn free(address: u64, timestamp: u64) -> Memory {
    rec(MemoryOp::Free, address, 0, timestamp, 0)
}

/// The `cudaStream_t` a stream-ordered allocation's call passed.
const STREAM_HANDLE: u64 = 0x7f00_dead_0000;

fn pool(mut m: Memory) -> Memory {
    m.is_async = true;
    m.stream = 7;
    m.pool_address = 0x7e00_0000_0000;
    m
}

fn stack(name: &str, line: i64) -> Frames {
    Arc::from(vec![
        Frame {
            filename: "libcudart.so.13".into(),
            line: 0,
            name: "cudaMalloc".into(),
        },
        Frame {
            filename: "model.py".into(),
            line,
            name: name.into(),
        },
        Frame {
            filename: "train.py".into(),
            line: 7,
            name: "<module>".into(),
        },
    ])
}

fn python(args: &[&std::ffi::OsStr]) -> Output {
    Command::new("python3")
        .args(args)
        .output()
        .expect("python3 runs (needed for the snapshot checks)")
}

/// Runs the checker; returns its stdout, asserting success.
fn check(file: &Path, extra: &[&str]) -> String {
    let mut args = vec![checker().into_os_string(), file.as_os_str().to_owned()];
    args.push("--reference".into());
    args.push(reference().into_os_string());
    args.extend(extra.iter().map(|s| s.into()));
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    let out = python(&refs);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "checker failed on {}:\n{stdout}{}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("check_snapshot: OK"), "{stdout}");
    stdout
}

/// `device N peak reserved B bytes` from the checker's summary line.
fn checker_peak(summary: &str, device: u32) -> u64 {
    let key = format!("device {device} peak reserved ");
    let rest = &summary[summary
        .find(&key)
        .unwrap_or_else(|| panic!("no {key:?} in {summary}"))
        + key.len()..];
    rest.split(' ').next().unwrap().parse().unwrap()
}

fn cuprof_memory(file: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cuprof"))
        .arg("memory")
        .arg(file)
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "cuprof memory failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The bytes of the `peak reserved:` line under `device N` in `cuprof memory`'s output.
fn printed_peak(text: &str, device: u32) -> u64 {
    let header = format!("device {device}\n");
    let section = &text[text
        .find(&header)
        .unwrap_or_else(|| panic!("no {header:?} in\n{text}"))..];
    let line = section
        .lines()
        .find(|l| l.trim_start().starts_with("peak reserved:"))
        .unwrap();
    let value = line.split_once(':').unwrap().1.trim();
    match value.rsplit_once('(') {
        Some((_, bytes)) => bytes.trim_end_matches(" bytes)").parse().unwrap(),
        None => value.trim_end_matches(" B").parse().unwrap(),
    }
}

#[test]
fn snapshot_passes_the_viewer_checks_and_peaks_agree() {
    let t0 = 1_763_000_000_000_000_000u64; // CLOCK_REALTIME ns
    let (a, b, c, d) = (
        0x7f10_0000_0000u64,
        0x7f20_0000_0000,
        0x7f30_0000_0000,
        0x7f40_0000_0000,
    );
    let mut t = MemoryTimeline::default();
    let records = [
        (alloc(a, 20 * MIB, t0), Some(stack("load_weights", 10))),
        (alloc(b, 2 * MIB, t0 + 100_000), None),
        (
            pool(alloc(c, 4 * MIB, t0 + 200_000)),
            Some(stack("workspace", 20)),
        ),
        (free(b, t0 + 300_000), None),
        (
            alloc(d, 64 * MIB, t0 + 400_000),
            Some(stack("activations", 30)),
        ),
        (pool(alloc(d + MIB, MIB, t0 + 500_000)), None), // inside d: a block
        (pool(free(c, t0 + 600_000)), None),
        (free(d, t0 + 700_000), None),
        // Device 2 (device 1 has nothing: an empty list in device_traces).
        (
            rec(MemoryOp::Alloc, 0x7f50_0000_0000, 2 * MIB, t0 + 800_000, 2),
            None,
        ),
    ];
    // Stream-ordered allocations carry the cudaStream_t their call passed (the snapshot's
    // `stream`, as torch writes it); CUPTI's own stream id (7 here) never reaches the snapshot.
    let counters: Vec<_> = records
        .into_iter()
        .map(|(m, f)| {
            let handle = if m.is_async { STREAM_HANDLE } else { 0 };
            t.record_on_stream(&m, f, handle)
        })
        .collect();
    let reserved: Vec<Option<i64>> = counters
        .iter()
        .map(|c| c.as_ref().map(|c| c.values[0].1))
        .collect();
    let m = MIB as i64;
    assert_eq!(
        reserved,
        vec![
            Some(20 * m),
            Some(22 * m),
            Some(26 * m),
            Some(24 * m),
            Some(88 * m),
            None,
            Some(84 * m),
            Some(20 * m),
            Some(2 * m),
        ]
    );
    assert_eq!(t.peak(0).unwrap().bytes, 88 * MIB);

    let file = scratch("test-rank0-memory-1763000000.pickle");
    t.write_snapshot(&file).unwrap();

    let summary = check(
        &file,
        &["--expect-peak", "0:92274688", "--expect-peak", "2:2097152"],
    );
    assert!(
        summary.contains(
            "matches reference (top level, segment, block, trace entry, frame, allocator_settings)"
        ),
        "{summary}"
    );
    assert!(
        summary.contains(", 2 segments, 22 trace entries, 3 device lists"),
        "{summary}"
    );
    assert_eq!(checker_peak(&summary, 0), 88 * MIB);
    assert_eq!(checker_peak(&summary, 2), 2 * MIB);

    let text = cuprof_memory(&file, &[]);
    assert_eq!(printed_peak(&text, 0), checker_peak(&summary, 0), "{text}");
    assert_eq!(printed_peak(&text, 2), checker_peak(&summary, 2), "{text}");
    assert!(
        text.contains(
            "  when:           time_us 1763000000000400 (+0.400 ms after the first trace entry)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "  by:             segment_alloc of 64.0 MiB (67108864 bytes) at 0x7f4000000000\n"
        ),
        "{text}"
    );
    assert!(text.contains("    activations (model.py:30)\n"), "{text}");
    assert!(text.contains("  live at end:    1 segment, 20.0 MiB (20971520 bytes); 1 active block, 20.0 MiB (20971520 bytes)\n"), "{text}");
    assert!(!text.contains("device 1\n"), "{text}");
    assert!(
        text.contains("device 2\n  peak reserved:  2.0 MiB (2097152 bytes)\n"),
        "{text}"
    );
    assert!(
        text.contains("stack:          no stacks recorded (run with --with-stack)"),
        "{text}"
    );

    // The entries, read back by Python's pickle, one by one.
    let script = "import pickle,sys\ns=pickle.load(open(sys.argv[1],'rb'))\n\
                  for e in s['device_traces'][0]: print(e['action'], hex(e['addr']), e['size'], e['stream'], e['time_us'], len(e['frames']))";
    let out = python(&["-c".as_ref(), script.as_ref(), file.as_os_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let us = t0 / 1000;
    let expect: Vec<String> = [
        ("segment_alloc", a, 20 * MIB, 0, 0, 3),
        ("alloc", a, 20 * MIB, 0, 0, 3),
        ("segment_alloc", b, 2 * MIB, 0, 100, 0),
        ("alloc", b, 2 * MIB, 0, 100, 0),
        ("segment_alloc", c, 4 * MIB, STREAM_HANDLE, 200, 3),
        ("alloc", c, 4 * MIB, STREAM_HANDLE, 200, 3),
        ("free_requested", b, 2 * MIB, 0, 300, 0),
        ("free_completed", b, 2 * MIB, 0, 300, 0),
        ("segment_free", b, 2 * MIB, 0, 300, 0),
        ("segment_alloc", d, 64 * MIB, 0, 400, 3),
        ("alloc", d, 64 * MIB, 0, 400, 3),
        // The first pool allocation inside d makes d a pool: its own block ends.
        ("free_requested", d, 64 * MIB, 0, 500, 0),
        ("free_completed", d, 64 * MIB, 0, 500, 0),
        ("alloc", d + MIB, MIB, STREAM_HANDLE, 500, 0),
        ("free_requested", c, 4 * MIB, STREAM_HANDLE, 600, 0),
        ("free_completed", c, 4 * MIB, STREAM_HANDLE, 600, 0),
        ("segment_free", c, 4 * MIB, STREAM_HANDLE, 600, 0),
        ("free_requested", d + MIB, MIB, STREAM_HANDLE, 700, 0),
        ("free_completed", d + MIB, MIB, STREAM_HANDLE, 700, 0),
        ("segment_free", d, 64 * MIB, 0, 700, 0),
    ]
    .iter()
    .map(|(act, addr, size, stream, dt, nframes)| {
        format!("{act} {addr:#x} {size} {stream} {} {nframes}", us + dt)
    })
    .collect();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .collect::<Vec<_>>(),
        expect
    );
}

#[test]
fn bounded_trace_peaks_agree_over_the_kept_window() {
    let mut t = MemoryTimeline::new(11);
    let base = 0x7f00_0000_0000u64;
    // 3 segments (2 entries each), then free them (3 each), then one more: 17 entries,
    // the oldest 6 (the three allocations) dropped.
    for i in 0..3 {
        t.record(
            &alloc(base + i * 0x1000_0000, (i + 1) * MIB, 1_000_000 * (i + 1)),
            None,
        );
    }
    for i in 0..3 {
        t.record(&free(base + i * 0x1000_0000, 10_000_000 + i), None);
    }
    t.record(&alloc(base, 5 * MIB, 20_000_000), None);
    assert_eq!(t.dropped_events(0), 6);
    assert_eq!(t.peak(0).unwrap().bytes, 6 * MIB);
    let file = scratch("bounded-memory.pickle");
    t.write_snapshot(&file).unwrap();
    // The kept window starts with all three segments live (6 MiB): the starting level.
    let summary = check(&file, &["--expect-peak", "6291456"]);
    let text = cuprof_memory(&file, &[]);
    assert_eq!(printed_peak(&text, 0), checker_peak(&summary, 0));
    assert!(text.contains("before the first trace entry"), "{text}");
}

#[test]
fn torch_reference_snapshot_peaks_agree() {
    let summary = check(&reference(), &["--expect-peak", "20971520"]);
    let text = cuprof_memory(&reference(), &["--frames", "40"]);
    assert_eq!(printed_peak(&text, 0), checker_peak(&summary, 0));
    assert!(text.contains("live at end:    1 segment, 20.0 MiB (20971520 bytes); 2 active blocks, 8.0 MiB (8388608 bytes)"), "{text}");
    assert!(text.contains("trace entries:  7 (alloc 3, free_completed 1, free_requested 1, segment_alloc 1, snapshot 1)"), "{text}");
    // torch's own capture frames are left out of the stack.
    assert!(!text.contains("torch::unwind::unwind()"), "{text}");
    assert!(text.contains("<module> (<string>:4)"), "{text}");
    assert!(text.contains("  stack:\n    c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc("), "{text}");
    // Its blocks: torch's own allocations at the program's line.
    assert!(text.contains("  leaked:         2 blocks, 8.0 MiB (8388608 bytes) (not freed by the last entry)\n    8.0 MiB (8388608 bytes) in 2 blocks: aten::empty_memory_format at <string>:4\n"), "{text}");
    assert!(text.contains("  peak allocated: 12.0 MiB (12582912 bytes) at time_us 1795351004966398 (+0.113 ms after the first trace entry)\n    12.0 MiB (12582912 bytes) in 3 blocks: aten::empty_memory_format at <string>:4\n"), "{text}");
    let short = cuprof_memory(&reference(), &[]);
    assert!(
        short.contains("    ... 16 more frames not shown\n"),
        "{short}"
    );
}

/// The checker itself fails on each silent trap and on drift from the reference.
#[test]
fn checker_fails_on_drift_and_viewer_traps() {
    let mut t = MemoryTimeline::default();
    t.record(
        &alloc(0x7f10_0000_0000, 20 * MIB, 1_000_000),
        Some(stack("f", 1)),
    );
    let good = scratch("good.pickle");
    t.write_snapshot(&good).unwrap();
    let cases: [(&str, &str, &str); 9] = [
        (
            "proto5",
            "pickle.dump(s, open(o, 'wb'), protocol=5)",
            "protocol 5",
        ),
        (
            "category",
            "s['device_traces'][0][0]['category'] = 'x'; dump()",
            "'category' key",
        ),
        (
            "long9",
            "s['segments'][0]['address'] = 2**64 - 1; dump()",
            "LONG1 of 9 bytes",
        ),
        (
            "blocks",
            "s['segments'][0]['blocks'][0]['size'] -= 1; dump()",
            "block sizes sum to",
        ),
        (
            "key",
            "del s['device_traces'][0][0]['user_metadata']; dump()",
            "missing keys ['user_metadata']",
        ),
        (
            "type",
            "s['segments'][0]['segment_type'] = 1; dump()",
            "segment_type: int (reference str)",
        ),
        (
            "settings",
            "s['allocator_settings']['garbage_collection_threshold'] = 0; dump()",
            "garbage_collection_threshold: int (reference float)",
        ),
        (
            "frame",
            "s['device_traces'][0][0]['frames'][0]['column'] = 1; dump()",
            "extra keys ['column']",
        ),
        (
            "line",
            "s['device_traces'][0][0]['frames'][0]['line'] = 1.0; dump()",
            "['line'] is a float",
        ),
    ];
    for (name, edit, message) in cases {
        let bad = scratch(&format!("bad-{name}.pickle"));
        let script = format!(
            "import pickle,sys\ns=pickle.load(open(sys.argv[1],'rb'))\no=sys.argv[2]\n\
             def dump(): pickle.dump(s, open(o, 'wb'), protocol=4)\n{edit}\n"
        );
        let out = python(&[
            "-c".as_ref(),
            script.as_ref(),
            good.as_os_str(),
            bad.as_os_str(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = python(&[
            checker().as_os_str(),
            bad.as_os_str(),
            "--reference".as_ref(),
            reference().as_os_str(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.starts_with("check_snapshot: FAIL") && stderr.contains(message),
            "{name}: {stderr}"
        );
    }
    // And a wrong expected peak.
    let out = python(&[
        checker().as_os_str(),
        good.as_os_str(),
        "--expect-peak".as_ref(),
        "1".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("peak reserved is 20971520 bytes, expected 1"));
}

/// `cuprof memory TRACE`: the leaks, growth and peak of a trace's `[memory]` events, as
/// `cuprof report` shows them (analysis_support's `with_leak`).
#[test]
fn memory_of_a_trace() {
    let path = scratch("leak-rank0.trace.json.gz");
    crate::analysis_support::with_leak().write_gz(&path);
    let text = cuprof_memory(&path, &["--top", "1"]);
    assert_eq!(
        text,
        format!(
            "PyTorch allocations in {}\n\
             rank 0 GPU 0: 8 allocations in the window; peak 11.0 KiB at +2.210 ms (step 3); alive at the end: 4.0 KiB in 4 allocations\n\
             live at step ends: 1 1.0 KiB, 2 2.0 KiB, 3 3.0 KiB, 4 4.0 KiB; growing 3.0 KiB over steps 1 to 4\n  \
             \x20          bytes  allocations  operator     Python line\n  \
             leaked   4.0 KiB            4  aten::empty  leak.py(10): train\n  \
             grew     3.0 KiB            3  aten::empty  leak.py(10): train\n  \
             at peak  8.0 KiB            1  aten::mm     model.py(20): forward\n\
             rank 0 CPU: 1 allocation in the window; peak 256 B at +500.000 µs (step 1); alive at the end: 0 B in 0 allocations\n\
             live at step ends: 1 256 B, 2 0 B, 3 0 B, 4 0 B\n  \
             \x20        bytes  allocations  operator       Python line\n  \
             at peak  256 B            1  (no operator)\n",
            path.display()
        )
    );
    // A trace without allocations says how to record them.
    let plain = scratch("plain-rank0.trace.json.gz");
    crate::analysis_support::sample().write_gz(&plain);
    assert!(cuprof_memory(&plain, &[]).contains("record with MEM"));
}
