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

/// A session whose cycle 1 records from 1,000 ns.
fn recording(sink: &MemSink) -> Session {
    let mut s = session(sink);
    s.handle(Input::BeginRecording {
        ts: 1_000,
        cycle: 1,
    });
    s
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
    let mut s = recording(&sink);
    s.handle(Input::Events(vec![
        // Warm-up call at 900; its kernel runs inside the window: not recorded.
        api(1, 900),
        kernel(1, 1_100, 1_200),
        // Recorded calls; kernel 3 runs after the end, but was launched inside.
        api(2, 1_300),
        kernel(2, 1_400, 1_500),
        api(3, 1_900),
    ]));
    s.handle(Input::EndRecording {
        ts: 2_000,
        last_call: None,
    });
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

/// A folder nothing can be created in.
struct RefusingSink;

impl Sink for RefusingSink {
    fn open(&mut self, _: u32) -> io::Result<(Box<dyn Write + Send>, PathBuf)> {
        Err(io::Error::from(io::ErrorKind::PermissionDenied))
    }
    fn open_snapshot(&mut self, _: u64) -> io::Result<(Box<dyn Write + Send>, PathBuf)> {
        Err(io::Error::from(io::ErrorKind::PermissionDenied))
    }
}

#[test]
fn a_cycle_whose_file_cannot_be_created_is_counted_failed_not_empty() {
    let counters = Arc::new(Counters::default());
    let mut s = Session::new(
        TraceMeta::default(),
        1,
        Duration::from_secs(1),
        Box::new(RefusingSink),
        counters.clone(),
    );
    // Cycle 1 records nothing: no file, and no failure.
    s.handle(Input::BeginRecording {
        ts: 1_000,
        cycle: 1,
    });
    s.handle(Input::EndRecording {
        ts: 1_500,
        last_call: None,
    });
    s.close_ended();
    assert_eq!(counters.failed_files.load(Relaxed), 0);
    // Cycle 2 records a kernel: its file fails.
    s.handle(Input::BeginRecording {
        ts: 2_000,
        cycle: 2,
    });
    s.handle(Input::Events(vec![api(1, 2_100), kernel(1, 2_200, 2_300)]));
    let (written, errors) = s.finish();
    assert!(written.is_empty());
    assert_eq!(counters.failed_files.load(Relaxed), 1);
    assert_eq!(
        errors,
        ["cuprof: cannot write the trace of cycle 2: permission denied; this cycle is not traced (make CUPROF_DIR writable or choose another)"]
    );
}

#[test]
fn close_ended_writes_an_ended_cycle_at_once_and_leaves_a_recording_one_open() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    s.handle(Input::Events(vec![api(1, 1_100), kernel(1, 1_200, 1_300)]));
    // Still recording: nothing to close.
    s.close_ended();
    assert!(s.written().is_empty());
    assert!(s.has_cycle(1));
    s.handle(Input::EndRecording {
        ts: 2_000,
        last_call: None,
    });
    // A kernel launched inside the cycle, its record come after the end but before the close.
    s.handle(Input::Events(vec![kernel(1, 2_100, 2_200)]));
    s.close_ended();
    assert!(!s.has_cycle(1));
    assert_eq!(s.written().len(), 1);
    assert_eq!(s.written()[0].cycle, 1);
    assert_eq!(
        kernel_names(&sink.trace("cycle1.json.gz")),
        vec!["k1", "k1"]
    );
}

#[test]
fn work_of_unrecorded_calls_before_cuda_profiler_stop_stays_in_the_cycle() {
    // Call 1 recorded; call 2 (a driver launch, its record filtered out) ran its kernel after
    // cudaProfilerStop (call 3) ended recording; call 4's kernel came after the stop.
    for (last_call, kept) in [(None, vec!["k1"]), (Some(3), vec!["k1", "k2"])] {
        let sink = MemSink::default();
        let mut s = recording(&sink);
        s.handle(Input::Events(vec![api(1, 1_100), kernel(1, 1_200, 1_300)]));
        s.handle(Input::EndRecording {
            ts: 2_000,
            last_call,
        });
        s.handle(Input::Events(vec![
            kernel(2, 2_100, 2_200),
            kernel(4, 2_300, 2_400),
        ]));
        let (written, _) = s.finish();
        assert_eq!(written.len(), 1);
        assert_eq!(
            kernel_names(&sink.trace("cycle1.json.gz")),
            kept,
            "{last_call:?}"
        );
    }
}

#[test]
fn a_cycle_with_nothing_in_it_writes_no_file() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    s.handle(Input::EndRecording {
        ts: 2_000,
        last_call: None,
    });
    let (written, errors) = s.finish();
    assert!(written.is_empty() && errors.is_empty());
    assert!(sink.names().is_empty());
}

#[test]
fn a_draining_cycle_keeps_its_late_gpu_work_while_the_next_records() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
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

/// Correlation ids of the flow events with phase `ph` in a trace, sorted.
fn flow_ids(t: &serde_json::Value, ph: &str) -> Vec<u64> {
    let mut v: Vec<u64> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == ph)
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn gpu_work_stays_in_the_cycle_of_its_launch_when_it_runs_during_the_next() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    // Cycle 1 launches k1 and k2; the GPU runs behind, so both start after cycle 2 began.
    s.handle(Input::Events(vec![api(1, 1_100), api(2, 1_200)]));
    s.handle(Input::EndRecording {
        ts: 2_000,
        last_call: None,
    });
    // A warm-up step between the cycles: its call is not recorded, nor its kernel.
    s.handle(Input::Events(vec![api(3, 2_200)]));
    s.handle(Input::BeginRecording {
        ts: 3_000,
        cycle: 2,
    });
    s.handle(Input::Events(vec![
        api(4, 3_100),
        kernel(1, 3_050, 3_400),
        kernel(2, 3_400, 3_600),
        kernel(3, 3_600, 3_700),
        kernel(4, 3_700, 3_800),
    ]));
    s.handle(Input::EndRecording {
        ts: 4_000,
        last_call: None,
    });
    let (written, errors) = s.finish();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        written.iter().map(|w| w.cycle).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let (c1, c2) = (sink.trace("cycle1.json.gz"), sink.trace("cycle2.json.gz"));
    assert_eq!(kernel_names(&c1), vec!["k1", "k2"]);
    assert_eq!(kernel_names(&c2), vec!["k4"]);
    // Every arrow starts and ends in the same file.
    assert_eq!(flow_ids(&c1, "s"), vec![1, 2]);
    assert_eq!(flow_ids(&c1, "f"), vec![1, 2]);
    assert_eq!(flow_ids(&c2, "s"), vec![4]);
    assert_eq!(flow_ids(&c2, "f"), vec![4]);
}

#[test]
fn gpu_work_of_a_closed_cycle_is_not_written_into_the_next() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    s.handle(Input::Events(vec![api(1, 1_100)]));
    s.handle(Input::EndRecording {
        ts: 2_000,
        last_call: None,
    });
    // Cycle 1 drains, is flushed, then closes.
    let later = Instant::now() + DRAIN + Duration::from_secs(1);
    assert_eq!(s.tick(later), Action::FlushCupti { forced: true });
    s.tick(later + Duration::from_secs(1));
    assert_eq!(s.written().len(), 1);
    s.handle(Input::BeginRecording {
        ts: 3_000,
        cycle: 2,
    });
    // k1's record comes only now (CUPTI held it back), while cycle 2 records.
    s.handle(Input::Events(vec![api(2, 3_100), kernel(1, 3_200, 3_300)]));
    s.handle(Input::Events(vec![kernel(2, 3_300, 3_400)]));
    s.handle(Input::EndRecording {
        ts: 4_000,
        last_call: None,
    });
    let (written, _) = s.finish();
    assert_eq!(written.len(), 2);
    assert_eq!(kernel_names(&sink.trace("cycle2.json.gz")), vec!["k2"]);
}

#[test]
fn deferred_work_goes_to_the_cycle_of_its_call_when_the_call_comes_after_it() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    s.handle(Input::Events(vec![api(1, 1_100)]));
    s.handle(Input::EndRecording {
        ts: 2_000,
        last_call: None,
    });
    s.handle(Input::BeginRecording {
        ts: 3_000,
        cycle: 2,
    });
    // Kernels after cycle 1's end and before cycle 2's begin, whose calls come later: k5 was
    // launched in cycle 1 (an id below cycle 1's newest would say so as well, but 5 is newer),
    // k6 outside recording, k7 by a call never recorded and newer than cycle 1's calls.
    s.handle(Input::Events(vec![
        kernel(5, 2_100, 2_200),
        kernel(6, 2_300, 2_400),
        kernel(7, 2_500, 2_600),
    ]));
    s.handle(Input::Events(vec![api(5, 1_900), api(6, 2_050)]));
    let (written, errors) = s.finish();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(written.len(), 1);
    assert_eq!(kernel_names(&sink.trace("cycle1.json.gz")), vec!["k5"]);
}

fn nvtx_range(id: u64, parent: u64, name: &str, start: u64, end: u64) -> Range {
    Range {
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
        stack: None,
    }
}

fn link(corr: u32, range: u64) -> Event {
    Event::ExternalCorrelation(ExternalCorrelation {
        external_kind: crate::EXTERNAL_KIND_CUPROF,
        external_id: range,
        correlation: corr,
    })
}

fn gpu_annotations(t: &serde_json::Value) -> Vec<(String, f64, f64)> {
    t["traceEvents"]
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
        .collect()
}

#[test]
fn nvtx_ranges_are_projected_onto_the_streams_of_their_work() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    // outer(1) holds inner(2); kernel 5 launched in inner, kernel 6 in outer.
    s.handle(Input::Events(vec![
        link(5, 2),
        api(5, 1_200),
        link(6, 1),
        api(6, 1_600),
    ]));
    s.handle(Input::Range(nvtx_range(2, 1, "inner", 1_150, 1_300)));
    s.handle(Input::Range(nvtx_range(1, 0, "outer", 1_100, 1_700)));
    s.handle(Input::Events(vec![
        kernel(5, 1_400, 1_500),
        kernel(6, 1_800, 1_900),
    ]));
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    assert_eq!(
        gpu_annotations(&t),
        vec![
            ("outer".to_string(), 1.399, 0.502),
            ("inner".to_string(), 1.399, 0.102)
        ]
    );
}

/// A `record_function` label from the native observer, its record as an operator's (no
/// sequence number, a string input, a keyword input): a `user_annotation` with every field
/// Kineto writes for it, and its projection onto the GPU carries its `External id`; an NVTX
/// range's projection carries none.
#[test]
fn native_labels_are_written_with_their_fields_and_link_their_projection() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    s.handle(Input::Events(vec![
        link(5, 7),
        api(5, 1_200),
        link(6, 8),
        api(6, 1_600),
    ]));
    let record = "## Call CompiledFxGraph fx1 ##\x1f-1\x1f0\x1f0\x1f[[]]\x1f[\"\"]\x1f[[]]\x1f[\"\"]\x1f\x1f\"scope\": \"user_scope\"";
    s.handle(Input::Range(Range {
        name: Name::from(record),
        kind: RangeKind::NativeLabel,
        ..nvtx_range(7, 0, "", 1_100, 1_300)
    }));
    s.handle(Input::Range(nvtx_range(8, 0, "nvtx", 1_500, 1_700)));
    s.handle(Input::Events(vec![
        kernel(5, 1_400, 1_450),
        kernel(6, 1_800, 1_900),
    ]));
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    let by = |cat: &str, name: &str| {
        t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["cat"] == cat && e["name"] == name)
            .unwrap_or_else(|| panic!("{cat} {name}"))
            .clone()
    };
    let label = by("user_annotation", "## Call CompiledFxGraph fx1 ##");
    assert_eq!(
        label["args"],
        serde_json::json!({
            "External id": 7, "Record function id": 0, "Concrete Inputs": [""],
            "Input type": [""], "Input Strides": [[]], "Input Dims": [[]], "scope": "user_scope",
            "Ev Idx": 0
        })
    );
    assert_eq!(
        (label["ts"].as_f64(), label["dur"].as_f64()),
        (Some(1.1), Some(0.2))
    );
    assert_eq!(
        by("gpu_user_annotation", "## Call CompiledFxGraph fx1 ##")["args"],
        serde_json::json!({"External id": 7})
    );
    assert!(by("gpu_user_annotation", "nvtx").get("args").is_none());
    // Every host event Kineto numbers takes the file's next `Ev Idx`; nothing else has one.
    assert_eq!(
        by("user_annotation", "nvtx")["args"],
        serde_json::json!({"Ev Idx": 1})
    );
    let numbered = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["args"].get("Ev Idx").is_some())
        .count();
    assert_eq!(numbered, 2);
}

/// An `nn.Module` call (`--with-modules`) is torch.profiler's `python_function` event, with the
/// args TensorBoard's Module View reads and the module's path; it is never projected.
#[test]
fn module_calls_are_written_as_torch_python_functions_with_their_path() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    s.handle(Input::Range(Range {
        domain: Some(Name::from("Net.blocks.0.\"q_proj\"")),
        kind: RangeKind::Module,
        ..nvtx_range(12, 11, "nn.Module: Linear_3", 1_100, 1_350)
    }));
    s.handle(Input::Range(Range {
        domain: Some(Name::from("Net")),
        kind: RangeKind::Module,
        ..nvtx_range(11, 0, "nn.Module: Net_0", 1_050, 1_400)
    }));
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    let modules: Vec<_> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "python_function")
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["ts"].as_f64().unwrap(),
                e["dur"].as_f64().unwrap(),
                e["args"].clone(),
            )
        })
        .collect();
    assert_eq!(
        modules,
        vec![
            (
                "nn.Module: Linear_3".to_string(),
                1.1,
                0.25,
                serde_json::json!({"Python parent id": 11, "Python id": 12,
                    "Python module id": 3, "Module path": "Net.blocks.0.\"q_proj\"",
                    "Ev Idx": 0})
            ),
            (
                "nn.Module: Net_0".to_string(),
                1.05,
                0.35,
                serde_json::json!({"Python parent id": 0, "Python id": 11,
                    "Python module id": 0, "Module path": "Net", "Ev Idx": 1})
            ),
        ]
    );
    assert!(gpu_annotations(&t).is_empty());
}

#[test]
fn projected_ranges_start_before_their_first_op_and_enclosing_ranges_come_first() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    // outer(1) > middle(2) > inner(3), all around the one kernel 5 (launched in inner);
    // sibling(4) of outer holds kernel 6 alone.
    s.handle(Input::Events(vec![
        link(5, 3),
        api(5, 1_200),
        link(6, 4),
        api(6, 1_700),
    ]));
    s.handle(Input::Range(nvtx_range(3, 2, "inner", 1_150, 1_300)));
    s.handle(Input::Range(nvtx_range(2, 1, "middle", 1_140, 1_400)));
    s.handle(Input::Range(nvtx_range(1, 0, "outer", 1_100, 1_500)));
    s.handle(Input::Range(nvtx_range(4, 0, "sibling", 1_600, 1_800)));
    s.handle(Input::Events(vec![
        kernel(5, 2_000, 3_000),
        kernel(6, 3_100, 3_600),
    ]));
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    // Each starts 1 ns before its first kernel and ends 1 ns after its last (Kineto's shift);
    // the three that tie are written outermost first.
    assert_eq!(
        gpu_annotations(&t),
        vec![
            ("outer".to_string(), 1.999, 1.002),
            ("middle".to_string(), 1.999, 1.002),
            ("inner".to_string(), 1.999, 1.002),
            ("sibling".to_string(), 3.099, 0.502),
        ]
    );
}

#[test]
fn call_to_range_links_stay_bounded_in_a_long_window() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    // Every call of a long window made inside NVTX range 7, as with a step range: 1.5 x the
    // bound of links, each call's kernel arriving soon after its link.
    let calls = (MAX_LINKS + MAX_LINKS / 2) as u32;
    for batch in (1..=calls).collect::<Vec<u32>>().chunks(256) {
        s.handle(Input::Events(batch.iter().map(|&c| link(c, 7)).collect()));
        s.handle(Input::Events(
            batch
                .iter()
                .map(|&c| kernel(c, 2_000 + c as u64, 2_001 + c as u64))
                .collect(),
        ));
        assert!(s.cycles[0].external.len() <= MAX_LINKS);
    }
    // The links held are the newest ones.
    let held = &s.cycles[0].external;
    assert!(held.len() > MAX_LINKS / 2, "{}", held.len());
    assert!(held.contains_key(&calls) && !held.contains_key(&1));
    s.handle(Input::Range(nvtx_range(7, 0, "step", 1_500, 3_000_000)));
    let (_, errors) = s.finish();
    assert!(errors.is_empty(), "{errors:?}");
    // Every kernel arrived while its link was held: the range spans all of them.
    let t = sink.trace("cycle1.json.gz");
    assert_eq!(
        gpu_annotations(&t),
        vec![("step".to_string(), 2.0, (calls + 2) as f64 / 1_000.0)]
    );
}

#[test]
fn gpu_work_arriving_before_its_link_is_linked_when_the_link_comes() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    // NVTX is in play (range 1's link); kernel 2 comes before its link to range 2.
    s.handle(Input::Events(vec![link(1, 1), kernel(2, 5_000, 6_000)]));
    s.handle(Input::Events(vec![link(2, 2)]));
    // Then more links than the bound holds: link 2 goes, kernel 2 is linked already.
    let later = 20_000_000..20_000_000 + 2 * MAX_LINKS as u32;
    for batch in later.clone().collect::<Vec<u32>>().chunks(256) {
        s.handle(Input::Events(batch.iter().map(|&c| link(c, 1)).collect()));
    }
    assert!(!s.cycles[0].external.contains_key(&2));
    s.handle(Input::Events(vec![
        link(3, 2),
        kernel(3, 8_000, 9_000),
        kernel(later.end - 1, 10_000, 11_000),
    ]));
    s.handle(Input::Range(nvtx_range(1, 0, "outer", 1_100, 1_200)));
    s.handle(Input::Range(nvtx_range(2, 0, "inner", 1_300, 1_400)));
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    assert_eq!(
        gpu_annotations(&t),
        vec![
            ("inner".to_string(), 4.999, 4.002),
            ("outer".to_string(), 9.999, 1.002)
        ]
    );
}

#[test]
fn work_launched_outside_every_range_is_not_held_without_bound() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    s.handle(Input::Events(vec![link(1, 1)]));
    // More kernels launched outside every range than the bound: none will ever link.
    let outside = 10..10 + MAX_DEFERRED as u32 + 100;
    for batch in outside.clone().collect::<Vec<u32>>().chunks(256) {
        s.handle(Input::Events(
            batch.iter().map(|&c| kernel(c, 2_000, 2_001)).collect(),
        ));
        assert!(s.cycles[0].unlinked_ops <= MAX_DEFERRED);
    }
    assert!(s.cycles[0].unlinked_ops > MAX_DEFERRED / 2);
    // A kernel of range 1 arriving just before its link is still linked.
    let c = outside.end;
    s.handle(Input::Events(vec![kernel(c, 3_000, 4_000), link(c, 1)]));
    s.handle(Input::Range(nvtx_range(1, 0, "step", 1_100, 5_000)));
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    assert_eq!(
        gpu_annotations(&t),
        vec![("step".to_string(), 2.999, 1.002)]
    );
}

#[test]
fn ranges_past_the_projection_bound_stay_on_the_cpu_timeline_and_are_said_once() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    let n = MAX_PROJECTED as u64 + 2;
    for id in 1..=n {
        s.handle(Input::Events(vec![link(id as u32, id)]));
        s.handle(Input::Range(nvtx_range(
            id,
            0,
            "layer",
            1_000 + id,
            1_001 + id,
        )));
        s.handle(Input::Events(vec![kernel(
            id as u32,
            1_001 + id,
            1_002 + id,
        )]));
    }
    assert_eq!(s.cycles[0].ranges.len(), MAX_PROJECTED);
    assert_eq!(s.cycles[0].extents.len(), MAX_PROJECTED);
    let (_, errors) = s.finish();
    assert_eq!(
        errors,
        vec![format!("cuprof: cycle 1 has more than {MAX_PROJECTED} NVTX ranges: the later ones are on the CPU timeline but not projected onto the GPU streams (narrow the window)")]
    );
    let t = sink.trace("cycle1.json.gz");
    let cpu = (t["traceEvents"].as_array().unwrap().iter())
        .filter(|e| e["cat"] == "user_annotation" && e["name"] == "layer")
        .count();
    assert_eq!(cpu as u64, n);
    assert_eq!(gpu_annotations(&t).len(), MAX_PROJECTED);
}

#[test]
fn backtrace_text_becomes_frames_without_cuprofs_own() {
    let text = "   0: std::backtrace::Backtrace::force_capture\n             at /rustc/x/library/std/src/backtrace.rs:312:9\n   1: cuprof::sources::stacks::capture\n             at tracer/preload/src/sources/stacks.rs:20:13\n   2: double_malloc\n             at tests/cupti-double/src/lib.rs:162:5\n   3: ffi_call_unix64\n   4: _PyEval_EvalFrameDefault\n";
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

#[test]
fn allocation_stacks_start_at_the_programs_call() {
    // As on a GPU: CUPTI's and the driver's frames sit between cuprof's callback and the
    // runtime's cudaMalloc that PyTorch's allocator called.
    let text = "   0: cuprof::stacks::capture\n   1: <unknown>\n   2: cuptiEnableDomain\n   3: cuDevicePrimaryCtxRetain\n   4: cudaMalloc\n   5: c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc\n";
    let names: Vec<String> = frames_of(text).into_iter().map(|f| f.name).collect();
    assert_eq!(
        names,
        vec![
            "cudaMalloc",
            "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"
        ]
    );
}

#[test]
fn a_projected_range_is_not_widened_into_an_op_that_touches_its_work() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    // Kernel 4 (outside every range) ends where kernel 5 (in "mid") begins, and kernel 6
    // (outside) begins where kernel 5 ends: the range spans kernel 5 exactly. "late" has a gap
    // before and after its kernel 8: widened by 1 ns each side.
    s.handle(Input::Events(vec![
        api(4, 1_100),
        link(5, 1),
        api(5, 1_200),
        api(6, 1_300),
        link(8, 2),
        api(8, 1_400),
    ]));
    s.handle(Input::Range(nvtx_range(1, 0, "mid", 1_150, 1_250)));
    s.handle(Input::Range(nvtx_range(2, 0, "late", 1_350, 1_450)));
    s.handle(Input::Events(vec![
        kernel(4, 2_000, 2_500),
        kernel(5, 2_500, 3_000),
        kernel(6, 3_000, 3_200),
        kernel(8, 4_000, 4_100),
    ]));
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    assert_eq!(
        gpu_annotations(&t),
        vec![
            ("mid".to_string(), 2.5, 0.5),
            ("late".to_string(), 3.999, 0.102)
        ]
    );
}

/// A range projected onto the op that touches the one before it starts at that op's very ns;
/// viewers nest slices that start together in file order, so the range is written first: the
/// op (and its arrow) is held back until the cycle's ranges are written.
#[test]
fn a_range_starting_with_its_first_op_is_written_before_it() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    // Kernel 4 (outside every range) ends where kernel 5, the first of "step", begins; kernel
    // 7 ends "step" after a gap. One call (5) comes after its kernel, its arrow with it.
    s.handle(Input::Events(vec![
        api(4, 1_100),
        link(5, 1),
        link(7, 1),
        api(7, 1_300),
    ]));
    s.handle(Input::Range(nvtx_range(1, 0, "step", 1_150, 1_350)));
    s.handle(Input::Events(vec![
        kernel(4, 2_000, 2_500),
        kernel(5, 2_500, 3_000),
        kernel(7, 3_100, 3_400),
    ]));
    s.handle(Input::Events(vec![api(5, 1_200)]));
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    assert_eq!(gpu_annotations(&t), vec![("step".to_string(), 2.5, 0.901)]);
    let events = t["traceEvents"].as_array().unwrap();
    let at = |what: &dyn Fn(&serde_json::Value) -> bool| -> usize {
        events.iter().position(what).expect("written")
    };
    let range = at(&|e| e["cat"] == "gpu_user_annotation");
    let k4 = at(&|e| e["name"] == "k4");
    let k5 = at(&|e| e["name"] == "k5");
    let k7 = at(&|e| e["name"] == "k7");
    let f5 = at(&|e| e["ph"] == "f" && e["id"] == 5);
    assert!(
        k4 < range && range < k5 && k5 < f5,
        "{k4} {range} {k5} {f5}"
    );
    // The others as they came.
    assert!(k4 < k7 && k7 < range, "{k7} {range}");
    assert_eq!(kernel_names(&t), ["k4", "k5", "k7"]);
    assert_eq!(flow_ids(&t, "f"), [4, 5, 7]);
    // On each track, of slices that start at one ns, the longer is written first.
    let mut first_at: std::collections::HashMap<(String, String, String), f64> =
        std::collections::HashMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let key = (
            e["pid"].to_string(),
            e["tid"].to_string(),
            e["ts"].to_string(),
        );
        let dur = e["dur"].as_f64().unwrap();
        if let Some(&before) = first_at.get(&key) {
            assert!(before >= dur, "{e}");
        }
        first_at.entry(key).or_insert(dur);
    }
}

#[test]
fn flow_arrows_are_written_whole_whichever_end_comes_first() {
    let sink = MemSink::default();
    let mut s = recording(&sink);
    // 5: call then kernel; 6: kernel then call; 7: a kernel whose call is never recorded (a
    // driver launch with driver calls not kept); 8: a launch whose kernel never comes.
    s.handle(Input::Events(vec![api(5, 1_100), kernel(5, 1_200, 1_300)]));
    s.handle(Input::Events(vec![kernel(6, 1_400, 1_500), api(6, 1_350)]));
    s.handle(Input::Events(vec![kernel(7, 1_600, 1_700), api(8, 1_800)]));
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    assert_eq!(flow_ids(&t, "s"), vec![5, 6]);
    assert_eq!(flow_ids(&t, "f"), vec![5, 6]);
    let start_of = |id: u64| -> String {
        t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["ph"] == "s" && e["id"] == id)
            .unwrap()["ts"]
            .to_string()
    };
    assert_eq!((start_of(5), start_of(6)), ("1.1".into(), "1.35".into()));
}

fn device_alloc(correlation: u32, address: u64, is_async: bool) -> Event {
    Event::Memory(Memory {
        op: MemoryOp::Alloc,
        memory_kind: crate::memory::DEVICE_MEMORY_KIND,
        correlation,
        address,
        bytes: 4096,
        timestamp: 2_000,
        pid: 1,
        device: 0,
        context: 1,
        stream: 7,
        is_async,
        pool_address: if is_async { 0x5000 } else { 0 },
    })
}

#[test]
fn a_stream_ordered_allocation_gets_the_stream_handle_its_call_was_given() {
    let sink = MemSink::default();
    let mut s = recording(&sink).with_memory(MemoryTimeline::default());
    s.handle(Input::AllocationStream {
        correlation: 5,
        stream: 0x7f00_dead_0000,
    });
    // A handle sent under a plain allocation's correlation id is not its stream.
    s.handle(Input::AllocationStream {
        correlation: 6,
        stream: 0x7f00_beef_0000,
    });
    s.handle(Input::Events(vec![
        device_alloc(5, 0x7f00_0000_0000, true),
        device_alloc(6, 0x7f00_1000_0000, false),
        // Its call's handle was never seen (the message was dropped): 0.
        device_alloc(8, 0x7f00_2000_0000, true),
    ]));
    let streams: Vec<(u64, &str, u64)> = s
        .memory
        .as_ref()
        .unwrap()
        .trace(0)
        .map(|e| (e.address, e.action.as_str(), e.stream))
        .collect();
    assert_eq!(
        streams,
        vec![
            (0x7f00_0000_0000, "segment_alloc", 0x7f00_dead_0000),
            (0x7f00_0000_0000, "alloc", 0x7f00_dead_0000),
            (0x7f00_1000_0000, "segment_alloc", 0),
            (0x7f00_1000_0000, "alloc", 0),
            (0x7f00_2000_0000, "segment_alloc", 0),
            (0x7f00_2000_0000, "alloc", 0),
        ]
    );
}

/// Device memory recorded without GPU work (the CPU and MEM activities): the counter's GPU
/// process is named all the same, as Perfetto and TensorBoard name a process by its metadata.
#[test]
fn a_memory_counter_alone_names_its_gpu_process() {
    let sink = MemSink::default();
    // The program's own process apart from GPU 0's.
    let meta = TraceMeta {
        pid: 1,
        ..TraceMeta::default()
    };
    let counters = Arc::new(Counters::default());
    let session = Session::new(
        meta,
        1,
        Duration::from_secs(1),
        Box::new(sink.clone()),
        counters,
    );
    let mut s = session.with_memory(MemoryTimeline::default());
    s.handle(Input::BeginRecording {
        ts: 1_000,
        cycle: 1,
    });
    s.handle(Input::Events(vec![device_alloc(
        5,
        0x7f00_0000_0000,
        false,
    )]));
    s.handle(Input::EndRecording {
        ts: 3_000,
        last_call: None,
    });
    s.finish();
    let t = sink.trace("cycle1.json.gz");
    let on_device: Vec<(&str, &str)> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["pid"] == 0)
        .map(|e| (e["ph"].as_str().unwrap(), e["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        on_device,
        [
            ("M", "process_name"),
            ("M", "process_labels"),
            ("M", "process_sort_index"),
            ("C", "GPU 0 Memory"),
        ]
    );
}

#[test]
fn consecutive_steps_do_not_touch() {
    // Step 1 ends where step 2 begins. Written touching, a reader adding `ts + dur` in floating
    // point sees them overlap (TensorBoard's plugin then drops step 2 from its operator tree).
    let sink = MemSink::default();
    let mut s = recording(&sink);
    for (number, start, end) in [(1, 1_000, 1_234_567_891), (2, 1_234_567_891, 2_469_135_782)] {
        s.handle(Input::Step {
            number,
            pid: 7,
            tid: 7,
            start,
            end,
            figures: StepFigures::default(),
        });
    }
    s.handle(Input::EndRecording {
        ts: 2_469_135_782,
        last_call: None,
    });
    s.finish();
    let t = sink.trace(&sink.names()[0]);
    let ns = |v: &serde_json::Value| (v.as_f64().unwrap() * 1000.0).round() as u64;
    let steps: Vec<(String, u64, u64)> = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("ProfilerStep#"))
        })
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                ns(&e["ts"]),
                ns(&e["dur"]),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("ProfilerStep#1".to_string(), 1_000, 1_234_566_890),
            ("ProfilerStep#2".to_string(), 1_234_567_891, 1_234_567_890),
        ]
    );
}

#[test]
fn a_steps_figures_are_its_args() {
    // Tokens are `args.work`; named figures are `args.figures`, names escaped, values exact.
    let sink = MemSink::default();
    let mut s = recording(&sink);
    let mut figures = StepFigures::default();
    figures.set("tokens", 96.0).unwrap();
    figures.set("kv_len", 1536.0).unwrap();
    figures.set("say \"hi\"\n", 0.125).unwrap();
    s.handle(Input::Step {
        number: 3,
        pid: 7,
        tid: 7,
        start: 1_000,
        end: 5_000,
        figures,
    });
    s.handle(Input::EndRecording {
        ts: 5_000,
        last_call: None,
    });
    s.finish();
    let t = sink.trace(&sink.names()[0]);
    let step = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "ProfilerStep#3")
        .unwrap();
    assert_eq!(step["args"]["work"], 96.0);
    assert_eq!(
        step["args"]["figures"],
        serde_json::json!({"kv_len": 1536, "say \"hi\"\n": 0.125})
    );
}
