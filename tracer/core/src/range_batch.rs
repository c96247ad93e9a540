//! PyTorch operator ranges in batches: the names' bytes end to end and the ranges' numbers, as
//! a program thread appends them (the preload's `op_batch`), turned into [`Range`]s by the
//! writer thread. Building each range's `Name` on the writer instead of the program thread is
//! the point: an allocation made on one thread and freed on another cost the program thread
//! glibc's slow path on every operator (BENCHMARKS.md, "PyTorch operators").
//!
//! PyTorch's own allocations and frees (`[memory]`, reported to the native observer with the
//! `MEM` activity) travel in the same batches as ranges of no length, so that they stay in
//! order with the operators they happen in.

use crate::event::{Name, PyStack, Range, RangeKind};

/// Ranges per batch: one channel message per this many operators.
const MAX_RANGES: usize = 512;
/// Name bytes per batch (names with shapes run to a few hundred bytes).
const MAX_NAME_BYTES: usize = 64 << 10;
/// The most ranges one push adds (the native observer hands over at most 64 operators at once:
/// `kMaxDone` in the preload's observer.cpp): a batch not yet full takes them without growing.
const MAX_PUSHED: usize = 64;

/// One operator range; its name is a span of the batch's name bytes. Plain data (its Python
/// stack, if any, is kept apart), 56 bytes, written once on the program thread.
#[derive(Clone, Copy)]
struct OpRange {
    name: (u32, u32),
    start: u64,
    end: u64,
    pid: u32,
    tid: u32,
    id: u64,
    parent: u64,
    kind: OpKind,
}

/// What a batched range is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// An NVTX observer range: its name is the range's.
    Nvtx,
    /// The native observer's operator: its name is the observer's record
    /// ([`crate::native_record`]).
    Native,
    /// A PyTorch allocation or free the native observer was told of: its name is the raw
    /// report ([`crate::native_record::memory_args`]), its start and end the time of it.
    Memory,
}

/// Operator ranges not yet sent, in the order they ended.
#[derive(Default)]
pub struct RangeBatch {
    names: Vec<u8>,
    ranges: Vec<OpRange>,
    /// The Python stacks of the ranges that have one (`--with-stack`): (index in `ranges`,
    /// stack), in the ranges' order.
    stacks: Vec<(u32, PyStack)>,
}

/// A finished operator range as the NVTX callbacks hand it over (its name borrowed).
pub struct FinishedOp<'a> {
    pub name: &'a [u8],
    pub start: u64,
    pub end: u64,
    pub pid: u32,
    pub tid: u32,
    pub id: u64,
    pub parent: u64,
    pub stack: Option<PyStack>,
    pub kind: OpKind,
}

/// A native operator as the observer hands it over (`CuprofDone` in the preload's
/// `ops/observer.cpp`: keep the two in step): its record is the `record_len` bytes at
/// `record_at` of the records handed over with it ([`RangeBatch::push_native`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NativeOp {
    pub start: u64,
    pub end: u64,
    pub id: u64,
    pub parent: u64,
    /// The observer's handle to the operator's Python stack (0: none), shared by the operators
    /// nested in the one that took it.
    pub stack: u64,
    pub record_len: u32,
    pub record_at: u32,
    /// This operator took `stack`: the handle ends with it.
    pub owns_stack: u8,
}

impl RangeBatch {
    pub fn push(&mut self, r: FinishedOp<'_>) {
        let at = self.names.len() as u32;
        self.names.extend_from_slice(r.name);
        if let Some(stack) = r.stack {
            self.stacks.push((self.ranges.len() as u32, stack));
        }
        self.ranges.push(OpRange {
            name: (at, r.name.len() as u32),
            start: r.start,
            end: r.end,
            pid: r.pid,
            tid: r.tid,
            id: r.id,
            parent: r.parent,
            kind: r.kind,
        });
    }

    /// Appends native operators that finished on thread `tid` of process `pid`, in order,
    /// whose records lie in `records` (each [`NativeOp::record_len`] long at its
    /// [`NativeOp::record_at`]; the observer's record buffer, copied whole, in one pass);
    /// `stack` gives the Python stack of each one with a stack handle. Adds nothing, and
    /// returns false, where a record lies outside `records`.
    pub fn push_native(
        &mut self,
        records: &[u8],
        pid: u32,
        tid: u32,
        ops: &[NativeOp],
        mut stack: impl FnMut(&NativeOp) -> Option<PyStack>,
    ) -> bool {
        let inside = |op: &NativeOp| {
            (op.record_at as usize)
                .checked_add(op.record_len as usize)
                .is_some_and(|end| end <= records.len())
        };
        if !ops.iter().all(inside) {
            return false;
        }
        let RangeBatch {
            names,
            ranges,
            stacks,
        } = self;
        let base = names.len() as u32;
        names.extend_from_slice(records);
        let first = ranges.len();
        ranges.extend(ops.iter().enumerate().map(|(i, op)| {
            if op.stack != 0 {
                if let Some(s) = stack(op) {
                    stacks.push(((first + i) as u32, s));
                }
            }
            let name = (base + op.record_at, op.record_len);
            OpRange {
                name,
                start: op.start,
                end: op.end,
                pid,
                tid,
                id: op.id,
                parent: op.parent,
                kind: OpKind::Native,
            }
        }));
        true
    }

    /// Takes the batch's ranges, leaving `spare` (a drained batch, its room kept) in its place,
    /// or without one an empty batch with room for as many: a busy thread then allocates each
    /// batch once, at its size, instead of growing it by doubling from nothing (a dozen
    /// reallocations and copies per batch on the program thread).
    pub fn take(&mut self, spare: Option<RangeBatch>) -> RangeBatch {
        let room = match spare {
            Some(mut spare) => {
                spare.clear();
                spare
            }
            None => RangeBatch {
                names: Vec::with_capacity(self.names.capacity().min(2 * MAX_NAME_BYTES)),
                ranges: Vec::with_capacity(self.ranges.capacity().min(MAX_RANGES + MAX_PUSHED)),
                stacks: Vec::new(),
            },
        };
        std::mem::replace(self, room)
    }

    /// Empties the batch, keeping its room.
    pub fn clear(&mut self) {
        self.names.clear();
        self.ranges.clear();
        self.stacks.clear();
    }

    pub fn is_full(&self) -> bool {
        self.ranges.len() >= MAX_RANGES || self.names.len() >= MAX_NAME_BYTES
    }

    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The batch's ranges as the session takes them (native records made the text
    /// [`crate::torch_op::TorchOp::parse_made`] reads), leaving the batch's room for reuse
    /// (its names are kept until [`Self::clear`]).
    pub fn drain(&mut self) -> impl Iterator<Item = Range> + '_ {
        let RangeBatch {
            names,
            ranges,
            stacks,
        } = self;
        let names = &*names;
        let mut stacks = stacks.drain(..).peekable();
        ranges.drain(..).enumerate().map(move |(index, r)| {
            let stack = stacks
                .next_if(|(at, _)| *at as usize == index)
                .map(|(_, stack)| stack);
            let (at, len) = (r.name.0 as usize, r.name.1 as usize);
            let bytes = &names[at..at + len];
            // A native record that does not parse stays as it is: the session leaves it out.
            let made = match r.kind {
                OpKind::Nvtx => None,
                OpKind::Native => crate::native_record::to_text(bytes),
                OpKind::Memory => crate::native_record::memory_args(bytes),
            };
            let name = match (made, r.kind) {
                (Some(text), _) => Name::from(text.as_str()),
                // Raw bytes are no name for it: empty, which the session leaves out.
                (None, OpKind::Memory) => Name::from(""),
                (None, _) => Name::from(String::from_utf8_lossy(bytes).as_ref()),
            };
            Range {
                name,
                domain: None,
                start: r.start,
                end: r.end,
                pid: r.pid,
                tid: r.tid,
                id: r.id,
                parent: r.parent,
                payload: None,
                kind: match r.kind {
                    OpKind::Nvtx => RangeKind::PushPop,
                    OpKind::Native => RangeKind::NativeOp,
                    OpKind::Memory => RangeKind::TorchMemory,
                },
                stack,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(name: &[u8], id: u64) -> FinishedOp<'_> {
        FinishedOp {
            name,
            start: 10 * id,
            end: 10 * id + 5,
            pid: 7,
            tid: 8,
            id,
            parent: id - 1,
            stack: None,
            kind: if id == 3 {
                OpKind::Native
            } else {
                OpKind::Nvtx
            },
        }
    }

    #[test]
    fn a_batch_gives_back_its_ranges_in_order_with_their_names() {
        let mut b = RangeBatch::default();
        b.push(finished(b"aten::add, op_id = 1", 1));
        b.push(finished(b"bad \xff, op_id = 2", 2));
        let ranges: Vec<Range> = b.drain().collect();
        assert_eq!(ranges.len(), 2);
        assert_eq!(&*ranges[0].name, "aten::add, op_id = 1");
        assert_eq!(&*ranges[1].name, "bad \u{fffd}, op_id = 2");
        assert_eq!(
            (ranges[1].start, ranges[1].end, ranges[1].pid, ranges[1].tid),
            (20, 25, 7, 8)
        );
        assert_eq!((ranges[1].id, ranges[1].parent), (2, 1));
        assert_eq!(ranges[1].kind, RangeKind::PushPop);
    }

    #[test]
    fn a_native_record_keeps_its_kind() {
        let mut b = RangeBatch::default();
        let record = crate::native_record::encode::record("aten::add", -1, 0, 0, None, None);
        b.push(finished(&record, 3));
        let ranges: Vec<Range> = b.drain().collect();
        assert_eq!(ranges[0].kind, RangeKind::NativeOp);
        assert_eq!(
            &*ranges[0].name,
            "aten::add\x1f-1\x1f0\x1f0\x1f\x1f\x1f\x1f\x1f"
        );
    }

    #[test]
    fn taking_a_batch_leaves_an_empty_one_with_its_room() {
        let mut b = RangeBatch::default();
        for id in 1..=MAX_RANGES as u64 {
            b.push(finished(b"aten::add, op_id = 1", id));
        }
        let names = b.names.capacity();
        let mut taken = b.take(None);
        assert_eq!(taken.len(), MAX_RANGES);
        assert_eq!(taken.names.len(), MAX_RANGES * 20);
        assert!(b.is_empty());
        assert_eq!(b.names.len(), 0);
        assert_eq!(b.ranges.capacity(), MAX_RANGES);
        assert_eq!(b.names.capacity(), names);
        // A drained batch given as the spare takes the taken one's place, emptied, its room kept.
        assert_eq!(taken.drain().count(), MAX_RANGES);
        let spare_room = (taken.names.capacity(), taken.ranges.capacity());
        b.push(finished(b"aten::mm", 1));
        let again = b.take(Some(taken));
        assert_eq!(again.len(), 1);
        assert!(b.is_empty());
        assert_eq!(b.names.len(), 0);
        assert_eq!((b.names.capacity(), b.ranges.capacity()), spare_room);
    }

    #[test]
    fn stacks_stay_with_their_ranges() {
        let stack = |line: u32| -> PyStack {
            vec![crate::event::PyFrame {
                file: Name::from("model.py"),
                line,
                function: Name::from("forward"),
            }]
            .into()
        };
        let with_stack = |name: &'static [u8], id: u64, line: Option<u32>| FinishedOp {
            stack: line.map(stack),
            ..finished(name, id)
        };
        let mut a = RangeBatch::default();
        a.push(with_stack(b"aten::mm", 1, Some(10)));
        a.push(with_stack(b"aten::t", 2, None));
        a.push(with_stack(b"aten::add", 4, None));
        a.push(with_stack(b"aten::relu", 5, Some(12)));
        let got: Vec<(String, Option<u32>)> = a
            .drain()
            .map(|r| (r.name.to_string(), r.stack.map(|s| s[0].line)))
            .collect();
        assert_eq!(
            got,
            [
                ("aten::mm".to_string(), Some(10)),
                ("aten::t".to_string(), None),
                ("aten::add".to_string(), None),
                ("aten::relu".to_string(), Some(12))
            ]
        );
        assert!(a.stacks.is_empty());
    }

    #[test]
    fn native_operators_take_their_records_where_they_lie() {
        let mut b = RangeBatch::default();
        b.push(finished(b"aten::mm", 1));
        // The observer's buffer holds the records in the order the operators started; they
        // are handed over in the order they ended (the outer one last).
        let op = |record_at: u32, record_len: u32, id: u64, stack: u64| NativeOp {
            start: 100 * id,
            end: 100 * id + 7,
            id,
            parent: 9,
            stack,
            record_len,
            record_at,
            owns_stack: 0,
        };
        let line = |op: &NativeOp| -> Option<PyStack> {
            Some(
                vec![crate::event::PyFrame {
                    file: Name::from("model.py"),
                    line: op.stack as u32,
                    function: Name::from("forward"),
                }]
                .into(),
            )
        };
        // A record past the buffer's end: nothing is added.
        let ops = [
            op(3, 5, 2, 4),
            op(8, 2, 3, 0),
            op(0, 3, 4, 0),
            op(9, 2, 5, 0),
        ];
        assert!(!b.push_native(b"aaabbbbbcc", 7, 8, &ops, line));
        assert!(!b.push_native(b"aaabbbbbcc", 7, 8, &[op(u32::MAX, 2, 6, 0)], line));
        assert_eq!(b.len(), 1);
        assert!(b.push_native(b"aaabbbbbcc", 7, 8, &ops[..3], line));
        assert_eq!(b.len(), 4);
        let spans: Vec<(u32, u32)> = b.ranges.iter().map(|r| r.name).collect();
        assert_eq!(spans, [(0, 8), (11, 5), (16, 2), (8, 3)]);
        assert_eq!(&b.names[..], b"aten::mmaaabbbbbcc");
        let got: Vec<Range> = b.drain().collect();
        let fields = |r: &Range| (r.id, r.start, r.end, r.pid, r.tid, r.kind);
        assert_eq!(fields(&got[1]), (2, 200, 207, 7, 8, RangeKind::NativeOp));
        assert_eq!(fields(&got[3]), (4, 400, 407, 7, 8, RangeKind::NativeOp));
        let names: Vec<String> = got.iter().map(|r| r.name.to_string()).collect();
        assert_eq!(names, ["aten::mm", "bbbbb", "cc", "aaa"]);
        let lines: Vec<Option<u32>> = got
            .iter()
            .map(|r| r.stack.as_ref().map(|s| s[0].line))
            .collect();
        assert_eq!(lines, [None, Some(4), None, None]);
    }

    #[test]
    fn a_batch_is_full_at_its_range_count_or_its_name_bytes() {
        let mut b = RangeBatch::default();
        for id in 1..MAX_RANGES as u64 {
            b.push(finished(b"aten::add, op_id = 1", id));
        }
        assert!(!b.is_full());
        b.push(finished(b"aten::add, op_id = 1", 9));
        assert!(b.is_full());
        let mut b = RangeBatch::default();
        let long = vec![b'x'; MAX_NAME_BYTES];
        b.push(finished(&long, 1));
        assert!(b.is_full());
    }
}
