//! Text for a terminal: the characters that could act on one or reorder the text around them
//! ([`is_active`], the rule every output of cuprof escapes by), shown as visible `\u{..}`
//! escapes; a path as one line of such text for a message.

use std::borrow::Cow;
use std::path::Path;

/// Whether `c` could act on a terminal or reorder the text around it instead of showing: C0
/// controls, DEL, C1 controls (ESC sequences, BEL, CSI), Unicode's bidirectional controls, and
/// its line and paragraph separators (U+2028, U+2029: a line break to many viewers and to
/// JavaScript). Text outputs show them as `\u{..}`; JSON strings hold them as `\u` escapes.
pub fn is_active(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}'
                | '\u{200f}'
                | '\u{061c}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
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

/// A name as one line of plain text: every [`is_active`] character (newlines and tabs too)
/// written as a visible `\u{..}` escape.
pub fn printable_line(s: &str) -> Cow<'_, str> {
    escape(s, |_| false)
}

/// Text for a terminal or a text file: as [`printable_line`], newlines kept.
pub fn printable_text(s: &str) -> Cow<'_, str> {
    escape(s, |c| c == '\n')
}

/// A path as a message names it: [`printable_line`] of it (a file name found by listing a
/// folder can hold an escape sequence).
pub fn path_line(p: &Path) -> String {
    printable_line(&p.to_string_lossy()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            path_line(Path::new("d/x\u{1b}]0;t\u{7}\n.json")),
            "d/x\\u{1b}]0;t\\u{7}\\u{a}.json"
        );
    }
}
