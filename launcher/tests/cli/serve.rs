//! `cuprof serve`: started on a free port, asked by concurrent clients over plain TCP; its
//! answers against `cuprof report`'s summary.json and the trace's own events; bad requests,
//! a port in use, a missing folder, a changed folder, the token beyond localhost, and the
//! page in headless Chromium.

use std::io::BufRead;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::analysis_support::*;
use crate::serve_client::*;

/// `cuprof serve ARGS --port 0`, once it has printed the address it listens on.
fn serve(args: &[&str]) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cuprof"));
    cmd.arg("serve").args(args).args(["--port", "0"]);
    Server::start(cmd)
}

fn get_json(address: SocketAddr, path: &str) -> Value {
    let (status, body) = get(address, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// Two ranks of `sample()`, the same events in each.
fn two_ranks(dir: &Path) {
    sample().write_gz(&dir.join("run-rank0.trace.json.gz"));
    let mut one = sample();
    one.rank = 1;
    one.world = 2;
    one.write_gz(&dir.join("run-rank1.trace.json.gz"));
}

/// The categories `/api/window` returns (its documentation's list).
const WINDOW_CATEGORIES: [&str; 7] = [
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_runtime",
    "cuda_driver",
    "user_annotation",
    "cpu_op",
];

/// The complete events of `trace` of the window's categories overlapping [t0, t1), as
/// (name, start, end) in ns, sorted.
fn events_in(trace: &Trace, t0: i64, t1: i64) -> Vec<(String, i64, i64)> {
    let ns = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as i64;
    let mut out: Vec<_> = trace
        .events
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).unwrap())
        .filter(|e| e["ph"] == "X" && WINDOW_CATEGORIES.contains(&e["cat"].as_str().unwrap()))
        .map(|e| {
            let start = ns(&e["ts"]);
            (
                e["name"].as_str().unwrap().to_string(),
                start,
                start + ns(&e["dur"]),
            )
        })
        .filter(|&(_, s, e)| s < t1 && e.max(s + 1) > t0)
        .collect();
    out.sort();
    out
}

#[test]
fn serve_answers_concurrent_clients_with_the_reports_figures_and_the_traces_events() {
    let dir = tempdir("serve1");
    let traces = dir.join("traces");
    std::fs::create_dir(&traces).unwrap();
    two_ranks(&traces);
    let (_, summary) = report(&traces, &dir.join("out"));
    let server = serve(&[traces.to_str().unwrap()]);
    let address = server.address;
    // 1 ms of rank 0 at one pixel a nanosecond: every event as itself.
    let (t0, t1) = (1_000_000, 2_000_000);
    let expected = events_in(&sample(), t0, t1);
    assert_eq!(expected.len(), 7, "{expected:?}");
    let window = format!("/api/window?rank=0&t0={t0}&t1={t1}&px=20000");
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let window = window.clone();
            std::thread::spawn(move || {
                let answers: Vec<Value> = [
                    "/api/summary",
                    "/api/kernels",
                    "/api/memory",
                    "/api/status",
                    &window,
                ]
                .iter()
                .map(|p| get_json(address, p))
                .collect();
                answers
            })
        })
        .collect();
    for c in clients {
        let a = c.join().unwrap();
        assert_eq!(a[0], summary);
        assert_eq!(a[1], summary["top_kernels"]);
        assert_eq!(a[2], summary["memory"]);
        assert_eq!(a[3]["generation"], 1);
        assert_eq!(a[3]["files"], 2);
        assert_eq!(
            a[3]["ranks"].as_array().unwrap().len(),
            2,
            "{}",
            a[3]["ranks"]
        );
        let w = &a[4];
        // A pixel of 50 ns: nothing narrower here; every event is itself.
        assert_eq!(w["pixel_ns"], 50);
        assert_eq!(w["total"], 7);
        assert_eq!(w["merged"], Value::Array(vec![]));
        let mut got: Vec<(String, i64, i64)> = w["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["start"].as_i64().unwrap(),
                    e["end"].as_i64().unwrap(),
                )
            })
            .collect();
        got.sort();
        assert_eq!(got, expected);
    }
    // The sections that have no rows here are JSON nulls, the page is the report's.
    assert_eq!(get_json(address, "/api/operators"), Value::Null);
    assert_eq!(get_json(address, "/api/torch_compile"), Value::Null);
    let flame = get_json(address, "/api/flame");
    let gpu_ns: u64 = flame
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ns"].as_u64().unwrap())
        .sum();
    let kernels_ns: i64 = summary["top_kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["total_ns"].as_i64().unwrap())
        .sum();
    // The flame graph weighs every GPU operation: kernels, the copy and the set.
    let copies_ns = 2 * (100_000 + 50_000);
    assert_eq!(gpu_ns as i64, kernels_ns + copies_ns);
    let (status, page) = get(address, "/report");
    assert_eq!(status, 200);
    assert!(page.starts_with("<!DOCTYPE html>"), "{}", &page[..100]);
    assert!(page.contains("<title>cuprof report</title>"));
    // Gzipped for a client that accepts it (as browsers do), the same page inflated.
    let (head, inflated) = get_encoded(address, "/report", "gzip, br");
    assert!(
        head.to_ascii_lowercase().contains("content-encoding: gzip"),
        "{head}"
    );
    assert_eq!(inflated, page);
    assert_eq!(get_json(address, "/api/live"), Value::Array(vec![]));
}

#[test]
fn serve_answers_bad_requests_with_4xx_and_keeps_serving() {
    let dir = tempdir("serve2");
    two_ranks(&dir);
    let server = serve(&[dir.to_str().unwrap()]);
    let a = server.address;
    for (path, status, line) in [
        ("/nothing", 404, "no such page: ask /, /report"),
        (
            "/api/window?rank=0&t0=1&t1=x",
            400,
            "t1=x is not an integer",
        ),
        ("/api/window?rank=0&t0=1", 400, "t1 is missing"),
        (
            "/api/window?rank=0&t0=5&t1=5",
            400,
            "the window [5, 5) is empty",
        ),
        (
            "/api/window?rank=0&t0=0&t1=9&px=20001",
            400,
            "px=20001 is not a width",
        ),
        (
            "/api/window?rank=7&t0=0&t1=9",
            404,
            "no rank 7 in the traces",
        ),
        (
            "/api/window?rank=0&t0=-4611686018427387904&t1=9",
            400,
            "outside the trace clock",
        ),
    ] {
        let (got, body) = get(a, path);
        assert_eq!(got, status, "{path}: {body}");
        assert!(body.contains(line), "{path}: {body}");
        assert_eq!(body.lines().count(), 1, "{path}: {body}");
    }
    let post =
        b"POST /api/summary HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(exchange(a, post).0, 405);
    let (status, _) = exchange(a, b"NOT HTTP AT ALL\r\n\r\n");
    assert_eq!(status, 400);
    // A page of another site whose name was resolved to this host (DNS rebinding) names
    // itself in `Host`: refused; this host under any of its loopback names is served.
    let rebound =
        b"GET /api/summary HTTP/1.1\r\nHost: attacker.example:8765\r\nConnection: close\r\n\r\n";
    let (status, body) = exchange(a, rebound);
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("this server answers requests addressed to localhost only: "),
        "{body}"
    );
    for host in ["localhost", "LOCALHOST:80", "127.0.0.2:1", "[::1]:8765"] {
        let request =
            format!("GET /api/status HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        assert_eq!(exchange(a, request.as_bytes()).0, 200, "{host}");
    }
    // Still serving.
    assert_eq!(get_json(a, "/api/status")["files"], 2);
}

#[test]
fn serve_on_a_port_in_use_or_a_missing_folder_says_so_in_one_line() {
    let dir = tempdir("serve3");
    two_ranks(&dir);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = cuprof(&["serve", dir.to_str().unwrap(), "--port", &port]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "cuprof: cannot listen on 127.0.0.1:{port}: pick another --port (0: any free one) or --bind: "
        )),
        "{err}"
    );
    let missing = dir.join("missing");
    let out = cuprof(&["serve", missing.to_str().unwrap(), "--port", "0"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("missing"), "{err}");
}

/// `/api/status` once `done` holds of it; the watcher looks once a second (a minute at most).
fn status_when(a: SocketAddr, done: impl Fn(&Value) -> bool, what: &str) -> Value {
    for _ in 0..600 {
        let s = get_json(a, "/api/status");
        if done(&s) {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{what} never happened");
}

#[test]
fn serve_loads_a_changed_folder_again_whole_and_reports_one_it_cannot_read() {
    let dir = tempdir("serve4");
    let traces = dir.join("traces");
    std::fs::create_dir(&traces).unwrap();
    sample().write_gz(&traces.join("run-rank0.trace.json.gz"));
    let server = serve(&[traces.to_str().unwrap()]);
    let a = server.address;
    assert_eq!(get_json(a, "/api/status")["files"], 1);
    // A second rank, written beside the first through a rename as the tracer writes.
    let mut one = sample();
    one.rank = 1;
    one.world = 2;
    one.write_gz(&dir.join("partial.tmp"));
    std::fs::rename(
        dir.join("partial.tmp"),
        traces.join("run-rank1.trace.json.gz"),
    )
    .unwrap();
    let status = status_when(a, |s| s["generation"] == 2, "the second load");
    assert_eq!(status["files"], 2);
    assert_eq!(status["problem"], Value::Null);
    let (_, summary) = report(&traces, &dir.join("out"));
    assert_eq!(get_json(a, "/api/summary"), summary);
    // The folder gone: said, and the last load still served; back: served as it was.
    std::fs::rename(&traces, dir.join("away")).unwrap();
    let status = status_when(
        a,
        |s| !s["problem"].is_null(),
        "the missing folder's report",
    );
    let problem = status["problem"].as_str().unwrap();
    assert!(problem.contains("traces"), "{problem}");
    assert_eq!(status["generation"], 2);
    assert_eq!(get_json(a, "/api/summary"), summary);
    std::fs::rename(dir.join("away"), &traces).unwrap();
    let status = status_when(a, |s| s["problem"].is_null(), "the folder's return");
    assert_eq!(status["generation"], 2);
}

#[test]
fn serve_beyond_localhost_refuses_requests_without_its_token() {
    let dir = tempdir("serve5");
    two_ranks(&dir);
    let mut server = serve(&[dir.to_str().unwrap(), "--bind", "0.0.0.0"]);
    assert!(server.address.ip().is_unspecified(), "{}", server.address);
    let mut line = String::new();
    server.stdout.read_line(&mut line).unwrap();
    let token = line
        .strip_prefix("token: ")
        .and_then(|t| t.split_once(' '))
        .unwrap_or_else(|| panic!("no token line: {line:?}"))
        .0
        .to_string();
    assert_eq!(token.len(), 32, "{token}");
    let port = server.address.port();
    let local = SocketAddr::from(([127, 0, 0, 1], port));
    let (status, body) = get(local, "/api/status");
    assert_eq!(status, 401, "{body}");
    assert!(body.starts_with("this server listens beyond localhost: send the token"));
    let (status, _) = get(local, "/api/status?token=0123456789abcdef0123456789abcdef");
    assert_eq!(status, 401);
    assert_eq!(
        get_json(local, &format!("/api/status?token={token}"))["files"],
        2
    );
    let header = format!("X-Cuprof-Token: {token}");
    assert_eq!(get_with(local, "/api/status", &[&header]).0, 200);
    // Through this host's address on its network, where it has one (the UDP socket sends
    // nothing: connecting only picks the route's source address).
    let udp = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    if udp.connect("192.0.2.1:9").is_ok() {
        let ip = udp.local_addr().unwrap().ip();
        assert!(!ip.is_loopback(), "{ip}");
        let outside = SocketAddr::new(ip, port);
        assert_eq!(get(outside, "/api/summary").0, 401);
        assert_eq!(get_with(outside, "/api/kernels", &[&header]).0, 200);
    }
}

#[test]
fn served_page_loads_in_chromium_and_its_script_fetches_the_summary() {
    let dir = tempdir("serve6");
    two_ranks(&dir);
    let server = serve(&[dir.to_str().unwrap()]);
    let url = format!("http://{}/", server.address);
    let (dom, err) = chromium_at(
        &url,
        &dir.join("profile"),
        &["--dump-dom", "--virtual-time-budget=10000"],
    );
    let console: Vec<&str> = err.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console: {console:?}");
    // The script filled the overview from /api/status and /api/summary, and the kernels.
    assert!(dom.contains(r#"<body data-loaded="yes">"#), "{dom}");
    assert!(
        dom.contains(r#"data-files="2" data-steps="8">2 file(s), 2 rank(s), 8 steps</p>"#),
        "{dom}"
    );
    assert!(
        dom.contains("<td>ncclDevKernel_AllReduce_Sum_f32_RING_LL</td>"),
        "{dom}"
    );
    assert!(
        dom.contains("no process runs with cuprof run --on-demand"),
        "{dom}"
    );
}

/// A window's answer is gzipped for a client that accepts gzip, once it is big enough to be
/// worth it (16 KiB), and plain for one that refuses it (`gzip;q=0`) or does not ask: the same
/// JSON either way.
#[test]
fn a_large_window_is_gzipped_only_for_a_client_that_accepts_it() {
    let dir = tempdir("serve-window-gzip");
    let mut t = Trace::new(0, 1);
    for i in 0..600 {
        t.launch("gemm", MAIN, i * 10_000, 0, 7, i * 10_000 + 2_000, 5_000);
    }
    t.write_gz(&dir.join("run-rank0.trace.json.gz"));
    let server = serve(&[dir.to_str().unwrap()]);
    let path = "/api/window?rank=0&t0=0&t1=6000000&px=20000";
    let (status, plain) = get(server.address, path);
    assert_eq!(status, 200, "{plain}");
    let w: Value = serde_json::from_str(&plain).unwrap();
    // Each launch call and its kernel, every one wider than a 300-ns pixel.
    assert_eq!(w["total"], 1200);
    assert!(plain.len() > 16 * 1024, "{}", plain.len());
    let (head, inflated) = get_encoded(server.address, path, "br, gzip");
    assert!(
        head.to_ascii_lowercase().contains("content-encoding: gzip"),
        "{head}"
    );
    assert_eq!(inflated, plain);
    let (head, body) = get_encoded(server.address, path, "gzip;q=0, identity");
    assert!(
        !head.to_ascii_lowercase().contains("content-encoding"),
        "{head}"
    );
    assert_eq!(body, plain);
}
