//! Small, allocation-free JSON formatting helpers for the hot writer path.

/// Appends `s` as a JSON string literal (quotes included). Control characters are escaped,
/// because a raw one inside a string is fatal to Perfetto.
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
            None => push_control_escape(out, c),
        }
        run_start = i + 1;
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

/// Appends `\u00XX`, the JSON escape of the byte `c` (a control character, or DEL).
#[inline]
pub fn push_control_escape(out: &mut Vec<u8>, c: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"\\u00");
    out.push(HEX[(c >> 4) as usize]);
    out.push(HEX[(c & 15) as usize]);
}

/// True for the bytes `push_str` must escape: `"`, `\\`, control characters and DEL.
#[inline(always)]
fn needs_escape(c: u8) -> bool {
    // `|`, not `||`: no branch per byte, so the scan in `push_str` vectorises.
    (c < 0x20) | (c == b'"') | (c == b'\\') | (c == 0x7f)
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
