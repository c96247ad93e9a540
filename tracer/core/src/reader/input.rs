//! Opening an input file so that no path can make a command hang or read forever.
//!
//! A FIFO with no writer blocks `open(2)` itself, and a device (`/dev/zero`) never ends, so a
//! path is opened with `O_NONBLOCK` (which does not block on a FIFO and changes nothing for a
//! regular file) and the open file is then checked with `fstat`: checking the path first and
//! opening it after would leave a window for it to be swapped.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why an opened path cannot be read as an input file (the path as a message shows it).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: cannot open it: {source}; check the path and its permissions")]
    Open {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("{path}: {kind}, not a regular file; pass the file itself")]
    NotRegular { path: String, kind: &'static str },
}

/// What a non-regular file is, in words.
pub fn file_kind(md: &Metadata) -> &'static str {
    let t = md.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a named pipe (FIFO)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_file() {
        "a regular file"
    } else {
        "a special file"
    }
}

/// Opens `path` for reading if it is a regular file (symlinks followed), without blocking on
/// a FIFO; the file and its metadata.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), InputError> {
    let open_err = |source| InputError::Open {
        path: crate::text::path_line(path),
        source,
    };
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(open_err)?;
    let md = f.metadata().map_err(open_err)?;
    if !md.is_file() {
        return Err(InputError::NotRegular {
            path: crate::text::path_line(path),
            kind: file_kind(&md),
        });
    }
    Ok((f, md))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_directories_are_refused() {
        let e = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/zero: a character device, not a regular file; pass the file itself"
        );
        let e = open_regular(Path::new("/")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/: a directory, not a regular file; pass the file itself"
        );
        let e = open_regular(Path::new("/nonexistent/x")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/x: cannot open it: "),
            "{e}"
        );
    }
}
