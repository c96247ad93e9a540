//! `cuprof flame`: folded stacks NVTX ranges -> kernel (GPU time) or API call (`--cpu`).

use crate::analysis_support::*;

#[test]
fn gpu_and_cpu_stacks() {
    let dir = tempdir("flame");
    let trace = dir.join("run-rank0.trace.json.gz");
    sample().write_gz(&trace);
    let svg = dir.join("flame.svg");
    let folded = dir.join("gpu.folded");
    let out = cuprof_ok(&[
        "flame",
        trace.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
    ]);
    assert!(out.contains("7 stacks"), "{out}");
    assert_eq!(
        std::fs::read_to_string(&folded).unwrap(),
        "(no launch record);Memset (Device) 50000\n\
         Memcpy HtoD (Pageable -> Device) 100000\n\
         backward;gemm 300000\n\
         backward;ncclDevKernel_AllReduce_Sum_f32_RING_LL 500000\n\
         forward;attention;flash_attn 200000\n\
         forward;gemm 300000\n\
         gemm 300000\n"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml"), "not an SVG");
    assert!(text.contains("flash_attn"));

    let folded = dir.join("cpu.folded");
    cuprof_ok(&[
        "flame",
        trace.to_str().unwrap(),
        "--cpu",
        "-o",
        svg.to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
    ]);
    assert_eq!(
        std::fs::read_to_string(&folded).unwrap(),
        "backward;cudaLaunchKernel 2000\n\
         cudaDeviceSynchronize 500000\n\
         cudaLaunchKernel 1000\n\
         cudaMemcpyAsync 1000\n\
         forward;attention;cudaLaunchKernel 1000\n\
         forward;cudaLaunchKernel 1000\n"
    );
}

#[test]
fn several_ranks_get_a_root_frame_each() {
    let dir = tempdir("flame2");
    let mut t1 = sample();
    t1.rank = 1;
    sample().write_gz(&dir.join("run-rank0.trace.json.gz"));
    t1.write_gz(&dir.join("run-rank1.trace.json.gz"));
    let folded = dir.join("f");
    cuprof_ok(&[
        "flame",
        dir.to_str().unwrap(),
        "-o",
        dir.join("x.svg").to_str().unwrap(),
        "--folded",
        folded.to_str().unwrap(),
    ]);
    let f = std::fs::read_to_string(&folded).unwrap();
    assert!(
        f.contains("rank 0;forward;attention;flash_attn 200000\n"),
        "{f}"
    );
    assert!(
        f.contains("rank 1;forward;attention;flash_attn 200000\n"),
        "{f}"
    );
}
