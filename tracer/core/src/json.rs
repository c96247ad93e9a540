//! Small, allocation-free JSON formatting helpers for the hot writer path.

/// Appends `s` as a JSON string literal (quotes included). Control characters are escaped,
/// because a raw one inside a string is fatal to Perfetto.
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut run_start = 0;
    for (i, &c) in bytes.iter().enumerate() {
        let escape: Option<&[u8]> = match c {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0..=0x1f | 0x7f => None,
            _ => continue,
        };
        out.extend_from_slice(&bytes[run_start..i]);
        match escape {
            Some(e) => out.extend_from_slice(e),
            None => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 15) as usize]);
            }
        }
        run_start = i + 1;
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

pub fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

pub fn push_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// Nanoseconds as microseconds with exactly three decimals (`1234567` -> `1234.567`): the
/// format Kineto writes, without the precision loss of an f64 at epoch scale.
pub fn push_us(out: &mut Vec<u8>, ns: i64) {
    if ns < 0 {
        out.push(b'-');
    }
    let ns = ns.unsigned_abs();
    push_u64(out, ns / 1000);
    let frac = ns % 1000;
    out.push(b'.');
    out.push(b'0' + (frac / 100) as u8);
    out.push(b'0' + (frac / 10 % 10) as u8);
    out.push(b'0' + (frac % 10) as u8);
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
        let frac = scaled % div;
        let s = format!("{frac:0width$}", width = decimals as usize);
        out.extend_from_slice(s.as_bytes());
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
    fn strings_escape_quotes_and_control_characters() {
        assert_eq!(s(|o| push_str(o, "a\"b\\c")), r#""a\"b\\c""#);
        assert_eq!(s(|o| push_str(o, "x\u{1}y\nz")), r#""x\u0001y\nz""#);
        assert_eq!(s(|o| push_str(o, "void f<int>(float*)")), "\"void f<int>(float*)\"");
        let round: String = serde_json::from_str(&s(|o| push_str(o, "t\u{7f}\u{1f}é"))).unwrap();
        assert_eq!(round, "t\u{7f}\u{1f}é");
    }

    #[test]
    fn floats_round_to_the_asked_decimals() {
        assert_eq!(s(|o| push_f64(o, 12.3456, 3)), "12.346");
        assert_eq!(s(|o| push_f64(o, 0.0, 2)), "0.00");
        assert_eq!(s(|o| push_f64(o, f64::NAN, 1)), "0.0");
        assert_eq!(s(|o| push_f64(o, 7.0, 0)), "7");
    }
}
