//! Values of `args` members the reader leaves as JSON text ([`RawMembers`]), turned into
//! column values. A value of an unexpected type becomes a null, never an error: a foreign trace
//! is still exported.
//!
//! [`RawMembers`]: cuprof_core::reader::RawMembers

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The text of an event from its `args` value on (`{...}` and whatever follows it), found
/// without parsing the members before it. `"args"` followed by `:` can only be a key: inside a
/// string the quotes would be escaped. Events of cuprof and Kineto hold no object before
/// `args`, so the first such key is the event's own.
fn args_onward(raw: &str) -> Option<&str> {
    let at = raw.find("\"args\"")?;
    let rest = raw[at + 6..].trim_start().strip_prefix(':')?.trim_start();
    rest.starts_with('{').then_some(rest)
}

/// The raw `args` object of an event's text, if it has one.
pub fn args_of(raw: &str) -> Option<&RawValue> {
    let mut de = serde_json::Deserializer::from_str(args_onward(raw)?);
    <&RawValue>::deserialize(&mut de).ok()
}

/// An integer, written as one (`12`), as a float with no fraction (`12.0`) or as a string of
/// one (`"12"`).
pub fn int(v: Option<&str>) -> Option<i64> {
    let t = v?.trim();
    let t = t
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(t);
    if let Ok(i) = t.parse::<i64>() {
        return Some(i);
    }
    let f = t.parse::<f64>().ok()?;
    (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
}

pub fn float(v: Option<&str>) -> Option<f64> {
    serde_json::from_str::<f64>(v?)
        .ok()
        .filter(|f| f.is_finite())
}

/// A string member's text (escapes decoded).
pub fn text(v: Option<&str>) -> Option<Cow<'_, str>> {
    serde_json::from_str::<Cow<'_, str>>(v?).ok()
}

/// `[x, y, z]` (missing trailing dimensions are 1; anything else is three nulls). Parsed by
/// hand: it is on every kernel, and a `Vec` per kernel would show in the profile.
pub fn dim3(v: Option<&str>) -> [Option<i64>; 3] {
    let none = [None; 3];
    let Some(inner) = v
        .map(str::trim)
        .and_then(|t| t.strip_prefix('['))
        .and_then(|t| t.strip_suffix(']'))
    else {
        return none;
    };
    let mut out = [Some(1); 3];
    for (n, part) in inner.split(',').enumerate() {
        if n == 3 {
            return none;
        }
        match part.trim().parse::<i64>() {
            Ok(x) => out[n] = Some(x),
            Err(_) => return none,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_values() {
        assert_eq!(int(Some("7")), Some(7));
        assert_eq!(int(Some("32.0")), Some(32));
        assert_eq!(int(Some("\"1024\"")), Some(1024));
        assert_eq!(int(Some("1.5")), None);
        assert_eq!(int(Some("[1]")), None);
        assert_eq!(int(None), None);
        assert_eq!(dim3(Some("[132, 2]")), [Some(132), Some(2), Some(1)]);
        assert_eq!(dim3(Some("[256, 1, 1]")), [Some(256), Some(1), Some(1)]);
        assert_eq!(dim3(Some("\"x\"")), [None; 3]);
        assert_eq!(dim3(Some("[1, 2, 3, 4]")), [None; 3]);
        assert_eq!(dim3(Some("[]")), [None; 3]);
        assert_eq!(text(Some(r#""a\"b""#)).as_deref(), Some("a\"b"));
        assert_eq!(text(Some("3")), None);
        assert_eq!(float(Some("1.5")), Some(1.5));
    }

    #[test]
    fn args_found_without_parsing_the_rest() {
        // A key that merely contains "args" in a string is not the member.
        let odd = r#"{"name": "x\"args\": {\"External id\": 1}", "args": {"External id": 2}}"#;
        assert_eq!(args_of(odd).map(|a| a.get()), Some(r#"{"External id": 2}"#));
        assert!(args_of(r#"{"ph": "X"}"#).is_none());
        assert!(args_of(r#"{"ph": "X", "args": 3}"#).is_none());
    }
}
