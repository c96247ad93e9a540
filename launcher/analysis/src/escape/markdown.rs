//! Markdown text (report.md): HTML a name holds shown as characters, table cells kept whole.

/// Text for report.md: a name from a trace can hold HTML (`<img src=x onerror=...>`), which
/// every Markdown renderer passes through; `&`, `<` and `>` become entities, which they show
/// as the characters. (Controls are escaped after, for the whole file, as for a terminal.)
pub fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// A table cell: a `|` would end it.
pub fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    #[test]
    fn html_becomes_entities_and_pipes_stay_in_their_cell() {
        assert_eq!(
            super::text("<img src=x onerror=alert(1)> & gemm<float>"),
            "&lt;img src=x onerror=alert(1)&gt; &amp; gemm&lt;float&gt;"
        );
        assert_eq!(super::text("aten::mm | x"), "aten::mm | x");
        assert_eq!(super::cell("a|b"), "a\\|b");
    }
}
