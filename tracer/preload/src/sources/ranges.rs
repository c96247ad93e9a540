//! The ranges NVTX and the native observer open, on a per-thread range stack: their ids (taken
//! in blocks), parents, names and labels, their CUPTI correlation, and where each one goes once
//! closed (the window, or the thread's operator batch). NVTX's callbacks ([`super::nvtx`]) and the
//! native observer's hooks ([`super::ops`]) drive it.
//!
//! PyTorch's NVTX observer (turned on by `host/python.rs`) makes every operator an NVTX range too:
//! those are recognised by name (`cuprof_core::torch_op`), correlated on a stack of their own
//! (so runtime calls carry the innermost operator's `External id` and NVTX ranges keep their
//! projection), and, with `--with-stack`, the outermost one reads the Python stack that the
//! operators nested in it share. An operator's name is never copied into an allocation of its
//! own on the program thread: it waits on a per-thread byte stack while the operator is open,
//! then goes into the thread's batch (`op_batch`).

use crate::cupti::libcupti::Correlated;
use crate::host::process::{guard, now_ns, pid, tid};
use crate::pipe::op_batch;
use crate::pipe::tracer::{running, Tracer};
use crate::window::boundaries as window;
use cuprof_core::event::{Name, PyStack, Range, RangeKind};
use cuprof_core::native_record;
use cuprof_core::range_batch::{FinishedOp, OpKind};
use cuprof_core::torch_op;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// A range's name as NVTX hands it over: borrowed for the call, or already made.
pub(super) enum Message<'a> {
    Bytes(&'a [u8]),
    Made(Name),
}

impl Message<'_> {
    fn is_op(&self) -> bool {
        match self {
            Message::Bytes(b) => torch_op::is_op_name(b),
            Message::Made(n) => torch_op::is_op_range(n),
        }
    }

    pub(super) fn into_name(self) -> Name {
        match self {
            Message::Bytes(b) => Name::from(String::from_utf8_lossy(b).as_ref()),
            Message::Made(n) => n,
        }
    }
}

/// An open range's name.
enum OpenName {
    /// A PyTorch operator's (the NVTX observer's): its bytes are in this thread's `op_names`,
    /// from `at`.
    Op { at: u32, len: u32 },
    /// Any other range's, with its domain and payload: boxed, so that an operator's `Open`,
    /// which the program thread moves at every operator's start and end, stays small.
    Other(Box<OtherName>),
}

struct OtherName {
    name: Name,
    domain: Option<Name>,
    payload: Option<f64>,
    /// A `record_function` label from the native observer, recorded: `name` is then its text
    /// record (an operator's fields, which Kineto writes for labels too).
    native_label: bool,
}

struct Open {
    id: u64,
    parent: u64,
    name: OpenName,
    start: u64,
    is_step: bool,
    /// A PyTorch operator (the NVTX observer's range), correlated on its own stack.
    correlated: Correlated,
    pushed_correlation: bool,
    stack: Option<PyStack>,
}

/// A thread's open ranges, in one thread-local: the library is a shared object, so each
/// thread-local it reaches costs a `__tls_get_addr` call, and an operator's start and end
/// should pay one each.
struct ThreadRanges {
    /// Push/pop ranges open on this thread, innermost last.
    open: Vec<Open>,
    /// The names of the operators open on this thread, end to end (push/pop ranges nest, so
    /// closing one truncates this to where its name begins).
    op_names: Vec<u8>,
    /// Range ids this thread may give out: `next_id..id_end`, taken from [`NEXT_ID`] a block
    /// at a time (an atomic add per operator is a locked instruction, which waits for every
    /// store before it).
    next_id: u64,
    id_end: u64,
    /// This thread's OS id once read (0 before): `process::tid` is a thread-local of its own.
    tid: u32,
    /// The id of the innermost range in `open` (0: none), which the native observer reads
    /// for its operators' parents (`ops::native`), without a call.
    innermost: u64,
}

impl ThreadRanges {
    fn tid(&mut self) -> u32 {
        if self.tid == 0 {
            self.tid = tid();
        }
        self.tid
    }

    fn next_id(&mut self) -> u64 {
        if self.next_id == self.id_end {
            (self.next_id, self.id_end) = take_id_block();
        }
        self.next_id += 1;
        self.next_id - 1
    }

    /// The innermost PyTorch operator open on this thread.
    fn innermost_op(&self) -> Option<&Open> {
        self.open
            .iter()
            .rev()
            .find(|o| o.correlated == Correlated::TorchOp)
    }

    fn push_open(&mut self, o: Open) {
        self.innermost = o.id;
        self.open.push(o);
    }

    fn pop_open(&mut self) -> Option<Open> {
        let o = self.open.pop();
        self.innermost = self.open.last().map_or(0, |o| o.id);
        o
    }

    fn remove_open(&mut self, at: usize) -> Open {
        let o = self.open.remove(at);
        self.innermost = self.open.last().map_or(0, |o| o.id);
        o
    }
}

/// An operator as it ends: what [`record_op`] needs of its [`Open`].
struct ClosedOp {
    id: u64,
    parent: u64,
    start: u64,
    /// Its name's bytes in the thread's `op_names`.
    at: u32,
    len: u32,
    stack: Option<PyStack>,
}

/// Whether a name's length fits an [`OpenName::Op`]'s (4 GiB: no NVTX message or operator
/// record comes near it).
fn fits_u32(bytes: &[u8]) -> bool {
    u32::try_from(bytes.len()).is_ok()
}

impl Open {
    /// What recording this range as an operator needs (its stack taken), if it is an operator
    /// whose name waits on `op_names`.
    fn take_closed_op(&mut self) -> Option<ClosedOp> {
        let OpenName::Op { at, len } = self.name else {
            return None;
        };
        Some(ClosedOp {
            id: self.id,
            parent: self.parent,
            start: self.start,
            at,
            len,
            stack: self.stack.take(),
        })
    }

    /// Pops the external correlation id this range pushed, if it pushed one.
    fn pop_correlation(&self, t: Option<&Tracer>) {
        if let Some(t) = t.filter(|_| self.pushed_correlation) {
            window::pop_correlation(t, self.correlated);
        }
    }
}

thread_local! {
    static THREAD: RefCell<ThreadRanges> = const {
        RefCell::new(ThreadRanges {
            open: Vec::new(),
            op_names: Vec::new(),
            next_id: 0,
            id_end: 0,
            tid: 0,
            innermost: 0,
        })
    };
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Ids a thread takes from [`NEXT_ID`] at a time.
const ID_BLOCK: u64 = 1024;

/// A block of range ids, for a thread's ranges and for the native observer, which gives its
/// operators ids of its own: the first, and one past the last.
pub fn take_id_block() -> (u64, u64) {
    let first = NEXT_ID.fetch_add(ID_BLOCK, Relaxed);
    (first, first + ID_BLOCK)
}

/// Where this thread's innermost range id is kept ([`ThreadRanges::innermost`]), for the
/// native observer to read. It lives as long as the thread: the thread-local's storage does.
pub fn innermost_range_cell() -> *const u64 {
    // SAFETY: a field's address, taken without a borrow; the observer only reads it, on this
    // thread, outside libcuprof.so's own calls.
    THREAD.with(|th| unsafe { std::ptr::addr_of!((*th.as_ptr()).innermost) })
}
/// Start/end ranges may end on another thread.
static STARTED: Mutex<Option<HashMap<u64, Open>>> = Mutex::new(None);

/// Opens a range. `enclosing_op_stack` is the Python stack of the innermost PyTorch operator
/// open on this thread, which a nested operator shares (`None` when no operator is open).
/// `batched`: the range nests (push/pop), so an operator's name can wait on this thread's
/// byte stack and the range go into the thread's batch.
fn open(
    message: Message<'_>,
    domain: Option<Name>,
    payload: Option<f64>,
    parent: u64,
    enclosing_op_stack: Option<Option<PyStack>>,
    batched: bool,
) -> Open {
    let start = now_ns();
    let id = THREAD.with(|th| th.borrow_mut().next_id());
    let t = running();
    let is_op = message.is_op();
    let name = match message {
        Message::Bytes(b)
            if is_op && batched && domain.is_none() && payload.is_none() && fits_u32(b) =>
        {
            THREAD.with(|th| {
                let names = &mut th.borrow_mut().op_names;
                let at = names.len() as u32;
                names.extend_from_slice(b);
                OpenName::Op {
                    at,
                    len: b.len() as u32,
                }
            })
        }
        m => OpenName::Other(Box::new(OtherName {
            name: m.into_name(),
            domain,
            payload,
            native_label: false,
        })),
    };
    let is_step = match &name {
        OpenName::Other(o) if !is_op => window::is_step_range(&o.name),
        _ => false,
    };
    if let Some(t) = t.filter(|_| is_step) {
        window::step_begin(t, start);
    }
    let correlated = if is_op {
        Correlated::TorchOp
    } else {
        Correlated::Range
    };
    let stack = match enclosing_op_stack {
        Some(stack) => stack,
        None if is_op && t.is_some() && window::wants_stacks() => crate::host::python::stack(),
        None => None,
    };
    let pushed_correlation = t.is_some_and(|t| window::push_correlation(t, correlated, id));
    Open {
        id,
        parent,
        name,
        start,
        is_step,
        correlated,
        pushed_correlation,
        stack,
    }
}

fn close(mut o: Open, kind: RangeKind) {
    let end = now_ns();
    let t = running();
    o.pop_correlation(t);
    if let Some(op) = o.take_closed_op() {
        THREAD.with(|th| record_op(t, &mut th.borrow_mut(), op, end));
        return;
    }
    let OpenName::Other(other) = o.name else {
        return;
    };
    let Some(t) = t else { return };
    let OtherName {
        name,
        domain,
        payload,
        native_label,
    } = *other;
    let kind = if native_label {
        RangeKind::NativeLabel
    } else {
        kind
    };
    window::send_range(
        t,
        Range {
            name,
            domain,
            start: o.start,
            end,
            pid: pid(),
            tid: tid(),
            id: o.id,
            parent: o.parent,
            payload,
            kind,
            stack: o.stack,
        },
    );
    if o.is_step {
        window::step_end(t, end);
    }
}

/// Hands a finished operator `o` (its name in the thread's `op_names`) to this thread's batch
/// while the window records operators, and takes its name off `op_names` either way (the
/// tracer may have stopped while the operator ran).
fn record_op(t: Option<&Tracer>, th: &mut ThreadRanges, o: ClosedOp, end: u64) {
    let (at, len) = (o.at as usize, o.len as usize);
    if let Some(t) = t.filter(|_| window::records_ranges()) {
        let tid = th.tid();
        op_batch::record(
            t,
            FinishedOp {
                name: &th.op_names[at..at + len],
                start: o.start,
                end,
                pid: pid(),
                tid,
                id: o.id,
                parent: o.parent,
                stack: o.stack,
                kind: OpKind::Nvtx,
            },
            // No operator encloses this one on this thread.
            at == 0,
        );
    } else {
        op_batch::not_recorded(t, at == 0);
    }
    th.op_names.truncate(at);
}

/// The NVTX observer's PyTorch operators open on this thread (their range names, innermost
/// first) and the Python stack of the outermost one, for an allocation made inside them
/// (`ops::open_operators` asks the native observer first).
pub fn open_operators() -> (Vec<Name>, Option<PyStack>) {
    THREAD.with(|th| {
        let Ok(th) = th.try_borrow() else {
            return (Vec::new(), None);
        };
        let ops: Vec<&Open> = th
            .open
            .iter()
            .rev()
            .filter(|o| o.correlated == Correlated::TorchOp)
            .collect();
        let stack = ops.first().and_then(|o| o.stack.clone());
        let names = ops.iter().map(|o| match &o.name {
            OpenName::Other(o) => o.name.clone(),
            OpenName::Op { at, len } => {
                let (at, len) = (*at as usize, *len as usize);
                Name::from(String::from_utf8_lossy(&th.op_names[at..at + len]).as_ref())
            }
        });
        (names.collect(), stack)
    })
}

pub(super) fn push(name: Message<'_>, domain: Option<Name>, payload: Option<f64>) -> c_int {
    guard(-1, || push_range(name, domain, payload, None).0)
}

/// Opens a push/pop range on this thread: its depth and its id. `under`: its parent and the
/// Python stack it shares, where the caller knows them (the native observer's labels, which
/// may open inside the observer's own operators); else the innermost range open here.
fn push_range(
    name: Message<'_>,
    domain: Option<Name>,
    payload: Option<f64>,
    under: Option<(u64, Option<PyStack>)>,
) -> (c_int, u64) {
    let (parent, enclosing_op_stack) = match under {
        Some((parent, stack)) => (parent, Some(stack)),
        None => THREAD.with(|th| {
            let th = th.borrow();
            (
                th.open.last().map(|o| o.id).unwrap_or(0),
                th.innermost_op().map(|o| o.stack.clone()),
            )
        }),
    };
    // Not under the stack's borrow: a step range may run the window, and through it Python.
    let o = open(name, domain, payload, parent, enclosing_op_stack, true);
    let id = o.id;
    THREAD.with(|th| {
        let mut th = th.borrow_mut();
        th.push_open(o);
        ((th.open.len() - 1) as c_int, id)
    })
}

/// Closes the innermost range open on this thread that `which` picks, wherever it is on the
/// stack (the native observer's labels and operators do not nest with each other).
fn close_innermost(which: impl Fn(&Open) -> bool) {
    let open = THREAD.with(|th| {
        let mut th = th.borrow_mut();
        let at = th.open.iter().rposition(&which)?;
        Some(th.remove_open(at))
    });
    if let Some(o) = open {
        close(o, RangeKind::PushPop);
    }
}

/// A `record_function` label's start, from the native observer (`record`: its fields, as an
/// operator's; `parent` and `stack`: the range it opens in and the Python stack of the
/// observer's operator it opens in): an NVTX-like range on this thread (a `user_annotation`
/// with the fields Kineto writes for it, projected onto the GPU), closed by its id.
pub fn native_label_begin(record: &[u8], parent: u64, stack: Option<PyStack>) -> u64 {
    let name = torch_op::native_record_name(record);
    let name = Message::Made(Name::from(String::from_utf8_lossy(name).as_ref()));
    let id = push_range(name, None, None, Some((parent, stack))).1;
    // The record becomes its text on this thread, while the window records: labels are few
    // (record_function blocks, compiled regions), operators many (theirs is made on the writer
    // thread).
    let Some(text) = running()
        .is_some()
        .then(|| native_record::to_text(record))
        .flatten()
    else {
        return id;
    };
    THREAD.with(|th| {
        let mut th = th.borrow_mut();
        if let Some(Open {
            name: OpenName::Other(other),
            ..
        }) = th.open.iter_mut().rev().find(|o| o.id == id)
        {
            other.name = Name::from(text);
            other.native_label = true;
        }
    });
    id
}

/// A label's end: it may end inside another operator than the one it began in
/// (`_record_function_exit`), so it is found by id.
pub fn native_label_end(id: u64) {
    close_innermost(|o| o.id == id);
}

pub(super) fn pop() -> c_int {
    guard(-1, || {
        let (top, depth) = THREAD.with(|th| {
            let mut th = th.borrow_mut();
            (th.pop_open(), th.open.len() as c_int)
        });
        match top {
            Some(o) => {
                close(o, RangeKind::PushPop);
                depth
            }
            None => -1,
        }
    })
}

pub(super) fn start(name: Message<'_>, domain: Option<Name>, payload: Option<f64>) -> u64 {
    guard(0, || {
        let o = open(name, domain, payload, 0, None, false);
        let id = o.id;
        // Start/end ranges are not nested on a thread; their correlation push would leak onto
        // the thread's stack, so undo it now.
        o.pop_correlation(running());
        let o = Open {
            pushed_correlation: false,
            ..o
        };
        if let Ok(mut m) = STARTED.lock() {
            m.get_or_insert_with(HashMap::new).insert(id, o);
        }
        id
    })
}

pub(super) fn end(id: u64) {
    guard((), || {
        let o = STARTED
            .lock()
            .ok()
            .and_then(|mut m| m.as_mut()?.remove(&id));
        if let Some(o) = o {
            close(o, RangeKind::StartEnd);
        }
    })
}

pub(super) fn mark(name: Name, domain: Option<Name>, payload: Option<f64>) {
    guard((), || {
        let Some(t) = running() else { return };
        let ts = now_ns();
        window::send_range(
            t,
            Range {
                name,
                domain,
                start: ts,
                end: ts,
                pid: pid(),
                tid: tid(),
                id: 0,
                parent: 0,
                payload,
                kind: RangeKind::Mark,
                stack: None,
            },
        );
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn range_ids_are_unique_across_threads_and_id_blocks() {
        let per_thread = 3 * ID_BLOCK as usize + 5;
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    (0..per_thread)
                        .map(|_| THREAD.with(|th| th.borrow_mut().next_id()))
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut seen = HashSet::new();
        for t in threads {
            let ids = t.join().unwrap();
            // A thread's own ids increase.
            assert!(ids.windows(2).all(|w| w[0] < w[1]));
            seen.extend(ids);
        }
        assert_eq!(seen.len(), 4 * per_thread);
        // 0 means "no parent".
        assert!(!seen.contains(&0));
    }
}
