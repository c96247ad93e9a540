//! The folder rule of docs/architecture.md: its ```house blocks say, per crate, which top-level
//! folder (`name/`) or file (`name.rs`) of `src/` may import which.
//!
//! ```text
//! crate tracer/preload/src
//! lib.rs -> *
//! sources/ -> window/ pipe/ state/ cupti/ host/
//! host/ ->
//! ```

use std::collections::BTreeMap;

use crate::scan::File;

/// One crate's rule: its `src/` folder (relative to the repository) and what each unit may import.
pub struct CrateRule {
    pub src: String,
    allowed: BTreeMap<String, Vec<String>>,
}

/// The rules of every ```house block of the document.
pub fn parse(doc: &str) -> Result<Vec<CrateRule>, String> {
    let mut out: Vec<CrateRule> = Vec::new();
    let mut inside = false;
    for (n, line) in doc.lines().enumerate() {
        let line = line.trim();
        if line.starts_with("```") {
            inside = line == "```house";
            continue;
        }
        if !inside || line.is_empty() {
            continue;
        }
        if let Some(src) = line.strip_prefix("crate ") {
            out.push(CrateRule {
                src: src.trim().to_string(),
                allowed: BTreeMap::new(),
            });
            continue;
        }
        let (name, targets) = line
            .split_once("->")
            .ok_or_else(|| format!("line {}: `UNIT -> UNITS` expected, got `{line}`", n + 1))?;
        let rule = out
            .last_mut()
            .ok_or_else(|| format!("line {}: a rule before any `crate` line", n + 1))?;
        let targets = targets
            .split_whitespace()
            .map(|t| unit(t.trim_end_matches('/')).to_string())
            .collect();
        if rule
            .allowed
            .insert(unit(name.trim().trim_end_matches('/')).to_string(), targets)
            .is_some()
        {
            return Err(format!("line {}: `{}` is given twice", n + 1, name.trim()));
        }
    }
    Ok(out)
}

/// The unit a file belongs to: its top-level folder or file under `src/`, by stem, so that a
/// module file and its folder (`live.rs`, `live/`) are one unit: `a/b/c.rs` -> `a`,
/// `x.rs` -> `x`. The document may write a unit as `a/`, `x.rs` or `x`.
fn unit(path: &str) -> &str {
    let first = path.split('/').next().unwrap_or(path);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// Each import that crosses from one unit to another the rule does not let it import.
pub fn violations(rule: &CrateRule, files: &[File]) -> Vec<String> {
    let mut out = Vec::new();
    for f in files {
        let from = unit(&f.path);
        let Some(allowed) = rule.allowed.get(from) else {
            out.push(format!(
                "{}: {} is in no rule (add `{from} -> …`)",
                rule.src, f.path
            ));
            continue;
        };
        for to in &f.imports {
            let target = unit(to);
            if target != from && !allowed.iter().any(|a| a == "*" || a == target) {
                let may = if allowed.is_empty() {
                    "nothing of the crate".to_string()
                } else {
                    format!("only {}", allowed.join(", "))
                };
                out.push(format!(
                    "{}: {} -> {to} ({from} may import {may})",
                    rule.src, f.path
                ));
            }
        }
    }
    out
}
