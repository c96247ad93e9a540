//! The flame graph of `cuprof flame` (same stacks, same inferno drawing), inline. The page is
//! static (its Content-Security-Policy allows no script), so inferno's zoom/search script and
//! the `onload` that starts it are left out, as are the XML prolog and the buttons that need
//! the script, and comments; hovering a frame still shows its name and time. inferno's stylesheet selects by
//! its own ids (`#frames`, `#title`, ...), which the rest of the page does not use, and one
//! bare `text` rule, which is scoped to the flame graph here so that it leaves the other charts
//! alone.

/// The SVG element of an inferno flame graph, made inert and scoped for inlining.
pub fn inline(svg: &str) -> String {
    let start = svg.find("<svg").unwrap_or(0);
    let mut s = svg[start..].replacen(r#" onload="init(evt)""#, "", 1);
    s = s.replacen("<svg ", r#"<svg class="flame" "#, 1);
    s = cut(&s, "<script", "</script>");
    for id in ["unzoom", "search", "matched"] {
        s = cut(&s, &format!(r#"<text id="{id}""#), "</text>");
    }
    // Comments (inferno's credits, with links) say nothing to the reader of the page.
    while s.contains("<!--") {
        let before = s.len();
        s = cut(&s, "<!--", "-->");
        if s.len() == before {
            break;
        }
    }
    label_root(&s.replace("\ntext {", "\nsvg.flame text {"))
}

/// [`inline`], with every element id of the SVG prefixed by `prefix`, and what refers to one
/// (`url(#id)`, and `#id` in its stylesheet), so that a second flame graph on the page repeats
/// none of the first one's ids.
pub fn inline_prefixed(svg: &str, prefix: &str) -> String {
    let s = inline(svg);
    let mut ids: Vec<&str> = s
        .match_indices(" id=\"")
        .filter_map(|(at, m)| {
            let rest = &s[at + m.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    // The stylesheet is rewritten apart: a frame's name may contain `#id` too.
    let (head, style, tail) = match (s.find("<style"), s.find("</style>")) {
        (Some(a), Some(b)) if a < b => (&s[..a], &s[a..b], &s[b..]),
        _ => (s.as_str(), "", ""),
    };
    let (mut head, mut style, mut tail) = (head.to_string(), style.to_string(), tail.to_string());
    for id in ids {
        for part in [&mut head, &mut tail] {
            *part = part
                .replace(&format!(" id=\"{id}\""), &format!(" id=\"{prefix}{id}\""))
                .replace(&format!("url(#{id})"), &format!("url(#{prefix}{id})"));
        }
        for after in [' ', ':', '{', ',', '.', '>'] {
            style = style.replace(&format!("#{id}{after}"), &format!("#{prefix}{id}{after}"));
        }
    }
    format!("{head}{style}{tail}")
}

/// inferno draws the root frame (every stack together) with an empty name, so its bar has
/// no text: it gets one, saying what it sums.
fn label_root(s: &str) -> String {
    let Some(t) = s.find("<title>all (") else {
        return s.to_string();
    };
    match s[t..].find("></text>") {
        Some(e) => format!(
            "{}>all (every stack)</text>{}",
            &s[..t + e],
            &s[t + e + 8..]
        ),
        None => s.to_string(),
    }
}

/// `s` without the first element that starts with `open` and ends with `close`.
fn cut(s: &str, open: &str, close: &str) -> String {
    match s.find(open) {
        Some(a) => match s[a..].find(close) {
            Some(b) => format!("{}{}", &s[..a], &s[a + b + close.len()..]),
            None => s.to_string(),
        },
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn inert_and_scoped() {
        let svg = "<?xml version=\"1.0\"?><!DOCTYPE svg><svg version=\"1.1\" onload=\"init(evt)\"><!--See https://x--><style>\ntext { font-size:12px }</style><script>var a;</script><text id=\"search\" x=\"1\">Search</text><g id=\"frames\"><g><title>all (5 ns, 100%)</title><rect/><text x=\"1%\"></text></g></g></svg>";
        assert_eq!(
            super::inline(svg),
            "<svg class=\"flame\" version=\"1.1\"><style>\nsvg.flame text { font-size:12px }</style><g id=\"frames\"><g><title>all (5 ns, 100%)</title><rect/><text x=\"1%\">all (every stack)</text></g></g></svg>"
        );
    }

    #[test]
    fn a_second_graphs_ids_are_its_own() {
        let svg = "<svg version=\"1.1\"><defs><linearGradient id=\"background\"/></defs><style>\n#title { x:1 }\n#frames > *:hover { y:2 }\n#search:hover, #search.show { z:3 }</style><rect fill=\"url(#background)\"/><text id=\"title\">t</text><svg id=\"frames\"><g><title>a #title here</title></g></svg></svg>";
        assert_eq!(
            super::inline_prefixed(svg, "mem-"),
            "<svg class=\"flame\" version=\"1.1\"><defs><linearGradient id=\"mem-background\"/></defs><style>\n#mem-title { x:1 }\n#mem-frames > *:hover { y:2 }\n#search:hover, #search.show { z:3 }</style><rect fill=\"url(#mem-background)\"/><text id=\"mem-title\">t</text><svg id=\"mem-frames\"><g><title>a #title here</title></g></svg></svg>"
        );
    }
}
