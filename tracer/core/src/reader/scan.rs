//! Byte scanners that find where one JSON value ends without parsing it.
//!
//! They never validate: serde_json does that when the slice they delimit is parsed. They only
//! need to be right about strings (a brace inside a string does not count) and escapes.

use std::ops::{ControlFlow, Range};

use memchr::{memchr2, memchr3};

/// Outcome of looking for the end of a value in the bytes buffered so far.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// The value is the first `n` bytes.
    Complete(usize),
    /// The buffer ends before the value does: read more and scan again.
    NeedMore,
}

/// The length of the JSON string starting at `s[0] == b'"'`, quotes included.
pub(crate) fn string_end(s: &[u8]) -> Scan {
    debug_assert_eq!(s.first(), Some(&b'"'));
    let mut i = 1;
    loop {
        match memchr2(b'"', b'\\', &s[i..]) {
            None => return Scan::NeedMore,
            Some(k) => {
                let at = i + k;
                if s[at] == b'"' {
                    return Scan::Complete(at + 1);
                }
                // A backslash escapes the next byte (`\"`, `\\`, `\u....` all start that way).
                i = at + 2;
                if i > s.len() {
                    return Scan::NeedMore;
                }
            }
        }
    }
}

/// The length of the object or array starting at `s[0]` (`{` or `[`), brackets included.
///
/// Only the bracket kind that opened it is counted: inside well-formed JSON the other kind is
/// balanced within it, and malformed JSON is reported when serde_json parses the slice.
pub(crate) fn container_end(s: &[u8]) -> Scan {
    let (open, close) = match s.first() {
        Some(b'{') => (b'{', b'}'),
        Some(b'[') => (b'[', b']'),
        _ => return Scan::Complete(0),
    };
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(k) = memchr3(b'"', open, close, &s[i..]) {
        let at = i + k;
        match s[at] {
            b'"' => match string_end(&s[at..]) {
                Scan::Complete(n) => i = at + n,
                Scan::NeedMore => return Scan::NeedMore,
            },
            c if c == open => {
                depth += 1;
                i = at + 1;
            }
            _ => {
                depth -= 1;
                i = at + 1;
                if depth == 0 {
                    return Scan::Complete(i);
                }
            }
        }
    }
    Scan::NeedMore
}

/// A copy of the JSON text `s` with each control character (below U+0020) that stands raw
/// inside a string written as its `\u00XX` escape, as JSON requires; `None` when there is
/// none. torch.profiler writes some strings without escaping them (a Triton launch's keyword
/// input holding a tab), and what it meant is unambiguous.
pub(crate) fn escape_raw_controls(s: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    let (mut in_string, mut escaped) = (false, false);
    for (at, &c) in s.iter().enumerate() {
        if in_string && !escaped && c < 0x20 {
            let out = out.get_or_insert_with(|| {
                let mut v = Vec::with_capacity(s.len() + 16);
                v.extend_from_slice(&s[..at]);
                v
            });
            crate::json::push_control_escape(out, c);
            continue;
        }
        if let Some(out) = out.as_mut() {
            out.push(c);
        }
        if escaped {
            escaped = false;
        } else if in_string && c == b'\\' {
            escaped = true;
        } else if c == b'"' {
            in_string = !in_string;
        }
    }
    out
}

/// The length of any JSON value starting at `s[0]` (not whitespace). A number or literal at
/// the very end of the buffer may continue in the next read, so it needs `at_eof` to be final.
pub(crate) fn value_end(s: &[u8], at_eof: bool) -> Scan {
    match s.first() {
        None => Scan::NeedMore,
        Some(b'"') => string_end(s),
        Some(b'{') | Some(b'[') => container_end(s),
        Some(_) => match s
            .iter()
            .position(|&c| matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
        {
            Some(n) => Scan::Complete(n),
            None if at_eof => Scan::Complete(s.len()),
            None => Scan::NeedMore,
        },
    }
}

/// The top-level members of the JSON object `raw`, in order: `f` gets the byte ranges of each
/// key (quotes included) and of its value, until it breaks (the rest is not scanned). False
/// when `raw` is not an object of that shape (`f` may have seen its first members). It only
/// delimits (the reader has parsed the event already): a tool that rewrites a few members
/// (`cuprof merge`) copies the others byte for byte without parsing them again. A callback
/// rather than a vector: merge calls it once per event, where an allocation each time, and
/// scanning the `args` it does not change, were measurable.
pub fn for_each_member(
    raw: &[u8],
    mut f: impl FnMut(Range<usize>, Range<usize>) -> ControlFlow<()>,
) -> bool {
    let ws = |i: usize| skip_ws(&raw[i..]).map(|k| i + k);
    let Some(mut i) = ws(0) else { return false };
    if raw[i] != b'{' {
        return false;
    }
    let Some(first) = ws(i + 1) else { return false };
    i = first;
    if raw[i] == b'}' {
        return true;
    }
    loop {
        if raw[i] != b'"' {
            return false;
        }
        let Scan::Complete(kn) = string_end(&raw[i..]) else {
            return false;
        };
        let key = i..i + kn;
        let Some(colon) = ws(i + kn) else {
            return false;
        };
        if raw[colon] != b':' {
            return false;
        }
        let Some(v) = ws(colon + 1) else { return false };
        let vn = match value_end(&raw[v..], true) {
            Scan::Complete(n) if n > 0 => n,
            _ => return false,
        };
        if f(key, v..v + vn).is_break() {
            return true;
        }
        let Some(after) = ws(v + vn) else {
            return false;
        };
        match raw[after] {
            b',' => match ws(after + 1) {
                Some(next) => i = next,
                None => return false,
            },
            b'}' => return true,
            _ => return false,
        }
    }
}

/// Index of the first byte of `s` that is not JSON whitespace.
pub(crate) fn skip_ws(s: &[u8]) -> Option<usize> {
    s.iter()
        .position(|&c| !matches!(c, b' ' | b'\n' | b'\r' | b'\t'))
}

/// Exact conversion of a JSON number of microseconds (`"125.500"`) to integer nanoseconds.
///
/// Plain decimals are converted digit by digit (an f64 would be off by a nanosecond past about
/// 2^43 µs); digits beyond the third decimal are rounded half away from zero; exponents fall
/// back to f64. `None` for anything that is not a number or does not fit.
pub fn micros_to_ns(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        _ => (false, b),
    };
    let mut int: i64 = 0;
    let mut i = 0;
    while i < digits.len() && digits[i].is_ascii_digit() {
        int = int
            .checked_mul(10)?
            .checked_add((digits[i] - b'0') as i64)?;
        i += 1;
    }
    if i == 0 {
        return None;
    }
    let mut frac: i64 = 0;
    let mut round_up = false;
    if i < digits.len() && digits[i] == b'.' {
        i += 1;
        let mut n = 0;
        while i < digits.len() && digits[i].is_ascii_digit() {
            if n < 3 {
                frac = frac * 10 + (digits[i] - b'0') as i64;
            } else if n == 3 {
                round_up = digits[i] >= b'5';
            }
            n += 1;
            i += 1;
        }
        for _ in n..3 {
            frac *= 10;
        }
    }
    if i != digits.len() {
        // Exponent form: rare in traces; f64 is as good as the writer was.
        let v: f64 = text.parse().ok()?;
        let ns = (v * 1000.0).round();
        return (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64);
    }
    let ns = int
        .checked_mul(1000)?
        .checked_add(frac)?
        .checked_add(round_up as i64)?;
    Some(if neg { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every member's ranges, as a vector.
    fn member_spans(raw: &[u8]) -> Option<Vec<(Range<usize>, Range<usize>)>> {
        let mut out = Vec::new();
        for_each_member(raw, |key, value| {
            out.push((key, value));
            ControlFlow::Continue(())
        })
        .then_some(out)
    }

    #[test]
    fn strings_with_escapes() {
        assert_eq!(string_end(br#""abc" x"#), Scan::Complete(5));
        assert_eq!(string_end(br#""a\"b" x"#), Scan::Complete(6));
        assert_eq!(string_end(br#""a\\" x"#), Scan::Complete(5));
        assert_eq!(string_end(br#""a\"#), Scan::NeedMore);
        assert_eq!(string_end(br#""a\\"#), Scan::NeedMore);
        assert_eq!(string_end(br#""abc"#), Scan::NeedMore);
    }

    #[test]
    fn containers_ignore_brackets_in_strings() {
        let s = br#"{"a": "}{", "b": {"c": [1, 2]}, "d": "\"}"} tail"#;
        assert_eq!(container_end(s), Scan::Complete(s.len() - 5));
        assert_eq!(container_end(br#"{"a": {"b": 1}"#), Scan::NeedMore);
        assert_eq!(container_end(br#"[1, [2, 3], "]"] ,"#), Scan::Complete(16));
    }

    #[test]
    fn scalars_need_a_delimiter_or_eof() {
        assert_eq!(value_end(b"123, ", false), Scan::Complete(3));
        assert_eq!(value_end(b"123", false), Scan::NeedMore);
        assert_eq!(value_end(b"123", true), Scan::Complete(3));
        assert_eq!(value_end(b"true}", false), Scan::Complete(4));
    }

    #[test]
    fn members_delimited() {
        let raw = br#" {"ph": "X", "pid" :12, "args": {"a": [1, "}"]}, "s": "a\"b"} "#;
        let spans = member_spans(raw).unwrap();
        let text: Vec<(&[u8], &[u8])> = spans
            .iter()
            .map(|(k, v)| (&raw[k.clone()], &raw[v.clone()]))
            .collect();
        assert_eq!(
            text,
            [
                (&br#""ph""#[..], &br#""X""#[..]),
                (br#""pid""#, b"12"),
                (br#""args""#, br#"{"a": [1, "}"]}"#),
                (br#""s""#, br#""a\"b""#),
            ]
        );
        assert_eq!(member_spans(b"{}"), Some(vec![]));
        assert_eq!(member_spans(b"[1]"), None);
        assert_eq!(member_spans(br#"{"a" 1}"#), None);
    }

    #[test]
    fn a_break_stops_the_walk_before_what_follows() {
        // What follows the second member is not even an object's syntax: never reached.
        let raw = br#"{"a": 1, "b": 2, "c" 3 ]"#;
        let mut keys = Vec::new();
        let done = for_each_member(raw, |key, _| {
            keys.push(raw[key].to_vec());
            if keys.len() == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert!(done);
        assert_eq!(keys, [br#""a""#.to_vec(), br#""b""#.to_vec()]);
    }

    #[test]
    fn raw_controls_in_strings_are_escaped_and_nothing_else_changes() {
        let raw = b"{\"a\": \"x\ty\\\"\n\", \"b\":\t[1,\n2], \"c\": \"\\\\\x1f\"}";
        let fixed = escape_raw_controls(raw).expect("two strings hold raw controls");
        assert_eq!(
            String::from_utf8(fixed).unwrap(),
            "{\"a\": \"x\\u0009y\\\"\\u000a\", \"b\":\t[1,\n2], \"c\": \"\\\\\\u001f\"}"
        );
        assert_eq!(escape_raw_controls(b"{\"a\":\n\"x\\ty\"}"), None);
    }

    #[test]
    fn micros_are_exact() {
        assert_eq!(micros_to_ns("125.500"), Some(125_500));
        assert_eq!(micros_to_ns("0.001"), Some(1));
        assert_eq!(micros_to_ns("7"), Some(7000));
        assert_eq!(micros_to_ns("-3.25"), Some(-3250));
        assert_eq!(micros_to_ns("1.0005"), Some(1001));
        assert_eq!(micros_to_ns("1.0004"), Some(1000));
        assert_eq!(micros_to_ns("1.5e3"), Some(1_500_000));
        // 91 days of microseconds: an f64 product would round.
        assert_eq!(
            micros_to_ns("7889237999999.999"),
            Some(7_889_237_999_999_999)
        );
        assert_eq!(micros_to_ns("\"x\""), None);
        assert_eq!(micros_to_ns(""), None);
    }
}
