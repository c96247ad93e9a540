//! What the user sees of a command: its standard output, which may be a pipe closed early
//! (`cuprof report T | head -1`), its notices, and its error, on one line.
//!
//! A command prints through a [`Console`] over the writers its caller gives: the `cuprof`
//! binary's stdout and stderr, or a test's buffers. A closed stdout is not an error: printing
//! stops, the command still writes its files, and it exits with status 0 (as `rg` does; a
//! shell's `pipefail` does not then flag the pipeline).

use std::io::{self, Write};

use crate::escape::terminal::{printable_line, printable_text};

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

    /// Prints `text` to stdout, what could act on a terminal escaped ([`printable_text`]: a
    /// name or a path in it is data); once the reader of a pipe has gone, prints nothing more.
    /// JSON prints the same: its strings hold no such character ([`crate::escape::json`]).
    pub fn print(&mut self, text: &str) -> anyhow::Result<()> {
        if self.closed {
            return Ok(());
        }
        let text = printable_text(text);
        let out = &mut *self.out;
        match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            r => Ok(r.map_err(|e| anyhow::Error::new(e).context("writing to standard output"))?),
        }
    }

    /// A notice on stderr (as `eprintln!`, but a failure to write it is not the command's),
    /// escaped as [`Console::print`] escapes.
    pub fn note(&mut self, line: &str) {
        let _ = writeln!(self.err, "{}", printable_text(line));
    }
}

/// `println!` to a [`Console`] that tolerates a closed pipe; returns `anyhow::Result<()>`.
macro_rules! outln {
    ($console:expr, $($arg:tt)*) => { $console.print(&(format!($($arg)*) + "\n")) };
}

pub(crate) use outln;

/// What the `cuprof` binary prints on stderr for a command that failed, before it exits with
/// status 1: `cuprof: what: why`, one line ([`one_line`]), nothing in it acting on a terminal
/// (a path or a name it quotes is data).
pub fn error_line(e: &anyhow::Error) -> String {
    format!("cuprof: {}\n", printable_line(&one_line(e)))
}

/// A line on the process's stderr, escaped as [`Console::print`] escapes: the binary's
/// commands that print without a [`Console`] (`eprintln!` is refused in the launcher's crates,
/// launcher/clippy.toml).
pub fn eprint_line(line: &str) {
    #[allow(clippy::disallowed_macros)] // The one route: escaped here.
    {
        eprintln!("{}", printable_text(line));
    }
}

/// A line on the process's stdout, escaped as [`Console::print`] escapes (for `top` and `ps`,
/// which print without a [`Console`]).
pub fn print_line(line: &str) {
    #[allow(clippy::disallowed_macros)] // The one route: escaped here.
    {
        println!("{}", printable_text(line));
    }
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
        con.print("x\n").unwrap();
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
    fn every_route_to_the_terminal_escapes() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut con = Console::new(&mut out, &mut err);
        con.print("k\u{1b}]0;t\u{7}\u{9b}\u{202e}\n").unwrap();
        con.note("note d/\u{1b}[2J\u{2028}x");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "k\\u{1b}]0;t\\u{7}\\u{9b}\\u{202e}\n"
        );
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "note d/\\u{1b}[2J\\u{2028}x\n"
        );
        let e = anyhow::anyhow!("d/f\u{1b}]0;t\u{7}\r.json: cannot read it");
        assert_eq!(
            error_line(&e),
            "cuprof: d/f\\u{1b}]0;t\\u{7}\\u{d}.json: cannot read it\n"
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
