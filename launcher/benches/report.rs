//! Throughput of `cuprof report` on a generated trace of about 1 GB of uncompressed JSON.
//!
//!     cargo bench -p cuprof-launcher --bench report            (or scripts/bench-report.sh)
//!
//! The trace is generated once into `$CUPROF_BENCH_DIR` (default `/tmp/cuprof-bench`) and reused
//! while its size matches; `CUPROF_BENCH_MB` sets the size (default 1024). The report runs in
//! its own process on one core (the analysis is single-threaded); the figure printed is MB/s of
//! uncompressed JSON (10^6 bytes per second), best of `CUPROF_BENCH_RUNS` runs (default 2).
//! Decompression alone is timed too, to show what share of the time is inflate.
//!
//! `report --html` is timed against plain `report` on the same trace, runs alternating, as
//! CPU time of the child (steadier than wall time on a shared machine) and wall time, best of
//! `CUPROF_BENCH_RUNS` each: the page must add at most 10%.

// A benchmark prints raw (launcher/clippy.toml is for what the crates output).
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use flate2::write::GzEncoder;
use flate2::Compression;

const PID: u64 = 4242;
const MAIN: u64 = 4242;

fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

/// Writes a cuprof-shaped trace of about `target` uncompressed bytes; returns its exact size.
fn generate(path: &Path, target: u64) -> std::io::Result<u64> {
    let file = std::fs::File::create(path)?;
    let mut gz = GzEncoder::new(BufWriter::with_capacity(1 << 20, file), Compression::fast());
    let mut n: u64 = 0;
    fn put<W: Write>(gz: &mut W, n: &mut u64, s: &str) -> std::io::Result<()> {
        *n += s.len() as u64;
        gz.write_all(s.as_bytes())
    }
    put(&mut gz, &mut n, "{\"schemaVersion\": 1,\n \"deviceProperties\": [{\"id\": 0, \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 85029158912, \"computeMajor\": 9, \"computeMinor\": 0, \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048, \"regsPerBlock\": 65536, \"warpSize\": 32, \"sharedMemPerBlock\": 49152, \"numSms\": 132, \"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": 232448, \"sharedMemPerMultiprocessor\": 233472}],\n \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 1, \"local_rank\": 0},\n \"cuprof\": {\"version\": \"0.1.0\", \"pid\": 4242, \"hostname\": \"bench\", \"cupti_version\": 130001, \"cycle\": 1, \"clock\": {\"realtime_ns\": 1700000001000000000, \"monotonic_ns\": 5000000000}, \"window\": \"bench\"},\n \"displayTimeUnit\": \"ms\",\n \"baseTimeNanoseconds\": 1700000000000000000,\n \"traceEvents\": [\n")?;
    let kernels = [
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
        "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, false, true, false, false, true, true, false>",
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "void at::native::(anonymous namespace)::layer_norm_kernel<c10::BFloat16, float>(long, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
    ];
    let mut t: u64 = 1_000_000;
    let mut corr: u64 = 1;
    let mut step = 0u64;
    let mut first = true;
    let mut buf = String::with_capacity(1 << 16);
    while n < target {
        let step_start = t;
        buf.clear();
        let sep = |buf: &mut String, first: &mut bool| {
            if !*first {
                buf.push_str(",\n");
            }
            *first = false;
        };
        let range_start = t;
        for k in 0..200u64 {
            let name = kernels[(k % kernels.len() as u64) as usize];
            let stream = if name.starts_with("nccl") { 13 } else { 7 };
            let dur = 5_000 + (k * 7919 % 40_000);
            let api = t;
            let gpu = t + 3_000;
            sep(&mut buf, &mut first);
            buf.push_str(&format!(
                "{{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": {PID}, \"tid\": {MAIN}, \"ts\": {}, \"dur\": 2.512, \"args\": {{\"cbid\": 211, \"correlation\": {corr}}}}}",
                us(api)
            ));
            sep(&mut buf, &mut first);
            buf.push_str(&format!(
                "{{\"ph\": \"s\", \"id\": {corr}, \"pid\": {PID}, \"tid\": {MAIN}, \"ts\": {}, \"cat\": \"ac2g\", \"name\": \"ac2g\"}}",
                us(api)
            ));
            sep(&mut buf, &mut first);
            buf.push_str(&format!(
                "{{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": {}, \"pid\": 0, \"tid\": {stream}, \"ts\": {}, \"dur\": {}, \"args\": {{\"device\": 0, \"context\": 1, \"stream\": {stream}, \"correlation\": {corr}, \"registers per thread\": 128, \"shared memory\": 49152, \"blocks per SM\": 1.939394, \"warps per SM\": 7.757576, \"grid\": [256, 1, 1], \"block\": [128, 1, 1], \"est. achieved occupancy %\": 12, \"queued\": 1.250}}}}",
                serde_json::to_string(name).unwrap(),
                us(gpu),
                us(dur)
            ));
            sep(&mut buf, &mut first);
            buf.push_str(&format!(
                "{{\"ph\": \"f\", \"id\": {corr}, \"pid\": 0, \"tid\": {stream}, \"ts\": {}, \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}}",
                us(gpu)
            ));
            corr += 1;
            t += dur + 4_000;
            if k % 50 == 0 {
                // The memory counter, so that the page's memory plot has a series to draw.
                sep(&mut buf, &mut first);
                buf.push_str(&format!(
                    "{{\"ph\": \"C\", \"cat\": \"cuda_memory\", \"name\": \"GPU 0 Memory\", \"pid\": 0, \"tid\": 0, \"ts\": {}, \"args\": {{\"reserved_bytes\": {}}}}}",
                    us(t),
                    (1 + (step % 97) + k) << 20
                ));
            }
            if k % 50 == 49 {
                sep(&mut buf, &mut first);
                buf.push_str(&format!(
                    "{{\"ph\": \"X\", \"cat\": \"gpu_memcpy\", \"name\": \"Memcpy DtoH (Device -> Pinned)\", \"pid\": 0, \"tid\": 7, \"ts\": {}, \"dur\": 12.000, \"args\": {{\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": {corr}, \"bytes\": 4194304, \"memory bandwidth (GB/s)\": 349.525333}}}}",
                    us(t)
                ));
                corr += 1;
                t += 20_000;
            }
        }
        sep(&mut buf, &mut first);
        buf.push_str(&format!(
            "{{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"forward\", \"pid\": {PID}, \"tid\": {MAIN}, \"ts\": {}, \"dur\": {}}}",
            us(range_start),
            us(t - range_start)
        ));
        sep(&mut buf, &mut first);
        buf.push_str(&format!(
            "{{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#{step}\", \"pid\": {PID}, \"tid\": {MAIN}, \"ts\": {}, \"dur\": {}, \"args\": {{\"work\": 4096.000000}}}}",
            us(step_start),
            us(t - step_start)
        ));
        step += 1;
        put(&mut gz, &mut n, &buf)?;
    }
    put(&mut gz, &mut n, "\n],\n \"cuprofStats\": {\"events\": 0, \"dropped_channel\": 0, \"dropped_cupti\": 0, \"dropped_buffers\": 0, \"kernels_without_timestamps\": 0, \"memory_events_dropped\": 0, \"complete\": true},\n \"traceName\": \"bench-rank0.trace.json.gz\"}\n")?;
    gz.finish()?.flush()?;
    Ok(n)
}

fn main() {
    // `cargo bench` passes `--bench`; anything else (`cargo test --benches`, `--list`) must not
    // generate a gigabyte.
    if !std::env::args().any(|a| a == "--bench") {
        println!("report: run with `cargo bench -p cuprof-launcher --bench report`");
        return;
    }
    let mb: u64 = std::env::var("CUPROF_BENCH_MB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    let runs: usize = std::env::var("CUPROF_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let dir = PathBuf::from(
        std::env::var("CUPROF_BENCH_DIR").unwrap_or_else(|_| "/tmp/cuprof-bench".to_string()),
    );
    std::fs::create_dir_all(&dir).expect("create the bench directory");
    let trace = dir.join("bench-rank0.trace.json.gz");
    let size_file = dir.join(format!("bench-{mb}MB.size"));
    let target = mb * 1_000_000;
    let size: u64 = match std::fs::read_to_string(&size_file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        Some(s) if trace.exists() => s,
        _ => {
            let t0 = Instant::now();
            let s = generate(&trace, target).expect("generate the bench trace");
            std::fs::write(&size_file, s.to_string()).expect("write the size marker");
            eprintln!(
                "generated {} ({:.0} MB uncompressed) in {:.1} s",
                trace.display(),
                s as f64 / 1e6,
                t0.elapsed().as_secs_f64()
            );
            s
        }
    };
    let compressed = std::fs::metadata(&trace).map(|m| m.len()).unwrap_or(0);

    // Inflate alone.
    let t0 = Instant::now();
    let mut d = flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(
        256 << 10,
        std::fs::File::open(&trace).expect("open the trace"),
    ));
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let k = d.read(&mut buf).expect("inflate");
        if k == 0 {
            break;
        }
        total += k as u64;
    }
    let inflate_s = t0.elapsed().as_secs_f64();
    assert_eq!(total, size);

    let html = dir.join("bench.html");
    let mut best = Best::default();
    let mut best_html = Best::default();
    let mut overview = String::new();
    for _ in 0..runs {
        overview = best.add(time_report(&trace, &[]));
        best_html.add(time_report(&trace, &["--html".as_ref(), html.as_os_str()]));
    }
    println!(
        "trace: {} ({:.0} MB uncompressed, {:.0} MB gzip)",
        trace.display(),
        size as f64 / 1e6,
        compressed as f64 / 1e6
    );
    println!(
        "inflate alone: {:.2} s, {:.0} MB/s",
        inflate_s,
        size as f64 / 1e6 / inflate_s
    );
    println!("report: {overview}");
    println!(
        "cuprof report: {:.2} s, {:.0} MB/s of uncompressed JSON (best of {runs}; goal >= 100); CPU {:.2} s",
        best.wall,
        size as f64 / 1e6 / best.wall,
        best.cpu
    );
    println!(
        "cuprof report --html: wall {:.2} s ({:+.1}%), CPU {:.2} s ({:+.1}%; goal <= +10%); page {:.1} MB",
        best_html.wall,
        (best_html.wall / best.wall - 1.0) * 100.0,
        best_html.cpu,
        (best_html.cpu / best.cpu - 1.0) * 100.0,
        std::fs::metadata(&html).map(|m| m.len()).unwrap_or(0) as f64 / 1e6
    );
}

/// Best (lowest) wall and CPU seconds over runs.
struct Best {
    wall: f64,
    cpu: f64,
}

impl Default for Best {
    fn default() -> Self {
        Best {
            wall: f64::MAX,
            cpu: f64::MAX,
        }
    }
}

impl Best {
    /// Keeps the lower times; returns the report's first line (files, ranks, events).
    fn add(&mut self, (wall, cpu, stdout): (f64, f64, String)) -> String {
        self.wall = self.wall.min(wall);
        self.cpu = self.cpu.min(cpu);
        stdout
            .lines()
            .find(|l| l.contains(" events"))
            .unwrap_or("")
            .trim()
            .to_string()
    }
}

/// User + system CPU seconds of the waited-for children so far.
fn children_cpu() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs `cuprof report TRACE EXTRA...` on one core; (wall, CPU) seconds.
fn time_report(trace: &Path, extra: &[&std::ffi::OsStr]) -> (f64, f64, String) {
    let cpu0 = children_cpu();
    let t0 = Instant::now();
    // One core: pinned with taskset where there is one.
    let pinned = Path::new("/usr/bin/taskset").exists();
    let mut cmd = if pinned {
        let mut c = Command::new("/usr/bin/taskset");
        c.args(["-c", "0", env!("CARGO_BIN_EXE_cuprof")]);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_cuprof"))
    };
    let out = cmd
        .arg("report")
        .arg(trace)
        .args(extra)
        .output()
        .expect("run cuprof report");
    let wall = t0.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "cuprof report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cpu = children_cpu() - cpu0;
    (wall, cpu, String::from_utf8_lossy(&out.stdout).into_owned())
}
