//! Figures as text: durations, shares, bytes, bandwidths, names cut to a width, and [`Table`]
//! (aligned text or Markdown). The ground every view and section formats with.

/// A table rendered either as aligned text or as a Markdown table.
pub struct Table {
    headers: Vec<String>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Headers starting with `>` are right-aligned (the `>` is dropped).
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers
                .iter()
                .map(|h| h.trim_start_matches('>').to_string())
                .collect(),
            right: headers.iter().map(|h| h.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    /// Cells are data from a trace: each is kept on one line, its control characters escaped.
    pub fn row(&mut self, cells: Vec<String>) {
        let one_line = |c: String| match crate::escape::terminal::printable_line(&c) {
            std::borrow::Cow::Borrowed(_) => c,
            std::borrow::Cow::Owned(escaped) => escaped,
        };
        self.rows.push(cells.into_iter().map(one_line).collect());
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn text(&self) -> String {
        let n = self.headers.len();
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::from("  ");
            for (i, c) in cells.iter().enumerate().take(n) {
                let pad = w[i] - c.chars().count();
                if i > 0 {
                    s.push_str("  ");
                }
                if self.right[i] {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    if i + 1 < n {
                        s.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.headers, &mut out);
        for r in &self.rows {
            line(r, &mut out);
        }
        out
    }

    pub fn markdown(&self) -> String {
        let esc = crate::escape::markdown::cell;
        let mut out = format!(
            "| {} |\n|{}\n",
            self.headers
                .iter()
                .map(|h| esc(h))
                .collect::<Vec<_>>()
                .join(" | "),
            self.right
                .iter()
                .map(|&r| if r { " ---: |" } else { " --- |" })
                .collect::<String>()
        );
        for r in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            ));
        }
        // A blank line ends the table: a note written after it (`(N more ...)`) would
        // otherwise be read as one more row.
        out.push('\n');
        out
    }
}

/// Nanoseconds in a readable unit: `812 ns`, `12.500 µs`, `3.250 ms`, `1.204 s`.
pub fn dur(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{ns:.0} ns")
    } else if a < 1e6 {
        format!("{:.3} µs", ns / 1e3)
    } else if a < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// A ratio as a multiple: `1.29×`.
pub fn times(x: f64) -> String {
    format!("{x:.2}×")
}

pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A bandwidth in GB/s with two decimals, `-` when there is none.
pub fn gbps(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.2}"))
}

pub fn bytes(b: i64) -> String {
    // GiB with two decimals: memcpy totals of a few GiB differ in the second.
    let decimals = if b >= 1 << 30 { 2 } else { 1 };
    cuprof_core::byte_size::format_upto(b, decimals, 3)
}

/// A long path cut to its last `max` characters (where a frame's file, line and function are).
pub fn short_tail(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        s.to_string()
    } else {
        let mut t = String::from('…');
        t.extend(s.chars().skip(n - (max - 1)));
        t
    }
}

/// Long C++ names cut to `max` characters for the terminal.
pub fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// A TFLOP/s figure, `-` when absent.
pub fn tflops(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.3}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_escape() {
        let mut t = Table::new(&["name", ">n"]);
        t.row(vec!["a|b".into(), "1".into()]);
        t.row(vec!["long name".into(), "100".into()]);
        assert_eq!(
            t.text(),
            "  name         n\n  a|b          1\n  long name  100\n"
        );
        assert_eq!(
            t.markdown(),
            "| name | n |\n| --- | ---: |\n| a\\|b | 1 |\n| long name | 100 |\n\n"
        );
        assert_eq!(dur(1500.0), "1.500 µs");
        assert_eq!(dur(999.0), "999 ns");
        assert_eq!(short("abcdef", 4), "abc…");
    }
}
