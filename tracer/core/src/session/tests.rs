use super::*;
use std::sync::Mutex;

type Buffer = Arc<Mutex<Vec<u8>>>;

/// Files in memory, by name.
#[derive(Clone, Default)]
struct MemSink(Arc<Mutex<Vec<(PathBuf, Buffer)>>>);

struct MemFile(Buffer);

impl Write for MemFile {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Sink for MemSink {
    fn open(&mut self, cycle: u32) -> io::Result<(Box<dyn Write + Send>, PathBuf)> {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let path = PathBuf::from(format!("cycle{cycle}.json.gz"));
        self.0.lock().unwrap().push((path.clone(), buf.clone()));
        Ok((Box::new(MemFile(buf)), path))
    }
    fn open_snapshot(&mut self, t: u64) -> io::Result<(Box<dyn Write + Send>, PathBuf)> {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let path = PathBuf::from(format!("memory-{t}.pickle"));
        self.0.lock().unwrap().push((path.clone(), buf.clone()));
        Ok((Box::new(MemFile(buf)), path))
    }
}

impl MemSink {
    fn names(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect()
    }
    fn trace(&self, name: &str) -> serde_json::Value {
        let files = self.0.lock().unwrap();
        let (_, buf) = files
            .iter()
            .find(|(p, _)| p.display().to_string() == name)
            .expect("file");
        let bytes = buf.lock().unwrap().clone();
        let mut text = String::new();
        use std::io::Read;
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

fn session(sink: &MemSink) -> Session {
    Session::new(
        TraceMeta::default(),
        1,
        Duration::from_secs(1),
        Box::new(sink.clone()),
        Arc::new(Counters::default()),
    )
}

fn api(corr: u32, start: u64) -> Event {
    Event::Api(ApiCall {
        domain: ApiDomain::Runtime,
        cbid: 211,
        name: Name::from("cudaLaunchKernel"),
        start,
        end: start + 2,
        pid: 1,
        tid: 1,
        correlation: corr,
        return_value: 0,
    })
}

fn kernel(corr: u32, start: u64, end: u64) -> Event {
    Event::Kernel(Kernel::sample(&format!("k{corr}"), corr, start, end))
}

fn kernel_names(t: &serde_json::Value) -> Vec<String> {
    let mut v: Vec<String> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "kernel")
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn gpu_work_is_routed_by_the_call_that_launched_it() {
    let sink = MemSink::default();
    let mut s = session(&sink);
    s.handle(Input::BeginRecording {
        ts: 1_000,
        cycle: 1,
    });
    s.handle(Input::Events(vec![
        // Warm-up call at 900; its kernel runs inside the window: not recorded.
        api(1, 900),
        kernel(1, 1_100, 1_200),
        // Recorded calls; kernel 3 runs after the end, but was launched inside.
        api(2, 1_300),
        kernel(2, 1_400, 1_500),
        api(3, 1_900),
    ]));
    s.handle(Input::EndRecording { ts: 2_000 });
    s.handle(Input::Events(vec![
        kernel(3, 2_100, 2_200),
        // A call after the end (kinds not yet off) and its kernel: not recorded.
        api(4, 2_050),
        kernel(4, 2_300, 2_400),
        // A kernel after the end whose call record never came, newer than the last recorded call.
        kernel(9, 2_500, 2_600),
    ]));
    let (written, errors) = s.finish();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(written.len(), 1);
    let t = sink.trace("cycle1.json.gz");
    assert_eq!(kernel_names(&t), vec!["k2", "k3"]);
    let calls: Vec<u64> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "cuda_runtime")
        .map(|e| e["args"]["correlation"].as_u64().unwrap())
        .collect();
    assert_eq!(calls, vec![2, 3]);
}

#[test]
fn a_cycle_with_nothing_in_it_writes_no_file() {
    let sink = MemSink::default();
    let mut s = session(&sink);
    s.handle(Input::BeginRecording {
        ts: 1_000,
        cycle: 1,
    });
    s.handle(Input::EndRecording { ts: 2_000 });
    let (written, errors) = s.finish();
    assert!(written.is_empty() && errors.is_empty());
    assert!(sink.names().is_empty());
}

#[test]
fn a_draining_cycle_keeps_its_late_gpu_work_while_the_next_records() {
    let sink = MemSink::default();
    let mut s = session(&sink);
    s.handle(Input::BeginRecording {
        ts: 1_000,
        cycle: 1,
    });
    s.handle(Input::Events(vec![api(1, 1_100)]));
    s.handle(Input::BeginRecording {
        ts: 2_000,
        cycle: 2,
    });
    s.handle(Input::Events(vec![
        api(2, 2_100),
        kernel(2, 2_200, 2_300),
        kernel(1, 1_900, 2_050),
    ]));
    let (written, _) = s.finish();
    assert_eq!(
        written.iter().map(|w| w.cycle).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(kernel_names(&sink.trace("cycle1.json.gz")), vec!["k1"]);
    assert_eq!(kernel_names(&sink.trace("cycle2.json.gz")), vec!["k2"]);
}

#[test]
fn nvtx_ranges_are_projected_onto_the_streams_of_their_work() {
    let sink = MemSink::default();
    let mut s = session(&sink);
    s.handle(Input::BeginRecording {
        ts: 1_000,
        cycle: 1,
    });
    let range = |id, parent, name: &str, start, end| Range {
        name: Name::from(name),
        domain: None,
        start,
        end,
        pid: 1,
        tid: 1,
        id,
        parent,
        payload: None,
        kind: RangeKind::PushPop,
    };
    let ext = |corr, id| {
        Event::ExternalCorrelation(ExternalCorrelation {
            external_kind: crate::EXTERNAL_KIND_CUPROF,
            external_id: id,
            correlation: corr,
        })
    };
    // outer(1) holds inner(2); kernel 5 launched in inner, kernel 6 in outer.
    s.handle(Input::Events(vec![
        ext(5, 2),
        api(5, 1_200),
        ext(6, 1),
        api(6, 1_600),
    ]));
    s.handle(Input::Range(range(2, 1, "inner", 1_150, 1_300)));
    s.handle(Input::Range(range(1, 0, "outer", 1_100, 1_700)));
    s.handle(Input::Events(vec![
        kernel(5, 1_400, 1_500),
        kernel(6, 1_800, 1_900),
    ]));
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    let gpu: Vec<(String, f64, f64)> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "gpu_user_annotation")
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        gpu,
        vec![
            ("outer".to_string(), 1.4, 0.5),
            ("inner".to_string(), 1.4, 0.1)
        ]
    );
}

#[test]
fn backtrace_text_becomes_frames_without_cuprofs_own() {
    let text = "   0: std::backtrace::Backtrace::force_capture\n             at /rustc/x/library/std/src/backtrace.rs:312:9\n   1: cuprof::stacks::capture\n             at tracer/preload/src/stacks.rs:20:13\n   2: double_malloc\n             at tests/cupti-double/src/lib.rs:162:5\n   3: ffi_call_unix64\n   4: _PyEval_EvalFrameDefault\n";
    let f = frames_of(text);
    let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "double_malloc",
            "ffi_call_unix64",
            "_PyEval_EvalFrameDefault"
        ]
    );
    assert_eq!(f[0].filename, "tests/cupti-double/src/lib.rs");
    assert_eq!(f[0].line, 162);
    assert_eq!(f[1].line, 0);
}
