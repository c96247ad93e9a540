//! `cuprof export` of a trace cuprof's writer indexed (docs/trace-format.md, "The gzip
//! layout"): its chunks read and encoded on every worker give every table the rows of a read
//! front to back, in the same order; an index that lies gives them too, read front to back.

use std::path::Path;

use crate::analysis_support::*;
use crate::export_support::Rows;
use cuprof_core::reader::chunks::Chunks;

/// The sample's and the operators' events three times over, with a module call, a Kineto
/// `[memory]` instant, an event lasting less than nothing, one without a `dur` and one of
/// another accelerator's category in each round: a row in every table, and every count the
/// warnings print.
fn trace() -> Trace {
    let mut t = sample();
    let ops = with_operators(300_000, true);
    for round in 0..3i64 {
        let shift = round * 1_000_000_000;
        t.step(10 + round, MAIN, shift + 20_000_000, 1_000_000, Some(1.0));
        t.events.extend(ops.events.iter().cloned());
        module_call(
            &mut t,
            &format!("Linear_{round}"),
            Some("model.layers.0"),
            (shift + 100, 5_000),
            (round + 1, 0),
        );
        t.tensor_memory(MAIN, shift + 200, 4096 + round, 1);
        t.x("cpu_op", "aten::negative", PID, MAIN, shift + 300, -5, "");
        t.events.push(format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "no_dur", "pid": {PID}, "tid": {MAIN}, "ts": {}}}"#,
            us(shift + 400)
        ));
        t.x("xpu_kernel", "foreign", PID, MAIN, shift + 500, 10, "");
        for i in 0..30 {
            let c = t.corr();
            t.kernel("k", 0, 7, shift + 2_000_000 + i * 1_000, 500, c);
        }
    }
    t
}

/// Every table of the dataset `out` (of one input, `NAME.parquet`), `files` last.
fn tables(out: &Path, name: &str) -> Vec<(&'static str, Rows)> {
    [
        "kernels",
        "copies",
        "api_calls",
        "operators",
        "ranges",
        "steps",
        "memory",
        "modules",
    ]
    .into_iter()
    .map(|t| {
        let p = out.join(t).join("rank=0/cycle=1").join(name);
        (t, Rows::read(&p))
    })
    .chain([("files", Rows::read(&out.join("files/files.parquet")))])
    .collect()
}

/// `export INPUT -o OUT -j JOBS`'s stdout, the dataset's folder written `OUT`.
fn export(input: &Path, out: &Path, jobs: &str) -> String {
    let stdout = cuprof_ok(&[
        "export",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "-j",
        jobs,
    ]);
    stdout.replace(out.to_str().unwrap(), "OUT")
}

/// Files under `d` whose name says they were left half-written.
fn temporaries(d: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            found.extend(temporaries(&p));
        } else if p.to_string_lossy().ends_with(".cuprof-tmp") {
            found.push(p.to_string_lossy().into_owned());
        }
    }
    found
}

/// Every column of every table equal, but for `skip` (`(table, column)`).
fn assert_same(a: &[(&str, Rows)], b: &[(&str, Rows)], skip: Option<(&str, &str)>, what: &str) {
    assert_eq!(a.len(), b.len());
    for ((ta, ra), (tb, rb)) in a.iter().zip(b) {
        assert_eq!(ta, tb);
        let (ca, cb) = (ra.columns(), rb.columns());
        assert_eq!(ca.len(), cb.len(), "{what}: {ta}");
        for ((na, va), (nb, vb)) in ca.iter().zip(&cb) {
            assert_eq!(na, nb, "{what}: {ta}");
            if skip != Some((*ta, na.as_str())) {
                assert_eq!(va, vb, "{what}: {ta}.{na}");
            }
        }
    }
}

#[test]
fn chunks_exported_in_parallel_give_the_rows_of_one_stream() {
    let d = tempdir("export-chunked");
    let traces = d.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let f = traces.join("test-rank0.trace.json.gz");
    let t = trace();
    t.write_chunked(&f, 600);
    let index = Chunks::open(&f).unwrap().index;
    let n = index.chunks.len();
    assert!(n >= 20, "{n}");
    let indexed = std::fs::read(&f).unwrap();
    let member_end = index.member_end() as usize;

    let out1 = d.join("ds-1");
    let out2 = d.join("ds-2");
    let by_chunks_1 = export(&f, &out1, "1");
    let by_chunks_2 = export(&f, &out2, "2");
    let (chunks_1, chunks_2) = (
        tables(&out1, "test-rank0.parquet"),
        tables(&out2, "test-rank0.parquet"),
    );
    // Read by chunks (no silent fallback): a row group per run of chunks that had kernels.
    assert!(
        chunks_1[0].1.row_groups() > 1,
        "{}",
        chunks_1[0].1.row_groups()
    );
    let kernels = t.events.iter().filter(|e| e.contains(r#""cat": "kernel""#));
    assert_eq!(chunks_1[0].1.len(), kernels.count());
    assert_eq!(by_chunks_1, by_chunks_2);
    assert_same(&chunks_1, &chunks_2, None, "-j 1 and -j 2");
    // Every table holds rows, and every count of the warnings is there.
    for (table, rows) in &chunks_1 {
        assert!(rows.len() > 0, "{table}");
    }
    assert!(
        by_chunks_1.contains("3 event(s) of categories `xpu_kernel`"),
        "{by_chunks_1}"
    );
    assert_eq!(by_chunks_1.matches("warning: ").count(), 2, "{by_chunks_1}");

    // An index that lies (chunk n-3 one byte longer, n-2 one shorter: contiguous still, so
    // the file's index opens, but those chunks do not inflate as it says) is found out after
    // earlier runs were written: the file is read front to back, nothing half-written stays.
    let entry = |i: usize| member_end + 16 + 12 * i;
    let mut lying = indexed.clone();
    for (i, by) in [(n - 3, 1i64), (n - 2, -1)] {
        let at = entry(i);
        let len = u32::from_le_bytes(lying[at..at + 4].try_into().unwrap());
        let len = (i64::from(len) + by) as u32;
        lying[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
    std::fs::write(&f, &lying).unwrap();
    assert!(
        Chunks::open(&f).is_some(),
        "the lie passes the index's own checks"
    );
    let out_lie = d.join("ds-lie");
    let fallen_back = export(&f, &out_lie, "1");
    let lie = tables(&out_lie, "test-rank0.parquet");
    assert_eq!(lie[0].1.row_groups(), 1, "read front to back");
    assert_eq!(temporaries(&d), Vec::<String>::new());
    assert_eq!(fallen_back, by_chunks_1);
    assert_same(&lie, &chunks_1, None, "a lying index");

    // The same file without its index: one stream. Only the compressed size differs (the
    // index member).
    std::fs::write(&f, &indexed[..member_end]).unwrap();
    assert!(Chunks::open(&f).is_none());
    let out_stream = d.join("ds-stream");
    let one_stream = export(&f, &out_stream, "2");
    let stream = tables(&out_stream, "test-rank0.parquet");
    assert_eq!(stream[0].1.row_groups(), 1);
    assert_eq!(one_stream, by_chunks_1);
    assert_same(
        &stream,
        &chunks_1,
        Some(("files", "compressed_bytes")),
        "one stream",
    );
    let files = &chunks_1[8].1;
    assert_eq!(files.int("compressed_bytes"), [indexed.len() as i64]);
    assert_eq!(stream[8].1.int("compressed_bytes"), [member_end as i64]);
    assert_eq!(files.int("events"), [t.events.len() as i64]);
    assert_eq!(files.int("uncompressed_bytes"), [t.json().len() as i64]);
}
