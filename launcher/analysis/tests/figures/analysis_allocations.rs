//! PyTorch's allocations in `cuprof report` and `cuprof memory TRACE`: leaks, growth over
//! steps and the peak, on a trace with a planted leak and a planted peak.

use crate::analysis_support::*;
use serde_json::{json, Value};

const MS: i64 = 1_000_000;

fn group(operator: &str, site: Option<&str>, stack: Option<&str>, bytes: i64, count: i64) -> Value {
    let mut g = json!({"operator": operator, "bytes": bytes, "count": count});
    if let Some(s) = site {
        g["call_site"] = json!(s);
    }
    if let Some(s) = stack {
        g["stack"] = json!(s);
    }
    g
}

#[test]
fn leaks_growth_and_peak_in_the_report() {
    let dir = tempdir("allocations");
    let trace = dir.join("leak-rank0.trace.json.gz");
    with_leak().write_gz(&trace);
    let (stdout, s) = report(&trace, &dir.join("out"));
    let a = s["allocations"].as_array().unwrap();
    assert_eq!(a.len(), 2, "{a:?}");
    let (gpu, cpu) = (&a[0], &a[1]);
    let empty = |bytes, count| {
        group(
            "aten::empty",
            Some("leak.py(10): train"),
            Some(LEAK_STACK),
            bytes,
            count,
        )
    };
    let mm = group(
        "aten::mm",
        Some("model.py(20): forward"),
        Some(MM_STACK),
        8192,
        1,
    );
    assert_eq!(gpu["device"], "GPU 0");
    assert_eq!(gpu["rank"], 0);
    assert_eq!(gpu["allocations"], 8);
    assert_eq!(
        (gpu["leaked_bytes"].as_i64(), gpu["leaked_count"].as_i64()),
        (Some(4096), Some(4))
    );
    assert_eq!(gpu["leaks"], json!([empty(4096, 4)]));
    assert_eq!(gpu["peak_bytes"], 8192 + 3 * 1024);
    let start = gpu["window_start_ns"].as_i64().unwrap();
    assert_eq!(gpu["peak_ns"].as_i64().unwrap() - start, 2 * MS + 210_000);
    assert_eq!(
        gpu["window_end_ns"].as_i64().unwrap() - start,
        3 * MS + 900_000
    );
    assert_eq!(gpu["peak_step"], 3);
    assert_eq!(gpu["at_peak"], json!([mm, empty(3072, 3)]));
    let ends: Vec<(i64, i64)> = gpu["step_ends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["step"].as_i64().unwrap(), e["bytes"].as_i64().unwrap()))
        .collect();
    assert_eq!(ends, [(1, 1024), (2, 2048), (3, 3072), (4, 4096)]);
    assert_eq!(
        gpu["growth"],
        json!({"steps": [1, 2, 3, 4], "bytes": 3072, "groups": [empty(3072, 3)]})
    );
    assert_eq!(cpu["device"], "CPU");
    assert_eq!(
        (cpu["allocations"].as_i64(), cpu["leaked_count"].as_i64()),
        (Some(1), Some(0))
    );
    assert_eq!(cpu["leaks"], json!([]));
    assert_eq!(cpu["peak_bytes"], 256);
    assert_eq!(cpu["peak_step"], 1);
    assert_eq!(
        cpu["at_peak"],
        json!([group("(no operator)", None, None, 256, 1)])
    );
    assert!(cpu.get("growth").is_none());

    let section = section_lines(
        &stdout,
        "PyTorch memory: leaks, growth and the peak (allocations made in the window)",
    );
    assert_eq!(
        section,
        [
            "rank 0 GPU 0: 8 allocations in the window; peak 11.0 KiB at +2.210 ms (step 3); alive at the end: 4.0 KiB in 4 allocations",
            "live at step ends: 1 1.0 KiB, 2 2.0 KiB, 3 3.0 KiB, 4 4.0 KiB; growing 3.0 KiB over steps 1 to 4",
            "             bytes  allocations  operator     Python line",
            "  leaked   4.0 KiB            4  aten::empty  leak.py(10): train",
            "  grew     3.0 KiB            3  aten::empty  leak.py(10): train",
            "  at peak  8.0 KiB            1  aten::mm     model.py(20): forward",
            "  at peak  3.0 KiB            3  aten::empty  leak.py(10): train",
            "rank 0 CPU: 1 allocation in the window; peak 256 B at +500.000 µs (step 1); alive at the end: 0 B in 0 allocations",
            "live at step ends: 1 256 B, 2 0 B, 3 0 B, 4 0 B",
            "           bytes  allocations  operator       Python line",
            "  at peak  256 B            1  (no operator)",
        ]
    );
    let md = std::fs::read_to_string(dir.join("out").join("report.md")).unwrap();
    assert!(
        md.contains("| leaked | 4.0 KiB | 4 | aten::empty | leak.py(10): train |\n"),
        "{md}"
    );
}
