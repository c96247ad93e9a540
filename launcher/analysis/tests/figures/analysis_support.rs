//! Builds cuprof traces with known content for the analysis tests: the JSON is written here,
//! in the schema of docs/trace-format.md, and gzipped with flate2.
//!
//! `cuprof ARGS` is `crate::command::cuprof`: in the figure tests, a call of the library
//! in-process (analysis/tests/figures/command.rs); in the CLI suite, which includes this file
//! too, the binary spawned (launcher/tests/cli/command.rs).
#![allow(dead_code, clippy::too_many_arguments)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use cuprof_core::chunked_gzip::ChunkedGz;
use flate2::write::GzEncoder;
use flate2::{Compression, FlushCompress};

pub use crate::command::cuprof;

/// The repository's root (the folder of Cargo.lock above this package).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("Cargo.lock").exists())
        .expect("the workspace root")
        .to_path_buf()
}

pub const BASE: i64 = 1_700_000_000_000_000_000;
pub const PID: i64 = 4242;

/// `{ns/1000}.{ns%1000:03}` as the tracer writes it.
pub fn us(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

pub fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

pub struct Trace {
    pub rank: i64,
    pub world: i64,
    pub hostname: String,
    pub clock: (i64, i64),
    pub base: i64,
    pub events: Vec<String>,
    pub stats: Option<String>,
    /// `cuprof.name` and `cuprof.run_id`, written when set (cuprof before run ids wrote none).
    pub run: Option<(String, String)>,
    next_corr: i64,
}

impl Trace {
    pub fn new(rank: i64, world: i64) -> Self {
        Trace {
            rank,
            world,
            hostname: "node0".into(),
            clock: (BASE + 1_000_000_000, 5_000_000_000),
            base: BASE,
            events: Vec::new(),
            stats: Some(
                r#"{"events": 0, "dropped_channel": 0, "dropped_cupti": 0, "dropped_buffers": 0, "kernels_without_timestamps": 0, "memory_events_dropped": 0, "complete": true}"#
                    .into(),
            ),
            run: None,
            next_corr: 1,
        }
    }

    pub fn corr(&mut self) -> i64 {
        let c = self.next_corr;
        self.next_corr += 1;
        c
    }

    pub fn x(
        &mut self,
        cat: &str,
        name: &str,
        pid: i64,
        tid: i64,
        start: i64,
        dur: i64,
        args: &str,
    ) {
        let args = if args.is_empty() {
            String::new()
        } else {
            format!(", \"args\": {{{args}}}")
        };
        self.events.push(format!(
            "{{\"ph\": \"X\", \"cat\": {}, \"name\": {}, \"pid\": {pid}, \"tid\": {tid}, \"ts\": {}, \"dur\": {}{args}}}",
            q(cat),
            q(name),
            us(start),
            us(dur)
        ));
    }

    pub fn kernel(&mut self, name: &str, dev: i64, stream: i64, start: i64, dur: i64, corr: i64) {
        let args = format!(
            "\"device\": {dev}, \"context\": 1, \"stream\": {stream}, \"correlation\": {corr}, \"registers per thread\": 32, \"shared memory\": 0, \"blocks per SM\": 1.000000, \"warps per SM\": 4.000000, \"grid\": [132, 1, 1], \"block\": [128, 1, 1], \"est. achieved occupancy %\": 6"
        );
        self.x("kernel", name, dev, stream, start, dur, &args);
    }

    pub fn memcpy(
        &mut self,
        name: &str,
        dev: i64,
        stream: i64,
        start: i64,
        dur: i64,
        corr: i64,
        bytes: i64,
    ) {
        let args = format!(
            "\"device\": {dev}, \"context\": 1, \"stream\": {stream}, \"correlation\": {corr}, \"bytes\": {bytes}, \"memory bandwidth (GB/s)\": {:.6}",
            bytes as f64 / dur as f64
        );
        self.x("gpu_memcpy", name, dev, stream, start, dur, &args);
    }

    pub fn memset(&mut self, dev: i64, stream: i64, start: i64, dur: i64, corr: i64, bytes: i64) {
        let args = format!(
            "\"device\": {dev}, \"context\": 1, \"stream\": {stream}, \"correlation\": {corr}, \"bytes\": {bytes}, \"memory bandwidth (GB/s)\": 1.0"
        );
        self.x(
            "gpu_memset",
            "Memset (Device)",
            dev,
            stream,
            start,
            dur,
            &args,
        );
    }

    pub fn runtime(&mut self, name: &str, tid: i64, start: i64, dur: i64, corr: i64) {
        let args = format!("\"cbid\": 211, \"correlation\": {corr}");
        self.x("cuda_runtime", name, PID, tid, start, dur, &args);
    }

    pub fn flow(&mut self, corr: i64, tid: i64, api: i64, dev: i64, stream: i64, gpu: i64) {
        self.events.push(format!(
            "{{\"ph\": \"s\", \"id\": {corr}, \"pid\": {PID}, \"tid\": {tid}, \"ts\": {}, \"cat\": \"ac2g\", \"name\": \"ac2g\"}}",
            us(api)
        ));
        self.events.push(format!(
            "{{\"ph\": \"f\", \"id\": {corr}, \"pid\": {dev}, \"tid\": {stream}, \"ts\": {}, \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}}",
            us(gpu)
        ));
    }

    /// `cudaLaunchKernel` at `api` (1 µs) on thread `tid`, the kernel at `start` for `dur`.
    pub fn launch(
        &mut self,
        name: &str,
        tid: i64,
        api: i64,
        dev: i64,
        stream: i64,
        start: i64,
        dur: i64,
    ) -> i64 {
        let c = self.corr();
        self.runtime("cudaLaunchKernel", tid, api, 1000, c);
        self.kernel(name, dev, stream, start, dur, c);
        self.flow(c, tid, api, dev, stream, start);
        c
    }

    pub fn copy(
        &mut self,
        name: &str,
        tid: i64,
        api: i64,
        dev: i64,
        stream: i64,
        start: i64,
        dur: i64,
        bytes: i64,
    ) -> i64 {
        let c = self.corr();
        self.runtime("cudaMemcpyAsync", tid, api, 1000, c);
        self.memcpy(name, dev, stream, start, dur, c, bytes);
        c
    }

    /// A PyTorch operator as cuprof's `torch_op` writes it (Kineto's fields).
    pub fn cpu_op(
        &mut self,
        name: &str,
        tid: i64,
        start: i64,
        dur: i64,
        ext: i64,
        dims: Option<&str>,
        stack: Option<&str>,
    ) {
        let mut args = format!("\"External id\": {ext}, \"Record function id\": {ext}");
        if let Some(d) = dims {
            args.push_str(&format!(", \"Input Dims\": {d}"));
        }
        if let Some(s) = stack {
            args.push_str(&format!(", \"Call stack\": {}", q(s)));
        }
        self.x("cpu_op", name, PID, tid, start, dur, &args);
    }

    /// `api` (1 µs) inside the operator `ext` on thread `tid`, then its GPU operation (`cat`
    /// `kernel` or `gpu_memcpy`) at `start` for `dur`, carrying `External id` only when
    /// `gpu_ext`.
    pub fn launch_in(
        &mut self,
        ext: i64,
        api: &str,
        cat: &str,
        name: &str,
        tid: i64,
        at: i64,
        start: i64,
        dur: i64,
        gpu_ext: bool,
    ) -> i64 {
        let c = self.corr();
        let args = format!("\"External id\": {ext}, \"cbid\": 211, \"correlation\": {c}");
        self.x("cuda_runtime", api, PID, tid, at, 1000, &args);
        let x = if gpu_ext {
            format!("\"External id\": {ext}, ")
        } else {
            String::new()
        };
        let args =
            format!("{x}\"device\": 0, \"stream\": 7, \"correlation\": {c}, \"bytes\": 4096");
        self.x(cat, name, 0, 7, start, dur, &args);
        c
    }

    /// An all-reduce numbered `seq` in process group "0", its kernel `kernel_us` µs.
    pub fn numbered_allreduce(&mut self, ext: i64, seq: Option<i64>, at: i64, kernel_us: i64) {
        let seq = seq.map_or(String::new(), |s| format!(", \"Seq\": {s}"));
        let args = format!(
            "\"External id\": {ext}, \"Record function id\": 0, \"Collective name\": \"allreduce\", \"dtype\": \"Float\", \"In msg nelems\": 1024, \"Out msg nelems\": 1024, \"Group size\": 2, \"Process Group Name\": \"0\"{seq}"
        );
        self.x("cpu_op", "record_param_comms", PID, MAIN, at, 10_000, &args);
        self.launch_in(
            ext,
            "cudaLaunchKernelExC",
            "kernel",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            MAIN,
            at + 1_000,
            at + 2_000,
            kernel_us * 1000,
            true,
        );
    }

    /// A PyTorch allocation (`bytes` > 0) or free on thread `tid`, as Kineto writes it
    /// (`device_type`: c10's, 0 CPU, 1 CUDA).
    pub fn tensor_memory(&mut self, tid: i64, at: i64, bytes: i64, device_type: i64) {
        self.tensor_memory_at(tid, at, bytes, device_type, 1);
    }

    /// [`Self::tensor_memory`] at address `addr` (what pairs an allocation with its free).
    pub fn tensor_memory_at(&mut self, tid: i64, at: i64, bytes: i64, device_type: i64, addr: u64) {
        let device = if device_type == 0 { -1 } else { 0 };
        self.events.push(format!(
            "{{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": {PID}, \"tid\": {tid}, \"ts\": {}, \"args\": {{\"Total Reserved\": 0, \"Total Allocated\": 0, \"Bytes\": {bytes}, \"Device Id\": {device}, \"Device Type\": {device_type}, \"Addr\": {addr}}}}}",
            us(at)
        ));
    }

    pub fn range(&mut self, name: &str, tid: i64, start: i64, dur: i64) {
        self.x("user_annotation", name, PID, tid, start, dur, "");
    }

    pub fn step(&mut self, n: i64, tid: i64, start: i64, dur: i64, work: Option<f64>) {
        let args = work
            .map(|w| format!("\"work\": {w:.6}"))
            .unwrap_or_default();
        self.x(
            "user_annotation",
            &format!("ProfilerStep#{n}"),
            PID,
            tid,
            start,
            dur,
            &args,
        );
    }

    pub fn sync(&mut self, kind: &str, dev: i64, stream: i64, start: i64, dur: i64, corr: i64) {
        let tid = if stream < 0 { 0 } else { stream };
        let args = format!(
            "\"cuda_sync_kind\": {}, \"wait_on_stream\": -1, \"stream\": {stream}, \"correlation\": {corr}, \"device\": {dev}, \"context\": 1",
            q(kind)
        );
        self.x("cuda_sync", kind, dev, tid, start, dur, &args);
    }

    pub fn metadata(&mut self, devices: &[i64], streams: &[(i64, i64)], threads: &[i64]) {
        let m = |name: &str, pid: i64, tid: i64, key: &str, v: String| {
            format!("{{\"ph\": \"M\", \"name\": {}, \"pid\": {pid}, \"tid\": {tid}, \"ts\": 0.000, \"args\": {{{}: {v}}}}}", q(name), q(key))
        };
        self.events
            .push(m("process_name", PID, 0, "name", q("python3")));
        self.events.push(m(
            "process_sort_index",
            PID,
            0,
            "sort_index",
            PID.to_string(),
        ));
        for &t in threads {
            self.events.push(m(
                "thread_name",
                PID,
                t,
                "name",
                q(&format!("thread {t} (python3)")),
            ));
        }
        for &d in devices {
            self.events
                .push(m("process_name", d, 0, "name", q(&format!("GPU {d}"))));
            self.events
                .push(m("process_labels", d, 0, "labels", q(&format!("GPU {d}"))));
            self.events.push(m(
                "process_sort_index",
                d,
                0,
                "sort_index",
                (5_000_000 + d).to_string(),
            ));
        }
        for &(d, s) in streams {
            self.events
                .push(m("thread_name", d, s, "name", q(&format!("stream {s} "))));
        }
    }

    pub fn window_end(&mut self, ts: i64) {
        self.events.push(format!(
            "{{\"ph\": \"i\", \"s\": \"g\", \"name\": \"Record Window End\", \"pid\": \"\", \"tid\": \"\", \"ts\": {}}}",
            us(ts)
        ));
    }

    pub fn header(&self) -> String {
        let run = self.run.as_ref().map_or_else(String::new, |(name, id)| {
            format!(", \"name\": {}, \"run_id\": {}", q(name), q(id))
        });
        format!(
            "{{\"schemaVersion\": 1,\n \"deviceProperties\": [{{\"id\": 0, \"name\": \"NVIDIA H100 80GB HBM3\", \"totalGlobalMem\": 85029158912, \"computeMajor\": 9, \"computeMinor\": 0, \"maxThreadsPerBlock\": 1024, \"maxThreadsPerMultiprocessor\": 2048, \"regsPerBlock\": 65536, \"warpSize\": 32, \"sharedMemPerBlock\": 49152, \"numSms\": 132, \"regsPerMultiprocessor\": 65536, \"sharedMemPerBlockOptin\": 232448, \"sharedMemPerMultiprocessor\": 233472}}],\n \"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {}, \"world_size\": {}, \"local_rank\": {}}},\n \"cuprof\": {{\"version\": \"0.1.0\", \"pid\": {PID}, \"hostname\": {}, \"cupti_version\": 130001, \"cycle\": 1, \"clock\": {{\"realtime_ns\": {}, \"monotonic_ns\": {}}}, \"window\": \"wait=0 warmup=0 active=4 repeat=1 source=nvtx:step\"{run}}},\n \"displayTimeUnit\": \"ms\",\n \"baseTimeNanoseconds\": {},\n \"traceEvents\": [\n",
            self.rank, self.world, self.rank, q(&self.hostname), self.clock.0, self.clock.1, self.base
        )
    }

    pub fn body(&self) -> String {
        self.events.join(",\n")
    }

    pub fn json(&self) -> String {
        let mut s = self.header();
        s.push_str(&self.body());
        s.push_str("\n],\n");
        if let Some(st) = &self.stats {
            s.push_str(&format!(" \"cuprofStats\": {st},\n"));
        }
        s.push_str(&format!(
            " \"traceName\": {}}}\n",
            q(&format!("test-rank{}.trace.json.gz", self.rank))
        ));
        s
    }

    pub fn write_gz(&self, path: &Path) {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(self.json().as_bytes()).unwrap();
        std::fs::write(path, e.finish().unwrap()).unwrap();
    }

    /// The trace written as cuprof's writer writes it: one gzip member in chunks of about
    /// `target` bytes of JSON, cut at event boundaries (where the tracer's writer hands its
    /// pieces over), and the index of them (docs/trace-format.md, "The gzip layout").
    pub fn write_chunked(&self, path: &Path, target: u64) {
        let mut gz = ChunkedGz::new(Vec::new(), 1).unwrap().with_target(target);
        let text = self.json();
        let head = self.header();
        gz.write_at_boundary(head.as_bytes()).unwrap();
        let mut rest = &text[head.len()..];
        // Every `,\n{` starts an event: cut there.
        while let Some(at) = rest[1..].find(",\n{").map(|i| i + 1) {
            gz.write_at_boundary(&rest.as_bytes()[..at]).unwrap();
            rest = &rest[at..];
        }
        gz.write_at_boundary(rest.as_bytes()).unwrap();
        std::fs::write(path, gz.finish().unwrap()).unwrap();
    }

    /// What a SIGKILLed tracer leaves: a gzip stream that stops at a sync-flush point after
    /// the first `keep` events, mid-array, with no trailer.
    pub fn write_cut(&self, path: &Path, keep: usize) {
        let mut text = self.header();
        text.push_str(&self.events[..keep].join(",\n"));
        text.push_str(",\n");
        let mut z = flate2::Compress::new(Compression::fast(), false);
        let mut out = Vec::with_capacity(text.len() + 1024);
        z.compress_vec(text.as_bytes(), &mut out, FlushCompress::Sync)
            .unwrap();
        let mut file = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        file.extend_from_slice(&out);
        std::fs::write(path, file).unwrap();
    }
}

/// A scratch directory removed when dropped.
pub struct Tmp(pub PathBuf);

impl std::ops::Deref for Tmp {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn tempdir(tag: &str) -> Tmp {
    // Tests of one binary run on threads of one process: a counter keeps their folders apart.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!(
        "cuprof-{tag}-{}-{n}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    Tmp(d)
}

/// Runs `cuprof ARGS`, asserting success; returns stdout.
pub fn cuprof_ok(args: &[&str]) -> String {
    let out = cuprof(args);
    assert!(
        out.status.success(),
        "cuprof {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `cuprof compare A B --json`'s object.
pub fn compare_json(a: &Path, b: &Path) -> serde_json::Value {
    let out = cuprof_ok(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    serde_json::from_str(&out).unwrap()
}

/// `cuprof compare A B --json`: its rows of `key` as (name, time in A, time in B), and the
/// whole comparison.
pub fn compared(a: &Path, b: &Path, key: &str) -> (Vec<(String, i64, i64)>, serde_json::Value) {
    let c = compare_json(a, b);
    let rows = c[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["a_ns"].as_i64().unwrap(),
                r["b_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    (rows, c)
}

/// `cuprof report INPUT -o OUT`: its stdout and summary.json.
pub fn report(input: &Path, out: &Path) -> (String, serde_json::Value) {
    let stdout = cuprof_ok(&[
        "report",
        input.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    (stdout, read_json(&out.join("summary.json")))
}

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A gzip file's text, every member.
pub fn read_gz_text(path: &Path) -> String {
    use std::io::Read;
    let mut s = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    s
}

pub fn read_gz_json(path: &Path) -> serde_json::Value {
    let f = std::fs::File::open(path).unwrap();
    serde_json::from_reader(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(
        f,
    )))
    .unwrap()
}

pub const MAIN: i64 = 100;
pub const OTHER: i64 = 200;

/// One rank, device 0, streams 7 and 13 (times in ns after the base):
///
/// | op | launch (thread 100) | runs | bucket |
/// | Memcpy HtoD 1 MB | 50 µs, no range | 100-200 µs s7 | (no NVTX range) |
/// | flash_attn | 250 µs in forward>attention | 300-500 s7 | attention |
/// | gemm | 150 µs in forward | 500-800 s7 | forward |
/// | gemm | 1200 µs in backward | 1200-1500 s7 | backward |
/// | ncclDevKernel_AllReduce | 1300 µs in backward | 1400-1900 s13 | backward |
/// | Memset 4 KiB | no launch record | 2000-2050 s7 | (no launch record) |
/// | gemm | 2650 µs, no range | 2700-3000 s7 | (no NVTX range) |
///
/// Steps 1, 2, 3, 4 ms (the first three report 100 units of work). A CPU
/// cudaDeviceSynchronize 2100-2600 µs and a Context Sync 1900-1950 µs make 550 µs of the idle
/// time sync wait. Thread 200 has a range over everything that must capture nothing.
pub fn sample() -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7), (0, 13)], &[MAIN, OTHER]);
    t.step(0, MAIN, 0, 1_000_000, Some(100.0));
    t.step(1, MAIN, 1_000_000, 2_000_000, Some(100.0));
    t.step(2, MAIN, 3_000_000, 3_000_000, Some(100.0));
    t.step(3, MAIN, 6_000_000, 4_000_000, None);
    t.range("forward", MAIN, 100_000, 600_000);
    t.range("attention", MAIN, 200_000, 200_000);
    t.range("backward", MAIN, 1_100_000, 900_000);
    t.range("other_thread", OTHER, 0, 10_000_000);
    t.copy(
        "Memcpy HtoD (Pageable -> Device)",
        MAIN,
        50_000,
        0,
        7,
        100_000,
        100_000,
        1_000_000,
    );
    t.launch("flash_attn", MAIN, 250_000, 0, 7, 300_000, 200_000);
    t.launch("gemm", MAIN, 150_000, 0, 7, 500_000, 300_000);
    t.launch("gemm", MAIN, 1_200_000, 0, 7, 1_200_000, 300_000);
    t.launch(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        MAIN,
        1_300_000,
        0,
        13,
        1_400_000,
        500_000,
    );
    t.memset(0, 7, 2_000_000, 50_000, 999, 4096);
    let c = t.corr();
    t.runtime("cudaDeviceSynchronize", MAIN, 2_100_000, 500_000, c);
    t.sync("Context Sync", 0, -1, 1_900_000, 50_000, c);
    t.launch("gemm", MAIN, 2_650_000, 0, 7, 2_700_000, 300_000);
    t.x("gpu_user_annotation", "forward", 0, 7, 300_000, 500_000, "");
    t.events.push(
        r#"{"ph": "C", "cat": "cuda_memory", "name": "GPU 0 Memory", "pid": 0, "tid": 0, "ts": 100.000, "args": {"reserved_bytes": 1048576}}"#
            .into(),
    );
    t.window_end(10_000_000);
    t.stats = Some(r#"{"events": 40, "dropped_channel": 3, "dropped_cupti": 2, "dropped_buffers": 0, "kernels_without_timestamps": 1, "memory_events_dropped": 0, "complete": true}"#.into());
    t
}

/// A PyTorch step on device 0 stream 7 (times in ns after the base; `gemm` is the first GEMM's
/// duration, 300 µs in the report tests):
///
/// | operator (thread 100 unless said) | calls | GPU work it launches |
/// | aten::linear 100-400 µs, shapes, stack model.py(12) | aten::t 110-130, aten::addmm 150-350 | gemm 500-500+gemm (id on the kernel), bias_add 800-850 (id only on the launch) |
/// | aten::addmm 1000-1100, other shapes, stack model.py(20) | | gemm 1200-1300 |
/// | aten::copy_ 2000-2100, no shapes | | Memcpy HtoD 2050-2150 |
/// | (none) | | gemm 3000-3050 |
/// | aten::mul 100-200 on thread 200 | | |
pub fn with_operators(gemm: i64, mul: bool) -> Trace {
    let mut t = Trace::new(0, 1);
    t.metadata(&[0], &[(0, 7)], &[MAIN, OTHER]);
    t.cpu_op(
        "aten::linear",
        MAIN,
        100_000,
        300_000,
        1,
        Some("[[8, 64], [32, 64], [32]]"),
        Some("model.py(12): forward;train.py(40): <module>"),
    );
    t.cpu_op("aten::t", MAIN, 110_000, 20_000, 2, Some("[[32,64]]"), None);
    t.cpu_op(
        "aten::addmm",
        MAIN,
        150_000,
        200_000,
        3,
        Some("[[32],[8,64],[64,32]]"),
        Some("model.py(12): forward;train.py(40): <module>"),
    );
    t.launch_in(
        3,
        "cudaLaunchKernel",
        "kernel",
        "gemm",
        MAIN,
        200_000,
        500_000,
        gemm,
        true,
    );
    t.launch_in(
        3,
        "cudaLaunchKernel",
        "kernel",
        "bias_add",
        MAIN,
        300_000,
        800_000,
        50_000,
        false,
    );
    t.cpu_op(
        "aten::addmm",
        MAIN,
        1_000_000,
        100_000,
        4,
        Some("[[32], [4, 64], [64, 32]]"),
        Some("model.py(20): head;train.py(40): <module>"),
    );
    t.launch_in(
        4,
        "cudaLaunchKernel",
        "kernel",
        "gemm",
        MAIN,
        1_050_000,
        1_200_000,
        100_000,
        true,
    );
    t.cpu_op("aten::copy_", MAIN, 2_000_000, 100_000, 5, None, None);
    t.launch_in(
        5,
        "cudaMemcpyAsync",
        "gpu_memcpy",
        "Memcpy HtoD (Pageable -> Device)",
        MAIN,
        2_010_000,
        2_050_000,
        100_000,
        true,
    );
    t.launch("gemm", MAIN, 3_000_000, 0, 7, 3_000_000, 50_000);
    if mul {
        t.cpu_op(
            "aten::mul",
            OTHER,
            100_000,
            100_000,
            6,
            Some("[[8],[8]]"),
            None,
        );
    }
    t
}

/// The names in directory `d`, sorted.
/// [`with_operators`] with PyTorch's allocations and frees: in `aten::t` (256 B CPU), in the
/// first `aten::addmm` (4 KiB on the GPU), a free of 256 B in `aten::linear` itself, in the
/// second `aten::addmm` (8 KiB GPU), in `aten::mul` on the other thread (64 B CPU), outside
/// every operator (1 KiB CPU), and one on a device torch's tables do not count (MPS).
pub fn with_allocations() -> Trace {
    let mut t = with_operators(300_000, true);
    t.tensor_memory(MAIN, 120_000, 256, 0);
    t.tensor_memory(MAIN, 160_000, 4096, 1);
    t.tensor_memory(MAIN, 390_000, -256, 0);
    t.tensor_memory(MAIN, 1_010_000, 8192, 1);
    t.tensor_memory(OTHER, 150_000, 64, 0);
    t.tensor_memory(MAIN, 5_000_000, 1024, 0);
    t.tensor_memory(MAIN, 2_050_000, 512, 13);
    t
}

pub const LEAK_STACK: &str = "leak.py(10): train;main.py(3): <module>";
pub const MM_STACK: &str = "/usr/lib/python3.12/site-packages/torch/nn/functional.py(5): linear;model.py(20): forward;main.py(4): <module>";

/// Steps 1 to 4 (step `n` at `n` ms, 0.9 ms long). In each, `aten::empty` allocates 1 KiB on
/// GPU 0 that is never freed (the leak, growing a KiB a step), and `aten::mm` 4 KiB freed
/// 0.1 ms later (8 KiB in step 3: the peak). Outside every operator: 256 B on the CPU in step 1
/// freed in step 2, and a free of GPU memory allocated before the window (not counted).
pub fn with_leak() -> Trace {
    let mut t = Trace::new(0, 1);
    for n in 1..=4 {
        let s = n * 1_000_000;
        t.step(n, MAIN, s, 900_000, None);
        t.cpu_op(
            "aten::empty",
            MAIN,
            s + 100_000,
            50_000,
            10 * n,
            None,
            Some(LEAK_STACK),
        );
        t.tensor_memory_at(MAIN, s + 110_000, 1024, 1, 0x1000 + n as u64);
        t.cpu_op(
            "aten::mm",
            MAIN,
            s + 200_000,
            50_000,
            10 * n + 1,
            None,
            Some(MM_STACK),
        );
        let mm = if n == 3 { 8192 } else { 4096 };
        t.tensor_memory_at(MAIN, s + 210_000, mm, 1, 0x9000);
        t.tensor_memory_at(MAIN, s + 310_000, -mm, 1, 0x9000);
    }
    t.tensor_memory_at(MAIN, 1_500_000, 256, 0, 0x77);
    t.tensor_memory_at(MAIN, 2_500_000, -256, 0, 0x77);
    t.tensor_memory_at(MAIN, 2_600_000, -999, 1, 0x5555);
    t
}

pub fn listing(d: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A finished command's stderr as text.
pub fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The lines of `cuprof report`'s section `== TITLE ==` in `stdout`, up to the next section.
pub fn section_lines<'a>(stdout: &'a str, title: &str) -> Vec<&'a str> {
    stdout
        .split(&format!("== {title} ==\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no section {title}: {stdout}"))
        .split("\n\n==")
        .next()
        .unwrap()
        .lines()
        .collect()
}

/// The real Kineto traces in tests/data/hta (one rank each), on which cuprof's figures are
/// checked against HTA's.
pub const HTA_TRACES: [&str; 3] = [
    "alexnet-old-kineto",
    "sampled-rank0",
    "simple-add-old-kineto",
];

/// Runs `cuprof report` on each of [`HTA_TRACES`], in a directory of its own (HTA reads every
/// trace in a directory), then `tests/hta/SCRIPT TRACE_DIR SUMMARY_JSON`, which must exit 0 and
/// print each of `agree`; `check` sees each summary.json first.
pub fn agrees_with_hta(
    script: &str,
    tag: &str,
    agree: &[&str],
    check: impl Fn(&str, &serde_json::Value),
) {
    let root = repo_root();
    let script = root.join("tests/hta").join(script);
    let dir = tempdir(tag);
    for name in HTA_TRACES {
        let traces = dir.join(name);
        std::fs::create_dir_all(&traces).unwrap();
        let file = format!("{name}.trace.json.gz");
        std::fs::copy(root.join("tests/data/hta").join(&file), traces.join(&file)).unwrap();
        let out = dir.join(format!("{name}-out"));
        let (_, s) = report(&traces, &out);
        check(name, &s);
        let o = Command::new("python3")
            .arg(&script)
            .arg(&traces)
            .arg(out.join("summary.json"))
            .output()
            .expect("run python3");
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && agree.iter().all(|a| stdout.contains(a)),
            "{name}: {stdout}\n{}\n(HTA missing? run `bash scripts/test.sh`, which installs it)",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Runs headless Chromium on `url` with `args`, its profile in `profile`; returns (stdout,
/// stderr).
pub fn chromium_at(url: &str, profile: &Path, args: &[&str]) -> (String, String) {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: run scripts/test.sh, which installs Debian's chromium \
         (apt-get install -y chromium) before the tests"
    );
    let out = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            &format!("--user-data-dir={}", profile.display()),
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium failed: {stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// An `nn.Module` call on `MAIN` as torch.profiler's `with_stack` writes it (`Python id` `id`,
/// the enclosing call's `parent`, 0 at the top), with cuprof's `Module path` when `path` is
/// given.
pub fn module_call(
    t: &mut Trace,
    name: &str,
    path: Option<&str>,
    span: (i64, i64),
    ids: (i64, i64),
) {
    let (id, parent) = ids;
    let mut args = format!(
        "\"Python parent id\": {parent}, \"Python id\": {id}, \"Python module id\": {}",
        name.rsplit('_').next().unwrap()
    );
    if let Some(p) = path {
        args.push_str(&format!(", \"Module path\": {}", q(p)));
    }
    let (start, dur) = span;
    t.x(
        "python_function",
        &format!("nn.Module: {name}"),
        PID,
        MAIN,
        start,
        dur,
        &args,
    );
}
