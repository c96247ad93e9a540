//! Many launching threads lose nothing by default (issue 19). With CUPTI 13's per-thread
//! buffers every thread that launched holds a buffer until it fills or a flush brings it back;
//! the pool bounds what those buffers hold, not how many there are, so 512 threads that each
//! launched get one, and the peak memory the tracer adds stays bounded. When what they hold
//! nears the bound, the tracer flushes the partly filled buffers back.

use crate::common::*;

const THREADS: u64 = 512;
/// All 512 threads hold a buffer at once (flood.py lets each launch once before any launches
/// twice), four times what the old pool allowed. 512 x 50 launches are 51,200 records, which a
/// debug build's writer drains well within its exit wait on a busy machine (BENCHMARKS.md's
/// "Threads" runs 2,000 a thread, release, where the reclaim flushes work too).
const PER_THREAD: u64 = 50;
const MAX_ADDED_RSS_KIB: u64 = 128 << 10;

fn flood(dir: &std::path::Path, traced: bool) -> (serde_json::Value, String) {
    let args = [PER_THREAD.to_string(), THREADS.to_string(), "0".into()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // The exit waits longer than its 10 s default for the writer: on a machine loaded by other
    // tests a debug build's writer can take longer than that to drain 51,200 records, and the
    // trace was cut (this test is about the buffers, not about that wait).
    let mut run = Run::python("flood.py", &args, dir).env("CUPROF_SHUTDOWN_WAIT", "120");
    if !traced {
        run = run.env_remove("LD_PRELOAD").env_remove("CUPROF_ENABLED");
    }
    run.ok_json()
}

#[test]
fn five_hundred_twelve_threads_keep_every_kernel_with_default_settings() {
    let dir = TempDir::new("threads");
    let (out, stderr) = flood(dir.path(), true);
    let kernels = THREADS * PER_THREAD;
    assert_eq!(out["kernels"], kernels);
    assert_eq!(
        out["produced"],
        2 * kernels,
        "a kernel and a runtime record per launch (default activities)"
    );
    assert_eq!(out["dropped_by_double"], 0);
    let t = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    assert_eq!(events(&t, "kernel").len() as u64, kernels);
    assert_eq!(events(&t, "cuda_runtime").len() as u64, kernels);
    let stats = &t["cuprofStats"];
    assert_eq!(stats["dropped_buffers"], 0, "{stats}");
    assert_eq!(stats["dropped_channel"], 0, "{stats}");
    assert_eq!(stats["dropped_cupti"], 0, "{stats}");
    assert!(!stderr.contains("records were lost"), "{stderr}");
    assert!(!stderr.contains("did not finish"), "{stderr}");

    let untraced_dir = TempDir::new("threads-untraced");
    let (plain, _) = flood(untraced_dir.path(), false);
    assert_eq!(plain["produced"], 0, "nothing enabled CUPTI records");
    assert_eq!(untraced_dir.files(), Vec::<String>::new());
    // Peak RSS as the program read it (VmHWM) after its forced flush, when every record has been
    // decoded. (The kernel's ru_maxrss of a child would also count the test process's own
    // memory: posix_spawn's exec carries over the spawning process's peak.)
    let (traced, untraced) = (
        out["peak_rss_kib"].as_u64().unwrap(),
        plain["peak_rss_kib"].as_u64().unwrap(),
    );
    let added = traced.saturating_sub(untraced);
    eprintln!("peak RSS: traced {traced} KiB, untraced {untraced} KiB, added {added} KiB");
    assert!(
        added < MAX_ADDED_RSS_KIB,
        "tracing added {added} KiB of peak RSS (traced {traced}, untraced {untraced})"
    );
}

#[test]
fn partly_filled_buffers_come_back_when_what_they_hold_nears_the_bound() {
    let dir = TempDir::new("reclaim");
    // Bound 4 MiB, reclaimed from 2 MiB. 32 threads x 400 kernels of 216 bytes: 22 pages
    // written in each buffer, 2.75 MiB in all, none full. The periodic flush is an hour away,
    // so only the reclaim flush can bring a buffer back before flood.py's own flush. 32
    // threads, half the 64 buffers out CUPROF_BUFFERS=1 allows: while a flush hands buffers
    // back they still count as out, and the threads already ask for new ones.
    let run = Run::python("flood.py", &["400", "32", "0", "reclaimed"], dir.path())
        .env("CUPROF_BUFFERS", "1")
        .env("CUPROF_BUFFER_SIZE", "4M")
        .env("CUPROF_FLUSH_MS", "3600000")
        .env("CUPROF_ACTIVITIES", "GPU");
    let (out, stderr) = run.ok_json();
    assert!(
        out["completed_before_flush"].as_u64().unwrap() > 0,
        "no buffer came back before the program's flush: {out}"
    );
    assert_eq!(out["produced"], 12_800);
    let t = read_trace(&dir.path().join("t-rank0.trace.json.gz"));
    assert_eq!(events(&t, "kernel").len(), 12_800);
    assert_eq!(t["cuprofStats"]["dropped_buffers"], 0);
    assert!(!stderr.contains("records were lost"), "{stderr}");
}
