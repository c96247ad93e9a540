//! Which `nn.Module` call each PyTorch operator ran in ([`ModuleTree`], derived once per file):
//! the module calls' nesting on each thread, each call's module path, and each operator's
//! innermost call. The figures per module are `sections::modules`.

use rustc_hash::FxHashMap;

use crate::load::{module_class, FileData, Interner, ModuleRange, NO_NAME};
use crate::model::links::NONE;

/// What is derived once from a file that has module calls.
pub struct ModuleTree {
    /// Per module call (index of `FileData::modules`): the innermost call of its thread that
    /// contains it, `NONE` at top level.
    pub parent: Vec<u32>,
    /// Per module call: its path (index of `paths`).
    pub path: Vec<u32>,
    /// The distinct module paths: `Module path` where the trace wrote it (cuprof's
    /// `--with-modules`: the root's class, then `named_modules()`'s name), else the names of
    /// the calls it is nested in and its own, joined by `.` (`Sequential_0.Linear_0`).
    pub paths: Vec<String>,
    /// Per path: its class (`Linear`), and whether the trace wrote it (`Module path`).
    pub class: Vec<String>,
    pub written: Vec<bool>,
    /// Per operator (index of `FileData::cpu_ops`): the innermost module call of its thread
    /// whose span holds the operator's, or `NONE`.
    pub op: Vec<u32>,
}

fn contains(outer: &ModuleRange, start: i64, end: i64) -> bool {
    outer.start <= start && end <= outer.end
}

/// The module calls of `f` and where its operators ran; `None` when it has no module call.
pub fn tree(f: &FileData, names: &Interner) -> Option<ModuleTree> {
    if f.modules.is_empty() {
        return None;
    }
    let calls = &f.modules;
    let mut by_thread: Vec<Vec<u32>> = vec![Vec::new(); f.threads.len()];
    for (i, c) in calls.iter().enumerate() {
        by_thread[c.thread as usize].push(i as u32);
    }
    let mut ops_by: Vec<Vec<u32>> = vec![Vec::new(); f.threads.len()];
    for (i, o) in f.cpu_ops.iter().enumerate() {
        ops_by[o.thread as usize].push(i as u32);
    }
    let mut parent = vec![NONE; calls.len()];
    let mut op = vec![NONE; f.cpu_ops.len()];
    let mut stack: Vec<u32> = Vec::new();
    for (list, ops) in by_thread.iter_mut().zip(ops_by.iter_mut()) {
        // Outer calls first (earlier start, then longer); operators by start, after the calls
        // that start with them.
        list.sort_by_key(|&i| {
            let c = &calls[i as usize];
            (c.start, std::cmp::Reverse(c.end), i)
        });
        ops.sort_by_key(|&i| f.cpu_ops[i as usize].start);
        stack.clear();
        let mut next = 0;
        for &oi in ops.iter() {
            let o = &f.cpu_ops[oi as usize];
            while next < list.len() && calls[list[next] as usize].start <= o.start {
                let c = &calls[list[next] as usize];
                while stack
                    .last()
                    .is_some_and(|&top| !contains(&calls[top as usize], c.start, c.end))
                {
                    stack.pop();
                }
                if let Some(&top) = stack.last() {
                    parent[list[next] as usize] = top;
                }
                stack.push(list[next]);
                next += 1;
            }
            // The innermost open call that holds the operator (a crossing one, which
            // well-formed traces do not have, is passed over, not closed).
            op[oi as usize] = stack
                .iter()
                .rev()
                .copied()
                .find(|&m| contains(&calls[m as usize], o.start, o.end))
                .unwrap_or(NONE);
        }
        for &ci in &list[next..] {
            let c = &calls[ci as usize];
            while stack
                .last()
                .is_some_and(|&top| !contains(&calls[top as usize], c.start, c.end))
            {
                stack.pop();
            }
            if let Some(&top) = stack.last() {
                parent[ci as usize] = top;
            }
            stack.push(ci);
        }
    }

    // Paths: outer calls first, so that a parent's path is known before its children's.
    let mut order: Vec<u32> = (0..calls.len() as u32).collect();
    order.sort_by_key(|&i| {
        let c = &calls[i as usize];
        (c.thread, c.start, std::cmp::Reverse(c.end), i)
    });
    let mut ids: FxHashMap<String, u32> = FxHashMap::default();
    let mut t = ModuleTree {
        parent,
        path: vec![0; calls.len()],
        paths: Vec::new(),
        class: Vec::new(),
        written: Vec::new(),
        op,
    };
    for i in order {
        let c = &calls[i as usize];
        let name = names.name(c.name);
        let (text, written) = if c.path != NO_NAME {
            (names.name(c.path).to_string(), true)
        } else {
            match t.parent[i as usize] {
                NONE => (name.to_string(), false),
                p => (
                    format!("{}.{name}", t.paths[t.path[p as usize] as usize]),
                    false,
                ),
            }
        };
        let next = t.paths.len() as u32;
        let id = *ids.entry(text).or_insert_with_key(|k| {
            t.paths.push(k.clone());
            t.class.push(module_class(name).to_string());
            t.written.push(written);
            next
        });
        t.path[i as usize] = id;
    }
    Some(t)
}

/// The attribute a written module path ends in, its list indices as `*`: `...h.3.attn.q_proj`
/// -> `q_proj`, `...transformer.h.3` -> `h.*`; a one-component path (the root) is itself.
pub fn attribute(path: &str) -> String {
    let parts: Vec<&str> = path.split('.').collect();
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(named) = parts.iter().rposition(|p| !numeric(p)) else {
        return parts.iter().map(|_| "*").collect::<Vec<_>>().join(".");
    };
    let mut out = parts[named].to_string();
    for _ in named + 1..parts.len() {
        out.push_str(".*");
    }
    out
}

/// `path` cut to its first `depth` components (`.` between them).
pub fn truncate(path: &str, depth: usize) -> &str {
    match path.match_indices('.').nth(depth.saturating_sub(1)) {
        Some((at, _)) if depth > 0 => &path[..at],
        _ => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_and_depths() {
        assert_eq!(attribute("M.model.layers.0.self_attn.q_proj"), "q_proj");
        assert_eq!(attribute("GPT2LMHeadModel.transformer.h.3"), "h.*");
        assert_eq!(attribute("M.blocks.0.1"), "blocks.*.*");
        assert_eq!(attribute("GPT2LMHeadModel"), "GPT2LMHeadModel");
        assert_eq!(truncate("a.b.c.d", 2), "a.b");
        assert_eq!(truncate("a.b", 2), "a.b");
        assert_eq!(truncate("a.b", 5), "a.b");
        assert_eq!(truncate("a", 1), "a");
    }
}
