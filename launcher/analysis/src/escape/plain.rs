//! Folded stacks (`frame;frame;leaf weight` per line): a frame stays one frame on one line.

/// A frame name safe for the folded format: `;` (which separates frames) becomes `:`, and
/// controls (a newline would end the line) are shown as in [`super::terminal`].
pub fn folded_frame(s: &str) -> String {
    super::terminal::printable_line(s).replace(';', ":")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_frame_stays_one_frame_on_one_line() {
        assert_eq!(
            super::folded_frame("a;b\nc\u{1b}]0;t\u{7} d"),
            "a:b\\u{a}c\\u{1b}]0:t\\u{7} d"
        );
    }
}
