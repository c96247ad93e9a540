#!/usr/bin/env python3
"""Torch-free checks of a memory snapshot pickle against PyTorch MemoryViz's rules.

usage: check_snapshot.py FILE.pickle [--reference REF.pickle] [--expect-peak [DEV:]BYTES]...

Checks (see docs/trace-format.md, "Memory snapshot"):
- `pickle.load` reads it (all `python -m torch.cuda._memory_viz` needs);
- `pickletools.genops` finds only opcodes that MemoryViz.js's unpickler implements
  (ALLOWED_OPCODES below), a PROTO of 2 to 4, and no LONG1 longer than 8 bytes
  (MemoryViz.js turns those into BigInts, then throws "Cannot mix BigInt and other types");
- no `category` key anywhere (MemoryViz.js throws unless one category is 'unknown');
- the structure MemoryViz walks: segments with blocks whose sizes sum to `total_size`
  (`_memory_viz stats` asserts it), one trace list per device in time order, known actions,
  every `alloc` inside a segment live at that moment (else the "Allocator State History"
  view dereferences a null segment);
- with --reference: the key sets and value types of the top level, segment, block, trace
  entry (per action where the reference has that action), frame and allocator_settings
  (recursively) equal the reference snapshot's; any drift fails;
- the peak reserved bytes per device, from device_traces (rule below), and with
  --expect-peak, that it equals the expected value (BYTES alone means device 0).

Peak reserved rule. Reserved memory is the sum of live segments: `segment_alloc` and
`segment_map` add their size, `segment_free` and `segment_unmap` subtract it. `alloc`,
`free_requested` and `free_completed` are blocks inside segments and add nothing (cuprof
writes a `segment_alloc` for each stream-ordered pool allocation that has no known pool
segment, so its pool allocations are always inside a segment too). Segments may exist
before the trace's first entry (allocated before recording started, or whose entries were
dropped at the bound), so the level is anchored at the end: reserved after the last entry
= the sum of `total_size` of the device's `segments`, and reserved before the first entry
= that sum minus the net of all entries. The peak is the highest level over the trace,
including that starting level. `cuprof memory` uses the same rule.

Prints one line starting with "check_snapshot: OK" on success; exits 1 with a message
starting with "check_snapshot: FAIL" on any failure.
"""

import argparse
import bisect
import pickle
import pickletools
import sys

# The opcodes MemoryViz.js's unpickle() implements (torch/utils/viz/MemoryViz.js).
ALLOWED_OPCODES = frozenset(
    [
        "PROTO", "FRAME", "STOP", "MARK",
        "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
        "EMPTY_LIST", "LIST", "APPEND", "APPENDS",
        "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
        "NONE", "NEWTRUE", "NEWFALSE",
        "BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT",
        "SHORT_BINUNICODE", "BINUNICODE",
        "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET",
    ]
)
# Named in the failure message when seen (all are outside ALLOWED_OPCODES anyway).
KNOWN_BAD = {
    "LONG4": "LONG4 (integers beyond 2^2039; write signed 64-bit integers)",
    "BINBYTES": "BINBYTES (bytes objects)",
    "SHORT_BINBYTES": "SHORT_BINBYTES (bytes objects)",
    "BINBYTES8": "BINBYTES8 (bytes objects, protocol 4)",
    "BINUNICODE8": "BINUNICODE8 (strings over 4 GiB)",
    "EMPTY_SET": "EMPTY_SET (sets)",
    "ADDITEMS": "ADDITEMS (sets)",
    "FROZENSET": "FROZENSET (sets)",
    "GLOBAL": "GLOBAL (class or function references)",
    "STACK_GLOBAL": "STACK_GLOBAL (class or function references)",
    "REDUCE": "REDUCE (object construction)",
    "NEWOBJ": "NEWOBJ (object construction)",
    "NEWOBJ_EX": "NEWOBJ_EX (object construction)",
    "BUILD": "BUILD (object state)",
    "BYTEARRAY8": "BYTEARRAY8 (protocol 5)",
    "NEXT_BUFFER": "NEXT_BUFFER (protocol 5)",
    "READONLY_BUFFER": "READONLY_BUFFER (protocol 5)",
}

ACTIONS = frozenset(
    [
        "alloc", "free_requested", "free_completed",
        "segment_alloc", "segment_free", "segment_map", "segment_unmap",
        "snapshot", "oom",
    ]
)
# Entries that carry no address/frames of an allocation (torch writes no frames for them).
SPECIAL_ACTIONS = frozenset(["snapshot", "oom"])
SEGMENT_PLUS = frozenset(["segment_alloc", "segment_map"])
SEGMENT_MINUS = frozenset(["segment_free", "segment_unmap"])
BLOCK_STATES = frozenset(["active_allocated", "active_pending_free", "inactive"])
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


class CheckError(Exception):
    pass


def fail(msg):
    raise CheckError(msg)


def check_opcodes(data):
    """Returns the protocol; fails on any opcode MemoryViz.js cannot read."""
    protocol = None
    first = True
    for op, arg, pos in pickletools.genops(data):
        name = op.name
        if name not in ALLOWED_OPCODES:
            what = KNOWN_BAD.get(name, name)
            fail(f"opcode {what} at byte {pos}: MemoryViz.js cannot read it")
        if name == "PROTO":
            if not first:
                fail(f"PROTO at byte {pos} is not the first opcode")
            if not 2 <= arg <= 4:
                fail(f"pickle protocol {arg}: MemoryViz.js reads protocols 2 to 4 only")
            protocol = arg
        elif first:
            fail("no PROTO opcode first: protocol 0/1 pickles are not supported")
        if name == "LONG1":
            nbytes = data[pos + 1]
            if nbytes > 8:
                fail(
                    f"LONG1 of {nbytes} bytes at byte {pos} (value {arg}): MemoryViz.js "
                    "makes it a BigInt and fails; integers must be signed 64-bit"
                )
        first = False
    return protocol


def walk(value, path, visit, seen=None):
    """Visits every value once; a container shared by several parents (a memoized frames
    list) is walked at its first path only."""
    if seen is None:
        seen = set()
    if isinstance(value, (dict, list, tuple)):
        if id(value) in seen:
            return
        seen.add(id(value))
    visit(value, path)
    if isinstance(value, dict):
        for k, v in value.items():
            walk(v, f"{path}[{k!r}]", visit, seen)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            walk(v, f"{path}[{i}]", visit, seen)


def check_values(snap):
    def visit(v, path):
        if isinstance(v, dict) and "category" in v:
            fail(f"{path} has a 'category' key: MemoryViz.js throws unless one is 'unknown'")
        if isinstance(v, int) and not isinstance(v, bool) and not I64_MIN <= v <= I64_MAX:
            fail(f"{path} = {v} is outside signed 64-bit")
        if isinstance(v, (set, frozenset, bytes, bytearray)):
            fail(f"{path} is a {type(v).__name__}")

    walk(snap, "snapshot", visit)


def need(d, key, types, where):
    if not isinstance(d, dict):
        fail(f"{where} is a {type(d).__name__}, not a dict")
    if key not in d:
        fail(f"{where} has no {key!r}")
    v = d[key]
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in _tuple(types)):
        fail(f"{where}[{key!r}] is a {type(v).__name__}")
    return v


def _tuple(t):
    return t if isinstance(t, tuple) else (t,)


def check_structure(snap):
    """The structure MemoryViz and _memory_viz.py walk."""
    checked_frames = set()

    def check_frames(frames, where):
        if id(frames) not in checked_frames:
            checked_frames.add(id(frames))
            check_frame_list(frames, where)

    if not isinstance(snap, dict):
        fail(f"top level is a {type(snap).__name__}, not a dict")
    segments = need(snap, "segments", list, "snapshot")
    traces = need(snap, "device_traces", list, "snapshot")
    need(snap, "allocator_settings", dict, "snapshot")
    for dev, trace in enumerate(traces):
        if not isinstance(trace, list):
            fail(f"device_traces[{dev}] is a {type(trace).__name__}, not a list")
    for i, seg in enumerate(segments):
        where = f"segments[{i}]"
        dev = need(seg, "device", int, where)
        if not 0 <= dev < len(traces):
            fail(f"{where} is on device {dev} but device_traces has {len(traces)} lists")
        need(seg, "address", int, where)
        total = need(seg, "total_size", int, where)
        need(seg, "stream", int, where)
        blocks = need(seg, "blocks", list, where)
        sizes = 0
        for j, b in enumerate(blocks):
            bw = f"{where}['blocks'][{j}]"
            sizes += need(b, "size", int, bw)
            state = need(b, "state", str, bw)
            if state not in BLOCK_STATES:
                fail(f"{bw} has state {state!r}")
            if "frames" in b:
                check_frames(b["frames"], bw)
        if sizes != total:
            fail(f"{where}: block sizes sum to {sizes}, total_size is {total}")
        if "frames" in seg:
            check_frames(seg["frames"], where)
    for dev, trace in enumerate(traces):
        last = None
        for i, e in enumerate(trace):
            where = f"device_traces[{dev}][{i}]"
            action = need(e, "action", str, where)
            if action not in ACTIONS:
                fail(f"{where} has unknown action {action!r}")
            need(e, "size", int, where)
            t = need(e, "time_us", int, where)
            if action != "oom":
                need(e, "addr", int, where)
            if "frames" in e:
                check_frames(e["frames"], where)
            elif action not in SPECIAL_ACTIONS:
                fail(f"{where} ({action}) has no frames")
            if last is not None and t < last:
                fail(f"{where}: time_us {t} is before the previous entry's {last}")
            last = t


def check_frame_list(frames, where):
    if not isinstance(frames, list):
        fail(f"{where}['frames'] is a {type(frames).__name__}, not a list")
    for k, f in enumerate(frames):
        fw = f"{where}['frames'][{k}]"
        need(f, "name", str, fw)
        need(f, "filename", str, fw)
        need(f, "line", int, fw)


def check_allocs_inside_segments(snap):
    """Every `alloc` lies inside a segment live at that moment (forward replay)."""
    segments = snap["segments"]
    for dev, trace in enumerate(snap["device_traces"]):
        if any(e["action"] in ("segment_map", "segment_unmap") for e in trace):
            continue  # expandable segments map pieces of one range: not replayed here
        live = {}
        allocated = set()
        last_seg_action = {}
        for e in trace:
            if e["action"] in ("segment_alloc", "segment_free"):
                last_seg_action[e["addr"]] = e["action"]
        # Segments that existed before the first entry: freed without an earlier alloc,
        # or live at the end without a segment_alloc as their address's last action.
        for e in trace:
            if e["action"] == "segment_alloc":
                allocated.add(e["addr"])
            elif e["action"] == "segment_free" and e["addr"] not in allocated:
                live.setdefault(e["addr"], e["size"])
        for seg in segments:
            if seg["device"] == dev and last_seg_action.get(seg["address"]) != "segment_alloc":
                live.setdefault(seg["address"], seg["total_size"])
        starts = sorted(live)
        for i, e in enumerate(trace):
            a = e["action"]
            if a == "segment_alloc":
                if e["addr"] not in live:
                    bisect.insort(starts, e["addr"])
                live[e["addr"]] = e["size"]
            elif a == "segment_free":
                if live.pop(e["addr"], None) is not None:
                    starts.remove(e["addr"])
            elif a == "alloc":
                k = bisect.bisect_right(starts, e["addr"]) - 1
                ok = k >= 0 and e["addr"] + e["size"] <= starts[k] + live[starts[k]]
                if not ok:
                    fail(
                        f"device_traces[{dev}][{i}]: alloc of {e['size']} at {e['addr']:#x} is "
                        "inside no live segment (MemoryViz's segment view would fail)"
                    )


def peaks(snap):
    """{device: (peak_bytes, index of the entry that reached it or None, start_bytes)}."""
    out = {}
    for dev, trace in enumerate(snap["device_traces"]):
        segs = [s for s in snap["segments"] if s["device"] == dev]
        if not trace and not segs:
            continue
        end = sum(s["total_size"] for s in segs)
        deltas = []
        for e in trace:
            a = e["action"]
            deltas.append(e["size"] if a in SEGMENT_PLUS else -e["size"] if a in SEGMENT_MINUS else 0)
        start = end - sum(deltas)
        if start < 0:
            fail(
                f"device {dev}: the trace frees {-start} bytes more than it allocates plus "
                "the live segments"
            )
        running, peak, at = start, start, None
        for i, d in enumerate(deltas):
            running += d
            if running < 0:
                fail(f"device {dev}: reserved bytes negative after entry {i}")
            if running > peak:
                peak, at = running, i
        out[dev] = (peak, at, start)
    return out


def shape(v):
    if isinstance(v, tuple):
        return "tuple(" + ",".join(shape(x) for x in v) + ")"
    return type(v).__name__


def signature(d):
    return tuple(sorted((k, shape(v)) for k, v in d.items()))


def describe_drift(where, ours, ref):
    ours, ref = dict(ours), dict(ref)
    missing = sorted(set(ref) - set(ours))
    extra = sorted(set(ours) - set(ref))
    types = sorted(f"{k}: {ours[k]} (reference {ref[k]})" for k in set(ours) & set(ref) if ours[k] != ref[k])
    parts = []
    if missing:
        parts.append(f"missing keys {missing}")
    if extra:
        parts.append(f"extra keys {extra}")
    if types:
        parts.append("types differ: " + ", ".join(types))
    return f"{where} drifts from the reference: " + "; ".join(parts)


def unique_signature(dicts, what):
    sigs = {signature(d) for d in dicts}
    if not sigs:
        return None
    if len(sigs) > 1:
        fail(f"the reference has several shapes of {what}: {sorted(sigs)}")
    return sigs.pop()


def frames_of(snap):
    """Every frame dict, each shared frames list once."""
    seen = set()

    def lists():
        for seg in snap["segments"]:
            yield seg.get("frames", [])
            for b in seg["blocks"]:
                yield b.get("frames", [])
        for trace in snap["device_traces"]:
            for e in trace:
                yield e.get("frames", [])

    for frames in lists():
        if id(frames) not in seen:
            seen.add(id(frames))
            yield from frames


def compare_dicts_deep(where, ours, ref):
    if signature(ours) != signature(ref):
        fail(describe_drift(where, signature(ours), signature(ref)))
    for k, v in ref.items():
        if isinstance(v, dict):
            compare_dicts_deep(f"{where}[{k!r}]", ours[k], v)


def compare_with_reference(snap, ref):
    """Key sets and value types at every level equal the reference's."""
    compared = []
    top = signature(ref)
    if signature(snap) != top:
        fail(describe_drift("top level", signature(snap), top))
    compared.append("top level")

    ref_segs = ref["segments"]
    seg_sig = unique_signature(ref_segs, "segments")
    if seg_sig is not None:
        for i, seg in enumerate(snap["segments"]):
            if signature(seg) != seg_sig:
                fail(describe_drift(f"segments[{i}]", signature(seg), seg_sig))
        compared.append("segment")

    block_sig = unique_signature([b for s in ref_segs for b in s["blocks"]], "blocks")
    if block_sig is not None:
        for i, seg in enumerate(snap["segments"]):
            for j, b in enumerate(seg["blocks"]):
                if signature(b) != block_sig:
                    fail(describe_drift(f"segments[{i}]['blocks'][{j}]", signature(b), block_sig))
        compared.append("block")

    ref_entries = [e for t in ref["device_traces"] for e in t]
    by_action = {}
    for e in ref_entries:
        by_action.setdefault(e["action"], []).append(e)
    action_sigs = {a: unique_signature(es, f"{a!r} trace entries") for a, es in by_action.items()}
    general = unique_signature(
        [e for e in ref_entries if e["action"] not in SPECIAL_ACTIONS], "trace entries"
    )
    for dev, trace in enumerate(snap["device_traces"]):
        for i, e in enumerate(trace):
            expect = action_sigs.get(e["action"], general)
            if expect is None:
                continue
            if signature(e) != expect:
                fail(describe_drift(f"device_traces[{dev}][{i}] ({e['action']})", signature(e), expect))
    if ref_entries:
        compared.append("trace entry")

    frame_sig = unique_signature(list(frames_of(ref)), "frames")
    if frame_sig is not None:
        for f in frames_of(snap):
            if signature(f) != frame_sig:
                fail(describe_drift(f"frame {f!r}", signature(f), frame_sig))
        compared.append("frame")

    compare_dicts_deep("allocator_settings", snap["allocator_settings"], ref["allocator_settings"])
    compared.append("allocator_settings")
    return compared


def parse_expect(s):
    dev, sep, n = s.rpartition(":")
    try:
        return (int(dev) if sep else 0), int(n)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected BYTES or DEV:BYTES, got {s!r}")


def load(path, what):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        fail(f"cannot read {what} {path}: {e}")
    try:
        return data, pickle.loads(data)
    except Exception as e:  # any unpickling error is a failure to report
        fail(f"pickle.load of {what} {path} failed: {type(e).__name__}: {e}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--reference", help="a snapshot written by torch to compare key sets and types with")
    p.add_argument(
        "--expect-peak",
        type=parse_expect,
        action="append",
        default=[],
        metavar="[DEV:]BYTES",
        help="expected peak reserved bytes (device 0 unless DEV: is given); repeatable",
    )
    args = p.parse_args(argv)
    try:
        data, snap = load(args.file, "snapshot")
        protocol = check_opcodes(data)
        check_values(snap)
        check_structure(snap)
        check_allocs_inside_segments(snap)
        compared = []
        if args.reference:
            _, ref = load(args.reference, "reference")
            check_structure(ref)
            compared = compare_with_reference(snap, ref)
        found = peaks(snap)
        for dev, expected in args.expect_peak:
            got = found.get(dev, (0, None, 0))[0]
            if got != expected:
                fail(f"device {dev}: peak reserved is {got} bytes, expected {expected}")
    except CheckError as e:
        print(f"check_snapshot: FAIL {args.file}: {e}", file=sys.stderr)
        return 1
    entries = sum(len(t) for t in snap["device_traces"])
    peak_text = ", ".join(f"device {d} peak reserved {p} bytes" for d, (p, _, _) in sorted(found.items()))
    ref_text = f", matches reference ({', '.join(compared)})" if compared else ""
    print(
        f"check_snapshot: OK {args.file}: protocol {protocol}, {len(snap['segments'])} segments, "
        f"{entries} trace entries, {len(snap['device_traces'])} device lists{ref_text}; "
        f"{peak_text or 'no device memory'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
