//! Source paths as a page that is shared shows them: no absolute path (a home folder, a user
//! name, a temporary folder) leaves the machine in a page, yet each file stays recognisable.
//!
//! Pages are mailed, attached to issues and served (`cuprof serve`); the terminal, report.md's
//! tables and summary.json keep every path whole, for the machine that made them. A page
//! shows, of an absolute path in a Python frame, a call site, a graph break or a generated
//! kernel's file:
//! - a package's file from the package on: `/v/lib/python3.12/site-packages/torch/nn/functional.py`
//!   is `torch/nn/functional.py` (`dist-packages` alike);
//! - the standard library's from the `pythonX.Y` folder on: `/usr/lib/python3.12/runpy.py` is
//!   `python3.12/runpy.py`;
//! - any other file as its folder and name: `/home/alice/proj/model.py` is `proj/model.py`,
//!   inductor's `/tmp/torchinductor_alice/ab/cab3.py` is `ab/cab3.py` (the folder is the first
//!   characters of the file's hash, so the pair stays unique).

use std::borrow::Cow;

/// `text` with every absolute path in it shortened (this module's rules). A path starts with
/// `/` at the text's start or after a space, a quote, `(`, `[`, `=`, `,` or `;`, holds a second
/// `/`, and runs up to a space, a quote, `(`, `)`, `[`, `]`, `,`, `;` or `:` (so that
/// `model.py(12)` and `model.py:12` keep their line).
pub fn shown(text: &str) -> Cow<'_, str> {
    if !text.contains('/') {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i] == b'/'
            && (i == 0
                || matches!(
                    bytes[i - 1],
                    b' ' | b'"' | b'\'' | b'(' | b'[' | b'=' | b',' | b';' | b'\t' | b'\n'
                ));
        if !starts {
            i += 1;
            continue;
        }
        let end = text[i..]
            .find([
                ' ', '"', '\'', '(', ')', '[', ']', ',', ';', ':', '\t', '\n',
            ])
            .map_or(text.len(), |n| i + n);
        let path = &text[i..end];
        if path[1..].contains('/') {
            out.push_str(&text[copied..i]);
            out.push_str(short(path));
            copied = end;
        }
        i = end.max(i + 1);
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// A field that holds one path (a graph break's file, a generated kernel's file), which may
/// hold spaces or commas: shortened whole when it is absolute.
pub fn shown_file(path: &str) -> &str {
    if path.starts_with('/') && path[1..].contains('/') {
        short(path)
    } else {
        path
    }
}

/// One absolute path, shortened (see the module's rules).
fn short(path: &str) -> &str {
    for marker in ["/site-packages/", "/dist-packages/"] {
        if let Some(at) = path.rfind(marker) {
            let rest = &path[at + marker.len()..];
            if !rest.is_empty() {
                return rest;
            }
        }
    }
    if let Some(at) = path.rfind("/lib/python") {
        let rest = &path[at + "/lib/".len()..];
        if rest.contains('/') {
            return rest;
        }
    }
    // The last two components: the file and its folder.
    let trimmed = path.trim_end_matches('/');
    match trimmed
        .rfind('/')
        .and_then(|last| trimmed[..last].rfind('/'))
    {
        Some(folder) => &trimmed[folder + 1..],
        None => trimmed.trim_start_matches('/'),
    }
}

#[cfg(test)]
mod tests {
    use super::{shown, shown_file};

    #[test]
    fn packages_standard_library_and_other_files() {
        let cases = [
            (
                "/v/lib/python3.12/site-packages/torch/nn/functional.py(9): linear",
                "torch/nn/functional.py(9): linear",
            ),
            (
                "/usr/lib/python3/dist-packages/numpy/core/x.py:3",
                "numpy/core/x.py:3",
            ),
            (
                "/usr/lib/python3.12/runpy.py(88): _run_code",
                "python3.12/runpy.py(88): _run_code",
            ),
            (
                "/home/alice/proj/model.py(12): forward",
                "proj/model.py(12): forward",
            ),
            ("/tmp/torchinductor_alice/ab/cab3.py", "ab/cab3.py"),
            ("/model.py(1): f", "/model.py(1): f"),
            ("model.py(12): forward", "model.py(12): forward"),
            (
                "torch/nn/modules/module.py(1750): _call_impl",
                "torch/nn/modules/module.py(1750): _call_impl",
            ),
            ("aten::add / aten::mul", "aten::add / aten::mul"),
            ("", ""),
        ];
        for (text, want) in cases {
            assert_eq!(shown(text), want, "{text}");
        }
    }

    #[test]
    fn every_path_in_a_text_and_nothing_else() {
        assert_eq!(
            shown("/home/a/p/m.py(3): f;/home/a/p/n.py(7): g;<frozen runpy>(1): x"),
            "p/m.py(3): f;p/n.py(7): g;<frozen runpy>(1): x"
        );
        assert_eq!(
            shown("Unsupported: call_function in \"/home/a/proj/model.py\", line 42 (x/y)"),
            "Unsupported: call_function in \"proj/model.py\", line 42 (x/y)"
        );
        assert_eq!(
            shown("L['x'].size()[0] == 4 at /srv/u/run/m.py:9 from=/a/b/c.py"),
            "L['x'].size()[0] == 4 at run/m.py:9 from=b/c.py"
        );
        assert_eq!(shown_file("/home/u/my, model.py"), "u/my, model.py");
        assert_eq!(shown_file("my, model.py"), "my, model.py");
        // A text without an absolute path is the same text, not a copy.
        assert!(matches!(
            shown("a/b/c.py(1): f"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
