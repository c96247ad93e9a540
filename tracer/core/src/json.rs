//! JSON as cuprof writes it: the writer's allocation-free numbers and strings, and every other
//! JSON output (summary.json, `compare --json`, merged traces) through [`to_string`] /
//! [`to_string_pretty`]; one rule ([`is_active`]) for which characters a string shows escaped.

use std::io;

pub use crate::text::is_active;

/// Appends `s` as a JSON string literal (quotes included). Control characters are escaped,
/// because a raw one inside a string is fatal to Perfetto; so is every other [`is_active`]
/// character (C1, bidirectional controls, line separators), which a viewer could act on.
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // Fast path, the common case (kernel and API names): nothing to escape. A branch-free
    // scan (the compiler vectorises the fold) and one copy, instead of a match per byte.
    if !bytes.iter().fold(false, |any, &c| any | needs_escape(c)) {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    out.push(b'"');
    let mut run_start = 0;
    for (i, c) in s.char_indices() {
        let escape: Option<&[u8]> = match c {
            '"' => Some(b"\\\""),
            '\\' => Some(b"\\\\"),
            '\n' => Some(b"\\n"),
            '\r' => Some(b"\\r"),
            '\t' => Some(b"\\t"),
            c if is_active(c) => None,
            _ => continue,
        };
        out.extend_from_slice(&bytes[run_start..i]);
        match escape {
            Some(e) => out.extend_from_slice(e),
            None => push_unicode_escape(out, c),
        }
        run_start = i + c.len_utf8();
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

/// Appends `\uXXXX`, the JSON escape of `c` (an [`is_active`] character: all lie in the BMP).
fn push_unicode_escape(out: &mut Vec<u8>, c: char) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let c = c as u32;
    debug_assert!(c <= 0xffff);
    out.extend_from_slice(b"\\u");
    for shift in [12, 8, 4, 0] {
        out.push(HEX[(c >> shift) as usize & 15]);
    }
}

/// Appends `\u00XX`, the JSON escape of the byte `c` (a control character, or DEL).
#[inline]
pub fn push_control_escape(out: &mut Vec<u8>, c: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"\\u00");
    out.push(HEX[(c >> 4) as usize]);
    out.push(HEX[(c & 15) as usize]);
}

/// True for the bytes after which `push_str` looks closer: `"`, `\\`, control characters, DEL,
/// and any byte of a non-ASCII character (which may be a C1 or bidirectional control).
#[inline(always)]
fn needs_escape(c: u8) -> bool {
    // `|`, not `||`: no branch per byte, so the scan in `push_str` vectorises.
    (c < 0x20) | (c == b'"') | (c == b'\\') | (c >= 0x7f)
}

/// Whether JSON text as read (an event's bytes) holds a byte [`escape_raw`] would change: a
/// control other than JSON's whitespace, DEL, or any non-ASCII byte (which may begin a C1 or
/// bidirectional control). A branch-free scan: most events are plain ASCII.
pub fn needs_raw_escape(raw: &[u8]) -> bool {
    raw.iter().fold(false, |any, &b| {
        any | (b >= 0x7f) | ((b < 0x20) & (b != b'\t') & (b != b'\n') & (b != b'\r'))
    })
}

/// JSON text as read, each [`is_active`] character in it (but JSON's whitespace: tab, newline,
/// carriage return) written as a `\u` escape. JSON's own syntax is ASCII, so such a character
/// stands in a string, where the escape means the same character: a copied event (merge,
/// repair) holds nothing raw a viewer could act on. Bytes that are not UTF-8 are kept.
pub fn escape_raw(raw: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !needs_raw_escape(raw) {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut out = Vec::with_capacity(raw.len() + 16);
    for chunk in raw.utf8_chunks() {
        let valid = chunk.valid();
        let mut start = 0;
        for (i, c) in valid.char_indices() {
            if is_active(c) && !matches!(c, '\t' | '\n' | '\r') {
                out.extend_from_slice(&valid.as_bytes()[start..i]);
                push_unicode_escape(&mut out, c);
                start = i + c.len_utf8();
            }
        }
        out.extend_from_slice(&valid.as_bytes()[start..]);
        out.extend_from_slice(chunk.invalid());
    }
    std::borrow::Cow::Owned(out)
}

/// [`escape_raw`] of JSON text held as a `str` (a header member as read).
pub fn escape_raw_str(raw: &str) -> std::borrow::Cow<'_, str> {
    match escape_raw(raw.as_bytes()) {
        std::borrow::Cow::Borrowed(_) => std::borrow::Cow::Borrowed(raw),
        // UTF-8 in, its characters kept or replaced by ASCII escapes: UTF-8 out.
        std::borrow::Cow::Owned(b) => std::borrow::Cow::Owned(String::from_utf8(b).expect("UTF-8")),
    }
}

/// A `serde_json` formatter that writes every [`is_active`] character of a string as a `\u`
/// escape (serde_json escapes only C0 controls, `"` and `\\`).
struct Escaping<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for Escaping<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices().filter(|&(_, c)| is_active(c)) {
            w.write_all(&fragment.as_bytes()[start..i])?;
            let mut e = Vec::with_capacity(6);
            push_unicode_escape(&mut e, c);
            w.write_all(&e)?;
            start = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[start..])
    }
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

fn write_with<T: serde::Serialize + ?Sized, F: serde_json::ser::Formatter>(
    v: &T,
    f: F,
) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(128);
    v.serialize(&mut serde_json::Serializer::with_formatter(
        &mut out,
        Escaping(f),
    ))?;
    // Serde writes valid UTF-8, and the escapes are ASCII.
    Ok(String::from_utf8(out).expect("JSON is UTF-8"))
}

/// `v` as compact JSON, its strings escaped as [`push_str`] escapes them.
pub fn to_string<T: serde::Serialize + ?Sized>(v: &T) -> serde_json::Result<String> {
    write_with(v, serde_json::ser::CompactFormatter)
}

/// `v` as indented JSON (two spaces), its strings escaped as [`push_str`] escapes them.
pub fn to_string_pretty<T: serde::Serialize + ?Sized>(v: &T) -> serde_json::Result<String> {
    write_with(v, serde_json::ser::PrettyFormatter::new())
}

/// "00" .. "99" as little-endian u16s: two ASCII digits per lookup.
const PAIRS: [u16; 100] = {
    let mut t = [0u16; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = (b'0' + (i / 10) as u8) as u16 | ((b'0' + (i % 10) as u8) as u16) << 8;
        i += 1;
    }
    t
};

/// Numbers from here on have more digits than [`digits`] packs.
const PACKED_LIMIT: u64 = 10_000_000_000_000_000;

/// The decimal digits of `v` (< 10^16) packed into a register, first digit in the lowest byte,
/// and their count. Built in a register rather than byte by byte in memory, so that the single
/// 16-byte store that copies them out never waits on narrower stores (no store-forwarding
/// stall, no `memcpy` call).
#[inline]
fn digits(mut v: u64) -> (u128, usize) {
    debug_assert!(v < PACKED_LIMIT);
    let n = v.checked_ilog10().map_or(1, |l| l as usize + 1);
    let mut x: u128 = 0;
    while v >= 100 {
        x = (x << 16) | PAIRS[(v % 100) as usize] as u128;
        v /= 100;
    }
    if v >= 10 {
        x = (x << 16) | PAIRS[v as usize] as u128;
    } else {
        x = (x << 8) | (b'0' + v as u8) as u128;
    }
    (x, n)
}

/// Appends the first `n` bytes of `packed` (see [`digits`]).
#[inline]
fn push_packed(out: &mut Vec<u8>, packed: u128, n: usize) {
    let len = out.len();
    out.extend_from_slice(&packed.to_le_bytes());
    out.truncate(len + n);
}

/// Appends `v` in decimal (the writer formats ~20 numbers per kernel event).
#[inline]
pub fn push_u64(out: &mut Vec<u8>, v: u64) {
    if v < 10 {
        out.push(b'0' + v as u8);
    } else if v < 100 {
        out.extend_from_slice(&PAIRS[v as usize].to_le_bytes());
    } else if v < PACKED_LIMIT {
        let (x, n) = digits(v);
        push_packed(out, x, n);
    } else {
        out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }
}

#[inline]
pub fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, v.unsigned_abs());
}

/// Nanoseconds as microseconds with exactly three decimals (`1234567` -> `1234.567`): the
/// format Kineto writes, without the precision loss of an f64 at epoch scale.
pub fn push_us(out: &mut Vec<u8>, ns: i64) {
    if ns < 0 {
        out.push(b'-');
    }
    let ns = ns.unsigned_abs();
    push_u64(out, ns / 1000);
    let frac = (ns % 1000) as u32;
    let tail =
        b'.' as u32 | (b'0' as u32 + frac / 100) << 8 | (PAIRS[(frac % 100) as usize] as u32) << 16;
    out.extend_from_slice(&tail.to_le_bytes());
}

/// A finite float with up to `decimals` decimals (non-finite values become 0).
pub fn push_f64(out: &mut Vec<u8>, v: f64, decimals: u32) {
    let v = if v.is_finite() { v } else { 0.0 };
    let scale = 10u64.pow(decimals) as f64;
    let scaled = (v.abs() * scale).round() as u64;
    if v < 0.0 && scaled != 0 {
        out.push(b'-');
    }
    let div = 10u64.pow(decimals);
    push_u64(out, scaled / div);
    if decimals > 0 {
        out.push(b'.');
        // The fraction, zero-padded to `decimals` digits, without a `format!` per call.
        let frac = scaled % div;
        let width = decimals as usize;
        if frac < PACKED_LIMIT {
            let (x, n) = digits(frac);
            for _ in n..width {
                out.push(b'0');
            }
            push_packed(out, x, n);
        } else {
            out.extend_from_slice(format!("{frac:0width$}").as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(f: impl Fn(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn microseconds_keep_every_nanosecond() {
        assert_eq!(s(|o| push_us(o, 1_234_567)), "1234.567");
        assert_eq!(s(|o| push_us(o, 5)), "0.005");
        assert_eq!(s(|o| push_us(o, 0)), "0.000");
        assert_eq!(s(|o| push_us(o, -1500)), "-1.500");
        assert_eq!(
            s(|o| push_us(o, 7_889_238_000_000_123)),
            "7889238000000.123"
        );
    }

    #[test]
    fn integers_match_the_standard_formatting() {
        let mut values = vec![
            0u64,
            1,
            9,
            10,
            11,
            99,
            100,
            101,
            999,
            1000,
            65_535,
            u32::MAX as u64,
            u64::MAX,
        ];
        for p in 0..20 {
            let x = 10u64.pow(p);
            values.extend([x - 1, x, x + 1]);
        }
        let mut r = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            values.push(r >> (r % 64));
        }
        for v in values {
            assert_eq!(s(|o| push_u64(o, v)), v.to_string());
            let i = v as i64;
            assert_eq!(s(|o| push_i64(o, i)), i.to_string());
        }
        assert_eq!(s(|o| push_i64(o, i64::MIN)), i64::MIN.to_string());
        let mut o = b"x".to_vec();
        push_u64(&mut o, 42);
        push_u64(&mut o, 7);
        assert_eq!(o, b"x427");
    }

    #[test]
    fn strings_escape_quotes_and_control_characters() {
        assert_eq!(s(|o| push_str(o, "a\"b\\c")), r#""a\"b\\c""#);
        assert_eq!(s(|o| push_str(o, "x\u{1}y\nz")), r#""x\u0001y\nz""#);
        assert_eq!(
            s(|o| push_str(o, "void f<int>(float*)")),
            "\"void f<int>(float*)\""
        );
        let round: String = serde_json::from_str(&s(|o| push_str(o, "t\u{7f}\u{1f}é"))).unwrap();
        assert_eq!(round, "t\u{7f}\u{1f}é");
    }

    #[test]
    fn copied_json_text_gets_its_active_characters_escaped() {
        let raw = "{\"name\": \"k\u{9b}1m\u{202e}\u{1b}[2J\u{7f}\ttab\",\n \"x\": 1}";
        let esc = escape_raw(raw.as_bytes());
        assert_eq!(
            std::str::from_utf8(&esc).unwrap(),
            "{\"name\": \"k\\u009b1m\\u202e\\u001b[2J\\u007f\ttab\",\n \"x\": 1}"
        );
        assert!(matches!(
            escape_raw(b"{\"a\": 1}\n"),
            std::borrow::Cow::Borrowed(_)
        ));
        // Not UTF-8: kept as it is, what follows still escaped.
        assert_eq!(&*escape_raw(b"\"\xff\xc2\x9b\""), b"\"\xff\\u009b\"");
    }

    #[test]
    fn strings_escape_what_a_viewer_could_act_on_in_every_json_output() {
        let name = "k\u{1b}]0;x\u{7}\u{7f}\u{9b}1m\u{202e}\u{2066}\u{2028}\u{2029}é名\"\\";
        let shown = r#""k\u001b]0;x\u0007\u007f\u009b1m\u202e\u2066\u2028\u2029é名\"\\""#;
        assert_eq!(s(|o| push_str(o, name)), shown);
        assert_eq!(to_string(name).unwrap(), shown);
        let v = serde_json::json!({ name: [name] });
        let pretty = to_string_pretty(&v).unwrap();
        assert_eq!(pretty, format!("{{\n  {shown}: [\n    {shown}\n  ]\n}}"));
        let back: serde_json::Value = serde_json::from_str(&pretty).unwrap();
        assert_eq!(back, v);
        assert_eq!(to_string(&v).unwrap(), format!("{{{shown}:[{shown}]}}"));
    }

    #[test]
    fn floats_round_to_the_asked_decimals() {
        assert_eq!(s(|o| push_f64(o, 12.3456, 3)), "12.346");
        assert_eq!(s(|o| push_f64(o, 0.0, 2)), "0.00");
        assert_eq!(s(|o| push_f64(o, f64::NAN, 1)), "0.0");
        assert_eq!(s(|o| push_f64(o, 7.0, 0)), "7");
        assert_eq!(s(|o| push_f64(o, 0.007576, 6)), "0.007576");
        assert_eq!(s(|o| push_f64(o, -2.05, 3)), "-2.050");
        assert_eq!(s(|o| push_f64(o, 1.0000004, 6)), "1.000000");
        assert_eq!(s(|o| push_f64(o, 46.5454549, 6)), "46.545455");
    }
}
