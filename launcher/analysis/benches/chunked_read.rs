//! One big trace read on every core (issue 53, item 3): a trace written by cuprof's own writer (kernels and their launches), read by `load_all`, `report`, `merge` and `export` on 1 and on N workers.
//!
//! Prints, for the file's size: the median time of each (runs alternate 1, N / N, 1; N is
//! BENCH_WORKERS, default 2), the
//! median of the paired speed-ups, the serial fraction they imply (Amdahl) and the speed-up that
//! fraction gives on 4 and 8 cores; the read and the export of the same file without its index
//! (one stream, what older traces get), and the size of the dataset each export wrote; and
//! what the full flushes cost in size at chunk targets of 1, 4 and 16 MiB against none (the
//! first 256 MiB of the trace).
//!
//!     CHUNKED_MB=1024 BENCH_REPS=5 cargo bench -p cuprof-analysis --bench chunked_read
//!     (or scripts/bench/chunked_read.sh, which states the load)

// It prints figures only (no names or paths from a trace).
#![allow(clippy::disallowed_macros)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use cuprof_analysis::io::jobs::Jobs;
use cuprof_analysis::load::{chunked, load_all, Interner};
use cuprof_analysis::merge::{merge, MergeOptions};
use cuprof_analysis::model::analyse_files;
use cuprof_analysis::report::{report, ReportOptions};
use cuprof_analysis::{export, ExportOptions};
use cuprof_core::chunked_gzip::ChunkedGz;
use cuprof_core::event::{ApiCall, ApiDomain, Kernel, Name};
use cuprof_core::reader::chunks::Chunks;
use cuprof_core::trace_writer::{TraceMeta, TraceStats, TraceWriter};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes kernels and their cudaLaunchKernel calls until the JSON holds about `mb` MiB.
fn write_trace(path: &Path, mb: u64) -> (u64, u64) {
    let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let meta = TraceMeta {
        pid: 4242,
        ..TraceMeta::default()
    };
    let mut w = TraceWriter::new(file, meta, 1).unwrap();
    let names: Vec<String> = (0..500)
        .map(|i| format!("void gemm_kernel_{i}<float, 128, 64>(Params)"))
        .collect();
    let launch: Name = Name::from("cudaLaunchKernel");
    // About 560 bytes of JSON per launch (kernel and call).
    let launches = mb * (1 << 20) / 560;
    for i in 0..launches {
        let t = 1_000_000 + i * 2_000;
        let c = i as u32;
        w.api(
            &ApiCall {
                domain: ApiDomain::Runtime,
                cbid: 211,
                name: launch.clone(),
                start: t,
                end: t + 500,
                pid: 4242,
                tid: 4242 + (i % 4) as u32,
                correlation: c,
                return_value: 0,
            },
            None,
        );
        let k = Kernel::sample(&names[(i % 500) as usize], c, t + 800, t + 1_800);
        w.kernel(&k, None);
        if i % 4096 == 0 {
            w.pump().unwrap();
        }
    }
    let events = w.events();
    w.finish(
        1_000_000 + launches * 2_000 + 10_000,
        &TraceStats::default(),
    )
    .unwrap();
    (events, launches)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn timed(jobs: u16, f: impl Fn() + Send + Sync) -> f64 {
    let t = Instant::now();
    Jobs { jobs: Some(jobs) }.install(&f).unwrap();
    t.elapsed().as_secs_f64()
}

fn load(path: &Path) {
    let (_, files) = load_all(&[path.to_path_buf()]).unwrap();
    assert!(files[0].read.truncated.is_none());
}

fn merge_of(path: &Path, out: &Path) {
    let mut o = MergeOptions::new(vec![path.to_path_buf()]);
    o.out = out.to_path_buf();
    o.jobs = Jobs { jobs: None };
    let (mut stdout, mut err) = (Vec::new(), Vec::new());
    merge(&o, &mut stdout, &mut err).unwrap();
}

/// `cuprof export PATH -o OUT` on the current pool; the dataset's size in bytes.
fn export_of(path: &Path, out: &Path) -> u64 {
    let o = ExportOptions {
        paths: vec![path.to_path_buf()],
        out: out.to_path_buf(),
        jobs: Jobs { jobs: None },
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    export(&o, &mut stdout, &mut stderr).unwrap();
    size_of_dir(out)
}

fn size_of_dir(d: &Path) -> u64 {
    std::fs::read_dir(d)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let md = e.metadata().unwrap();
            if md.is_dir() {
                size_of_dir(&e.path())
            } else {
                md.len()
            }
        })
        .sum()
}

fn report_of(path: &Path) {
    let mut o = ReportOptions::new(vec![path.to_path_buf()]);
    o.jobs = Jobs { jobs: None };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    report(&o, &mut out, &mut err).unwrap();
}

/// Medians of `f` on 1 and `many` workers, alternating, and of their paired ratio.
fn compare(name: &str, reps: u64, many: u16, f: &(dyn Fn() + Send + Sync)) -> f64 {
    let (mut one, mut two, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..reps {
        let (a, b) = if r % 2 == 0 {
            let a = timed(1, f);
            (a, timed(many, f))
        } else {
            let b = timed(many, f);
            (timed(1, f), b)
        };
        one.push(a);
        two.push(b);
        ratio.push(a / b);
    }
    let s = median(ratio);
    // Amdahl: s = 1 / (serial + (1 - serial) / n).
    let n = f64::from(many);
    let serial = ((n / s - 1.0) / (n - 1.0)).clamp(0.0, 1.0);
    let on = |n: f64| 1.0 / (serial + (1.0 - serial) / n);
    println!(
        "{name:<28} 1 worker {:7.3} s   {many} workers {:7.3} s   speed-up {s:.2}x   serial {:.1}%   \
         on paper: 4 cores {:.2}x, 8 cores {:.2}x",
        median(one),
        median(two),
        serial * 100.0,
        on(4.0),
        on(8.0)
    );
    s
}

/// The serial fraction measured directly, on one worker: the join's share of a read by
/// chunks (the machine's load leaves it alone, unlike a ratio of two wall times).
fn phases(path: &Path, reps: u64) {
    let (mut chunks, mut join) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let p = Jobs { jobs: Some(1) }
            .install(|| {
                chunked::load_timed(path, &mut Interner::default())
                    .unwrap()
                    .1
            })
            .unwrap();
        chunks.push(p.chunks.as_secs_f64());
        join.push(p.join.as_secs_f64());
    }
    let (c, j) = (median(chunks), median(join));
    let serial = j / (c + j);
    let on = |n: f64| 1.0 / (serial + (1.0 - serial) / n);
    println!(
        "phases on 1 worker: chunks {c:.3} s, join {j:.3} s: serial {:.1}%   \
         Amdahl: 2 cores {:.2}x, 4 cores {:.2}x, 8 cores {:.2}x",
        serial * 100.0,
        on(2.0),
        on(4.0),
        on(8.0)
    );
}

/// Compressed size of the first `limit` bytes of `path`'s JSON at chunk targets (`u64::MAX`:
/// no full flush), cut at event boundaries as the writer cuts.
fn flush_cost(path: &Path, limit: usize) {
    let mut text = Vec::with_capacity(limit);
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .take(limit as u64)
        .read_to_end(&mut text)
        .unwrap();
    let cut = memchr_last(&text, b",\n{").unwrap_or(text.len());
    text.truncate(cut);
    let mut sizes = Vec::new();
    for target in [u64::MAX, 16 << 20, 4 << 20, 1 << 20] {
        let mut gz = ChunkedGz::new(Vec::new(), 1).unwrap().with_target(target);
        let mut rest = &text[..];
        while !rest.is_empty() {
            let end = rest.len().min(64 << 10);
            let at = if end == rest.len() {
                end
            } else {
                memchr_last(&rest[..end], b",\n{")
                    .filter(|&a| a > 0)
                    .unwrap_or(end)
            };
            gz.write_at_boundary(&rest[..at]).unwrap();
            rest = &rest[at..];
        }
        sizes.push((target, gz.finish().unwrap().len()));
    }
    let none = sizes[0].1 as f64;
    println!(
        "full-flush cost, first {} MiB of JSON at level 1: none {} bytes",
        text.len() >> 20,
        sizes[0].1
    );
    for (target, size) in &sizes[1..] {
        println!(
            "  chunks of {:>2} MiB: {size} bytes (+{} bytes, +{:.3}%)",
            target >> 20,
            *size as i64 - none as i64,
            (*size as f64 / none - 1.0) * 100.0
        );
    }
}

fn memchr_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to filter.
    let mb = env("CHUNKED_MB", 1024);
    let reps = env("BENCH_REPS", 5);
    let many = env("BENCH_WORKERS", 2).clamp(2, 256) as u16;
    let dir = std::env::var("CHUNKED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir());
    let path = dir.join(format!(
        "cuprof-chunked-{}-rank0.trace.json.gz",
        std::process::id()
    ));
    let t = Instant::now();
    let (events, launches) = write_trace(&path, mb);
    let write_s = t.elapsed().as_secs_f64();
    let chunks = Chunks::open(&path).expect("an indexed trace");
    let (json, gz) = (chunks.index.total_len(), chunks.file_len);
    println!(
        "trace: {events} events ({launches} kernels and their launches), {:.0} MiB of JSON in \
         {:.0} MiB of gzip, {} chunks; written in {write_s:.1} s on one core",
        json as f64 / 1048576.0,
        gz as f64 / 1048576.0,
        chunks.index.chunks.len()
    );
    compare("load (columns)", reps, many, &|| load(&path));
    phases(&path, reps);
    compare("report (whole command)", reps, many, &|| report_of(&path));
    // Report's two parts apart: the load with the model derived from it, and the sections.
    compare("  load and model", reps, many, &|| {
        analyse_files(std::slice::from_ref(&path)).unwrap();
    });
    let an = analyse_files(std::slice::from_ref(&path)).unwrap();
    compare("  sections (summarize)", reps, many, &|| {
        an.summarize();
    });
    drop(an);
    let out = dir.join(format!("cuprof-export-{}", std::process::id()));
    compare("export (whole command)", reps, many, &|| {
        export_of(&path, &out);
    });
    let by_chunks = export_of(&path, &out);
    // The same bytes without the index member: one stream, front to back.
    let plain = dir.join(format!(
        "cuprof-stream-{}-rank0.trace.json.gz",
        std::process::id()
    ));
    {
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&plain, &bytes[..chunks.index.member_end() as usize]).unwrap();
    }
    compare("load, no index (one stream)", reps.min(3), many, &|| {
        load(&plain)
    });
    let merged = dir.join(format!(
        "cuprof-merged-{}.trace.json.gz",
        std::process::id()
    ));
    compare("merge (whole command)", reps, many, &|| {
        merge_of(&path, &merged)
    });
    compare("merge, no index (one stream)", reps.min(3), many, &|| {
        merge_of(&plain, &merged)
    });
    std::fs::remove_file(&merged).unwrap();
    let out_stream = dir.join(format!("cuprof-export-stream-{}", std::process::id()));
    compare("export, no index (one stream)", reps.min(3), many, &|| {
        export_of(&plain, &out_stream);
    });
    println!(
        "export's dataset: by chunks {by_chunks} bytes, one stream {} bytes",
        export_of(&plain, &out_stream)
    );
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&out_stream).unwrap();
    flush_cost(&path, 256 << 20);
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(&plain).unwrap();
}
