//! XML and HTML text (the HTML page, every SVG): markup characters as entities, and what XML
//! 1.0 cannot hold at all (most C0 controls, even as character references) or a viewer could
//! act on, shown as a visible `\u{..}` escape.

use std::borrow::Cow;

/// Text for an XML or HTML text node or a quoted attribute: `&<>"'` as entities (so `]]>` and
/// `</svg>` cannot end anything), controls as in [`super::terminal`] (newlines kept: a
/// tooltip's lines).
pub fn text(s: &str) -> String {
    let line = super::terminal::printable_text(s);
    let mut o = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            // Not characters to XML 1.0 (nor valid in any name).
            '\u{fffe}' | '\u{ffff}' => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

/// A whole document made elsewhere (inferno's SVG) with what XML 1.0 cannot hold replaced by
/// U+FFFD: the last guard, for text that was not built through [`text`].
pub fn valid_document(s: &str) -> Cow<'_, str> {
    let bad = |c: char| matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}');
    if !s.chars().any(bad) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| if bad(c) { '\u{fffd}' } else { c })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_controls_cannot_escape_a_node() {
        assert_eq!(text(r#"a<b & "c""#), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(
            text("x]]></svg><script>\u{1b}[2J\u{0}\u{7}'\n\r"),
            "x]]&gt;&lt;/svg&gt;&lt;script&gt;\\u{1b}[2J\\u{0}\\u{7}&#39;\n\\u{d}"
        );
        assert_eq!(
            text("\u{202e}\u{2028}\u{fffe}"),
            "\\u{202e}\\u{2028}\u{fffd}"
        );
        assert_eq!(valid_document("<t>a\u{1b}b\tc</t>"), "<t>a\u{fffd}b\tc</t>");
    }
}
