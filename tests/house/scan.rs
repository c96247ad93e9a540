//! Reads a crate's files from its root through their `mod` declarations and finds, in each,
//! the other files of the crate its paths name.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One file of a crate: its path relative to the crate's `src/` and the files it imports.
#[derive(Debug)]
pub struct File {
    pub path: String,
    pub imports: BTreeSet<String>,
}

/// A module: the file that holds it (inline modules share their file's).
struct Module {
    file: usize,
    children: BTreeMap<String, Vec<String>>,
}

/// The crate's files, in the order their `mod` declarations reach them, each with its imports.
pub fn crate_files(root: &Path) -> Vec<File> {
    let src = root.parent().unwrap().to_path_buf();
    // Each file's path under `src/` and the paths its code names (with the scope each is
    // written in), read while the module tree is walked: resolved once the tree is whole.
    let mut files: Vec<(String, Vec<NamedPath>)> = Vec::new();
    let mut modules: BTreeMap<Vec<String>, Module> = BTreeMap::new();
    let mut todo = vec![(root.to_path_buf(), Vec::<String>::new())];
    while let Some((path, module)) = todo.pop() {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let code = blank(&text);
        let file = files.len();
        let is_dir_owner = matches!(
            path.file_name().unwrap().to_str().unwrap(),
            "mod.rs" | "lib.rs" | "main.rs"
        );
        let child_dir = if is_dir_owner {
            path.parent().unwrap().to_path_buf()
        } else {
            path.with_extension("")
        };
        let tokens = tokenize(&code);
        let mut inline: Vec<(Vec<String>, usize)> = Vec::new();
        let mut depth = 0usize;
        modules.entry(module.clone()).or_insert(Module {
            file,
            children: BTreeMap::new(),
        });
        let mut i = 0;
        while i < tokens.len() {
            let t = &tokens[i];
            match t.text.as_str() {
                "{" => depth += 1,
                "}" => {
                    depth = depth.saturating_sub(1);
                    if inline.last().is_some_and(|(_, d)| *d == depth) {
                        inline.pop();
                    }
                }
                "mod" if i + 2 < tokens.len() && is_ident(&tokens[i + 1].text) => {
                    let name = tokens[i + 1].text.clone();
                    let here = inline
                        .last()
                        .map(|(m, _)| m.clone())
                        .unwrap_or(module.clone());
                    let mut child = here.clone();
                    child.push(name.clone());
                    modules
                        .get_mut(&here)
                        .unwrap()
                        .children
                        .insert(name.clone(), child.clone());
                    if tokens[i + 2].text == ";" && inline.is_empty() {
                        let target = path_attr(&text, &code, tokens[i].at)
                            .map(|p| path.parent().unwrap().join(p))
                            .unwrap_or_else(|| {
                                let flat = child_dir.join(format!("{name}.rs"));
                                if flat.is_file() {
                                    flat
                                } else {
                                    child_dir.join(&name).join("mod.rs")
                                }
                            });
                        todo.push((target, child));
                    } else if tokens[i + 2].text == "{" {
                        modules.insert(
                            child.clone(),
                            Module {
                                file,
                                children: BTreeMap::new(),
                            },
                        );
                        inline.push((child, depth));
                        depth += 1;
                        i += 3;
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        files.push((rel, paths(&tokens, &module)));
    }
    // Second pass: every file's paths, resolved against the whole module tree.
    let mut out: Vec<File> = files
        .iter()
        .map(|(rel, _)| File {
            path: rel.clone(),
            imports: BTreeSet::new(),
        })
        .collect();
    for (n, (_, named)) in files.iter().enumerate() {
        for (scope, segments) in named {
            if let Some(target) = resolve(&modules, scope, segments) {
                if target != n {
                    let name = out[target].path.clone();
                    out[n].imports.insert(name);
                }
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The file a path names: the deepest module on it, from the scope it is written in. `None`
/// for a path outside the crate (another crate, a local variable's type, a macro's `$crate`).
fn resolve(
    modules: &BTreeMap<Vec<String>, Module>,
    scope: &[String],
    segments: &[String],
) -> Option<usize> {
    let mut at: Vec<String>;
    let mut rest = segments;
    match segments.first()?.as_str() {
        "crate" => {
            at = Vec::new();
            rest = &rest[1..];
        }
        "self" | "super" => {
            at = scope.to_vec();
            while let Some(s) = rest.first() {
                match s.as_str() {
                    "self" => {}
                    "super" => {
                        at.pop()?;
                    }
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        first => {
            // A bare first segment names a child module of the scope, or nothing of the crate.
            let child = modules.get(scope)?.children.get(first)?;
            at = child.clone();
            rest = &rest[1..];
        }
    }
    let mut file = modules.get(&at)?.file;
    for s in rest {
        at.push(s.clone());
        match modules.get(&at) {
            Some(m) => file = m.file,
            None => break,
        }
    }
    Some(file)
}

/// A token of blanked code and its byte offset.
struct Token {
    text: String,
    at: usize,
}

fn is_ident(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn tokenize(code: &str) -> Vec<Token> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
            out.push(Token {
                text: code[start..i].to_string(),
                at: start,
            });
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push(Token {
                text: "::".into(),
                at: i,
            });
            i += 2;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else {
            out.push(Token {
                text: (c as char).to_string(),
                at: i,
            });
            i += 1;
        }
    }
    out
}

/// A path as written (`crate::a::b`, `super::T`) and the module it is written in.
type NamedPath = (Vec<String>, Vec<String>);

/// Every path of the code with the module it is written in: `use` trees expanded, and paths in
/// expressions and types (`a::b::c`).
fn paths(tokens: &[Token], module: &[String]) -> Vec<NamedPath> {
    let mut out = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let scope = |inline: &Vec<(String, usize)>| {
        let mut s = module.to_vec();
        s.extend(inline.iter().map(|(n, _)| n.clone()));
        s
    };
    while i < tokens.len() {
        let t = tokens[i].text.as_str();
        match t {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t.text == "{") => {
                inline.push((tokens[i + 1].text.clone(), depth));
                depth += 1;
                i += 3;
                continue;
            }
            "use" => {
                let end = (i..tokens.len())
                    .find(|&j| tokens[j].text == ";")
                    .unwrap_or(tokens.len());
                let s = scope(&inline);
                let mut j = i + 1;
                for p in use_tree(tokens, &mut j, end, Vec::new()) {
                    out.push((s.clone(), p));
                }
                i = end + 1;
                continue;
            }
            _ if is_ident(t)
                && tokens.get(i + 1).is_some_and(|n| n.text == "::")
                // `$crate::` is a macro's, `pub(in crate::x)` a visibility, `x::y` after `::`
                // the tail of a path already taken.
                && !(i > 0 && matches!(tokens[i - 1].text.as_str(), "$" | "in" | "::")) =>
            {
                let mut p = vec![t.to_string()];
                let mut j = i + 1;
                while j + 1 < tokens.len()
                    && tokens[j].text == "::"
                    && is_ident(&tokens[j + 1].text)
                {
                    p.push(tokens[j + 1].text.clone());
                    j += 2;
                }
                out.push((scope(&inline), p));
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) from `*j` up to `end` into its paths.
fn use_tree(tokens: &[Token], j: &mut usize, end: usize, prefix: Vec<String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // The path being read; `None` once a group has taken it (`a::{b, c}` names `a::b` and
    // `a::c`, not `a`).
    let mut cur = Some(prefix.clone());
    while *j < end {
        let t = tokens[*j].text.as_str();
        match t {
            "{" => {
                *j += 1;
                out.extend(use_tree(tokens, j, end, cur.take().unwrap_or_default()));
                continue;
            }
            "}" => {
                out.extend(cur.filter(|c| c.len() > prefix.len()));
                *j += 1;
                return out;
            }
            "," => {
                out.extend(cur.filter(|c| c.len() > prefix.len()));
                cur = Some(prefix.clone());
            }
            "as" => *j += 1, // the alias that follows is not a path
            _ if is_ident(t) => {
                if let Some(c) = cur.as_mut() {
                    c.push(t.to_string());
                }
            }
            _ => {}
        }
        *j += 1;
    }
    out.extend(cur.filter(|c| c.len() > prefix.len()));
    out
}

/// `#[path = "x.rs"]` right before the `mod` at `at`, read from the raw text (the blanked code
/// keeps offsets, not the literal).
fn path_attr(text: &str, code: &str, at: usize) -> Option<String> {
    let before = code[..at].trim_end();
    let before = before.strip_suffix("pub").unwrap_or(before).trim_end();
    if !before.ends_with(']') {
        return None;
    }
    let open = before.rfind("#[")?;
    if !code[open..].starts_with("#[path") {
        return None;
    }
    let raw = &text[open..before.len()];
    let q1 = raw.find('"')?;
    let q2 = raw[q1 + 1..].find('"')?;
    Some(raw[q1 + 1..q1 + 1 + q2].to_string())
}

/// The code with comments and string and character literals turned into spaces, byte for byte
/// (offsets stay), so that nothing inside them reads as a path.
pub fn blank(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let clear = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == b'/' && next == Some(b'/') {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            clear(&mut out, i, end);
            i = end;
        } else if c == b'/' && next == Some(b'*') {
            let (mut j, mut nest) = (i + 2, 1);
            while j < b.len() && nest > 0 {
                if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                    nest += 1;
                    j += 2;
                } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                    nest -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            clear(&mut out, i, j);
            i = j;
        } else if (c == b'r' || (c == b'b' && next == Some(b'r')))
            && !(i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && {
                let k = if c == b'b' { i + 2 } else { i + 1 };
                let hashes = b[k..].iter().take_while(|&&h| h == b'#').count();
                b.get(k + hashes) == Some(&b'"')
            }
        {
            let k = if c == b'b' { i + 2 } else { i + 1 };
            let hashes = b[k..].iter().take_while(|&&h| h == b'#').count();
            let body = k + hashes + 1;
            let mut close = b"\"".to_vec();
            close.extend(std::iter::repeat_n(b'#', hashes));
            let end = b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| body + p + close.len());
            clear(&mut out, i, end);
            i = end;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            clear(&mut out, i, j + 1);
            i = j + 1;
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let end = if next == Some(b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|p| i + 2 + p + 1)
            } else {
                let len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + len) == Some(&b'\'')).then_some(i + 2 + len)
            };
            match end {
                Some(e) => {
                    clear(&mut out, i, e);
                    i = e;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
