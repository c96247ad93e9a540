//! The house rules of docs/architecture.md, checked over the source: no import circle among the
//! files of any crate, and no folder importing one that the document does not allow it to.
//!
//! An import is a path in code (a `use` line, `pub use` re-exports included, or a path in an
//! expression) that names another file's module: `crate::…`, `super::…`, `self::…` or a child
//! module's name. A parent's `mod child;` is containment, not an import. The source is read as
//! text with comments and literals blanked, so the check needs no compiler and runs in
//! milliseconds.

mod graph;
mod rules;
mod scan;

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every crate root of the workspace (its `src/lib.rs` or `src/main.rs`), found by walking the
/// tree for Cargo.toml files, so that a new crate is checked without being listed here.
fn crate_roots(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                crate_roots(&p, out);
            }
        } else if name == "Cargo.toml" {
            for root in ["src/lib.rs", "src/main.rs"] {
                let r = dir.join(root);
                if r.is_file() {
                    out.push(r);
                }
            }
        }
    }
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut roots = Vec::new();
    crate_roots(&repo(), &mut roots);
    assert!(
        roots
            .iter()
            .any(|r| r.ends_with("tracer/preload/src/lib.rs")),
        "the walk found the injected library: {roots:?}"
    );
    let mut circles = Vec::new();
    for root in &roots {
        let files = scan::crate_files(root);
        for c in graph::circles(&files) {
            circles.push(format!(
                "{}: {}",
                root.strip_prefix(repo()).unwrap().display(),
                c.join(" -> ")
            ));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles (docs/architecture.md):\n{}",
        circles.join("\n")
    );
}

#[test]
fn every_folder_imports_only_what_docs_architecture_allows() {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let crates = rules::parse(&doc).unwrap_or_else(|e| panic!("docs/architecture.md: {e}"));
    assert!(
        !crates.is_empty(),
        "docs/architecture.md names no crate rule"
    );
    let mut broken = Vec::new();
    for rule in &crates {
        let root = repo().join(&rule.src).join("lib.rs");
        let root = if root.is_file() {
            root
        } else {
            repo().join(&rule.src).join("main.rs")
        };
        let files = scan::crate_files(&root);
        broken.extend(rules::violations(rule, &files));
    }
    assert!(
        broken.is_empty(),
        "imports docs/architecture.md does not allow:\n{}",
        broken.join("\n")
    );
}

/// The check itself, on a crate planted with a circle (and on one without): it must fail when a
/// circle appears, or it proves nothing.
#[test]
fn a_planted_circle_is_found() {
    let dir = std::env::temp_dir().join(format!("cuprof-house-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("model")).unwrap();
    let write = |p: &str, s: &str| std::fs::write(src.join(p), s).unwrap();
    write("lib.rs", "//! root\nmod model;\nmod render;\nmod format;\n");
    write(
        "model/mod.rs",
        "//! model\nmod steps;\npub use steps::Step;\npub fn f() { crate::render::g(); }\n",
    );
    write(
        "model/steps.rs",
        "//! steps\n// use crate::format; (a comment is not an import)\nuse super::super::format::dur;\npub struct Step;\nconst S: &str = \"crate::render::g\";\n",
    );
    write(
        "render.rs",
        "//! render\nuse crate::{format::{dur, pct}, model::Step};\npub fn g() {}\n",
    );
    write(
        "format.rs",
        "//! format\npub fn dur() {}\npub fn pct() {}\n",
    );
    let files = scan::crate_files(&src.join("lib.rs"));
    let circles = graph::circles(&files);
    assert_eq!(circles, vec![vec!["model/mod.rs", "render.rs"]]);
    let edges: Vec<String> = files
        .iter()
        .flat_map(|f| f.imports.iter().map(move |i| format!("{} -> {i}", f.path)))
        .collect();
    assert_eq!(
        edges,
        [
            "model/mod.rs -> model/steps.rs",
            "model/mod.rs -> render.rs",
            "model/steps.rs -> format.rs",
            "render.rs -> format.rs",
            "render.rs -> model/mod.rs",
        ]
    );
    // The folder rule: `model/` may import `format.rs` only; `render.rs` nothing but the two.
    let rule = rules::parse(
        "```house\ncrate x/src\nlib.rs -> *\nrender.rs -> model/ format.rs\nmodel/ -> format.rs\nformat.rs ->\n```\n",
    )
    .unwrap()
    .remove(0);
    assert_eq!(
        rules::violations(&rule, &files),
        ["x/src: model/mod.rs -> render.rs (model may import only format)"]
    );
    // Cut the circle: none is left.
    write(
        "model/mod.rs",
        "//! model\nmod steps;\npub use steps::Step;\n",
    );
    assert!(graph::circles(&scan::crate_files(&src.join("lib.rs"))).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}
