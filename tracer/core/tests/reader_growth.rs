//! An event larger than the reader's buffer (a 16 MiB `args` string) is read with a number of
//! refills that grows with the logarithm of its size: each refill at least doubles the data
//! buffered, so the event is scanned O(log n) times and the read stays linear. Reading 1 MiB
//! at a time scanned it 16 times here (one 100 MB event took 2.5 s, 200 MB 9.7 s).

use std::cell::Cell;
use std::io::Cursor;
use std::ops::ControlFlow;
use std::path::Path;
use std::rc::Rc;

use cuprof_core::reader::TraceReader;

#[test]
fn a_huge_event_is_read_in_logarithmically_many_fills() {
    let big = "x".repeat(16 << 20);
    let trace = format!(
        "{{\"traceEvents\": [{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k\", \"ts\": 1.000, \
         \"dur\": 2.000, \"args\": {{\"note\": \"{big}\"}}}}, {{\"ph\": \"X\", \"cat\": \"kernel\", \
         \"name\": \"after\", \"ts\": 5.000, \"dur\": 1.000}}]}}"
    );
    let len = trace.len() as u64;
    let mut r = TraceReader::new(Cursor::new(trace.into_bytes()), Path::new("big.json")).unwrap();
    let fills = Rc::new(Cell::new(0u32));
    let f = fills.clone();
    r.on_progress(move |_| f.set(f.get() + 1));
    let mut names = Vec::new();
    let s = r
        .read_events(|e| {
            names.push((e.name.to_string(), e.raw.len()));
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(s.uncompressed_bytes, len);
    assert!(s.truncated.is_none());
    assert_eq!(names[1], ("after".to_string(), 72));
    assert_eq!(names[0].1, (16 << 20) + 90);
    // 1, 2, 4, 8 and 16 MiB buffered, then the rest of the file: the event ends in the last.
    assert_eq!(fills.get(), 6);
}
