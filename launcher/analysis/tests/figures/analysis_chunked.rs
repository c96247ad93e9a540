//! A trace cuprof's writer indexed (one gzip member in chunks, docs/trace-format.md) is read
//! chunk by chunk on every worker, with exactly the figures of a read front to back.

use crate::analysis_support::*;
use cuprof_analysis::load::{chunked, Interner};
use cuprof_core::reader::chunks::Chunks;

/// The sample's and the operators' events, with Python frames on two threads, three times
/// over (a second apart): threads, names and operators recur across chunks.
fn trace() -> Trace {
    let mut t = sample();
    let ops = with_operators(300_000, true);
    for round in 0..3i64 {
        let shift = round * 1_000_000_000;
        t.step(10 + round, MAIN, shift + 20_000_000, 1_000_000, Some(1.0));
        t.events.extend(ops.events.iter().cloned());
        t.x(
            "python_function",
            "train.py(40): <module>",
            PID,
            MAIN,
            shift,
            5_000_000,
            "",
        );
        t.x(
            "python_function",
            "model.py(3): forward",
            PID,
            300 + round,
            shift + 50,
            400_000,
            "",
        );
        t.cpu_op(
            "aten::relu",
            300 + round,
            shift + 100,
            1_000,
            90 + round,
            None,
            None,
        );
    }
    t
}

#[test]
fn chunks_read_in_parallel_give_the_summary_of_one_stream() {
    let d = tempdir("chunked");
    let f = d.join("test-rank0.trace.json.gz");
    let t = trace();
    t.write_chunked(&f, 600);
    let chunks = Chunks::open(&f).unwrap().index.chunks.len();
    assert!(chunks >= 20, "{chunks}");
    // The chunked read is taken (not a silent fallback), and finds every event.
    let data = chunked::load(&f, &mut Interner::default()).expect("read by chunks");
    assert_eq!(data.read.events, t.events.len() as u64);
    assert_eq!(data.read.uncompressed_bytes, t.json().len() as u64);

    let summary = |tag: &str, jobs: &str| {
        let out = d.join(tag);
        let stdout = cuprof_ok(&[
            "report",
            f.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "-j",
            jobs,
        ]);
        // What differs is where it wrote.
        let stdout = stdout.replace(out.to_str().unwrap(), "OUT");
        (stdout, std::fs::read(out.join("summary.json")).unwrap())
    };
    let merged = |tag: &str| {
        // The same name (the merged trace's `traceName`) in folders of their own.
        std::fs::create_dir_all(d.join(tag)).unwrap();
        let out = d.join(tag).join("merged.trace.json.gz");
        cuprof_ok(&["merge", f.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        read_gz_text(&out)
    };
    let by_chunks_2 = summary("chunks-2", "2");
    let by_chunks_1 = summary("chunks-1", "1");
    let merged_by_chunks = merged("merged-chunks");
    // The same file without its index member: one stream, front to back.
    let bytes = std::fs::read(&f).unwrap();
    let member_end = Chunks::open(&f).unwrap().index.member_end() as usize;
    std::fs::write(&f, &bytes[..member_end]).unwrap();
    assert!(Chunks::open(&f).is_none());
    let one_stream = summary("stream", "2");
    assert_eq!(by_chunks_2.0, one_stream.0);
    assert_eq!(by_chunks_1.0, one_stream.0);
    assert_eq!(
        String::from_utf8(by_chunks_2.1).unwrap(),
        String::from_utf8(one_stream.1.clone()).unwrap()
    );
    assert_eq!(by_chunks_1.1, one_stream.1);
    assert_eq!(merged_by_chunks, merged("merged-stream"));
    let s: serde_json::Value = serde_json::from_slice(&one_stream.1).unwrap();
    assert!(s.to_string().contains("aten::relu"), "operators counted");
}
