//! What the user sees of a command: its standard output, which may be a pipe closed early
//! (`cuprof report T | head -1`), its notices, and its error, on one line.
//!
//! A command prints through a [`Console`] over the writers its caller gives: the `cuprof`
//! binary's stdout and stderr, or a test's buffers. A closed stdout is not an error: printing
//! stops, the command still writes its files, and it exits with status 0 (as `rg` does; a
//! shell's `pipefail` does not then flag the pipeline).

use std::borrow::Cow;
use std::io::{self, Write};

/// Where a command prints: its standard output, and its notices (standard error). The `cuprof`
/// binary passes the process's own; a test passes buffers and reads what the command printed.
pub struct Console<'a> {
    out: &'a mut (dyn Write + Send),
    err: &'a mut (dyn Write + Send),
    /// The reader of `out` has gone: nothing more is printed.
    closed: bool,
}

impl<'a> Console<'a> {
    pub fn new(out: &'a mut (dyn Write + Send), err: &'a mut (dyn Write + Send)) -> Self {
        Console {
            out,
            err,
            closed: false,
        }
    }

    /// Prints `text` to stdout; once the reader of a pipe has gone, prints nothing more.
    pub fn print(&mut self, text: &str) -> anyhow::Result<()> {
        if self.closed {
            return Ok(());
        }
        let out = &mut *self.out;
        match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            r => Ok(r.map_err(|e| anyhow::Error::new(e).context("writing to standard output"))?),
        }
    }

    /// [`Console::print`] for text made of a trace's names: what could act on a terminal is
    /// escaped ([`printable_text`]). JSON goes through [`Console::print`]: its strings are
    /// escaped already.
    pub fn print_text(&mut self, text: &str) -> anyhow::Result<()> {
        self.print(&printable_text(text))
    }

    /// A notice on stderr (as `eprintln!`, but a failure to write it is not the command's).
    pub fn note(&mut self, line: &str) {
        let _ = writeln!(self.err, "{line}");
    }
}

/// `println!` to a [`Console`] that tolerates a closed pipe; returns `anyhow::Result<()>`.
macro_rules! outln {
    ($console:expr, $($arg:tt)*) => { $console.print(&(format!($($arg)*) + "\n")) };
}

pub(crate) use outln;

/// What the `cuprof` binary prints on stderr for a command that failed, before it exits with
/// status 1: `cuprof: what: why`, one line ([`one_line`]).
pub fn error_line(e: &anyhow::Error) -> String {
    format!("cuprof: {}\n", one_line(e))
}

/// Whether `c` would act on a terminal or reorder the text around it instead of showing:
/// C0 controls, DEL, C1 controls (ESC sequences, BEL, CSI), Unicode's bidirectional controls,
/// and its line and paragraph separators (U+2028, U+2029: a line break to many viewers and to
/// JavaScript).
fn is_active(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
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

/// The error and its causes on one line, `what: why: why`, each cause shown once (a cause whose
/// text the message already quotes is not repeated).
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
            ("sep\u{2028}para\u{2029}", "sep\\u{2028}para\\u{2029}"),
            ("del\u{7f}csi\u{9b}", "del\\u{7f}csi\\u{9b}"),
        ];
        for (name, shown) in cases {
            assert_eq!(printable_line(name), shown, "{name:?}");
        }
        assert!(matches!(printable_line("plain"), Cow::Borrowed(_)));
        assert_eq!(printable_text("a\nb\u{1b}c\n"), "a\nb\\u{1b}c\n");
    }

    /// A writer whose reader has gone after `room` bytes, or that fails otherwise.
    struct Pipe {
        room: usize,
        got: Vec<u8>,
        kind: io::ErrorKind,
    }

    impl Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.got.len() + buf.len() > self.room {
                return Err(io::Error::from(self.kind));
            }
            self.got.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stdout_stops_the_printing_quietly() {
        let mut out = Pipe {
            room: 8,
            got: Vec::new(),
            kind: io::ErrorKind::BrokenPipe,
        };
        let mut err = Vec::new();
        let mut con = Console::new(&mut out, &mut err);
        con.print("first\n").unwrap();
        // The reader goes: not an error, and nothing more is printed, though it would fit.
        con.print("second\n").unwrap();
        con.print_text("x\n").unwrap();
        con.note("a notice");
        assert_eq!(out.got, b"first\n");
        assert_eq!(err, b"a notice\n");
        let mut out = Pipe {
            room: 0,
            got: Vec::new(),
            kind: io::ErrorKind::PermissionDenied,
        };
        let e = Console::new(&mut out, &mut err).print("x").unwrap_err();
        assert_eq!(
            error_line(&e),
            "cuprof: writing to standard output: permission denied\n"
        );
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
