//! What the user sees of a command: its standard output, which may be a pipe closed early
//! (`cuprof report T | head -1`), and its error, on one line.
//!
//! A closed stdout is not an error: printing stops, the command still writes its files, and
//! it exits with status 0 (as `rg` does; a shell's `pipefail` does not then flag the pipeline).

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

/// `println!` that tolerates a closed pipe; returns `anyhow::Result<()>`.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::console::print(&(format!($($arg)*) + "\n")) };
}

pub(crate) use outln;

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
