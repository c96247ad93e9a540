//! Terminal text: what could act on a terminal (controls, C1, bidirectional controls, line
//! separators) shown as a visible `\u{..}` escape; paths in messages through [`Shown`].

use std::fmt;
use std::path::Path;

/// The rule and the escapes are core's (its messages name paths too).
pub use cuprof_core::text::{is_active, path_line, printable_line, printable_text};

/// A path as a message shows it: one line, nothing in it acting on a terminal (a file name
/// found by listing a folder can hold an escape sequence). `Path::display` is refused in the
/// launcher's crates (launcher/clippy.toml): messages write `path.shown()`.
pub trait Shown {
    fn shown(&self) -> ShownPath<'_>;
}

impl Shown for Path {
    fn shown(&self) -> ShownPath<'_> {
        ShownPath(self)
    }
}

/// [`Shown::shown`]'s `Display`.
pub struct ShownPath<'a>(&'a Path);

impl fmt::Display for ShownPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&path_line(self.0))
    }
}

/// Paths as a message lists them, `sep` between.
pub fn shown_paths<P: AsRef<Path>>(paths: &[P], sep: &str) -> String {
    paths
        .iter()
        .map(|p| p.as_ref().shown().to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_in_messages_are_one_line_of_printable_text() {
        let p = Path::new("d1/x\u{1b}]0;pwned\u{7}\n.json");
        assert_eq!(
            p.shown().to_string(),
            "d1/x\\u{1b}]0;pwned\\u{7}\\u{a}.json"
        );
        assert_eq!(
            shown_paths(&[p, Path::new("b")], ", "),
            format!("{}, b", p.shown())
        );
    }
}
