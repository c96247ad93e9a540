//! `cuprof report`'s collectives: each collective's `record_param_comms` operator (torch's
//! metadata: name, dtype, message elements, group size) with the kernels attributed to it, in
//! nccl-tests' figures: calls, message bytes, GPU time, algorithm and bus bandwidth.

use crate::analysis_support::*;
use crate::export_support::Rows;
use serde_json::{json, Value};

/// A collective's operator as torch.profiler and cuprof write it, `dtype` and `group` left out
/// when `None`.
#[allow(clippy::too_many_arguments)]
fn collective(
    t: &mut Trace,
    ext: i64,
    name: &str,
    dtype: Option<&str>,
    nelems: (i64, i64),
    group: Option<i64>,
    start: i64,
    dur: i64,
) {
    let mut args = format!(
        "\"External id\": {ext}, \"Record function id\": 0, \"Collective name\": {}, \"In msg nelems\": {}, \"Out msg nelems\": {}, \"Process Group Name\": \"0\"",
        q(name),
        nelems.0,
        nelems.1
    );
    if let Some(d) = dtype {
        args.push_str(&format!(", \"dtype\": {}", q(d)));
    }
    if let Some(n) = group {
        args.push_str(&format!(", \"Group size\": {n}"));
    }
    t.x("cpu_op", "record_param_comms", PID, MAIN, start, dur, &args);
}

fn row(s: &Value, i: usize) -> Value {
    s["collectives"][i].clone()
}

/// `v` written and read back as summary.json is (serde_json's reader may land on a neighbour of
/// a double that needs 17 digits).
fn as_read(v: Value) -> Value {
    serde_json::from_str(&v.to_string()).unwrap()
}

/// Two all-reduces (their kernels `allreduce_us` µs each), an all-gather, a send, a barrier,
/// and a compute kernel in another operator.
fn collectives_trace(allreduce_us: [i64; 2]) -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN]);
    // Two all-reduces of 1 Mi floats (4 MiB) among 8 ranks.
    for (i, (ext, kernel)) in [(11, allreduce_us[0] * 1000), (12, allreduce_us[1] * 1000)]
        .into_iter()
        .enumerate()
    {
        let at = i as i64 * 1_000_000;
        collective(
            &mut t,
            ext,
            "allreduce",
            Some("Float"),
            (1 << 20, 1 << 20),
            Some(8),
            at,
            20_000,
        );
        t.launch_in(
            ext,
            "cudaLaunchKernelExC",
            "kernel",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            MAIN,
            at + 5_000,
            at + 10_000,
            kernel,
            true,
        );
    }
    // An all-gather: 4 Ki bf16 in, 32 Ki out (64 KiB, nccl-tests' size), its kernel without
    // an External id of its own (found through its launch's).
    collective(
        &mut t,
        13,
        "allgather_into_tensor_coalesced",
        Some("BFloat16"),
        (4096, 32768),
        Some(8),
        3_000_000,
        10_000,
    );
    t.launch_in(
        13,
        "cudaLaunchKernelExC",
        "kernel",
        "ncclDevKernel_AllGather_RING_LL",
        MAIN,
        3_002_000,
        3_010_000,
        16_000,
        false,
    );
    // A send of 256 floats (no bus bandwidth in nccl-tests), and a barrier that says no dtype
    // and launched nothing.
    collective(
        &mut t,
        14,
        "send",
        Some("Float"),
        (256, 256),
        Some(2),
        4_000_000,
        5_000,
    );
    t.launch_in(
        14,
        "cudaLaunchKernelExC",
        "kernel",
        "ncclDevKernel_SendRecv",
        MAIN,
        4_001_000,
        4_002_000,
        2_000,
        true,
    );
    collective(&mut t, 15, "barrier", None, (0, 0), None, 5_000_000, 3_000);
    // A compute kernel in another operator is no collective's.
    t.cpu_op("aten::mm", MAIN, 6_000_000, 10_000, 16, None, None);
    t.launch_in(
        16,
        "cudaLaunchKernel",
        "kernel",
        "gemm",
        MAIN,
        6_001_000,
        6_002_000,
        50_000,
        true,
    );

    t
}

#[test]
fn collectives_with_nccl_tests_figures() {
    let t = collectives_trace([100, 300]);
    let dir = tempdir("collectives");
    let trace = dir.join("t-rank0.trace.json.gz");
    t.write_gz(&trace);
    let out = dir.join("out");
    let (stdout, s) = report(&trace, &out);
    assert_eq!(s["collectives"].as_array().unwrap().len(), 4);
    assert_eq!(
        row(&s, 0),
        as_read(
            json!({"name": "allreduce", "dtype": "Float", "group_size": 8, "count": 2,
               "bytes": 8_388_608, "cpu_ns": 40_000, "gpu_ns": 400_000, "kernels": 2,
               "algbw_gbps": 8_388_608.0 / 400_000.0, "busbw_gbps": 8_388_608.0 / 400_000.0 * 1.75})
        )
    );
    assert_eq!(
        row(&s, 1),
        as_read(
            json!({"name": "allgather_into_tensor_coalesced", "dtype": "BFloat16", "group_size": 8,
               "count": 1, "bytes": 65_536, "cpu_ns": 10_000, "gpu_ns": 16_000, "kernels": 1,
               "algbw_gbps": 4.096, "busbw_gbps": 4.096 * 0.875})
        )
    );
    assert_eq!(
        row(&s, 2),
        json!({"name": "send", "dtype": "Float", "group_size": 2, "count": 1, "bytes": 1_024,
               "cpu_ns": 5_000, "gpu_ns": 2_000, "kernels": 1, "algbw_gbps": 0.512,
               "busbw_gbps": null})
    );
    assert_eq!(
        row(&s, 3),
        json!({"name": "barrier", "dtype": "", "group_size": null, "count": 1, "bytes": null,
               "cpu_ns": 3_000, "gpu_ns": 0, "kernels": 0, "algbw_gbps": null,
               "busbw_gbps": null})
    );
    let section: Vec<&str> = stdout
        .split("== Collectives (nccl-tests' figures) ==\n")
        .nth(1)
        .and_then(|r| r.split("\n\n").next())
        .expect("the section")
        .lines()
        .collect();
    assert_eq!(
        section,
        [
            "  collective                       dtype     ranks  calls     bytes    GPU time  kernels  algbw GB/s  busbw GB/s   CPU time",
            "  allreduce                        Float         8      2   8.0 MiB  400.000 µs        2       20.97       36.70  40.000 µs",
            "  allgather_into_tensor_coalesced  BFloat16      8      1  64.0 KiB   16.000 µs        1        4.10        3.58  10.000 µs",
            "  send                             Float         2      1   1.0 KiB    2.000 µs        1        0.51           -   5.000 µs",
            "  barrier                                        -      1         -        0 ns        0           -           -   3.000 µs",
        ]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains(
            "| allreduce | Float | 8 | 2 | 8.0 MiB | 400.000 µs | 2 | 20.97 | 36.70 | 40.000 µs |"
        ),
        "{md}"
    );
    // The page's table, each figure marked with summary.json's value.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains(r#"<section id="cp-collectives"><h2>Collectives</h2>"#));
    assert!(
        html.contains(r#"data-key="collectives.0.gpu_ns" data-value="400000""#),
        "{html}"
    );
    assert!(html.contains(r#"data-key="collectives.3.bytes" data-value="null""#));
}

/// Without collectives, no section and no key.
#[test]
fn no_collectives_no_section() {
    let dir = tempdir("no-collectives");
    let trace = dir.join("t-rank0.trace.json.gz");
    sample().write_gz(&trace);
    let (stdout, s) = report(&trace, &dir.join("out"));
    assert_eq!(s.get("collectives"), None);
    assert!(!stdout.contains("Collectives"));
}

/// `cuprof compare` puts each collective's GPU time in A and B side by side.
#[test]
fn compare_puts_collectives_side_by_side() {
    let dir = tempdir("collectives-compare");
    let (a, b) = (
        dir.join("a-rank0.trace.json.gz"),
        dir.join("b-rank0.trace.json.gz"),
    );
    collectives_trace([100, 300]).write_gz(&a);
    collectives_trace([100, 100]).write_gz(&b);
    let (rows, c) = compared(&a, &b, "collectives");
    assert_eq!(
        rows,
        [
            ("allreduce".to_string(), 400_000, 200_000),
            (
                "allgather_into_tensor_coalesced".to_string(),
                16_000,
                16_000
            ),
            ("send".to_string(), 2_000, 2_000),
            ("barrier".to_string(), 0, 0),
        ]
    );
    assert_eq!(c["collectives"][0]["ratio"], 0.5);
    let table = cuprof_ok(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(table.contains("collective, GPU time"), "{table}");
}

/// `cuprof export`'s operators table carries each collective's metadata, for SQL over ranks.
#[test]
fn export_has_the_collectives_columns() {
    let dir = tempdir("collectives-export");
    let traces = dir.join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    collectives_trace([100, 300]).write_gz(&traces.join("t-rank0.trace.json.gz"));
    let out = dir.join("ds");
    cuprof_ok(&[
        "export",
        traces.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let o = Rows::read(&out.join("operators/rank=0/cycle=1/t-rank0.parquet"));
    let text = |v: &[&str]| v.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>();
    assert_eq!(
        o.texts("collective"),
        [
            text(&[
                "allreduce",
                "allreduce",
                "allgather_into_tensor_coalesced",
                "send",
                "barrier"
            ]),
            vec![None]
        ]
        .concat()
    );
    assert_eq!(
        o.texts("dtype"),
        [
            text(&["Float", "Float", "BFloat16", "Float"]),
            vec![None, None]
        ]
        .concat()
    );
    assert_eq!(
        o.ints("in_msg_nelems"),
        [
            Some(1 << 20),
            Some(1 << 20),
            Some(4096),
            Some(256),
            Some(0),
            None
        ]
    );
    assert_eq!(
        o.ints("out_msg_nelems"),
        [
            Some(1 << 20),
            Some(1 << 20),
            Some(32768),
            Some(256),
            Some(0),
            None
        ]
    );
    assert_eq!(
        o.ints("group_size"),
        [Some(8), Some(8), Some(8), Some(2), None, None]
    );
    assert_eq!(o.ints("flops"), [None; 6]);
}

/// Two ranks: the same three all-reduces (by group and `Seq`) took 100, 300, 50 µs on rank 0
/// and 400, 100, 50 µs on rank 1; so rank 0 waited 200 µs (in the second) and rank 1 300 µs
/// (in the first). A collective only on rank 0, and one without `Seq` on rank 1, match nothing.
#[test]
fn each_ranks_waiting_in_shared_collectives() {
    let dir = tempdir("collective-waits");
    for (rank, kernels, extra) in [(0, [100, 300, 50], Some(4)), (1, [400, 100, 50], None)] {
        let mut t = Trace::new(rank, 2);
        t.metadata(&[0], &[(0, 7)], &[MAIN]);
        for (i, us) in kernels.into_iter().enumerate() {
            let i = i as i64;
            t.numbered_allreduce(10 + i, Some(i + 1), i * 1_000_000, us);
        }
        t.numbered_allreduce(20, extra, 5_000_000, 70);
        t.write_gz(&dir.join(format!("t-rank{rank}.trace.json.gz")));
    }
    let (stdout, s) = report(&dir, &dir.join("out"));
    assert_eq!(
        s["collective_waits"],
        json!([
            {"rank": 0, "matched": 3, "gpu_ns": 450_000, "wait_ns": 200_000},
            {"rank": 1, "matched": 3, "gpu_ns": 550_000, "wait_ns": 300_000},
        ])
    );
    assert_eq!(
        section_lines(&stdout, "Waiting in collectives (per rank)"),
        [
            "  rank  collectives    GPU time     waiting  share",
            "     0            3  450.000 µs  200.000 µs  44.4%",
            "     1            3  550.000 µs  300.000 µs  54.5%",
            "",
            "rank 0 waits least: the other ranks wait for it in their collectives (waiting: a kernel's time beyond the shortest rank's kernel of the same collective)",
        ]
    );
    // One rank's traces: nothing to match, no section.
    let one = tempdir("collective-waits-one");
    std::fs::copy(
        dir.join("t-rank0.trace.json.gz"),
        one.join("t-rank0.trace.json.gz"),
    )
    .unwrap();
    let (stdout, s) = report(&one, &one.join("out"));
    assert_eq!(s.get("collective_waits"), None);
    assert!(!stdout.contains("Waiting in collectives"));
}
