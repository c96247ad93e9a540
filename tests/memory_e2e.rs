//! Issue 5 end to end: device allocations on the double become a counter track in the trace
//! and a snapshot pickle that Python's pickle, the viewer's rules and `cuprof memory` agree on.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const MIB: i64 = 1 << 20;

fn reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/reference/torch-2.11-memory-snapshot.pickle")
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
            20 * MIB
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
    let dump = Command::new("python3")
        .arg("-c")
        .arg("import pickle,sys,json; s=pickle.load(open(sys.argv[1],'rb')); print(json.dumps({'trace': [[e['action'], e['size'], e['addr'], [f['name'] for f in e['frames']]] for e in s['device_traces'][0]], 'segments': [[g['address'], g['total_size'], len(g['blocks'])] for g in s['segments']]}))")
        .arg(&pickle)
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&dump.stdout).unwrap();
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
        ]
    );
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
    // Live at the end: the 20 MiB segment at its address.
    assert_eq!(v["segments"], serde_json::json!([[out["b"], 20 * MIB, 1]]));

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
