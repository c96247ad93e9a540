//! The `args` members the tables keep beyond those the streaming reader decodes: parsed from
//! the event's own text, and only for the events whose table has them. Values of an unexpected
//! type become nulls, never an error: a foreign trace is still exported.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The members of `args` that some table keeps, unparsed.
#[derive(Deserialize, Default)]
#[serde(default)]
pub struct Extra<'a> {
    #[serde(borrow, rename = "External id")]
    pub external_id: Option<&'a RawValue>,
    #[serde(borrow, rename = "Sequence number")]
    pub sequence_number: Option<&'a RawValue>,
    #[serde(borrow, rename = "Fwd thread id")]
    pub fwd_thread_id: Option<&'a RawValue>,
    #[serde(borrow, rename = "Input Dims")]
    pub input_dims: Option<&'a RawValue>,
    #[serde(borrow)]
    pub grid: Option<&'a RawValue>,
    #[serde(borrow)]
    pub block: Option<&'a RawValue>,
    #[serde(borrow, rename = "registers per thread")]
    pub registers: Option<&'a RawValue>,
    #[serde(borrow, rename = "shared memory")]
    pub shared_memory: Option<&'a RawValue>,
    #[serde(borrow, rename = "graph id")]
    pub graph_id: Option<&'a RawValue>,
    #[serde(borrow, rename = "memory bandwidth (GB/s)")]
    pub bandwidth: Option<&'a RawValue>,
    #[serde(borrow)]
    pub cbid: Option<&'a RawValue>,
    #[serde(borrow)]
    pub domain: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WithArgs<'a> {
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
}

/// The raw `args` object of an event's text, if it has one.
pub fn args_of(raw: &str) -> Option<&RawValue> {
    serde_json::from_str::<WithArgs<'_>>(raw).ok()?.args
}

/// The [`Extra`] members of an event's text (all absent when `args` is missing or odd).
pub fn extra(raw: &str) -> Extra<'_> {
    args_of(raw)
        .and_then(|a| serde_json::from_str(a.get()).ok())
        .unwrap_or_default()
}

/// An integer, written as one (`12`), as a float with no fraction (`12.0`) or as a string of
/// one (`"12"`).
pub fn int(v: Option<&RawValue>) -> Option<i64> {
    let t = v?.get().trim();
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

pub fn float(v: Option<&RawValue>) -> Option<f64> {
    serde_json::from_str::<f64>(v?.get())
        .ok()
        .filter(|f| f.is_finite())
}

/// A string member's text (escapes decoded).
pub fn text<'a>(v: Option<&'a RawValue>) -> Option<Cow<'a, str>> {
    serde_json::from_str::<Cow<'a, str>>(v?.get()).ok()
}

/// `[x, y, z]` (missing trailing dimensions are 1; anything else is three nulls).
pub fn dim3(v: Option<&RawValue>) -> [Option<i64>; 3] {
    let Some(v) = v else {
        return [None; 3];
    };
    match serde_json::from_str::<Vec<i64>>(v.get()) {
        Ok(d) if !d.is_empty() && d.len() <= 3 => {
            [0, 1, 2].map(|i| Some(d.get(i).copied().unwrap_or(1)))
        }
        _ => [None; 3],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_and_lenient_values() {
        let raw = r#"{"ph": "X", "args": {"External id": 7, "grid": [132, 2], "block": "x", "registers per thread": 32.0, "shared memory": "1024", "Input Dims": [[2, 3], []], "domain": "a\"b", "memory bandwidth (GB/s)": 1.5}}"#;
        let e = extra(raw);
        assert_eq!(int(e.external_id), Some(7));
        assert_eq!(dim3(e.grid), [Some(132), Some(2), Some(1)]);
        assert_eq!(dim3(e.block), [None; 3]);
        assert_eq!(int(e.registers), Some(32));
        assert_eq!(int(e.shared_memory), Some(1024));
        assert_eq!(e.input_dims.map(|r| r.get()), Some("[[2, 3], []]"));
        assert_eq!(text(e.domain).as_deref(), Some("a\"b"));
        assert_eq!(float(e.bandwidth), Some(1.5));
        assert_eq!(int(e.graph_id), None);
        assert!(extra(r#"{"ph": "X"}"#).external_id.is_none());
        assert!(extra(r#"{"ph": "X", "args": 3}"#).external_id.is_none());
    }
}
