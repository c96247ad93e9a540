//! No record is lost silently: when the buffer pool runs dry (more threads hold buffers than the
//! pool has), or CUPTI reports drops, the counts reach the trace's `cuprofStats` and one line
//! on stderr, and kept + dropped adds up to what was produced.

mod common;
use common::*;

#[test]
fn an_exhausted_pool_and_cupti_drops_are_counted_exactly() {
    let dir = TempDir::new("drops");
    // One 1 MiB buffer in the pool, four threads each needing its own (CUPTI 13's per-thread
    // buffers): three threads get small overflow buffers whose records are dropped, counted.
    let (out, stderr) = Run::python("flood.py", &["3000", "4", "7"], dir.path())
        .env("CUPROF_BUFFERS", "1")
        .env("CUPROF_BUFFER_SIZE", "1M")
        .env("CUPROF_ACTIVITIES", "GPU")
        .ok_json();
    let t = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    let stats = &t["cuprofStats"];
    let kept = events(&t, "kernel").len() as u64;
    let produced = out["produced"].as_u64().unwrap();
    assert_eq!(produced, 12_000, "kernel records only (GPU activity)");
    assert_eq!(
        out["dropped_by_double"], 0,
        "every record reached one of cuprof's buffers"
    );
    let dropped_buffers = stats["dropped_buffers"].as_u64().unwrap();
    assert!(dropped_buffers > 0, "the pool ran dry: {stats}");
    assert_eq!(
        kept + dropped_buffers + stats["dropped_channel"].as_u64().unwrap(),
        produced,
        "{stats}"
    );
    assert_eq!(stats["dropped_cupti"], 7);
    let lost = dropped_buffers + 7 + stats["dropped_channel"].as_u64().unwrap();
    let line = format!("cuprof: {lost} records were lost");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with(&line)).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    // The advice names what to change for each cause that happened, and only those.
    let mut advice = Vec::new();
    if stats["dropped_channel"] != 0 {
        advice.push("the writer fell behind: narrow the window or record less (CUPROF_ACTIVITIES, CUPROF_API)");
    }
    advice.push("CUPTI ran out of buffer room: raise CUPROF_BUFFER_SIZE");
    advice.push("more threads held buffers than the pool allows: raise CUPROF_BUFFERS");
    assert!(
        lines[0].ends_with(&format!("): {}", advice.join("; "))),
        "{}",
        lines[0]
    );
}
