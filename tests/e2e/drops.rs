//! No record is lost silently: when the buffer pool runs dry (more threads hold buffers than the
//! pool allows), or CUPTI reports drops, the counts reach the trace's `cuprofStats` and one line
//! on stderr, and kept + dropped adds up to what was produced.

use crate::common::*;

#[test]
fn an_exhausted_pool_and_cupti_drops_are_counted_exactly() {
    let dir = TempDir::new("drops");
    // CUPROF_BUFFERS=1 lets 64 buffers out at once. 100 threads each launch one kernel and then
    // wait for the others, so all hold their CUPTI 13 buffer at once: 64 get pooled buffers, 36
    // get overflow buffers whose records are dropped, counted. Nothing brings buffers back
    // early: the periodic flush is an hour away, and 64 written pages are far under half the
    // bound (16 MiB), where the pool would reclaim them.
    let (out, stderr) = Run::python("flood.py", &["1", "100", "7"], dir.path())
        .env("CUPROF_BUFFERS", "1")
        .env("CUPROF_BUFFER_SIZE", "16M")
        .env("CUPROF_FLUSH_MS", "3600000")
        .env("CUPROF_ACTIVITIES", "GPU")
        .ok_json();
    let t = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    let stats = &t["cuprofStats"];
    assert_eq!(out["produced"], 100, "kernel records only (GPU activity)");
    assert_eq!(
        out["dropped_by_double"], 0,
        "every record reached one of cuprof's buffers"
    );
    assert_eq!(events(&t, "kernel").len(), 64);
    assert_eq!(stats["dropped_buffers"], 36, "{stats}");
    assert_eq!(stats["dropped_channel"], 0, "{stats}");
    assert_eq!(stats["dropped_cupti"], 7);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("cuprof: 43 records were lost"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    // The advice names what to change for each cause that happened, and only those.
    assert!(
        lines[0].ends_with(
            "): CUPTI ran out of buffer room: raise CUPROF_BUFFER_SIZE; CUPTI's buffers held more \
             records than the pool allows, or more threads held buffers than it allows: raise \
             CUPROF_BUFFERS"
        ),
        "{}",
        lines[0]
    );
}
