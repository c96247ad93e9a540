//! `cuprof memory FILE.pickle`: a short summary of a memory snapshot pickle (cuprof's, or
//! one written by `torch.cuda.memory._dump_snapshot`), readable without a browser.
//!
//! Per device: peak reserved bytes, when (`time_us` and the offset from the device's first
//! trace entry), by which stack, what is live at the end, and the number of trace entries.
//!
//! The file goes through three modules, each with one job: [`unpickle`] decodes it into an
//! arena of objects within limits a crafted file cannot exceed, [`snapshot`] reads the
//! snapshot's model out of that and computes each device's summary (the peak rule is there),
//! [`render`] writes the text.

mod render;
mod snapshot;
mod unpickle;

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;

use snapshot::DeviceSummary;

#[derive(clap::Args)]
pub struct MemoryArgs {
    /// A memory snapshot pickle (`NAME-rankR-memory-UNIXTIME.pickle`, or torch's own).
    pub file: PathBuf,
    /// At most this many frames of the peak's stack are printed.
    #[arg(long, default_value_t = 12)]
    pub frames: usize,
}

/// The largest pickle read: torch's snapshots of 100,000 trace entries with deep stacks are
/// a few hundred MB.
const MAX_PICKLE_BYTES: u64 = 4 << 30;

pub fn run(args: MemoryArgs) -> anyhow::Result<()> {
    let bytes = read_limited(&args.file, MAX_PICKLE_BYTES)?;
    let devices = load(&bytes)
        .with_context(|| format!("{} is not a memory snapshot", args.file.display()))?;
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    cuprof_analysis::io::console::Console::new(&mut out, &mut err).print_text(&render::render(
        &args.file.display().to_string(),
        &devices,
        args.frames,
    ))
}

/// The whole of `path`, a regular file of at most `max` bytes (a device or a FIFO is refused
/// before it is read, and a file that grows past `max` while read is refused too).
fn read_limited(path: &Path, max: u64) -> anyhow::Result<Vec<u8>> {
    let (f, md) = cuprof_core::reader::open_regular(path)?;
    let too_big = || {
        anyhow::anyhow!(
            "{}: larger than {} bytes, the most `cuprof memory` reads; not a memory snapshot \
             cuprof or torch would write",
            path.display(),
            max
        )
    };
    if md.len() > max {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(md.len() as usize);
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{}: cannot read it", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(too_big());
    }
    Ok(bytes)
}

/// The per-device summaries of a snapshot pickle.
fn load(bytes: &[u8]) -> anyhow::Result<Vec<DeviceSummary>> {
    let pickle =
        unpickle::decode(bytes, unpickle::Limits::default()).context("cannot unpickle it")?;
    snapshot::summaries(&pickle)
}

#[cfg(test)]
mod tests {
    use super::render::render;
    use super::snapshot::{summarize, Snapshot};
    use super::unpickle::{decode, Limits, Node, NodeId, Pickle};
    use super::*;
    use cuprof_core::event::{Memory, MemoryOp};
    use cuprof_core::memory::{Frame as CoreFrame, MemoryTimeline, DEVICE_MEMORY_KIND};
    use serde_pickle::{DeOptions, HashableValue, Value};
    use std::sync::Arc;

    const MIB: u64 = 1 << 20;

    fn rec(op: MemoryOp, address: u64, bytes: u64, timestamp: u64, device: u32) -> Memory {
        Memory {
            op,
            memory_kind: DEVICE_MEMORY_KIND,
            correlation: 0,
            address,
            bytes,
            timestamp,
            pid: 1,
            device,
            context: 1,
            stream: 0,
            is_async: false,
            pool_address: 0,
        }
    }

    #[test]
    fn summary_of_a_cuprof_snapshot() {
        let mut t = MemoryTimeline::default();
        let stack: Arc<[CoreFrame]> = Arc::from(vec![
            CoreFrame {
                filename: "??".into(),
                line: 0,
                name: "torch::unwind::unwind()".into(),
            },
            CoreFrame {
                filename: "train.py".into(),
                line: 42,
                name: "forward".into(),
            },
        ]);
        t.record(
            &rec(MemoryOp::Alloc, 0x1000_0000, 2 * MIB, 5_000_000, 1),
            None,
        );
        t.record(
            &rec(MemoryOp::Alloc, 0x2000_0000, 20 * MIB, 7_500_000, 1),
            Some(stack),
        );
        t.record(&rec(MemoryOp::Free, 0x2000_0000, 0, 9_000_000, 1), None);
        let sum = load(&t.snapshot_pickle()).unwrap();
        assert_eq!(sum.len(), 1);
        let d = &sum[0];
        assert_eq!((d.device, d.start, d.peak), (1, 0, 22 * MIB as i64));
        let e = d.peak_entry.as_ref().unwrap();
        assert_eq!(
            (e.action.as_str(), e.addr, e.time_us),
            ("segment_alloc", 0x2000_0000, 7_500)
        );
        assert_eq!(
            (
                d.live_segments,
                d.live_bytes,
                d.active_blocks,
                d.active_bytes
            ),
            (1, 2 * MIB as i64, 1, 2 * MIB as i64)
        );
        assert_eq!(d.entries, 7);
        let text = render("x.pickle", &sum, 12);
        assert_eq!(
            text,
            "memory snapshot x.pickle\n\
             device 1\n  \
             peak reserved:  22.0 MiB (23068672 bytes)\n  \
             when:           time_us 7500 (+2.500 ms after the first trace entry)\n  \
             by:             segment_alloc of 20.0 MiB (20971520 bytes) at 0x20000000\n  \
             stack:\n    \
             forward (train.py:42)\n    \
             ... 1 more frame not shown\n  \
             live at end:    1 segment, 2.0 MiB (2097152 bytes); 1 active block, 2.0 MiB (2097152 bytes)\n  \
             trace entries:  7 (alloc 2, free_completed 1, free_requested 1, segment_alloc 2, segment_free 1)\n"
        );
    }

    #[test]
    fn no_stacks_and_segments_from_before_the_trace() {
        // A torch-like file: a 20 MiB segment allocated before recording, freed in the
        // trace, and a 2 MiB one allocated in it without stacks.
        let mut t = MemoryTimeline::default();
        t.record(&rec(MemoryOp::Alloc, 0x1000_0000, 20 * MIB, 1_000, 0), None);
        t.record(&rec(MemoryOp::Alloc, 0x3000_0000, 2 * MIB, 2_000, 0), None);
        t.record(&rec(MemoryOp::Free, 0x1000_0000, 0, 3_000, 0), None);
        let mut snap =
            Snapshot::from_pickle(&decode(&t.snapshot_pickle(), Limits::default()).unwrap())
                .unwrap();
        snap.device_traces[0].drain(0..2); // the 20 MiB segment was allocated before recording
        let sum = summarize(&snap);
        let d = &sum[0];
        assert_eq!((d.start, d.peak), (20 * MIB as i64, 22 * MIB as i64));
        let text = render("y", &sum, 12);
        assert!(
            text.contains("stack:          no stacks recorded (run with --with-stack)"),
            "{text}"
        );
        assert!(
            text.contains("reserved before the first entry: 20.0 MiB (20971520 bytes)"),
            "{text}"
        );

        // Only frees: the peak is the starting level.
        snap.device_traces[0].drain(0..2);
        let sum = summarize(&snap);
        assert_eq!(
            (sum[0].start, sum[0].peak, sum[0].peak_entry.is_none()),
            (22 * MIB as i64, 22 * MIB as i64, true)
        );
        assert!(render("y", &sum, 12).contains("before the first trace entry"));
    }

    #[test]
    fn empty_and_malformed() {
        let empty = MemoryTimeline::default().snapshot_pickle();
        assert_eq!(load(&empty).unwrap(), vec![]);
        assert!(render("z", &[], 12).contains("no device memory recorded"));
        let not_a_snapshot = serde_pickle::to_vec(&vec![1, 2], Default::default()).unwrap();
        let err = load(&not_a_snapshot).unwrap_err();
        assert!(format!("{err:#}").contains("not a dict"), "{err:#}");
    }

    /// serde-pickle's value of a decoded pickle (shared objects copied), to compare the two.
    fn to_value(p: &Pickle, id: NodeId) -> Value {
        let items = |ids: &[NodeId]| ids.iter().map(|&i| to_value(p, i)).collect();
        match p.node(id) {
            Node::None => Value::None,
            Node::Bool(b) => Value::Bool(*b),
            Node::Int(i) => Value::I64(*i),
            Node::Float(f) => Value::F64(*f),
            Node::Str(s) => Value::String(s.to_string()),
            Node::Bytes(b) => Value::Bytes(b.to_vec()),
            Node::List(l) => Value::List(items(l)),
            Node::Tuple(t) => Value::Tuple(items(t)),
            Node::Dict(pairs) => Value::Dict(
                pairs
                    .iter()
                    .map(|&(k, v)| (to_value(p, k).into_hashable().unwrap(), to_value(p, v)))
                    .collect(),
            ),
        }
    }

    mod unpickle {
        pub fn value(bytes: &[u8]) -> anyhow::Result<serde_pickle::Value> {
            let p = super::decode(bytes, super::Limits::default())?;
            Ok(super::to_value(&p, p.root))
        }
    }

    fn read_value(bytes: &[u8]) -> anyhow::Result<Value> {
        unpickle::value(bytes)
    }

    fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
        match v {
            Value::Dict(d) => d.get(&HashableValue::String(key.to_owned())),
            _ => None,
        }
    }

    fn list<'a>(v: &'a Value, what: &str) -> anyhow::Result<&'a [Value]> {
        match v {
            Value::List(l) | Value::Tuple(l) => Ok(l),
            _ => anyhow::bail!("{what} is not a list"),
        }
    }

    /// The decoder gives exactly what serde-pickle gives, on cuprof's pickles and on pickles
    /// written by CPython (memoized dicts and lists, shared objects).
    #[test]
    fn fallback_decoder_matches_serde_pickle() {
        let mut t = MemoryTimeline::new(3);
        let stack: Arc<[CoreFrame]> = Arc::from(vec![CoreFrame {
            filename: "a.py".into(),
            line: 1,
            name: "f".into(),
        }]);
        for i in 0..5u64 {
            t.record(
                &rec(
                    MemoryOp::Alloc,
                    0x1000_0000 + i * 0x100_0000,
                    (i + 1) * MIB,
                    i,
                    (i % 2) as u32,
                ),
                Some(stack.clone()),
            );
        }
        t.allocator_settings_mut().garbage_collection_threshold = 0.5;
        let bytes = t.snapshot_pickle();
        let via_serde = serde_pickle::value_from_slice(&bytes, DeOptions::new()).unwrap();
        assert_eq!(unpickle::value(&bytes).unwrap(), via_serde);

        let value = serde_pickle::value_from_slice(&bytes, DeOptions::new()).unwrap();
        for (proto, opts) in [
            (3, serde_pickle::SerOptions::new()),
            (2, serde_pickle::SerOptions::new().proto_v2()),
        ] {
            let bytes = serde_pickle::value_to_vec(&value, opts).unwrap();
            assert_eq!(unpickle::value(&bytes).unwrap(), value, "proto {proto}");
        }
    }

    /// A CPython protocol-4 pickle of `{"a": [x, x], "b": (1, -2, 2**40, 1.5, None, True, b"z")}`
    /// with `x = {"name": "n", "line": 3}` shared: serde-pickle fails on it, the fallback does not.
    #[test]
    fn shared_containers_written_by_cpython() {
        let bytes: &[u8] = b"\x80\x04\x95L\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(}\x94(\x8c\x04name\x94\x8c\x01n\x94\x8c\x04line\x94K\x03uh\x03e\x8c\x01b\x94(K\x01J\xfe\xff\xff\xff\x8a\x06\x00\x00\x00\x00\x00\x01G?\xf8\x00\x00\x00\x00\x00\x00N\x88C\x01z\x94t\x94u.";
        assert!(matches!(
            serde_pickle::value_from_slice(bytes, DeOptions::new()),
            Err(serde_pickle::Error::Syntax(
                serde_pickle::ErrorCode::Recursive
            ))
        ));
        let v = read_value(bytes).unwrap();
        let x = get(&v, "a")
            .map(|a| list(a, "a").unwrap().to_vec())
            .unwrap();
        assert_eq!(x.len(), 2);
        assert_eq!(x[0], x[1]);
        assert_eq!(get(&x[1], "name"), Some(&Value::String("n".into())));
        assert_eq!(get(&x[1], "line"), Some(&Value::I64(3)));
        assert_eq!(
            get(&v, "b"),
            Some(&Value::Tuple(vec![
                Value::I64(1),
                Value::I64(-2),
                Value::I64(1 << 40),
                Value::F64(1.5),
                Value::None,
                Value::Bool(true),
                Value::Bytes(b"z".to_vec()),
            ]))
        );
        assert!(unpickle::value(b"\x80\x04\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.").is_err());
        assert!(unpickle::value(b"\x80\x04c__builtin__\nset\n.").is_err());
        assert!(unpickle::value(b"\x80\x04]\x94(").is_err());
    }

    #[test]
    fn human_units() {
        use cuprof_core::byte_size::with_exact as human;
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB (1536 bytes)");
        assert_eq!(human(20 << 20), "20.0 MiB (20971520 bytes)");
        assert_eq!(human(80 << 30), "80.0 GiB (85899345920 bytes)");
    }
}
