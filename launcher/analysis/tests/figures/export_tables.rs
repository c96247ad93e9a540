//! `cuprof export`: the dataset's layout and every table's rows, read back with the parquet
//! crate and checked value by value.

use std::path::Path;

use crate::analysis_support::*;
use crate::export_support::Rows;

fn export(traces: &Path, out: &Path) -> String {
    cuprof_ok(&[
        "export",
        traces.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ])
}

/// The sample trace of the analysis tests, plus a PyTorch operator, a Kineto `[memory]`
/// instant, and a kernel at a time a float would round.
fn traced() -> Trace {
    let mut t = sample();
    t.x(
        "cpu_op",
        "aten::addmm",
        PID,
        MAIN,
        140_000,
        20_001,
        r#""External id": 17, "Sequence number": 42, "Fwd thread id": 0, "Record function id": 0, "Input Dims": [[64, 1024], [1024, 512], []], "flops": 67108864, "Call stack": "/srv/m.py(12): forward;/srv/train.py(40): <module>""#,
    );
    t.events.push(
        r#"{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 4242, "tid": 100, "ts": 150.000, "args": {"Device Type": 1, "Device Id": 0, "Addr": 139844, "Bytes": 2048, "Total Allocated": 6144, "Total Reserved": 2097152}}"#
            .into(),
    );
    // 123456789012.345 µs: as a double times 1000 this is 123456789012344.99...
    t.kernel("exact", 0, 7, 123_456_789_012_345, 1, 5000);
    t
}

#[test]
fn every_table_row_by_row() {
    let dir = tempdir("export-tables");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    traced().write_gz(&traces.join("t-rank0.trace.json.gz"));
    let out = dir.join("ds");
    let stdout = export(&traces, &out);
    assert_eq!(
        stdout,
        format!(
            "exported 1 file (48 events) to {}: kernels 6, copies 2, api_calls 7, operators 1, \
             ranges 5, steps 4, memory 4, modules 0\n",
            out.display()
        )
    );
    let part = |t: &str| out.join(t).join("rank=0/cycle=1/t-rank0.parquet");

    let k = Rows::read(&part("kernels"));
    assert_eq!(
        k.text("name"),
        [
            "flash_attn",
            "gemm",
            "gemm",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "gemm",
            "exact"
        ]
    );
    assert_eq!(
        k.int("start_ns"),
        [
            300_000,
            500_000,
            1_200_000,
            1_400_000,
            2_700_000,
            123_456_789_012_345
        ]
    );
    assert_eq!(
        k.int("end_ns"),
        [
            500_000,
            800_000,
            1_500_000,
            1_900_000,
            3_000_000,
            123_456_789_012_346
        ]
    );
    assert_eq!(k.int("device"), [0; 6]);
    assert_eq!(k.ints("stream"), [7, 7, 7, 13, 7, 7].map(Some));
    assert_eq!(k.ints("correlation"), [2, 3, 4, 5, 7, 5000].map(Some));
    assert_eq!(k.ints("external_id"), [None; 6]);
    assert_eq!(k.ints("grid_x"), [Some(132); 6]);
    assert_eq!(k.ints("grid_y"), [Some(1); 6]);
    assert_eq!(k.ints("block_x"), [Some(128); 6]);
    assert_eq!(k.ints("block_z"), [Some(1); 6]);
    assert_eq!(k.ints("registers_per_thread"), [Some(32); 6]);
    assert_eq!(k.ints("shared_memory"), [Some(0); 6]);
    assert_eq!(k.ints("graph_id"), [None; 6]);

    let c = Rows::read(&part("copies"));
    assert_eq!(c.text("kind"), ["memcpy", "memset"]);
    assert_eq!(
        c.text("name"),
        ["Memcpy HtoD (Pageable -> Device)", "Memset (Device)"]
    );
    assert_eq!(c.int("start_ns"), [100_000, 2_000_000]);
    assert_eq!(c.int("end_ns"), [200_000, 2_050_000]);
    assert_eq!(c.ints("bytes"), [Some(1_000_000), Some(4096)]);
    assert_eq!(c.floats("bandwidth_gbps"), [Some(10.0), Some(1.0)]);
    assert_eq!(c.ints("correlation"), [Some(1), Some(999)]);

    let a = Rows::read(&part("api_calls"));
    assert_eq!(
        a.text("name"),
        [
            "cudaMemcpyAsync",
            "cudaLaunchKernel",
            "cudaLaunchKernel",
            "cudaLaunchKernel",
            "cudaLaunchKernel",
            "cudaDeviceSynchronize",
            "cudaLaunchKernel"
        ]
    );
    assert_eq!(a.text("kind"), ["runtime"; 7]);
    assert_eq!(a.ints("pid"), [Some(PID); 7]);
    assert_eq!(a.ints("tid"), [Some(MAIN); 7]);
    assert_eq!(
        a.int("start_ns"),
        [50_000, 250_000, 150_000, 1_200_000, 1_300_000, 2_100_000, 2_650_000]
    );
    assert_eq!(a.int("end_ns")[5], 2_600_000);
    assert_eq!(a.ints("correlation"), [1, 2, 3, 4, 5, 6, 7].map(Some));
    assert_eq!(a.ints("cbid"), [Some(211); 7]);

    let o = Rows::read(&part("operators"));
    assert_eq!(o.text("name"), ["aten::addmm"]);
    assert_eq!(
        (o.int("start_ns"), o.int("end_ns")),
        (vec![140_000], vec![160_001])
    );
    assert_eq!(o.ints("external_id"), [Some(17)]);
    assert_eq!(o.ints("sequence_number"), [Some(42)]);
    assert_eq!(o.ints("fwd_thread_id"), [Some(0)]);
    assert_eq!(
        o.texts("input_dims"),
        [Some("[[64, 1024], [1024, 512], []]".to_string())]
    );
    assert_eq!(o.ints("flops"), [Some(67_108_864)]);
    assert_eq!(
        o.texts("call_stack"),
        [Some(
            "/srv/m.py(12): forward;/srv/train.py(40): <module>".to_string()
        )]
    );
    assert_eq!(o.texts("collective"), [None]);

    let r = Rows::read(&part("ranges"));
    assert_eq!(
        r.text("name"),
        [
            "forward",
            "attention",
            "backward",
            "other_thread",
            "forward"
        ]
    );
    assert_eq!(r.text("kind"), ["cpu", "cpu", "cpu", "cpu", "gpu"]);
    assert_eq!(r.ints("tid"), [MAIN, MAIN, MAIN, OTHER, 7].map(Some));
    assert_eq!(r.ints("pid"), [PID, PID, PID, PID, 0].map(Some));
    assert_eq!(r.int("start_ns"), [100_000, 200_000, 1_100_000, 0, 300_000]);
    assert_eq!(
        r.int("end_ns"),
        [700_000, 400_000, 2_000_000, 10_000_000, 800_000]
    );
    assert_eq!(r.texts("domain"), [None, None, None, None, None]);

    let s = Rows::read(&part("steps"));
    assert_eq!(s.int("step"), [0, 1, 2, 3]);
    assert_eq!(s.int("start_ns"), [0, 1_000_000, 3_000_000, 6_000_000]);
    assert_eq!(
        s.int("end_ns"),
        [1_000_000, 3_000_000, 6_000_000, 10_000_000]
    );
    assert_eq!(
        s.floats("work"),
        [Some(100.0), Some(100.0), Some(100.0), None]
    );

    let m = Rows::read(&part("memory"));
    assert_eq!(
        m.text("name"),
        ["GPU 0 Memory", "[memory]", "[memory]", "[memory]"]
    );
    assert_eq!(
        m.text("counter"),
        [
            "reserved_bytes",
            "Bytes",
            "Total Allocated",
            "Total Reserved"
        ]
    );
    assert_eq!(m.int("value"), [1_048_576, 2048, 6144, 2_097_152]);
    assert_eq!(m.int("ts_ns"), [100_000, 150_000, 150_000, 150_000]);
    assert_eq!(m.ints("device"), [Some(0); 4]);
    assert_eq!(
        m.ints("addr"),
        [None, Some(139_844), Some(139_844), Some(139_844)]
    );

    let f = Rows::read(&out.join("files/files.parquet"));
    assert_eq!(f.len(), 1);
    assert_eq!(
        f.text("path"),
        [traces.join("t-rank0.trace.json.gz").display().to_string()]
    );
    assert_eq!((f.int("rank"), f.int("cycle")), (vec![0], vec![1]));
    assert_eq!(f.ints("world_size"), [Some(1)]);
    assert_eq!(f.texts("hostname"), [Some("node0".to_string())]);
    assert_eq!(f.ints("pid"), [Some(PID)]);
    assert_eq!(
        f.texts("devices"),
        [Some("0: NVIDIA H100 80GB HBM3".to_string())]
    );
    assert_eq!(f.ints("base_time_ns"), [Some(BASE)]);
    // cuprof's launches carry their operator's External id.
    assert_eq!(f.text("operator_link"), ["external_id"]);
    assert_eq!(f.ints("clock_realtime_ns"), [Some(BASE + 1_000_000_000)]);
    assert_eq!(f.ints("clock_monotonic_ns"), [Some(5_000_000_000)]);
    assert_eq!(f.int("events"), [48]);
    assert_eq!(
        f.int("compressed_bytes"),
        [std::fs::metadata(traces.join("t-rank0.trace.json.gz"))
            .unwrap()
            .len() as i64]
    );
    assert_eq!(f.int("uncompressed_bytes"), [traced().json().len() as i64]);
    assert_eq!(f.texts("truncated"), [None]);
    assert_eq!(f.ints("stats_events"), [Some(40)]);
    assert_eq!(f.ints("dropped_channel"), [Some(3)]);
    assert_eq!(f.ints("dropped_cupti"), [Some(2)]);
    assert_eq!(f.ints("dropped_buffers"), [Some(0)]);
    assert_eq!(f.ints("kernels_without_timestamps"), [Some(1)]);
    assert_eq!(f.ints("memory_events_dropped"), [Some(0)]);
    assert_eq!(f.bools("complete"), [Some(true)]);

    // Nothing but the tables: no temporary file left behind.
    let mut tables: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    tables.sort();
    assert_eq!(
        tables,
        [
            "api_calls",
            "copies",
            "files",
            "kernels",
            "memory",
            "modules",
            "operators",
            "ranges",
            "steps"
        ]
    );
    assert_eq!(
        std::fs::read_dir(out.join("kernels/rank=0/cycle=1"))
            .unwrap()
            .count(),
        1
    );
}

/// More rows than one batch (16,384): every row is there, in order.
#[test]
fn large_file_in_many_batches() {
    let dir = tempdir("export-large");
    let mut t = Trace::new(3, 4);
    let n = 40_000i64;
    for i in 0..n {
        t.kernel(
            if i % 3 == 0 { "a" } else { "b" },
            0,
            7,
            i * 1000 + 1,
            999,
            i,
        );
    }
    let trace = dir.join("big-rank3.trace.json.gz");
    t.write_gz(&trace);
    let out = dir.join("ds");
    export(&trace, &out);
    let k = Rows::read(&out.join("kernels/rank=3/cycle=1/big-rank3.parquet"));
    assert_eq!(k.len(), n as usize);
    let start = k.int("start_ns");
    assert!(start
        .iter()
        .enumerate()
        .all(|(i, &s)| s == i as i64 * 1000 + 1));
    assert_eq!(
        k.int("end_ns")
            .iter()
            .zip(&start)
            .map(|(e, s)| e - s)
            .sum::<i64>(),
        999 * n
    );
    assert_eq!(k.text("name").iter().filter(|x| *x == "a").count(), 13_334);
}

/// Files of two directories, a rank in two cycles, and a foreign trace with no rank at all.
#[test]
fn partitions_by_rank_and_cycle() {
    let dir = tempdir("export-parts");
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let mut t = Trace::new(2, 4);
    t.kernel("k", 0, 7, 1000, 10, 1);
    t.write_gz(&a.join("job-rank2.trace.json.gz"));
    t.write_gz(&b.join("job-rank2.trace.json.gz"));
    let kineto = dir.join("kineto.json");
    std::fs::write(
        &kineto,
        r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k2", "pid": 1, "tid": 9, "ts": 5.5, "dur": 0.25, "args": {"device": 1, "stream": 9}}]}"#,
    )
    .unwrap();
    let out = dir.join("ds");
    cuprof_ok(&[
        "export",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        kineto.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "-j",
        "2",
    ]);
    let k = out.join("kernels");
    assert!(k.join("rank=2/cycle=1/job-rank2.parquet").is_file());
    assert!(k.join("rank=2/cycle=1/job-rank2-1.parquet").is_file());
    // No rank anywhere: the next after the known ones, as `cuprof report` numbers it.
    let f = Rows::read(&k.join("rank=3/cycle=0/kineto.parquet"));
    assert_eq!(f.text("name"), ["k2"]);
    assert_eq!(
        (f.int("start_ns"), f.int("end_ns")),
        (vec![5500], vec![5750])
    );
    assert_eq!(
        (f.int("device"), f.ints("stream")),
        (vec![1], vec![Some(9)])
    );
    let files = Rows::read(&out.join("files/files.parquet"));
    assert_eq!(files.int("rank"), [2, 2, 3]);
    assert_eq!(files.int("cycle"), [1, 1, 0]);
    assert_eq!(files.ints("dropped_channel"), [Some(0), Some(0), None]);
    assert_eq!(files.bools("complete"), [Some(true), Some(true), None]);
}

/// A trace cut short is exported up to the cut, and the files table says where it stops.
#[test]
fn cut_short_trace() {
    let dir = tempdir("export-cut");
    let mut t = Trace::new(0, 1);
    for i in 0..10 {
        t.kernel("k", 0, 7, i * 1000, 500, i);
    }
    let trace = dir.join("cut-rank0.trace.json.gz");
    t.write_cut(&trace, 6);
    let out = dir.join("ds");
    let stdout = export(&trace, &out);
    assert!(stdout.contains("note: "), "{stdout}");
    let k = Rows::read(&out.join("kernels/rank=0/cycle=1/cut-rank0.parquet"));
    assert_eq!(k.int("start_ns"), [0, 1000, 2000, 3000, 4000, 5000]);
    let f = Rows::read(&out.join("files/files.parquet"));
    let why = f.texts("truncated")[0].clone().unwrap();
    assert!(why.contains("after 6 complete events"), "{why}");
    assert_eq!(f.ints("dropped_channel"), [None]);
}

#[test]
fn refuses_an_output_that_is_an_input() {
    let dir = tempdir("export-refuse");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let trace = traces.join("x-rank0.trace.json.gz");
    sample().write_gz(&trace);
    for (args, why) in [
        (
            vec![
                "export",
                traces.to_str().unwrap(),
                "-o",
                traces.to_str().unwrap(),
            ],
            "the output directory is one of the inputs",
        ),
        (
            vec![
                "export",
                trace.to_str().unwrap(),
                "-o",
                traces.to_str().unwrap(),
            ],
            "the output directory holds an input",
        ),
    ] {
        let o = cuprof(&args);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(why), "{err}");
        assert_eq!(
            std::fs::read_dir(&traces).unwrap().count(),
            1,
            "nothing written"
        );
    }
}
