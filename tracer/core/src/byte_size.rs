//! Byte counts for people: binary units (KiB = 1024 bytes), one rule for everything cuprof
//! prints (the library's end-of-run lines, `cuprof run`'s summary, every offline command).

const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/// The unit a byte count of magnitude `max` is shown in: (divisor, label), the largest unit
/// not above it, at most `largest` (an index in B, KiB, MiB, GiB, TiB, PiB).
pub fn unit_upto(max: f64, largest: usize) -> (f64, &'static str) {
    let mut div = 1.0;
    let mut i = 0;
    while i < largest.min(UNITS.len() - 1) && max.abs() >= div * 1024.0 {
        div *= 1024.0;
        i += 1;
    }
    (div, UNITS[i])
}

/// `512 B`, `1.5 KiB`, `20.0 MiB`: `decimals` after the point past bytes.
pub fn format(bytes: i64, decimals: usize) -> String {
    format_upto(bytes, decimals, UNITS.len() - 1)
}

/// [`format`] with units up to `largest` (an index in B, KiB, ..., PiB).
pub fn format_upto(bytes: i64, decimals: usize, largest: usize) -> String {
    let (div, label) = unit_upto(bytes as f64, largest);
    if div == 1.0 {
        format!("{bytes} B")
    } else {
        format!("{:.decimals$} {label}", bytes as f64 / div)
    }
}

/// `20.0 MiB (20971520 bytes)`; `512 B` below a KiB.
pub fn with_exact(bytes: i64) -> String {
    let short = format(bytes, 1);
    if short.ends_with(" B") {
        short
    } else {
        format!("{short} ({bytes} bytes)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_decimals() {
        assert_eq!(format(512, 1), "512 B");
        assert_eq!(format(1536, 1), "1.5 KiB");
        assert_eq!(format(-1536, 1), "-1.5 KiB");
        assert_eq!(format(3 << 30, 2), "3.00 GiB");
        assert_eq!(format(5 << 40, 1), "5.0 TiB");
        assert_eq!(format_upto(5 << 40, 2, 3), "5120.00 GiB");
        assert_eq!(with_exact(20 << 20), "20.0 MiB (20971520 bytes)");
        assert_eq!(with_exact(1000), "1000 B");
        assert_eq!(
            unit_upto(3.0 * 1024.0 * 1024.0, 3),
            (1024.0 * 1024.0, "MiB")
        );
        assert_eq!(unit_upto(1e15, 3), (1024.0 * 1024.0 * 1024.0, "GiB"));
        assert_eq!(unit_upto(10.0, 5), (1.0, "B"));
    }
}
