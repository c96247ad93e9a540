//! Issue 5 end to end: device allocations on the double become a counter track in the trace
//! and a snapshot pickle that Python's pickle, the viewer's rules and `cuprof memory` agree on.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: i64 = 1 << 20;

fn reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/torch-2.11-memory-snapshot.pickle")
}

#[test]
fn allocations_become_a_counter_track_and_a_torch_snapshot() {
    let dir = TempDir::new("memory");
    let (out, _) = Run::python("memory.py", &[], dir.path())
        .env("CUPROF_ACTIVITIES", "CPU,GPU,MEM")
        .env("CUPROF_WITH_STACK", "1")
        .ok_json();
    let files = dir.files();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[1], "t-rank0.trace.json.gz");
    assert!(
        files[0].starts_with("t-rank0-memory-") && files[0].ends_with(".pickle"),
        "{files:?}"
    );

    // The counter track: reserved bytes after each allocation and free, in order.
    let t = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    let reserved: Vec<i64> = phs(&t, "C")
        .iter()
        .map(|e| e["args"]["reserved_bytes"].as_i64().unwrap())
        .collect();
    assert_eq!(
        reserved,
        vec![
            2 * MIB,
            22 * MIB,
            20 * MIB,
            84 * MIB,
            20 * MIB,
            24 * MIB,
            20 * MIB,
            40 * MIB
        ]
    );
    assert!(phs(&t, "C")
        .iter()
        .all(|e| e["name"] == "GPU 0 Memory" && e["pid"] == 0));

    // The pickle against the viewer's rules and the real torch 2.11 snapshot's keys and types.
    let pickle = dir.path().join(&files[0]);
    let peak = out["peak"].as_i64().unwrap();
    let check = Command::new("python3")
        .arg(apps().join("check_snapshot.py"))
        .arg(&pickle)
        .arg("--reference")
        .arg(reference())
        .args(["--expect-peak", &peak.to_string()])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    // Entry by entry, read back with Python's pickle; stacks from --with-stack.
    let v = snapshot_json(
        &pickle,
        "{'trace': [[e['action'], e['size'], e['addr'], [f['name'] for f in e['frames']], e['stream']] for e in s['device_traces'][0]], 'segments': [[g['address'], g['total_size'], len(g['blocks']), g['stream']] for g in s['segments']]}",
    );
    let actions: Vec<(String, i64)> = v["trace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[0].as_str().unwrap().to_string(), e[1].as_i64().unwrap()))
        .filter(|(a, _)| a.starts_with("segment_"))
        .collect();
    assert_eq!(
        actions,
        vec![
            ("segment_alloc".to_string(), 2 * MIB),
            ("segment_alloc".to_string(), 20 * MIB),
            ("segment_free".to_string(), 2 * MIB),
            ("segment_alloc".to_string(), 64 * MIB),
            ("segment_free".to_string(), 64 * MIB),
            ("segment_alloc".to_string(), 4 * MIB),
            ("segment_free".to_string(), 4 * MIB),
            ("segment_alloc".to_string(), 20 * MIB),
        ]
    );
    // Each entry's stream: the cudaStream_t the stream-ordered allocations were made on
    // (on their frees' entries too), 0 for cudaMalloc's; never CUPTI's stream id (7).
    let stream = out["stream"].as_i64().unwrap();
    assert_eq!(stream, 0x7f00_dead_0000);
    let streams: Vec<(String, i64, i64)> = v["trace"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let action = e[0].as_str().unwrap().to_string();
            (action, e[2].as_i64().unwrap(), e[4].as_i64().unwrap())
        })
        .collect();
    let [a, b, c, p, q] = ["a", "b", "c", "p", "q"].map(|k| out[k].as_i64().unwrap());
    let life = |addr: i64, stream: i64, freed: bool| {
        let actions = ["segment_alloc", "alloc"].iter().chain(if freed {
            &["free_requested", "free_completed", "segment_free"][..]
        } else {
            &[][..]
        });
        actions
            .map(|action| (action.to_string(), addr, stream))
            .collect::<Vec<_>>()
    };
    let mut expected = Vec::new();
    expected.extend(life(a, 0, false));
    expected.extend(life(b, 0, false));
    expected.extend(life(a, 0, true).split_off(2));
    expected.extend(life(c, 0, true));
    expected.extend(life(p, stream, true));
    expected.extend(life(q, stream, false));
    assert_eq!(streams, expected);
    for e in v["trace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e[0] == "segment_alloc")
    {
        let frames: Vec<&str> = e[3]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        assert!(
            frames.contains(&"double_malloc") || frames.contains(&"double_malloc_async"),
            "allocation stack: {frames:?}"
        );
    }
    // Live at the end: the two 20 MiB segments at their addresses, on their streams.
    assert_eq!(
        v["segments"],
        serde_json::json!([[b, 20 * MIB, 1, 0], [q, 20 * MIB, 1, stream]])
    );

    // torch's own reader: `_memory_viz stats` names a segment's stream when it is not 0.
    let stats = Command::new("python3")
        .args(["-m", "torch.cuda._memory_viz", "stats"])
        .arg(&pickle)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&stats.stdout);
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    let segment_lines: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(
        segment_lines,
        vec![
            "[a] 20.0MiB allocated, 0.0B free",
            "[a] 20.0MiB allocated, 0.0B free stream_139641712607232",
        ],
        "{text}"
    );

    // `cuprof memory` prints the same peak.
    let summary = Command::new(cuprof_bin())
        .arg("memory")
        .arg(&pickle)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(
        summary.status.success(),
        "{}",
        String::from_utf8_lossy(&summary.stderr)
    );
    assert!(text.contains(&format!("({peak} bytes)")), "{text}");
}

#[test]
fn stream_handles_are_read_without_stacks_too() {
    let dir = TempDir::new("memory-streams");
    let (out, _) = Run::python("memory.py", &[], dir.path())
        .env("CUPROF_ACTIVITIES", "CPU,GPU,MEM")
        .ok_json();
    let files = dir.files();
    assert!(files[0].ends_with(".pickle"), "{files:?}");
    let segments = snapshot_json(
        &dir.path().join(&files[0]),
        "[[g['address'], g['stream'], len(g['frames'])] for g in s['segments']]",
    );
    assert_eq!(
        segments,
        serde_json::json!([[out["b"], 0, 0], [out["q"], 0x7f00_dead_0000_i64, 0]])
    );
}
