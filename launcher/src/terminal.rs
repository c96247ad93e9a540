//! The terminal for `cuprof top`: keys without Enter and without echo, the alternate screen,
//! and everything put back when the view ends (by `q`, an error, Ctrl-C or a panic).
//!
//! Hand-rolled with termios and a few ANSI sequences: a full-screen redraw once a second and
//! one key need no terminal library.

use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::time::Duration;

/// A key pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(u8),
    Up,
    Down,
    PageUp,
    PageDown,
}

/// The key that `bytes` (one read of the terminal) begins with: arrows and page keys are
/// escape sequences.
fn key_of(bytes: &[u8]) -> Option<Key> {
    match bytes {
        [] => None,
        [0x1b, b'[', b'A', ..] | [0x1b, b'O', b'A', ..] => Some(Key::Up),
        [0x1b, b'[', b'B', ..] | [0x1b, b'O', b'B', ..] => Some(Key::Down),
        [0x1b, b'[', b'5', b'~', ..] => Some(Key::PageUp),
        [0x1b, b'[', b'6', b'~', ..] => Some(Key::PageDown),
        [b, ..] => Some(Key::Char(*b)),
    }
}

/// The terminal in key-at-a-time mode, on the alternate screen, until dropped.
pub struct Screen {
    saved: libc::termios,
    fd: i32,
}

impl Screen {
    /// `None` when stdin or stdout is not a terminal.
    pub fn open() -> Option<Screen> {
        let fd = std::io::stdin().as_raw_fd();
        // SAFETY: isatty only reads the descriptors' state.
        if unsafe { libc::isatty(fd) == 0 || libc::isatty(libc::STDOUT_FILENO) == 0 } {
            return None;
        }
        // SAFETY: a zeroed termios is a valid output buffer for tcgetattr.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd is a terminal; saved is a valid termios.
        if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
            return None;
        }
        let mut raw = saved;
        // Keys come one at a time, unechoed; Ctrl-C still signals (ISIG stays on).
        raw.c_lflag &= !(libc::ICANON | libc::ECHO);
        raw.c_cc[libc::VMIN] = 0;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: fd is a terminal; raw is a valid termios.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) } != 0 {
            return None;
        }
        // The alternate screen, cursor hidden (the escape sequences are this file's own).
        #[allow(clippy::disallowed_macros)]
        {
            print!("\x1b[?1049h\x1b[?25l");
        }
        let _ = std::io::stdout().flush();
        Some(Screen { saved, fd })
    }

    /// The lines [`Screen::draw`] shows (the last row stays empty).
    pub fn height(&self) -> usize {
        size().0.saturating_sub(1)
    }

    /// Redraws the whole screen with `lines`, each cut to the terminal's width.
    pub fn draw(&self, lines: &[String]) {
        let (rows, cols) = size();
        let mut out = String::from("\x1b[H\x1b[2J");
        for l in lines.iter().take(rows.saturating_sub(1)) {
            out.extend(l.chars().take(cols));
            out.push_str("\r\n");
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }

    /// Waits up to `d` for a key; returns it, if one came.
    pub fn key(&self, d: Duration) -> Option<Key> {
        let mut p = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = d.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, ms) } <= 0 {
            return None;
        }
        let mut b = [0u8; 8];
        // SAFETY: reads at most b.len() bytes into b.
        let n = unsafe { libc::read(self.fd, b.as_mut_ptr().cast(), b.len()) };
        key_of(&b[..usize::try_from(n).ok()?])
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        #[allow(clippy::disallowed_macros)] // This file's own escape sequences.
        {
            print!("\x1b[?25h\x1b[?1049l");
        }
        let _ = std::io::stdout().flush();
        // SAFETY: fd is the terminal whose settings were saved.
        unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved) };
    }
}

/// The terminal's rows and columns (24 x 80 when it does not say).
fn size() -> (usize, usize) {
    // SAFETY: a zeroed winsize is a valid output buffer for TIOCGWINSZ.
    let mut w: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut w) } == 0;
    if ok && w.ws_row > 0 && w.ws_col > 0 {
        (usize::from(w.ws_row), usize::from(w.ws_col))
    } else {
        (24, 80)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_escape_sequences() {
        assert_eq!(key_of(b"q"), Some(Key::Char(b'q')));
        assert_eq!(key_of(b"\x1b[A"), Some(Key::Up));
        assert_eq!(key_of(b"\x1bOB"), Some(Key::Down));
        assert_eq!(key_of(b"\x1b[5~"), Some(Key::PageUp));
        assert_eq!(key_of(b"\x1b[6~"), Some(Key::PageDown));
        assert_eq!(key_of(b"\x1b"), Some(Key::Char(0x1b)));
        assert_eq!(key_of(b""), None);
    }
}
