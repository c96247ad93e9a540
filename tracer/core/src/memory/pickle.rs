//! A small pickle writer restricted to the opcodes that PyTorch's MemoryViz.js unpickler
//! understands (pytorch.org/memory_viz and `python -m torch.cuda._memory_viz trace_plot`).
//!
//! What it writes, and why:
//! - `PROTO 4` header, no `FRAME` (framing is optional for readers; Python's and
//!   MemoryViz.js's unpicklers both accept unframed protocol-4 data).
//! - Integers: `BININT1` (0..=255), `BININT2` (256..=65535), `BININT` (other i32),
//!   else `LONG1` with the minimal two's-complement length, which for an `i64` is at most
//!   8 bytes. MemoryViz.js turns a 9-byte `LONG1` into a BigInt and later throws
//!   "Cannot mix BigInt and other types", so every value goes through `i64`
//!   ([`PickleWriter::uint`] clamps a `u64` to `i64::MAX`).
//! - Strings: `SHORT_BINUNICODE` / `BINUNICODE` (never `BINUNICODE8`), memoized by content
//!   (`MEMOIZE` + `BINGET`/`LONG_BINGET`), so repeated keys and values cost 2 to 5 bytes;
//!   except inside a container that is itself memoized and referenced again (a stack's
//!   frames list), whose strings are written in full ([`PickleWriter::str_raw`]).
//! - Containers: `EMPTY_DICT` / `EMPTY_LIST` filled with `MARK ... SETITEMS` / `APPENDS` in
//!   batches of at most 1000 items, like CPython's pickler: MemoryViz.js appends a batch
//!   with a JavaScript spread call, which fails on very long argument lists.
//! - `TUPLE2`, `NEWTRUE`/`NEWFALSE`, `BINFLOAT`, `STOP`.
//!
//! Never written: `BINBYTES*`, `LONG4`, `BINUNICODE8`, sets, `GLOBAL`/`STACK_GLOBAL`,
//! `REDUCE`, `NEWOBJ`, `BUILD`, protocol 5 buffers.

use std::collections::HashMap;

pub(crate) const PROTO: u8 = 0x80;
pub(crate) const STOP: u8 = b'.';
pub(crate) const MARK: u8 = b'(';
pub(crate) const EMPTY_DICT: u8 = b'}';
pub(crate) const EMPTY_LIST: u8 = b']';
pub(crate) const SETITEMS: u8 = b'u';
pub(crate) const APPENDS: u8 = b'e';
pub(crate) const TUPLE2: u8 = 0x86;
pub(crate) const NEWTRUE: u8 = 0x88;
pub(crate) const NEWFALSE: u8 = 0x89;
pub(crate) const BININT: u8 = b'J';
pub(crate) const BININT1: u8 = b'K';
pub(crate) const BININT2: u8 = b'M';
pub(crate) const LONG1: u8 = 0x8a;
pub(crate) const BINFLOAT: u8 = b'G';
pub(crate) const SHORT_BINUNICODE: u8 = 0x8c;
pub(crate) const BINUNICODE: u8 = b'X';
pub(crate) const MEMOIZE: u8 = 0x94;
pub(crate) const BINGET: u8 = b'h';
pub(crate) const LONG_BINGET: u8 = b'j';

/// Items per `APPENDS`/`SETITEMS` batch (CPython's `_BATCHSIZE`).
pub(crate) const BATCH: usize = 1000;

/// Streams pickle opcodes into a byte buffer. Callers build containers with
/// [`begin_list`](Self::begin_list)/[`end_list`](Self::end_list) and
/// [`begin_dict`](Self::begin_dict)/[`end_dict`](Self::end_dict); the writer inserts
/// the `MARK`/`APPENDS`/`SETITEMS` batching itself.
pub(crate) struct PickleWriter {
    buf: Vec<u8>,
    /// Number of `MEMOIZE`s written so far: the next memo index.
    memo_len: u32,
    strings: HashMap<String, u32>,
    /// Open containers: items written into the current batch.
    open: Vec<Open>,
}

struct Open {
    dict: bool,
    /// Values (lists) or key+value halves (dicts) pushed since the last MARK.
    pending: usize,
}

impl PickleWriter {
    #[cfg(test)]
    pub(crate) fn new() -> Self {
        Self::with_capacity(4096)
    }

    pub(crate) fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(bytes);
        buf.extend_from_slice(&[PROTO, 4]);
        PickleWriter {
            buf,
            memo_len: 0,
            strings: HashMap::new(),
            open: Vec::new(),
        }
    }

    /// Ends the pickle. Panics (a bug in the caller) if a container is still open.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        assert!(self.open.is_empty(), "pickle container left open");
        self.buf.push(STOP);
        self.buf
    }

    /// Called after every complete value pushed on the unpickler's stack: closes the
    /// current batch of the enclosing container when it is full.
    fn pushed(&mut self) {
        let Some(top) = self.open.last_mut() else {
            return;
        };
        debug_assert!(top.pending > 0, "value pushed without before_item");
        let per_batch = if top.dict { 2 * BATCH } else { BATCH };
        if top.pending == per_batch {
            let op = if top.dict { SETITEMS } else { APPENDS };
            top.pending = 0;
            self.buf.push(op);
        }
    }

    /// Called before every value: opens a batch with MARK inside an open container.
    fn before_item(&mut self) {
        if let Some(top) = self.open.last_mut() {
            if top.pending == 0 {
                self.buf.push(MARK);
            }
            top.pending += 1;
        }
    }

    pub(crate) fn int(&mut self, v: i64) {
        self.before_item();
        self.int_raw(v);
        self.pushed();
    }

    fn int_raw(&mut self, v: i64) {
        match v {
            0..=0xff => {
                self.buf.push(BININT1);
                self.buf.push(v as u8);
            }
            0x100..=0xffff => {
                self.buf.push(BININT2);
                self.buf.extend_from_slice(&(v as u16).to_le_bytes());
            }
            _ if i32::try_from(v).is_ok() => {
                self.buf.push(BININT);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes());
            }
            _ => {
                let bytes = v.to_le_bytes();
                // Minimal two's-complement length, as CPython's encode_long: drop
                // redundant sign bytes from the top.
                let mut n = 8;
                while n > 1 {
                    let top = bytes[n - 1];
                    let next_sign = bytes[n - 2] & 0x80;
                    if (top == 0 && next_sign == 0) || (top == 0xff && next_sign != 0) {
                        n -= 1;
                    } else {
                        break;
                    }
                }
                self.buf.push(LONG1);
                self.buf.push(n as u8);
                self.buf.extend_from_slice(&bytes[..n]);
            }
        }
    }

    /// A `u64` written as a signed 64-bit integer: values of 2^63 or more (which device
    /// addresses, sizes and microsecond times never reach) are clamped to `i64::MAX`
    /// rather than written as a 9-byte `LONG1`.
    pub(crate) fn uint(&mut self, v: u64) {
        self.int(clamp_u64(v));
    }

    pub(crate) fn float(&mut self, v: f64) {
        self.before_item();
        self.buf.push(BINFLOAT);
        self.buf.extend_from_slice(&v.to_be_bytes());
        self.pushed();
    }

    pub(crate) fn bool(&mut self, v: bool) {
        self.before_item();
        self.buf.push(if v { NEWTRUE } else { NEWFALSE });
        self.pushed();
    }

    /// A string, memoized by content: the second occurrence is a `BINGET`.
    pub(crate) fn str(&mut self, s: &str) {
        self.before_item();
        if let Some(&idx) = self.strings.get(s) {
            self.get(idx);
        } else {
            self.str_op(s);
            let idx = self.memoize();
            self.strings.insert(s.to_owned(), idx);
        }
        self.pushed();
    }

    /// A string written in full, not memoized: for the inside of a container that is
    /// itself memoized and referenced again. serde-pickle (which `cuprof memory` reads
    /// with) copies a shared container for each reference but counts the references of
    /// the memo entries inside it only once, and fails with "recursive structure found"
    /// when a shared container holds memo references.
    pub(crate) fn str_raw(&mut self, s: &str) {
        self.before_item();
        self.str_op(s);
        self.pushed();
    }

    fn str_op(&mut self, s: &str) {
        let bytes = s.as_bytes();
        // Longer than 4 GiB cannot occur for names; truncate defensively.
        let len = bytes.len().min(u32::MAX as usize);
        if len < 256 {
            self.buf.push(SHORT_BINUNICODE);
            self.buf.push(len as u8);
        } else {
            self.buf.push(BINUNICODE);
            self.buf.extend_from_slice(&(len as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(&bytes[..len]);
    }

    /// Pushes a memoized object again (no `before_item`/`pushed`: see [`Self::memo_ref`]).
    fn get(&mut self, idx: u32) {
        if idx < 256 {
            self.buf.push(BINGET);
            self.buf.push(idx as u8);
        } else {
            self.buf.push(LONG_BINGET);
            self.buf.extend_from_slice(&idx.to_le_bytes());
        }
    }

    /// Pushes an object memoized earlier with [`Self::begin_list_memoized`].
    pub(crate) fn memo_ref(&mut self, idx: u32) {
        self.before_item();
        self.get(idx);
        self.pushed();
    }

    fn memoize(&mut self) -> u32 {
        self.buf.push(MEMOIZE);
        let idx = self.memo_len;
        self.memo_len += 1;
        idx
    }

    pub(crate) fn begin_list(&mut self) {
        self.before_item();
        self.buf.push(EMPTY_LIST);
        self.open.push(Open {
            dict: false,
            pending: 0,
        });
    }

    /// Opens a list and memoizes it (right after `EMPTY_LIST`, as CPython does), returning
    /// its memo index for [`Self::memo_ref`].
    pub(crate) fn begin_list_memoized(&mut self) -> u32 {
        self.begin_list();
        self.memoize()
    }

    pub(crate) fn end_list(&mut self) {
        let open = self.open.pop().expect("end_list without begin_list");
        debug_assert!(!open.dict);
        if open.pending > 0 {
            self.buf.push(APPENDS);
        }
        self.pushed();
    }

    pub(crate) fn begin_dict(&mut self) {
        self.before_item();
        self.buf.push(EMPTY_DICT);
        self.open.push(Open {
            dict: true,
            pending: 0,
        });
    }

    pub(crate) fn end_dict(&mut self) {
        let open = self.open.pop().expect("end_dict without begin_dict");
        debug_assert!(open.dict);
        debug_assert!(
            open.pending.is_multiple_of(2),
            "dict with a key but no value"
        );
        if open.pending > 0 {
            self.buf.push(SETITEMS);
        }
        self.pushed();
    }

    /// `(a, b)` of two integers (`segment_pool_id`).
    pub(crate) fn tuple2_int(&mut self, a: i64, b: i64) {
        self.before_item();
        self.int_raw(a);
        self.int_raw(b);
        self.buf.push(TUPLE2);
        self.pushed();
    }

    /// A dict key (a memoized string).
    pub(crate) fn key(&mut self, k: &str) {
        self.str(k);
    }
}

/// `u64` to `i64`, clamping at `i64::MAX` (see [`PickleWriter::uint`]).
pub(crate) fn clamp_u64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(v: i64) -> Vec<u8> {
        let mut w = PickleWriter::new();
        w.int(v);
        let b = w.finish();
        b[2..b.len() - 1].to_vec()
    }

    #[test]
    fn integer_encodings() {
        assert_eq!(ints(0), vec![BININT1, 0]);
        assert_eq!(ints(255), vec![BININT1, 255]);
        assert_eq!(ints(256), vec![BININT2, 0, 1]);
        assert_eq!(ints(65535), vec![BININT2, 0xff, 0xff]);
        assert_eq!(ints(65536), vec![BININT, 0, 0, 1, 0]);
        assert_eq!(ints(-1), vec![BININT, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(ints(i32::MAX as i64), vec![BININT, 0xff, 0xff, 0xff, 0x7f]);
        // 2^31: the value serde-pickle would write as a 9-byte LONG1 if it came as a u64.
        assert_eq!(ints(1 << 31), vec![LONG1, 5, 0, 0, 0, 0x80, 0]);
        assert_eq!(
            ints(-(1 << 31) - 1),
            vec![LONG1, 5, 0xff, 0xff, 0xff, 0x7f, 0xff]
        );
        // A device address as in the reference snapshot: 6 bytes.
        assert_eq!(ints(139833808781312), {
            let mut v = vec![LONG1, 6];
            v.extend_from_slice(&139833808781312i64.to_le_bytes()[..6]);
            v
        });
        let mut max = vec![LONG1, 8];
        max.extend_from_slice(&i64::MAX.to_le_bytes());
        assert_eq!(ints(i64::MAX), max);
        let mut min = vec![LONG1, 8];
        min.extend_from_slice(&i64::MIN.to_le_bytes());
        assert_eq!(ints(i64::MIN), min);
    }

    #[test]
    fn u64_is_clamped_never_nine_bytes() {
        let mut w = PickleWriter::new();
        w.uint(u64::MAX);
        w.uint(1 << 63);
        let b = w.finish();
        let mut one = vec![LONG1, 8];
        one.extend_from_slice(&i64::MAX.to_le_bytes());
        assert_eq!(&b[2..12], &one[..]);
        assert_eq!(&b[12..22], &one[..]);
    }

    #[test]
    fn strings_are_memoized() {
        let mut w = PickleWriter::new();
        w.begin_list();
        w.str("ab");
        w.str("ab");
        w.end_list();
        let b = w.finish();
        assert_eq!(
            b,
            vec![
                PROTO,
                4,
                EMPTY_LIST,
                MARK,
                SHORT_BINUNICODE,
                2,
                b'a',
                b'b',
                MEMOIZE,
                BINGET,
                0,
                APPENDS,
                STOP
            ]
        );
    }

    #[test]
    fn long_string_and_long_binget() {
        let mut w = PickleWriter::new();
        w.begin_list();
        for i in 0..300 {
            w.str(&format!("s{i}"));
        }
        w.str("s299");
        w.str(&"x".repeat(300));
        w.end_list();
        let b = w.finish();
        // s299 is memo 299: LONG_BINGET 299.
        let needle = [LONG_BINGET, 43, 1, 0, 0];
        assert!(b.windows(5).any(|x| x == needle));
        let mut long = vec![BINUNICODE];
        long.extend_from_slice(&300u32.to_le_bytes());
        assert!(b.windows(5).any(|x| x == &long[..]));
    }

    #[test]
    fn lists_are_batched_by_1000() {
        let mut w = PickleWriter::new();
        w.begin_list();
        for _ in 0..2001 {
            w.int(1);
        }
        w.end_list();
        let b = w.finish();
        assert_eq!(b.iter().filter(|&&x| x == MARK).count(), 3);
        assert_eq!(b.iter().filter(|&&x| x == APPENDS).count(), 3);
    }

    #[test]
    fn dict_tuple_float_bool() {
        let mut w = PickleWriter::new();
        w.begin_dict();
        w.key("t");
        w.tuple2_int(0, 0);
        w.key("f");
        w.float(0.0);
        w.key("b");
        w.bool(false);
        w.key("e");
        w.begin_list();
        w.end_list();
        w.key("d");
        w.begin_dict();
        w.end_dict();
        w.end_dict();
        let b = w.finish();
        let mut expect = vec![PROTO, 4, EMPTY_DICT, MARK];
        expect.extend_from_slice(&[
            SHORT_BINUNICODE,
            1,
            b't',
            MEMOIZE,
            BININT1,
            0,
            BININT1,
            0,
            TUPLE2,
        ]);
        expect.extend_from_slice(&[
            SHORT_BINUNICODE,
            1,
            b'f',
            MEMOIZE,
            BINFLOAT,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ]);
        expect.extend_from_slice(&[SHORT_BINUNICODE, 1, b'b', MEMOIZE, NEWFALSE]);
        expect.extend_from_slice(&[SHORT_BINUNICODE, 1, b'e', MEMOIZE, EMPTY_LIST]);
        expect.extend_from_slice(&[SHORT_BINUNICODE, 1, b'd', MEMOIZE, EMPTY_DICT]);
        expect.extend_from_slice(&[SETITEMS, STOP]);
        assert_eq!(b, expect);
    }
}
