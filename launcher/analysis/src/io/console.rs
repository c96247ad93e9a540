//! What the user sees of a command: its standard output, which may be a pipe closed early
//! (`cuprof report T | head -1`), and its error, on one line.
//!
//! A closed stdout is not an error: printing stops, the command still writes its files, and
//! it exits with status 0 (as `rg` does; a shell's `pipefail` does not then flag the pipeline).

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// Prints `text` to stdout; once the reader of a pipe has gone, prints nothing more.
pub fn print(text: &str) -> anyhow::Result<()> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        r => Ok(r.map_err(|e| anyhow::Error::new(e).context("writing to standard output"))?),
    }
}

/// [`print`] for text made of a trace's names: what could act on a terminal is escaped
/// ([`printable_text`]). JSON goes through [`print`]: its strings are escaped already.
pub fn print_text(text: &str) -> anyhow::Result<()> {
    print(&printable_text(text))
}

/// `println!` that tolerates a closed pipe; returns `anyhow::Result<()>`.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::io::console::print(&(format!($($arg)*) + "\n")) };
}

pub(crate) use outln;

/// The error and its causes on one line, `what: why: why`, each cause shown once (a cause whose
/// text the message already quotes is not repeated).
/// Whether `c` would act on a terminal or reorder the text around it instead of showing:
/// C0 controls, DEL, C1 controls (ESC sequences, BEL, CSI), and Unicode's bidirectional
/// controls.
fn is_active(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_active(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_active(c) && !keep(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A name from a trace as one line of plain text: every control character (newlines and tabs
/// too) and bidirectional control written as a visible `\u{..}` escape.
pub fn printable_line(s: &str) -> Cow<'_, str> {
    escape(s, |_| false)
}

/// Text for a terminal or a text file: as [`printable_line`], newlines kept.
pub fn printable_text(s: &str) -> Cow<'_, str> {
    escape(s, |c| c == '\n')
}

pub fn one_line(e: &anyhow::Error) -> String {
    let mut s = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
    }
    s.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn names_cannot_act_on_a_terminal() {
        let cases = [
            ("aten::mm", "aten::mm"),
            ("title\u{1b}]0;pwned\u{7}x", "title\\u{1b}]0;pwned\\u{7}x"),
            ("clear\u{1b}[2J", "clear\\u{1b}[2J"),
            ("two\nlines\ttab\r", "two\\u{a}lines\\u{9}tab\\u{d}"),
            ("csi\u{9b}31m del\u{7f}", "csi\\u{9b}31m del\\u{7f}"),
            (
                "bidi \u{202e}txt.exe\u{2066}",
                "bidi \\u{202e}txt.exe\\u{2066}",
            ),
            ("µs ünïcode 名前", "µs ünïcode 名前"),
        ];
        for (name, shown) in cases {
            assert_eq!(printable_line(name), shown, "{name:?}");
        }
        assert!(matches!(printable_line("plain"), Cow::Borrowed(_)));
        assert_eq!(printable_text("a\nb\u{1b}c\n"), "a\nb\\u{1b}c\n");
    }

    #[test]
    fn errors_fit_on_one_line() {
        let io = io::Error::new(io::ErrorKind::NotFound, "No such file or directory");
        let e = Err::<(), _>(io)
            .context("x.json: cannot read")
            .context("report failed")
            .unwrap_err();
        assert_eq!(
            one_line(&e),
            "report failed: x.json: cannot read: No such file or directory"
        );
        // A message that already quotes its cause does not repeat it.
        let io = io::Error::other("disk full");
        let e = anyhow::Error::new(io).context("out.svg: cannot write (disk full)\nretry");
        assert_eq!(one_line(&e), "out.svg: cannot write (disk full) retry");
    }
}
