//! `cuprof memory FILE`: what a memory snapshot pickle (cuprof's, or one written by
//! `torch.cuda.memory._dump_snapshot`) or a trace recorded with `MEM` says about memory,
//! readable without a browser.
//!
//! A pickle, per device: peak reserved bytes, when (`time_us` and the offset from the device's
//! first trace entry), by which stack, what is live at the end, the number of trace entries;
//! then the blocks its trace allocated and never freed (leaks) and the peak of allocated
//! blocks with what was alive at it, each by stack. A trace (`.json`, `.json.gz`): the same
//! leaks and peak from its `[memory]` events, with growth over steps, as `cuprof report`
//! writes them.
//!
//! A pickle goes through four modules, each with one job: [`unpickle`] decodes it into an
//! arena of objects within limits a crafted file cannot exceed, [`snapshot`] reads the
//! snapshot's model out of that and computes each device's summary (the peak rule is there),
//! [`blocks`] the leaks and peak of allocated blocks, [`render`] writes the text.

mod blocks;
mod render;
mod snapshot;
mod unpickle;

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;

use blocks::Blocks;
use cuprof_analysis::escape::terminal::Shown;
use snapshot::DeviceSummary;

#[derive(clap::Args)]
pub struct MemoryArgs {
    /// A memory snapshot pickle (`NAME-rankR-memory-UNIXTIME.pickle`, or torch's own), or a
    /// trace recorded with MEM (`.json`, `.json.gz`).
    pub file: PathBuf,
    /// At most this many frames of each stack are printed.
    #[arg(long, default_value_t = 12)]
    pub frames: usize,
    /// At most this many groups of allocations per list (leaks, growth, at the peak).
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

/// The largest pickle read: torch's snapshots of 100,000 trace entries with deep stacks are
/// a few hundred MB.
const MAX_PICKLE_BYTES: u64 = 4 << 30;

pub fn run(args: MemoryArgs) -> anyhow::Result<()> {
    let name = args.file.shown().to_string();
    let text = if is_trace(&args.file) {
        trace_text(&args.file, args.top)?
    } else {
        let bytes = read_limited(&args.file, MAX_PICKLE_BYTES)?;
        let (devices, blocks) =
            load_with_blocks(&bytes).with_context(|| format!("{name} is not a memory snapshot"))?;
        let mut text = render::render(&name, &devices, args.frames);
        text.push_str(&render::blocks(&devices, &blocks, args.frames, args.top));
        text
    };
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    cuprof_analysis::io::console::Console::new(&mut out, &mut err).print(&text)
}

/// Whether `path` names a trace (`.json`, `.json.gz`) rather than a pickle.
fn is_trace(path: &Path) -> bool {
    let name = path.to_string_lossy();
    name.ends_with(".json") || name.ends_with(".json.gz")
}

/// The leaks, growth and peak of a trace's `[memory]` events, as `cuprof report` shows them.
fn trace_text(path: &Path, top: usize) -> anyhow::Result<String> {
    let a = cuprof_analysis::model::analyse(&[path.to_path_buf()])?;
    let rows = cuprof_analysis::sections::allocations::find(
        &a.names, &a.files, &a.links, &a.modules, &a.ranks,
    );
    let mut text = format!("PyTorch allocations in {}\n", path.shown());
    if rows.is_empty() {
        text.push_str(
            "no PyTorch allocations with addresses ([memory] events): record with MEM, or \
             torch.profiler's profile_memory=True\n",
        );
    } else {
        text.push_str(&cuprof_analysis::views::render::allocations(
            &rows, top, false, 70,
        ));
    }
    Ok(text)
}
/// The whole of `path`, a regular file of at most `max` bytes (a device or a FIFO is refused
/// before it is read, and a file that grows past `max` while read is refused too).
fn read_limited(path: &Path, max: u64) -> anyhow::Result<Vec<u8>> {
    let (f, md) = cuprof_core::reader::open_regular(path)?;
    let too_big = || {
        anyhow::anyhow!(
            "{}: larger than {} bytes, the most `cuprof memory` reads; not a memory snapshot \
             cuprof or torch would write",
            path.shown(),
            max
        )
    };
    if md.len() > max {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(md.len() as usize);
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{}: cannot read it", path.shown()))?;
    if bytes.len() as u64 > max {
        return Err(too_big());
    }
    Ok(bytes)
}

/// The per-device summaries of a snapshot pickle.
#[cfg(test)]
fn load(bytes: &[u8]) -> anyhow::Result<Vec<DeviceSummary>> {
    Ok(load_with_blocks(bytes)?.0)
}

/// The per-device summaries of a snapshot pickle, and each device's blocks.
fn load_with_blocks(bytes: &[u8]) -> anyhow::Result<(Vec<DeviceSummary>, Vec<Blocks>)> {
    let pickle =
        unpickle::decode(bytes, unpickle::Limits::default()).context("cannot unpickle it")?;
    let devices = snapshot::summaries(&pickle)?;
    let snap = snapshot::Snapshot::from_pickle(&pickle)?;
    let blocks = devices
        .iter()
        .map(|d| blocks::blocks(&pickle, &snap, d.device))
        .collect::<anyhow::Result<_>>()?;
    Ok((devices, blocks))
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

    fn frame(name: &str, filename: &str, line: i64) -> CoreFrame {
        CoreFrame {
            filename: filename.into(),
            line,
            name: name.into(),
        }
    }

    /// A planted leak (two 1 MiB blocks from `aten::zeros` at leak.py:10, never freed) and a
    /// planted peak (an 8 MiB `aten::mm` block at model.py:20 while the leak is alive): the
    /// blocks, groups, lines and time are exact.
    #[test]
    fn leaks_and_peak_of_a_snapshot() {
        let leak: Arc<[CoreFrame]> = Arc::from(vec![
            frame("torch::unwind::unwind()", "??", 0),
            frame(
                "at::_ops::empty_strided::call(c10::ArrayRef<long>)",
                "??",
                0,
            ),
            frame("at::_ops::zeros::call(c10::ArrayRef<long>)", "??", 0),
            frame(
                "_call_impl",
                "/usr/lib/python3.12/site-packages/torch/nn/modules/module.py",
                1751,
            ),
            frame("train", "leak.py", 10),
            frame("<module>", "main.py", 3),
        ]);
        let mm: Arc<[CoreFrame]> = Arc::from(vec![
            frame(
                "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)",
                "??",
                0,
            ),
            frame("forward", "model.py", 20),
        ]);
        let mut t = MemoryTimeline::default();
        let ms = 1_000_000;
        t.record(
            &rec(MemoryOp::Alloc, 0x1000_0000, MIB, ms, 0),
            Some(leak.clone()),
        );
        t.record(
            &rec(MemoryOp::Alloc, 0x2000_0000, MIB, 2 * ms, 0),
            Some(leak),
        );
        t.record(
            &rec(MemoryOp::Alloc, 0x3000_0000, 8 * MIB, 3 * ms, 0),
            Some(mm.clone()),
        );
        t.record(&rec(MemoryOp::Free, 0x3000_0000, 0, 4 * ms, 0), None);
        t.record(
            &rec(MemoryOp::Alloc, 0x4000_0000, 4 * MIB, 5 * ms, 0),
            Some(mm),
        );
        t.record(&rec(MemoryOp::Free, 0x4000_0000, 0, 6 * ms, 0), None);
        let (devices, blocks) = load_with_blocks(&t.snapshot_pickle()).unwrap();
        assert_eq!(blocks.len(), 1);
        let b = &blocks[0];
        assert_eq!(
            (b.allocations, b.leaked_count, b.leaked_bytes),
            (4, 2, 2 * MIB as i64)
        );
        let row = |g: &super::blocks::Group| (g.operator.clone(), g.line.clone(), g.bytes, g.count);
        let zeros = |bytes: u64| {
            (
                "aten::zeros".to_string(),
                Some("leak.py:10".to_string()),
                bytes as i64,
                2,
            )
        };
        assert_eq!(
            b.leaks.iter().map(row).collect::<Vec<_>>(),
            [zeros(2 * MIB)]
        );
        assert_eq!(
            (b.peak_bytes, b.peak_time_us),
            (10 * MIB as i64, Some(3000))
        );
        assert_eq!(
            b.at_peak.iter().map(row).collect::<Vec<_>>(),
            [
                (
                    "aten::mm".to_string(),
                    Some("model.py:20".to_string()),
                    8 * MIB as i64,
                    1
                ),
                zeros(2 * MIB)
            ]
        );
        assert_eq!(b.leaks[0].frames.len(), 6);
        assert_eq!(
            render::blocks(&devices, &blocks, 3, 10),
            "device 0 blocks (allocated in the trace, freed by free_requested or free_completed)\n  \
             allocated:      4 blocks\n  \
             leaked:         2 blocks, 2.0 MiB (2097152 bytes) (not freed by the last entry)\n    \
             2.0 MiB (2097152 bytes) in 2 blocks: aten::zeros at leak.py:10\n      \
             at::_ops::empty_strided::call(c10::ArrayRef<long>) (??:0)\n      \
             at::_ops::zeros::call(c10::ArrayRef<long>) (??:0)\n      \
             _call_impl (/usr/lib/python3.12/site-packages/torch/nn/modules/module.py:1751)\n  \
             peak allocated: 10.0 MiB (10485760 bytes) at time_us 3000 (+2.000 ms after the first trace entry)\n    \
             8.0 MiB (8388608 bytes) in 1 block: aten::mm at model.py:20\n      \
             at::_ops::mm::call(at::Tensor const&, at::Tensor const&) (??:0)\n      \
             forward (model.py:20)\n    \
             2.0 MiB (2097152 bytes) in 2 blocks: aten::zeros at leak.py:10\n      \
             at::_ops::empty_strided::call(c10::ArrayRef<long>) (??:0)\n      \
             at::_ops::zeros::call(c10::ArrayRef<long>) (??:0)\n      \
             _call_impl (/usr/lib/python3.12/site-packages/torch/nn/modules/module.py:1751)\n"
        );
        // One group shown: the rest is counted.
        assert!(render::blocks(&devices, &blocks, 0, 1)
            .ends_with("aten::mm at model.py:20\n    ... 1 more group not shown\n"));
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
