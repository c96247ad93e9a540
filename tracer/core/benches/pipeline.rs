//! The CPU side of the tracer (issue 8): what a CUPTI buffer costs from the completion callback
//! to bytes on disk.
//!
//!     cargo bench -p cuprof-core --bench pipeline         (scripts/bench-cpu.sh prints a table)
//!
//! Inputs are CUPTI 13.0 record buffers laid out byte for byte as libcupti writes them
//! (`CUpti_ActivityKernel10` = 216 bytes, `CUpti_ActivityAPI` = 40, `CUpti_ActivityMemcpy6`,
//! `CUpti_ActivityMemset4`; sizes from cupti-sys, field offsets from `decode::off`), with a
//! PyTorch-like mix: every kernel launch is a `cudaLaunchKernel` runtime record plus a kernel
//! record, kernels cycle through 20 distinct (mostly mangled, templated) names, and every 50th
//! launch adds a `cudaMemcpyAsync` + memcpy, every 100th a `cudaMemsetAsync` + memset. Kernel
//! names live in real memory and are resolved like the preload library does: interned by
//! pointer, with the bytes checked on every hit, demangled once.
//!
//! Groups (criterion reports time and elements/s; ns per record = 1e9 / (records/s)):
//! - `decode`: one buffer's records -> `Vec<Event>`, as the completion callback does it.
//! - `channel`: batches through a crossbeam bounded(4096) channel to a consumer thread.
//! - `callback`: decode + `try_send`, the whole cost on CUPTI's thread (goal < 100 ns/record).
//! - `writer`: `Session` (routing, flows, trace writer, gzip level 1) for decoded batches;
//!   `trace_writer_gzip` compares gzip levels on kernel events alone.
//! - `end_to_end`: decode + channel + session + gzip on one core (goal >= 2 M events/s).
//!
//! Before the timed groups it prints (and writes to `target/criterion/cuprof-summary.json`)
//! the on-disk size per kernel event per gzip level and the in-memory sizes of the event model.

mod common;
use common::thread_cpu_ns;
use criterion::{black_box, BatchSize, BenchmarkId, Criterion, Throughput};
use cuprof_core::decode::{off, Decoder, LayoutFamily, Resolve};
use cuprof_core::event::{ApiDomain, Event, Name};
use cuprof_core::session::{Counters, Input, Session, Sink};
use cuprof_core::trace_writer::{DeviceProps, TraceMeta, TraceWriter};
use std::collections::HashMap;
use std::ffi::{c_char, CStr, CString};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KERNEL: usize = std::mem::size_of::<cupti_sys::CUpti_ActivityKernel10>();
const API: usize = std::mem::size_of::<cupti_sys::CUpti_ActivityAPI>();
const MEMCPY: usize = std::mem::size_of::<cupti_sys::CUpti_ActivityMemcpy6>();
const MEMSET: usize = std::mem::size_of::<cupti_sys::CUpti_ActivityMemset4>();
/// The fixtures' buffer size: 8 MiB, the preload library's default until it became 2 MiB
/// (`CUPROF_BUFFER_SIZE`). Kept so the figures in BENCHMARKS.md stay comparable; the cost per
/// record does not depend on it (one batch per buffer).
const BUFFER_BYTES: usize = 8 << 20;
/// The preload library's channel capacity (tracer/preload/src/life/setup.rs).
const CHANNEL_CAPACITY: usize = 4096;
const BASE_NS: u64 = 1_763_800_000_000_000_000;
const PID: u32 = 4242;
const TID: u32 = 4243;

const CBID_MEMCPY_ASYNC: u32 = 41;
const CBID_MEMSET_ASYNC: u32 = 51;
const CBID_LAUNCH_KERNEL: u32 = 211;

// ------------------------------------------------------------------ kernel names

/// Twenty kernel names as CUPTI hands them out: mangled C++ (long templates), or plain.
fn kernel_names() -> Vec<CString> {
    let fixed = [
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIN3c108BFloat16EEENS_6detail5ArrayIPcLi3EEEEEviT0_T1_",
        "_ZN7cutlass7Kernel2I66cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8EEvNT_6ParamsE",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
        "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi4EEENS1_20FusedAdamMathFunctorIfLi4ELNS1_8ADAM_MODEE1ELb0EEEJPfddddddbPKfSA_EEEvT_T0_DpT1_",
        "_ZN2at6native43_GLOBAL__N__d8ceb000_20_SoftMax_cu_9f978f6330cunn_SoftMaxForwardILi4EN3c108BFloat16EfS4_NS1_25SoftMaxForwardEpilogueEEEvPT2_PKT0_l",
        "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIfffEEjfLi4EEEEEvT1_",
        "_ZN2at6native24index_elementwise_kernelILi128ELi4EZNS0_16gpu_index_kernelIZNS0_17index_kernel_implINS0_10OpaqueTypeILi2EEEEEvRNS_18TensorIteratorBaseEN3c108ArrayRefIlEESA_EUlPcPKclE_EEvS7_SA_SA_RKT_bEUliE_EEvlT1_",
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
    ];
    let mut v: Vec<CString> = fixed.iter().map(|s| CString::new(*s).unwrap()).collect();
    let mut i = 0;
    while v.len() < 20 {
        let ident = format!("fused_layer_norm_bias_dropout_residual_kernel_variant_{i}");
        let s = format!(
            "_ZN5torch4cuda{}{}ILi{}EN3c108BFloat16EfEEvPKT0_PS3_PKT1_S8_ii",
            ident.len(),
            ident,
            128 << (i % 3)
        );
        v.push(CString::new(s).unwrap());
        i += 1;
    }
    v
}

// ------------------------------------------------------------------ a resolver like the preload's

/// The preload library's `resolve::Names`, mirrored (that crate's modules are private): kernel
/// names interned by pointer, the NUL-terminated bytes compared on every hit (a reused address
/// may hold another name), demangled once; API names from a table built at start-up.
struct PtrNames {
    kernels: HashMap<u64, (Box<[u8]>, Name)>,
    runtime: Vec<Name>,
}

fn demangle(raw: &str) -> String {
    if raw.starts_with("_Z") || raw.starts_with("__Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(raw) {
            if let Ok(s) = sym.demangle(&cpp_demangle::DemangleOptions::new()) {
                return s;
            }
        }
    }
    raw.to_string()
}

impl PtrNames {
    fn new() -> Self {
        let runtime = (0..500u32)
            .map(|cbid| {
                Name::from(match cbid {
                    CBID_LAUNCH_KERNEL => "cudaLaunchKernel".to_string(),
                    CBID_MEMCPY_ASYNC => "cudaMemcpyAsync".to_string(),
                    CBID_MEMSET_ASYNC => "cudaMemsetAsync".to_string(),
                    n => format!("cudaApi#{n}"),
                })
            })
            .collect();
        PtrNames {
            kernels: HashMap::new(),
            runtime,
        }
    }
}

impl Resolve for PtrNames {
    fn kernel_name(&mut self, ptr: u64) -> Name {
        // SAFETY: the bench's names live in `Fixture::names` for the whole run.
        let bytes = unsafe { CStr::from_ptr(ptr as *const c_char) }.to_bytes();
        if let Some((seen, name)) = self.kernels.get(&ptr) {
            if **seen == *bytes {
                return name.clone();
            }
        }
        let name = Name::from(demangle(&String::from_utf8_lossy(bytes)));
        self.kernels.insert(ptr, (bytes.into(), name.clone()));
        name
    }

    fn string(&mut self, ptr: u64) -> Name {
        // SAFETY: as above.
        Name::from(unsafe { CStr::from_ptr(ptr as *const c_char) }.to_string_lossy())
    }

    fn api_name(&mut self, _domain: ApiDomain, cbid: u32) -> Name {
        match self.runtime.get(cbid as usize) {
            Some(n) => n.clone(),
            None => Name::from(format!("cudaApi#{cbid}")),
        }
    }
}

// ------------------------------------------------------------------ record buffers

/// A tiny deterministic PRNG (xorshift64*), so every run decodes the same bytes.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One CUPTI buffer's valid bytes, 8-byte aligned like the buffers the preload hands out.
struct Buffer {
    words: Vec<u64>,
    valid: usize,
    records: usize,
    kernels: usize,
}

impl Buffer {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `valid` <= words.len() * 8; u64 storage viewed as bytes.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.valid) }
    }
}

struct Writer<'a> {
    b: &'a mut [u8],
}
impl Writer<'_> {
    fn u8(&mut self, o: usize, v: u8) {
        self.b[o] = v;
    }
    fn u16(&mut self, o: usize, v: u16) {
        self.b[o..o + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, o: usize, v: u32) {
        self.b[o..o + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, o: usize, v: i32) {
        self.u32(o, v as u32);
    }
    fn u64(&mut self, o: usize, v: u64) {
        self.b[o..o + 8].copy_from_slice(&v.to_le_bytes());
    }
}

/// The generator's state carried from buffer to buffer (time and correlation ids go on).
struct Gen {
    rng: Rng,
    now: u64,
    gpu: u64,
    corr: u32,
    launch: u64,
}

impl Gen {
    fn new() -> Self {
        Gen {
            rng: Rng(0x9e37_79b9_7f4a_7c15),
            now: BASE_NS + 1_000_000,
            gpu: BASE_NS + 1_000_000,
            corr: 1,
            launch: 0,
        }
    }
}

/// Fills one buffer of `bytes` with the mix; `kernels_only` leaves out API records, memcpys
/// and memsets (`CUPROF_ACTIVITIES=GPU` on a launch-bound loop).
// `%` rather than `is_multiple_of` (Rust 1.87): the workspace's rust-version is 1.80.
#[allow(clippy::manual_is_multiple_of)]
fn fill_buffer(g: &mut Gen, names: &[CString], bytes: usize, kernels_only: bool) -> Buffer {
    let mut words = vec![0u64; bytes / 8];
    // SAFETY: viewing the u64 storage as bytes.
    let raw = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), bytes) };
    let (mut at, mut records, mut kernels) = (0usize, 0usize, 0usize);
    loop {
        let need = API + KERNEL + API + MEMCPY + API + MEMSET;
        if at + need > bytes {
            break;
        }
        g.launch += 1;
        // A runtime call on the CPU, then its GPU work once the GPU gets to it.
        let api = |w: &mut Writer, g: &mut Gen, cbid: u32, dur: u64| {
            w.u32(0, 5);
            w.u32(off::api::CBID, cbid);
            w.u64(off::api::START, g.now);
            w.u64(off::api::END, g.now + dur);
            w.u32(off::api::PROCESS_ID, PID);
            w.u32(off::api::THREAD_ID, TID);
            w.u32(off::api::CORRELATION_ID, g.corr);
            w.u32(off::api::RETURN_VALUE, 0);
        };
        let launch_dur = 2_500 + g.rng.below(1_500);
        if !kernels_only {
            api(
                &mut Writer {
                    b: &mut raw[at..at + API],
                },
                g,
                CBID_LAUNCH_KERNEL,
                launch_dur,
            );
            at += API;
            records += 1;
        }
        let which = (g.launch % names.len() as u64) as usize;
        let start = g.gpu.max(g.now + 4_000) + g.rng.below(400);
        let dur = 1_500 + (which as u64 * 733) % 30_000 + g.rng.below(800);
        {
            use off::kernel as k;
            let mut w = Writer {
                b: &mut raw[at..at + KERNEL],
            };
            w.u32(0, 10);
            w.u16(k::REGISTERS_PER_THREAD, 32 + (which as u16 % 5) * 16);
            w.u64(k::START, start);
            w.u64(k::END, start + dur);
            w.u32(k::DEVICE_ID, 0);
            w.u32(k::CONTEXT_ID, 1);
            w.u32(k::STREAM_ID, 7);
            let grid = [[1024, 1, 1], [132, 1, 1], [64, 8, 1], [1, 1, 1]][which % 4];
            let block = [[128, 1, 1], [256, 1, 1], [384, 1, 1], [32, 1, 1]][which % 4];
            for i in 0..3 {
                w.i32(k::GRID_X + 4 * i, grid[i]);
                w.i32(k::BLOCK_X + 4 * i, block[i]);
                w.u32(k::CLUSTER_X + 4 * i, 0);
            }
            w.i32(
                k::STATIC_SHARED_MEMORY,
                if which % 3 == 0 { 0 } else { 16_384 },
            );
            w.i32(
                k::DYNAMIC_SHARED_MEMORY,
                if which % 5 == 0 { 49_152 } else { 0 },
            );
            w.u32(k::CORRELATION_ID, g.corr);
            w.u64(k::NAME, names[which].as_ptr() as u64);
            w.u8(k::LAUNCH_TYPE, 0);
            w.u32(k::CHANNEL_ID, 3);
            w.u32(k::CHANNEL_TYPE, 1);
            w.u8(k::IS_DEVICE_LAUNCHED, 0);
        }
        at += KERNEL;
        records += 1;
        kernels += 1;
        g.gpu = start + dur;
        g.now += launch_dur + 500 + g.rng.below(3_000);
        g.corr += 1;
        if kernels_only {
            continue;
        }
        for (every, cbid) in [(50, CBID_MEMCPY_ASYNC), (100, CBID_MEMSET_ASYNC)] {
            if g.launch % every != 0 {
                continue;
            }
            let api_dur = 3_000 + g.rng.below(2_000);
            api(
                &mut Writer {
                    b: &mut raw[at..at + API],
                },
                g,
                cbid,
                api_dur,
            );
            at += API;
            let start = g.gpu.max(g.now + 3_000);
            let dur = 2_000 + g.rng.below(5_000);
            if cbid == CBID_MEMCPY_ASYNC {
                use off::memcpy as m;
                let mut w = Writer {
                    b: &mut raw[at..at + MEMCPY],
                };
                w.u32(0, 1);
                let dtoh = g.launch % 100 == 0;
                w.u8(m::COPY_KIND, if dtoh { 2 } else { 1 });
                w.u8(m::SRC_KIND, if dtoh { 3 } else { 2 });
                w.u8(m::DST_KIND, if dtoh { 2 } else { 3 });
                w.u64(m::BYTES, 4096 << g.rng.below(8));
                w.u64(m::START, start);
                w.u64(m::END, start + dur);
                w.u32(m::DEVICE_ID, 0);
                w.u32(m::CONTEXT_ID, 1);
                w.u32(m::STREAM_ID, 7);
                w.u32(m::CORRELATION_ID, g.corr + 1);
                w.u32(m::RUNTIME_CORRELATION_ID, g.corr);
                at += MEMCPY;
            } else {
                use off::memset as m;
                let mut w = Writer {
                    b: &mut raw[at..at + MEMSET],
                };
                w.u32(0, 2);
                w.u32(m::VALUE, 0);
                w.u64(m::BYTES, 1 << 20);
                w.u64(m::START, start);
                w.u64(m::END, start + dur);
                w.u32(m::DEVICE_ID, 0);
                w.u32(m::CONTEXT_ID, 1);
                w.u32(m::STREAM_ID, 7);
                w.u32(m::CORRELATION_ID, g.corr);
                w.u16(m::MEMORY_KIND, 3);
                at += MEMSET;
            }
            records += 2;
            g.gpu = start + dur;
            g.now += api_dur + 500;
            g.corr += 2;
        }
    }
    words.truncate(at.div_ceil(8));
    Buffer {
        words,
        valid: at,
        records,
        kernels,
    }
}

/// `cuptiActivityGetNextRecord`, for the kinds in these buffers: records are packed, each the
/// size of its kind's struct.
fn record_len(kind: u32) -> usize {
    match kind {
        10 => KERNEL,
        5 | 4 => API,
        1 => MEMCPY,
        2 => MEMSET,
        _ => unreachable!("kind {kind} not generated"),
    }
}

/// What `buffers::completed` does with one buffer: walk the records, decode each into a batch
/// allocated per buffer (capacity valid / 128, as the preload does).
fn decode_buffer(d: &mut Decoder, names: &mut PtrNames, buf: &[u8]) -> Vec<Event> {
    let mut events = Vec::with_capacity(buf.len() / 128);
    let mut at = 0;
    while at + 4 <= buf.len() {
        let rec = &buf[at..];
        let kind = u32::from_le_bytes(rec[..4].try_into().unwrap());
        if let Some(e) = d.decode(rec, names) {
            events.push(e);
        }
        at += record_len(kind);
    }
    events
}

// ------------------------------------------------------------------ writer sinks

/// Counts the compressed bytes; keeps them only when asked (to check the output parses).
#[derive(Clone, Default)]
struct CountingSink {
    bytes: Arc<AtomicU64>,
    keep: Option<Arc<std::sync::Mutex<Vec<u8>>>>,
}

struct CountingFile(CountingSink);
impl Write for CountingFile {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.bytes.fetch_add(b.len() as u64, Relaxed);
        if let Some(k) = &self.0.keep {
            k.lock().unwrap().extend_from_slice(b);
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Sink for CountingSink {
    fn open(&mut self, _cycle: u32) -> io::Result<(Box<dyn Write + Send>, PathBuf)> {
        Ok((
            Box::new(CountingFile(self.clone())),
            PathBuf::from("bench.trace.json.gz"),
        ))
    }
    fn open_snapshot(&mut self, _unix_time: u64) -> io::Result<(Box<dyn Write + Send>, PathBuf)> {
        Ok((Box::new(io::sink()), PathBuf::from("bench.pickle")))
    }
}

fn h100() -> DeviceProps {
    DeviceProps {
        id: 0,
        name: "NVIDIA H100 80GB HBM3".into(),
        total_global_mem: 85_029_158_912,
        compute_major: 9,
        compute_minor: 0,
        max_threads_per_block: 1024,
        max_threads_per_multiprocessor: 2048,
        regs_per_block: 65_536,
        warp_size: 32,
        shared_mem_per_block: 49_152,
        num_sms: 132,
        regs_per_multiprocessor: 65_536,
        shared_mem_per_block_optin: 232_448,
        shared_mem_per_multiprocessor: 233_472,
        max_blocks_per_multiprocessor: 32,
    }
}

fn meta() -> TraceMeta {
    TraceMeta {
        devices: vec![h100()],
        pid: PID,
        process_name: "python3".into(),
        hostname: "bench".into(),
        cupti_version: 130001,
        cycle: 1,
        world_size: 1,
        base_time_ns: cuprof_core::trace_writer::base_time_ns(BASE_NS),
        trace_name: "bench.trace.json.gz".into(),
        ..Default::default()
    }
}

fn session(sink: CountingSink, level: u32) -> Session {
    let mut s = Session::new(
        meta(),
        level,
        Duration::from_secs(1),
        Box::new(sink),
        Arc::new(Counters::default()),
    );
    s.handle(Input::BeginRecording {
        ts: BASE_NS,
        cycle: 1,
    });
    s
}

/// Writes `batches` through a session; returns (compressed bytes, events in the file).
fn write_session(batches: Vec<Vec<Event>>, level: u32) -> (u64, u64) {
    let sink = CountingSink::default();
    let mut s = session(sink.clone(), level);
    for b in batches {
        s.handle(Input::Events(b));
    }
    let (written, errors) = s.finish();
    assert!(errors.is_empty(), "{errors:?}");
    (sink.bytes.load(Relaxed), written[0].events)
}

// ------------------------------------------------------------------ fixture

struct Fixture {
    /// Kept alive: records point into these strings.
    names: Vec<CString>,
    /// Default activities (kernels + API + copies + sets).
    mix: Vec<Buffer>,
    /// `CUPROF_ACTIVITIES=GPU` on a launch-bound loop: kernel records only.
    kernels: Vec<Buffer>,
}

impl Fixture {
    fn new(buffers: usize) -> Self {
        let names = kernel_names();
        let mut g = Gen::new();
        let mix = (0..buffers)
            .map(|_| fill_buffer(&mut g, &names, BUFFER_BYTES, false))
            .collect();
        let mut g = Gen::new();
        let kernels = (0..buffers)
            .map(|_| fill_buffer(&mut g, &names, BUFFER_BYTES, true))
            .collect();
        Fixture {
            names,
            mix,
            kernels,
        }
    }

    fn decoded(&self, bufs: &[Buffer]) -> Vec<Vec<Event>> {
        let mut d = Decoder::new(LayoutFamily::Cupti13);
        let mut n = PtrNames::new();
        bufs.iter()
            .map(|b| decode_buffer(&mut d, &mut n, b.bytes()))
            .collect()
    }
}

fn records(bufs: &[Buffer]) -> u64 {
    bufs.iter().map(|b| b.records as u64).sum()
}

// ------------------------------------------------------------------ figures on the thread's CPU clock

/// Runs `f` `reps` times; medians of (wall ns, this thread's CPU ns). `f` returns what it wants
/// dropped after the clock stops.
fn measure<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, f64) {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let (t, c) = (Instant::now(), thread_cpu_ns());
        let out = f();
        cpu.push((thread_cpu_ns() - c) as f64);
        wall.push(t.elapsed().as_nanos() as f64);
        drop(out);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    (med(&mut wall), med(&mut cpu))
}

/// The figures, each the median of `reps` passes over the fixture.
fn figures(fx: &Fixture, reps: usize, lines: &mut Vec<String>, json: &mut Vec<String>) {
    let row = |lines: &mut Vec<String>,
               json: &mut Vec<String>,
               key: &str,
               what: &str,
               n: u64,
               (wall, cpu): (f64, f64)| {
        lines.push(format!(
            "{what:52} {:8.1} ns/record CPU {:7.2} M/s CPU {:7.2} M/s wall",
            cpu / n as f64,
            n as f64 / cpu * 1e3,
            n as f64 / wall * 1e3
        ));
        json.push(format!(
            "\"{key}_ns_per_record_cpu\": {:.2}",
            cpu / n as f64
        ));
        json.push(format!("\"{key}_per_s_cpu\": {:.0}", n as f64 / cpu * 1e9));
        json.push(format!(
            "\"{key}_per_s_wall\": {:.0}",
            n as f64 / wall * 1e9
        ));
    };
    for (label, bufs) in [("mix", &fx.mix), ("kernels_only", &fx.kernels)] {
        let n = records(bufs);
        let mut d = Decoder::new(LayoutFamily::Cupti13);
        let mut names = PtrNames::new();
        let t = measure(reps, || {
            bufs.iter()
                .map(|b| decode_buffer(&mut d, &mut names, b.bytes()))
                .collect::<Vec<_>>()
        });
        row(
            lines,
            json,
            &format!("decode_{label}"),
            &format!("decode ({label})"),
            n,
            t,
        );
    }
    {
        // decode + try_send on this thread; a consumer thread receives and drops the batches,
        // as the writer would.
        let n = records(&fx.mix);
        let (tx, rx) = crossbeam_channel::bounded::<Input>(CHANNEL_CAPACITY);
        let consumer = std::thread::spawn(move || while rx.recv().is_ok() {});
        let mut d = Decoder::new(LayoutFamily::Cupti13);
        let mut names = PtrNames::new();
        let t = measure(reps, || {
            for b in &fx.mix {
                let events = decode_buffer(&mut d, &mut names, b.bytes());
                tx.try_send(Input::Events(events))
                    .expect("room in the channel");
            }
        });
        row(
            lines,
            json,
            "callback_mix",
            "callback: decode + try_send (mix)",
            n,
            t,
        );
        drop(tx);
        consumer.join().unwrap();
    }
    for (label, bufs) in [("mix", &fx.mix), ("kernels_only", &fx.kernels)] {
        let n = records(bufs);
        let decoded = fx.decoded(bufs);
        let mut copies: Vec<_> = (0..reps).map(|_| decoded.clone()).collect();
        let t = measure(reps, || write_session(copies.pop().unwrap(), 1));
        row(
            lines,
            json,
            &format!("writer_{label}"),
            &format!("writer: session + gzip 1 ({label})"),
            n,
            t,
        );
    }
    for (label, bufs) in [("mix", &fx.mix), ("kernels_only", &fx.kernels)] {
        // What compression alone costs: the session's JSON, gzipped again in 64 KiB writes.
        let n = records(bufs);
        let sink = CountingSink {
            keep: Some(Default::default()),
            ..Default::default()
        };
        let mut s = session(sink.clone(), 0);
        for b in fx.decoded(bufs) {
            s.handle(Input::Events(b));
        }
        let _ = s.finish();
        let stored = sink.keep.unwrap().lock().unwrap().clone();
        let mut json_text = Vec::new();
        io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&stored[..]),
            &mut json_text,
        )
        .unwrap();
        lines.push(format!(
            "{label}: {:.0} bytes of JSON per record",
            json_text.len() as f64 / n as f64
        ));
        json.push(format!(
            "\"json_bytes_per_record_{label}\": {:.1}",
            json_text.len() as f64 / n as f64
        ));
        for level in [1u32, 2] {
            let t = measure(reps, || {
                let mut gz =
                    flate2::write::GzEncoder::new(io::sink(), flate2::Compression::new(level));
                for chunk in json_text.chunks(1 << 16) {
                    gz.write_all(chunk).unwrap();
                }
                gz.finish().unwrap();
            });
            row(
                lines,
                json,
                &format!("gzip{level}_alone_{label}"),
                &format!("gzip {level} alone on that JSON ({label})"),
                n,
                t,
            );
        }
    }
    for (label, bufs) in [("mix", &fx.mix), ("kernels_only", &fx.kernels)] {
        let n = records(bufs);
        let t = measure(reps, || end_to_end(bufs, 1));
        row(
            lines,
            json,
            &format!("e2e_{label}"),
            &format!("end to end, one core, gzip 1 ({label})"),
            n,
            t,
        );
    }
}

/// Decode + channel + session + gzip, in turn on one thread. Returns the compressed bytes.
fn end_to_end(bufs: &[Buffer], level: u32) -> u64 {
    let mut d = Decoder::new(LayoutFamily::Cupti13);
    let mut names = PtrNames::new();
    let (tx, rx) = crossbeam_channel::bounded::<Input>(CHANNEL_CAPACITY);
    let sink = CountingSink::default();
    let mut s = session(sink.clone(), level);
    for buf in bufs {
        let events = decode_buffer(&mut d, &mut names, buf.bytes());
        tx.try_send(Input::Events(events)).unwrap();
        s.handle(rx.recv().unwrap());
    }
    let _ = s.finish();
    sink.bytes.load(Relaxed)
}

// ------------------------------------------------------------------ memory

fn proc_status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Peak RSS added by decode + channel + session + writer for a window of `kernels` launches
/// (the mix: launch records + kernel records + copies), one buffer generated at a time, all on
/// this thread (so no channel backlog: the writer keeps up by construction). Run first, before
/// the fixture exists, so that the high-water mark is this stage's.
fn memory_window(kernels: u64) -> (u64, u64, u64) {
    let before = proc_status_kib("VmRSS:");
    let names = kernel_names();
    let mut g = Gen::new();
    let mut d = Decoder::new(LayoutFamily::Cupti13);
    let mut resolver = PtrNames::new();
    let (tx, rx) = crossbeam_channel::bounded::<Input>(CHANNEL_CAPACITY);
    let sink = CountingSink::default();
    let mut s = session(sink.clone(), 1);
    let mut seen = 0u64;
    while seen < kernels {
        let buf = fill_buffer(&mut g, &names, BUFFER_BYTES, false);
        seen += buf.kernels as u64;
        let events = decode_buffer(&mut d, &mut resolver, buf.bytes());
        drop(buf);
        tx.try_send(Input::Events(events)).unwrap();
        s.handle(rx.recv().unwrap());
    }
    let at_end = proc_status_kib("VmHWM:");
    let _ = s.finish();
    (before, at_end, sink.bytes.load(Relaxed))
}

// ------------------------------------------------------------------ summary (sizes)

fn summary(fx: &Fixture, memory: Option<(String, String)>) {
    let mut lines = Vec::new();
    let mut json = Vec::new();
    if let Some((line, j)) = memory {
        lines.push(line);
        json.push(j);
    }
    // Correctness first: the mix decodes to what was generated, names demangled, and the
    // session's output is valid JSON with every kernel in it.
    {
        let batches = fx.decoded(&fx.mix[..1]);
        let evs = &batches[0];
        assert_eq!(evs.len(), fx.mix[0].records);
        let kernels: Vec<_> = evs
            .iter()
            .filter_map(|e| {
                if let Event::Kernel(k) = e {
                    Some(k)
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(kernels.len(), fx.mix[0].kernels);
        assert!(kernels.iter().any(|k| k
            .name
            .starts_with("void at::native::vectorized_elementwise_kernel<4,")));
        let sink = CountingSink {
            keep: Some(Default::default()),
            ..Default::default()
        };
        let mut s = session(sink.clone(), 1);
        s.handle(Input::Events(batches.into_iter().next().unwrap()));
        let _ = s.finish();
        let gz = sink.keep.unwrap().lock().unwrap().clone();
        let mut text = String::new();
        io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).expect("the trace is valid JSON");
        let n = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "kernel")
            .count();
        assert_eq!(n, fx.mix[0].kernels);
        if let Some(path) = std::env::var_os("CUPROF_BENCH_DUMP") {
            std::fs::write(path, &text).unwrap();
        }
        if std::env::var_os("CUPROF_BENCH_SHOW").is_some() {
            for l in text.lines().filter(|l| l.starts_with("{\"ph\"")).take(12) {
                println!("{l}");
            }
        }
    }
    let sizes = [
        ("Event", std::mem::size_of::<Event>()),
        ("Kernel", std::mem::size_of::<cuprof_core::event::Kernel>()),
        (
            "ApiCall",
            std::mem::size_of::<cuprof_core::event::ApiCall>(),
        ),
        ("Memcpy", std::mem::size_of::<cuprof_core::event::Memcpy>()),
        ("Input", std::mem::size_of::<Input>()),
    ];
    for (n, s) in sizes {
        lines.push(format!("size_of::<{n}>() = {s} bytes"));
        json.push(format!("\"size_of_{n}\": {s}"));
    }
    let b = &fx.mix[0];
    lines.push(format!(
        "one {} MiB buffer of the mix: {} records ({} kernels), {:.1} bytes/record; batch Vec reserved: {} bytes",
        BUFFER_BYTES >> 20,
        b.records,
        b.kernels,
        b.valid as f64 / b.records as f64,
        b.valid / 128 * std::mem::size_of::<Event>()
    ));
    json.push(format!("\"records_per_buffer\": {}", b.records));
    json.push(format!(
        "\"batch_vec_bytes\": {}",
        b.valid / 128 * std::mem::size_of::<Event>()
    ));
    for (label, bufs) in [("mix", &fx.mix), ("kernels_only", &fx.kernels)] {
        let kernels: u64 = bufs.iter().map(|b| b.kernels as u64).sum();
        let decoded = fx.decoded(bufs);
        let levels: Vec<u32> = std::env::var("CUPROF_BENCH_LEVELS")
            .ok()
            .map(|v| v.split(',').filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_else(|| vec![0, 1, 2, 3, 4, 6]);
        for &level in &levels {
            let (bytes, events) = write_session(decoded.clone(), level);
            let mut copies: Vec<_> = (0..3).map(|_| decoded.clone()).collect();
            let (_, cpu) = measure(3, || write_session(copies.pop().unwrap(), level));
            lines.push(format!(
                "{label:12} gzip {level}: {:6.1} bytes/kernel, {:5.1} bytes/trace event on disk ({events} trace events, {kernels} kernels, {:6.2} MB); writer {:5.2} M records/s CPU",
                bytes as f64 / kernels as f64,
                bytes as f64 / events as f64,
                bytes as f64 / 1e6,
                records(bufs) as f64 / cpu * 1e3,
            ));
            json.push(format!(
                "\"bytes_per_kernel_{label}_gzip{level}\": {:.2}",
                bytes as f64 / kernels as f64
            ));
            json.push(format!(
                "\"bytes_per_event_{label}_gzip{level}\": {:.2}",
                bytes as f64 / events as f64
            ));
            json.push(format!(
                "\"writer_{label}_gzip{level}_per_s_cpu\": {:.0}",
                records(bufs) as f64 / cpu * 1e9
            ));
        }
    }
    let reps = std::env::var("CUPROF_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    figures(fx, reps, &mut lines, &mut json);
    println!("\n== cuprof CPU path: sizes and per-stage figures (median of {reps}) ==");
    for l in &lines {
        println!("{l}");
    }
    println!();
    if let Some(path) = std::env::var_os("CUPROF_BENCH_SUMMARY") {
        let _ = std::fs::write(path, format!("{{{}}}\n", json.join(", ")));
    }
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("criterion");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("cuprof-summary.json"),
        format!("{{{}}}\n", json.join(", ")),
    );
}

// ------------------------------------------------------------------ benches

fn bench_decode(c: &mut Criterion, fx: &Fixture) {
    let mut g = c.benchmark_group("decode");
    for (label, buf) in [("mix", &fx.mix[0]), ("kernels_only", &fx.kernels[0])] {
        g.throughput(Throughput::Elements(buf.records as u64));
        let mut d = Decoder::new(LayoutFamily::Cupti13);
        let mut names = PtrNames::new();
        g.bench_function(BenchmarkId::new("buffer_8MiB", label), |b| {
            b.iter_with_large_drop(|| decode_buffer(&mut d, &mut names, black_box(buf.bytes())))
        });
    }
    g.finish();
}

fn bench_channel(c: &mut Criterion, fx: &Fixture) {
    let mut g = c.benchmark_group("channel");
    let batch = fx.decoded(&fx.mix[..1]).pop().unwrap();
    for per_batch in [64usize, batch.len()] {
        // Pre-built batches, moved through a bounded channel to a consumer thread that drops
        // them (the writer's cost is measured separately).
        let template: Vec<Event> = batch[..per_batch].to_vec();
        let n_batches = 256u64;
        g.throughput(Throughput::Elements(per_batch as u64 * n_batches));
        g.bench_function(BenchmarkId::new("try_send_256_batches", per_batch), |b| {
            b.iter_batched(
                || (0..n_batches).map(|_| template.clone()).collect::<Vec<_>>(),
                |batches| {
                    let (tx, rx) = crossbeam_channel::bounded::<Input>(CHANNEL_CAPACITY);
                    let consumer = std::thread::spawn(move || {
                        let mut n = 0usize;
                        let mut held = Vec::new();
                        while let Ok(Input::Events(e)) = rx.recv() {
                            n += e.len();
                            held.push(e); // dropped after the loop, outside the hand-off
                        }
                        (n, held)
                    });
                    for b in batches {
                        if tx.try_send(Input::Events(b)).is_err() {
                            panic!("channel full");
                        }
                    }
                    drop(tx);
                    consumer.join().unwrap()
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

/// What CUPTI's thread pays per buffer: decode + try_send (the writer drains concurrently).
fn bench_callback(c: &mut Criterion, fx: &Fixture) {
    let mut g = c.benchmark_group("callback");
    let bufs = &fx.mix;
    g.throughput(Throughput::Elements(records(bufs)));
    let mut d = Decoder::new(LayoutFamily::Cupti13);
    let mut names = PtrNames::new();
    let (tx, rx) = crossbeam_channel::bounded::<Input>(CHANNEL_CAPACITY);
    // The consumer drops each batch as it comes, as the writer does once it has written it.
    let consumer = std::thread::spawn(move || while rx.recv().is_ok() {});
    g.bench_function(BenchmarkId::new("decode_try_send", "mix"), |b| {
        b.iter(|| {
            for buf in bufs {
                let events = decode_buffer(&mut d, &mut names, buf.bytes());
                tx.try_send(Input::Events(events))
                    .expect("channel has room");
            }
        });
    });
    drop(tx);
    consumer.join().unwrap();
    g.finish();
}

fn bench_writer(c: &mut Criterion, fx: &Fixture) {
    let mut g = c.benchmark_group("writer");
    g.sample_size(10);
    for (label, bufs) in [("mix", &fx.mix), ("kernels_only", &fx.kernels)] {
        let decoded = fx.decoded(bufs);
        g.throughput(Throughput::Elements(records(bufs)));
        g.bench_function(BenchmarkId::new("session_gzip1", label), |b| {
            b.iter_batched(
                || decoded.clone(),
                |batches| write_session(batches, 1),
                BatchSize::PerIteration,
            )
        });
    }
    // The trace writer alone on kernel events, per gzip level.
    let kernels: Vec<cuprof_core::event::Kernel> = fx
        .decoded(&fx.kernels[..1])
        .into_iter()
        .flatten()
        .filter_map(|e| {
            if let Event::Kernel(k) = e {
                Some(k)
            } else {
                None
            }
        })
        .collect();
    g.throughput(Throughput::Elements(kernels.len() as u64));
    for level in [0u32, 1, 3, 6] {
        g.bench_function(BenchmarkId::new("trace_writer_kernels_gzip", level), |b| {
            b.iter(|| {
                let sink = CountingSink::default();
                let mut w = TraceWriter::new(CountingFile(sink.clone()), meta(), level).unwrap();
                for k in &kernels {
                    w.kernel(k, None);
                    w.pump().unwrap();
                }
                w.finish(BASE_NS, &Default::default()).unwrap();
                sink.bytes.load(Relaxed)
            })
        });
    }
    g.finish();
}

/// Decode + channel + session + gzip, all on one core (one thread, in turn).
fn bench_end_to_end(c: &mut Criterion, fx: &Fixture) {
    let mut g = c.benchmark_group("end_to_end");
    g.sample_size(10);
    for (label, bufs) in [("mix", &fx.mix), ("kernels_only", &fx.kernels)] {
        g.throughput(Throughput::Elements(records(bufs)));
        g.bench_function(BenchmarkId::new("one_core_gzip1", label), |b| {
            b.iter(|| end_to_end(bufs, 1))
        });
    }
    g.finish();
}

fn main() {
    // Peak memory of a 1-million-kernel window, measured before anything else is allocated.
    let memory = std::env::var("CUPROF_BENCH_LOOP").is_err().then(|| {
        let n = 1_000_000;
        let (before, peak, bytes) = memory_window(n);
        let line = format!(
            "1,000,000-kernel window (mix, one thread): peak RSS {:.0} MiB over {:.0} MiB before (+{:.0} MiB), {:.1} MB gz written",
            peak as f64 / 1024.0,
            before as f64 / 1024.0,
            (peak.saturating_sub(before)) as f64 / 1024.0,
            bytes as f64 / 1e6
        );
        let json = format!("\"rss_added_mib_1m_kernels\": {:.1}", (peak.saturating_sub(before)) as f64 / 1024.0);
        (line, json)
    });
    let buffers: usize = std::env::var("CUPROF_BENCH_BUFFERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let fx = Fixture::new(buffers);
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(20)
        .configure_from_args();
    // `CUPROF_BENCH_LOOP=decode|writer|e2e[:LEVEL]`: run one stage for ~5 s and exit (for perf).
    if let Ok(stage) = std::env::var("CUPROF_BENCH_LOOP") {
        // `stage:level:iterations` runs a fixed count instead (for instruction counts).
        let mut parts = stage.split(':');
        let stage = parts.next().unwrap_or("e2e").to_string();
        let level: u32 = parts.next().and_then(|l| l.parse().ok()).unwrap_or(1);
        let iterations: Option<u32> = parts.next().and_then(|l| l.parse().ok());
        let decoded = fx.decoded(&fx.mix);
        let t = Instant::now();
        let mut done = 0;
        while iterations.map_or(t.elapsed() < Duration::from_secs(5), |n| done < n) {
            done += 1;
            match stage.as_str() {
                "decode" => drop(fx.decoded(&fx.mix)),
                "writer" => drop(write_session(decoded.clone(), level)),
                _ => drop(end_to_end(&fx.mix, level)),
            }
        }
        return;
    }
    if std::env::var_os("CUPROF_BENCH_NO_SUMMARY").is_none() {
        summary(&fx, memory);
    }
    if std::env::var_os("CUPROF_BENCH_NO_CRITERION").is_some() {
        return;
    }
    bench_decode(&mut c, &fx);
    bench_channel(&mut c, &fx);
    bench_callback(&mut c, &fx);
    bench_writer(&mut c, &fx);
    bench_end_to_end(&mut c, &fx);
    c.final_summary();
    drop(fx.names);
}
