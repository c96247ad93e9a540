//! The lean decode ([`Detail::Lean`](super::Detail::Lean)) of an event of the common shape, by
//! one hand-written pass over its bytes instead of serde_json.
//!
//! `cuprof merge` reads every event this way, and on a trace of small events serde_json's
//! parse was 45% of its time (BENCHMARKS.md, "merge on many small events"). Most events are
//! plain: ASCII strings without escapes, numbers without exponents, each member once. This pass
//! validates and decodes exactly those. Anything else (an escape, a byte outside printable
//! ASCII, an exponent, a member the decode names twice, a value of an unusual type, the end of
//! the buffer) makes it give up, and serde_json parses the event as before: the fast path
//! never refuses an event, so every error, and every event it is unsure of, is serde_json's.
//! The differential test below checks that whatever this pass returns, serde_json's lean decode
//! returns the same.

use std::borrow::Cow;

use super::event::{Args, Event, Id, MemberSpans};
use super::scan::micros_to_ns;

/// Deepest nesting followed here (serde_json refuses beyond 128; deeper events go to it).
const MAX_DEPTH: u32 = 32;

/// The event at the start of `bytes` (at its `{`) and its length, or `None` when it is not of
/// the plain shape this pass decodes (or not complete in `bytes`): then serde_json decides.
pub(crate) fn parse_prefix(bytes: &[u8], offset: u64) -> Option<(Event<'_>, usize)> {
    let mut p = Plain { b: bytes, i: 0 };
    let f = p.event()?;
    let n = p.i;
    Some((
        Event {
            raw: &bytes[..n],
            offset,
            ph: Cow::Borrowed(text(f.ph.unwrap_or(b""))),
            cat: Cow::Borrowed(""),
            name: Cow::Borrowed(text(f.name.unwrap_or(b""))),
            pid: f.pid,
            tid: None,
            ts: f.ts,
            dur: None,
            id: f.id,
            args: Args {
                name: f.args_name.map(|n| Cow::Borrowed(text(n))),
                sort_index: f.sort_index,
                ..Args::default()
            },
            spans: Some(f.spans),
        },
        n,
    ))
}

/// What the lean decode keeps of an event.
#[derive(Default)]
struct LeanFields<'a> {
    ph: Option<&'a [u8]>,
    name: Option<&'a [u8]>,
    pid: Option<Id<'a>>,
    ts: Option<i64>,
    id: Option<Id<'a>>,
    args_name: Option<&'a [u8]>,
    sort_index: Option<i64>,
    spans: MemberSpans,
}

/// A string [`Plain::string`] returned, as `str`.
fn text(s: &[u8]) -> &str {
    // Printable ASCII, so the check cannot fail; it runs only on the few strings kept (keys
    // and skipped strings are never converted: checking them all was 9% of the pass).
    std::str::from_utf8(s).unwrap_or_default()
}

/// The event's members that serde_json's lean decode names (`LeanFields` in `event.rs`): one
/// seen twice is an error there, so here it hands the event over.
const EVENT_KEYS: [&[u8]; 9] = [
    b"ph", b"name", b"pid", b"ts", b"id", b"args", b"cat", b"tid", b"dur",
];

/// The same for the members of `args` (`LeanArgs` in `event.rs`).
const ARGS_KEYS: [&[u8]; 36] = [
    b"name",
    b"sort_index",
    b"correlation",
    b"stream",
    b"device",
    b"bytes",
    b"work",
    b"payload",
    b"External id",
    b"Input Dims",
    b"flops",
    b"Call stack",
    b"Sequence number",
    b"Fwd thread id",
    b"grid",
    b"block",
    b"registers per thread",
    b"shared memory",
    b"graph id",
    b"memory bandwidth (GB/s)",
    b"cbid",
    b"domain",
    b"Collective name",
    b"dtype",
    b"In msg nelems",
    b"Out msg nelems",
    b"Group size",
    b"Process Group Name",
    b"Seq",
    b"kernel_file",
    b"kernel_num_gb",
    b"kernel_flop",
    b"num_warps",
    b"num_stages",
    b"kernel_kwargs",
    b"figures",
];

// Each key has a bit of `object_once`'s `seen` mask.
const _: () = assert!(ARGS_KEYS.len() <= 64 && EVENT_KEYS.len() <= 64);

/// `key`'s bit among `keys` (its index), 0 for a key not among them.
#[inline]
fn key_bit(keys: &[&[u8]], key: &[u8]) -> u64 {
    keys.iter().position(|k| *k == key).map_or(0, |i| 1 << i)
}

/// A cursor over plain JSON. Each method returns `None` as soon as the text leaves the plain
/// shape, whether or not it is valid JSON.
struct Plain<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Plain<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.i += 1;
        }
    }

    /// Consumes `c` (after whitespace).
    #[inline]
    fn expect(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string of printable ASCII without escapes, at `"`: its contents.
    #[inline]
    fn string(&mut self) -> Option<&'a [u8]> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let end = start + plain_run(self.b.get(start..)?);
        if *self.b.get(end)? != b'"' {
            return None;
        }
        self.i = end + 1;
        Some(&self.b[start..end])
    }

    /// A number without exponent (`-?(0|[1-9][0-9]*)(\.[0-9]+)?`) followed by a delimiter:
    /// its text.
    #[inline]
    fn number(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        if self.peek()? == b'-' {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek()? == b'.' {
            self.i += 1;
            let at = self.i;
            self.digits();
            if self.i == at {
                return None;
            }
        }
        // A digit after a leading 0, an exponent, anything but the end of the value: not plain.
        if !matches!(
            self.peek()?,
            b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'
        ) {
            return None;
        }
        Some(&self.b[start..self.i])
    }

    #[inline]
    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    /// An integer that fits an i64 (`pid`, `id`, `sort_index`).
    #[inline]
    fn int(&mut self) -> Option<i64> {
        let (neg, digits) = match self.number()? {
            [b'-', rest @ ..] => (true, rest),
            all => (false, all),
        };
        let mut v: i64 = 0;
        for &d in digits {
            if !d.is_ascii_digit() {
                return None;
            }
            // Accumulated negative when negative, so that i64::MIN fits.
            let d = i64::from(d - b'0');
            v = v.checked_mul(10)?.checked_add(if neg { -d } else { d })?;
        }
        Some(v)
    }

    /// A `pid` or flow `id`: an integer or a string, as serde's `LenientId` has them.
    fn id(&mut self) -> Option<Id<'a>> {
        if self.peek()? == b'"' {
            return self.string().map(|s| Id::Str(Cow::Borrowed(text(s))));
        }
        self.int().map(Id::Int)
    }

    /// `true`, `false` or `null`, followed by a delimiter.
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if !self.b.get(self.i..)?.starts_with(word) {
            return None;
        }
        self.i += word.len();
        matches!(
            self.peek()?,
            b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'
        )
        .then_some(())
    }

    /// Any plain value, checked and skipped.
    fn value(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => {
                self.i += 1;
                self.members(|p, _| p.value(depth + 1))
            }
            b'[' => {
                self.i += 1;
                self.elements(b']', |p| p.value(depth + 1))
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(drop),
        }
    }

    /// The elements of an array or object whose opening bracket was consumed, through its
    /// `close`: `each` consumes one element.
    #[inline]
    fn elements(&mut self, close: u8, mut each: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.ws();
        if self.peek()? == close {
            self.i += 1;
            return Some(());
        }
        loop {
            self.ws();
            each(self)?;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                c if c == close => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// The members of an object whose `{` was consumed, through its `}`: `member` gets each
    /// key with the cursor at its value and consumes the value.
    #[inline]
    fn members(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.elements(b'}', |p| {
            let key = p.string()?;
            p.expect(b':')?;
            p.ws();
            member(p, key)
        })
    }

    /// An object (at its `{`) whose members among `keys` may each appear once (serde's
    /// derive refuses one seen twice: such an object goes to serde_json); `member` as in
    /// [`Self::members`].
    fn object_once(
        &mut self,
        keys: &[&[u8]],
        mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        if self.peek()? != b'{' {
            return None;
        }
        self.i += 1;
        let mut seen = 0u64;
        self.members(|p, key| {
            let bit = key_bit(keys, key);
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            member(p, key)
        })
    }

    fn event(&mut self) -> Option<LeanFields<'a>> {
        let mut f = LeanFields::default();
        self.object_once(&EVENT_KEYS, |p, key| {
            let start = p.i;
            match key {
                b"ph" => f.ph = Some(p.string()?),
                b"name" => f.name = Some(p.string()?),
                b"pid" => {
                    f.pid = Some(p.id()?);
                    f.spans.pid = Some(start..p.i);
                }
                b"id" => {
                    f.id = Some(p.id()?);
                    f.spans.id = Some(start..p.i);
                }
                b"ts" => {
                    f.ts = micros_to_ns(text(p.number()?));
                    f.spans.ts = Some(start..p.i);
                }
                b"args" => {
                    p.args(&mut f)?;
                    f.spans.args = Some(start..p.i);
                }
                _ => p.value(1)?,
            }
            Some(())
        })?;
        Some(f)
    }

    /// `args`: an object (serde's struct decode takes other shapes too: they go to it).
    fn args(&mut self, f: &mut LeanFields<'a>) -> Option<()> {
        self.object_once(&ARGS_KEYS, |p, key| {
            match key {
                b"name" => f.args_name = Some(p.string()?),
                b"sort_index" => f.sort_index = Some(p.int()?),
                _ => p.value(2)?,
            }
            Some(())
        })
    }
}

/// A byte that stands for itself in a JSON string: printable ASCII but `"` and `\`.
#[inline(always)]
fn plain_char(c: u8) -> bool {
    (0x20..0x7f).contains(&c) & (c != b'"') & (c != b'\\')
}

/// How many bytes at the start of `s` are [`plain_char`]s, eight at a time: strings were the
/// largest part of this pass byte by byte.
#[inline]
fn plain_run(s: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `x` below `n` (n <= 0x80). A borrow can only mark bytes
    // above a true one, so the lowest mark is exact.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH;
    let equal = |x: u64, c: u8| below(x ^ (ONES * u64::from(c)), 1);
    let mut i = 0;
    while let Some(chunk) = s.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let stop = below(x, 0x20) | (x & HIGH) | equal(x, b'"') | equal(x, b'\\') | equal(x, 0x7f);
        if stop != 0 {
            return i + (stop.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + s[i..].iter().take_while(|&&c| plain_char(c)).count()
}

/// The fast path's answer must be serde_json's lean decode's, whenever it gives one: checks
/// that it is (panicking if not) and tells whether the fast path took `bytes`. For tests, here
/// and in the reader's.
#[cfg(test)]
pub(super) fn agrees(bytes: &[u8]) -> bool {
    let Some((mut fast, n)) = parse_prefix(bytes, 7) else {
        return false;
    };
    // The spans are those the byte scanner finds (the first of each key, as each is once).
    let mut found = MemberSpans::default();
    assert!(super::scan::for_each_member(&bytes[..n], |key, value| {
        let slot = match &bytes[key] {
            b"\"pid\"" => &mut found.pid,
            b"\"ts\"" => &mut found.ts,
            b"\"id\"" => &mut found.id,
            b"\"args\"" => &mut found.args,
            _ => return std::ops::ControlFlow::Continue(()),
        };
        slot.get_or_insert(value);
        std::ops::ControlFlow::Continue(())
    }));
    assert_eq!(fast.spans.take(), Some(found));
    match Event::parse_prefix_lean(bytes, 7) {
        Ok(Some((slow, m))) => {
            assert_eq!(n, m, "length of {:?}", String::from_utf8_lossy(bytes));
            assert_eq!(fast, slow, "{:?}", String::from_utf8_lossy(bytes));
        }
        other => panic!(
            "fast path took {:?}, serde_json: {other:?}",
            String::from_utf8_lossy(bytes)
        ),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL: &str = r#"{"ph": "X", "cat": "kernel", "name": "gemm_kernel_3", "pid": 0, "tid": 7, "ts": 1000.250, "dur": 13.004, "args": {"device": 0, "stream": 7, "correlation": 12, "grid": [132, 1, 1], "block": [128, 1, 1]}}"#;

    #[test]
    fn plain_runs_eight_bytes_at_a_time() {
        let mut x: u32 = 7;
        for len in 0..40 {
            for _ in 0..200 {
                let s: Vec<u8> = (0..len)
                    .map(|_| {
                        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                        // Mostly plain, with every kind of stop byte now and then.
                        match (x >> 16) % 40 {
                            0 => b'"',
                            1 => b'\\',
                            2 => (x >> 8) as u8 % 0x20,
                            3 => 0x7f | (x >> 8) as u8,
                            _ => 0x20 + (x >> 8) as u8 % 0x5f,
                        }
                    })
                    .collect();
                let bytewise = s.iter().take_while(|&&c| plain_char(c)).count();
                assert_eq!(plain_run(&s), bytewise, "{s:?}");
            }
        }
    }

    #[test]
    fn the_common_events_take_the_fast_path() {
        let events = [
            KERNEL,
            r#"{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242, "ts": 998.000, "dur": 2.000, "args": {"cbid": 211, "correlation": 12}}"#,
            r#"{"ph": "s", "id": 12, "pid": 4242, "tid": 4242, "ts": 998.000, "cat": "ac2g", "name": "ac2g"}"#,
            r#"{"ph": "f", "id": "x12", "pid": 0, "tid": 7, "ts": 1000.250, "cat": "ac2g", "name": "ac2g", "bp": "e"}"#,
            r#"{"ph": "M", "name": "process_name", "pid": 3, "tid": 0, "args": {"name": "python3"}}"#,
            r#"{"ph": "M", "name": "process_sort_index", "pid": -3, "args": {"sort_index": -4}}"#,
            r#"{"ph":"i","s":"g","name":"x","pid":"","tid":"","ts":-0.5,"args":{"a":[[],{}],"b":{"c":null,"d":true,"e":false},"f":0.0}}"#,
            // Numbers past 64 bits are only skipped, as serde_json skips them.
            r#"{"ph": "X", "args": {"big": 123456789012345678901234567890, "neg": -98765432109876543210987.5}}"#,
            "{ }",
            "{\n\t\"ph\" :\r\"X\" }",
        ];
        for e in events {
            assert!(agrees(e.as_bytes()), "not taken: {e}");
            // What follows the event is not part of it.
            assert!(agrees(format!("{e},\n{e}").as_bytes()));
        }
    }

    #[test]
    fn unusual_events_go_to_serde_json() {
        let events = [
            r#"{"ph": "X", "name": "a\"b"}"#,
            r#"{"ph": "X", "name": "é"}"#,
            r#"{"ph": "X", "ts": 1e3}"#,
            r#"{"ph": "X", "ts": 01}"#,
            r#"{"ph": "X", "ts": 1.}"#,
            r#"{"ph": "X", "ph": "X"}"#,
            r#"{"ph": "X", "cat": 1, "cat": 2}"#,
            r#"{"ph": "X", "args": {"grid": 1, "grid": 2}}"#,
            r#"{"ph": "X", "args": []}"#,
            r#"{"ph": "X", "args": null}"#,
            r#"{"ph": "X", "pid": 1.0}"#,
            r#"{"ph": "X", "pid": 9223372036854775808}"#,
            r#"{"ph": 5}"#,
            r#"{"ph": "X", "a": tru}"#,
            r#"{"ph": "X", "a": [1,]}"#,
            r#"{"ph": "X",}"#,
            r#"{"ph": "X" "a": 1}"#,
            r#"{"ph": "X", "a": 1"#,
            "{\"ph\": \"X\", \"a\": \"\u{1}\"}",
            "{\"ph\": \"X\", \"a\": \"\x7f\"}",
        ];
        for e in events {
            assert!(parse_prefix(e.as_bytes(), 0).is_none(), "taken: {e}");
        }
        let deep = format!("{{\"a\": {}{}}}", "[".repeat(40), "]".repeat(40));
        assert!(parse_prefix(deep.as_bytes(), 0).is_none());
        // Duplicates the lean decode ignores are fine.
        assert!(agrees(
            br#"{"x": 1, "x": 2, "args": {"y": 1, "y": 2, "z": {"a": 1, "a": 1}}}"#
        ));
    }

    /// Random edits of plain events (bytes replaced, inserted, deleted, the event cut short,
    /// members repeated): whenever the fast path answers, serde_json answers the same.
    #[test]
    fn differential_against_serde_json() {
        let seeds = [
            KERNEL,
            r#"{"ph": "M", "name": "process_sort_index", "pid": 3, "args": {"sort_index": 4, "name": "p"}}"#,
            r#"{"ph": "f", "id": 77, "pid": 0, "tid": 7, "ts": 0.001, "args": {"a": [-1.5, 0, "s", true, null, {"b": []}]}}"#,
        ];
        let alphabet =
            b" \t\n{}[]:,\"\\-+.0123456789eEtrufalsn_xyzphnameidargsortdex\x01\x7f\xc3\xa9";
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let (mut taken, mut total) = (0, 0);
        for round in 0..60_000 {
            let mut e = seeds[round % seeds.len()].as_bytes().to_vec();
            for _ in 0..1 + next(3) {
                let at = next(e.len());
                match next(6) {
                    0 => e[at] = alphabet[next(alphabet.len())],
                    1 => e.insert(at, alphabet[next(alphabet.len())]),
                    2 => {
                        e.remove(at);
                    }
                    3 => e.truncate(at),
                    4 => {
                        // A member repeated: `"k": v, ` copied after the first `{`.
                        let key = [
                            &b"\"ph\": \"i\", "[..],
                            b"\"pid\": 5, ",
                            b"\"ts\": 2.5, ",
                            b"\"id\": \"q\", ",
                            b"\"cat\": 1, ",
                            b"\"x\": 1, ",
                        ][next(6)];
                        let brace = e.iter().rposition(|&c| c == b'{').unwrap_or(0);
                        let at = if e.get(brace + 1) == Some(&b'"') {
                            brace + 1
                        } else {
                            1
                        };
                        e.splice(at.min(e.len())..at.min(e.len()), key.iter().copied());
                    }
                    _ => {
                        let d = b"0123456789"[next(10)];
                        e.insert(at, d);
                    }
                }
                if e.is_empty() {
                    e.push(b'{');
                }
            }
            total += 1;
            if agrees(&e) {
                taken += 1;
            }
            // Followed by more events, as in the reader's buffer.
            e.extend_from_slice(b",\n{\"ph\": \"X\"}");
            agrees(&e);
        }
        // The edits leave many events plain: the comparison is not vacuous.
        assert!(taken > total / 10, "{taken} of {total} taken");
    }
}
