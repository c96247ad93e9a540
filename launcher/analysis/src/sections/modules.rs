//! *Modules*: CPU and GPU time per `nn.Module` path, self and inclusive, rolled up to a depth
//! or grouped by class or attribute name (summary.json's `modules`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::load::FileData;
use crate::model::links::{Links, NONE};
use crate::model::modules::{attribute, truncate, ModuleTree};
use crate::saturating::AddSat;

/// What the module rows are keyed by (`report --module-by`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleGrouping {
    /// The module path (cut to `depth` components where asked).
    #[default]
    Path,
    /// The module's class (`Linear`).
    Class,
    /// The attribute name the module is held under, list indices as `*` (`q_proj`, `h.*`);
    /// the class where the trace wrote no path (torch's own traces).
    Attribute,
}

impl std::str::FromStr for ModuleGrouping {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "path" => Ok(ModuleGrouping::Path),
            "class" => Ok(ModuleGrouping::Class),
            "attribute" => Ok(ModuleGrouping::Attribute),
            _ => Err(format!(
                "`{s}` is no module grouping; use path, class or attribute"
            )),
        }
    }
}

/// How `report` groups the module rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModuleView {
    pub by: ModuleGrouping,
    /// Paths cut to this many components (`--module-depth`, path grouping only).
    pub depth: Option<usize>,
}

/// One group of module calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleRow {
    /// The module path (or its first `depth` components), class or attribute.
    pub name: String,
    /// The group's calls that are not inside another call of the group.
    pub calls: u64,
    /// Host time in the group's calls (those inside another call of the group counted once).
    pub cpu_inclusive_ns: i64,
    /// Host time in the group's calls outside the module calls they made that are not of the
    /// group.
    pub cpu_self_ns: i64,
    /// Time of the kernels launched by operators inside the group's calls, at any depth.
    pub gpu_inclusive_ns: i64,
    /// Time of the kernels launched by operators whose innermost module call is the group's.
    pub gpu_self_ns: i64,
}

/// The module view of the traces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Modules {
    pub by: ModuleGrouping,
    /// Depth the paths were cut to (`null`: whole paths).
    #[serde(default)]
    pub depth: Option<usize>,
    /// By GPU inclusive time, then CPU inclusive time, then name.
    pub rows: Vec<ModuleRow>,
    /// Time of the kernels whose operator ran in no module call (backward and optimizer
    /// operators, code outside the model).
    pub outside_gpu_ns: i64,
    /// Why there are no rows, in one line (no operators, or no module calls in the traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The one line of a trace without PyTorch operators.
pub const NO_OPERATORS: &str =
    "no PyTorch in the trace(s) (no `cpu_op` events): the module view needs a PyTorch program's trace";
/// The one line of a trace with operators and no module calls.
pub const NO_MODULE_CALLS: &str = "no nn.Module calls in the trace(s): record them with \
     `cuprof run --with-modules`, or torch.profiler's with_stack=True";

/// The module figures of `files` grouped as `view` asks.
pub fn summarize(
    files: &[FileData],
    links: &[Option<Links>],
    trees: &[Option<ModuleTree>],
    view: ModuleView,
) -> Modules {
    let mut out = Modules {
        by: view.by,
        depth: view.depth.filter(|_| view.by == ModuleGrouping::Path),
        ..Modules::default()
    };
    if files.iter().all(|f| f.cpu_ops.is_empty()) {
        out.note = Some(NO_OPERATORS.to_string());
        return out;
    }
    if trees.iter().all(Option::is_none) {
        out.note = Some(NO_MODULE_CALLS.to_string());
        return out;
    }
    let mut rows: BTreeMap<String, ModuleRow> = BTreeMap::new();
    for ((f, l), t) in files.iter().zip(links).zip(trees) {
        let Some(t) = t else {
            if let Some(l) = l {
                for (o, &g) in f.ops.iter().zip(&l.gpu) {
                    if g != NONE && o.kind.is_kernel() {
                        out.outside_gpu_ns.add_sat(o.end - o.start);
                    }
                }
            }
            continue;
        };
        file_rows(f, l.as_ref(), t, out.depth, view.by, &mut rows, &mut out);
    }
    let mut rows: Vec<ModuleRow> = rows.into_values().collect();
    rows.sort_by(|a, b| {
        b.gpu_inclusive_ns
            .cmp(&a.gpu_inclusive_ns)
            .then(b.cpu_inclusive_ns.cmp(&a.cpu_inclusive_ns))
            .then(a.name.cmp(&b.name))
    });
    out.rows = rows;
    out
}

fn file_rows(
    f: &FileData,
    l: Option<&Links>,
    t: &ModuleTree,
    depth: Option<usize>,
    by: ModuleGrouping,
    rows: &mut BTreeMap<String, ModuleRow>,
    out: &mut Modules,
) {
    // Each path's group, then each call's.
    let group_of_path: Vec<String> = t
        .paths
        .iter()
        .enumerate()
        .map(|(p, path)| match by {
            ModuleGrouping::Path => match depth {
                Some(d) => truncate(path, d).to_string(),
                None => path.clone(),
            },
            ModuleGrouping::Class => t.class[p].clone(),
            ModuleGrouping::Attribute if t.written[p] => attribute(path),
            ModuleGrouping::Attribute => t.class[p].clone(),
        })
        .collect();
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    for g in &group_of_path {
        let n = ids.len();
        ids.entry(g.as_str()).or_insert(n);
    }
    let names_of: Vec<&str> = {
        let mut v = vec![""; ids.len()];
        for (g, &i) in &ids {
            v[i] = g;
        }
        v
    };
    let group: Vec<usize> = t
        .path
        .iter()
        .map(|&p| ids[group_of_path[p as usize].as_str()])
        .collect();
    let mut acc = vec![ModuleRow::default(); ids.len()];
    let calls = &f.modules;
    // Each call's own time: its span less its direct children's.
    let mut own: Vec<i64> = calls.iter().map(|c| c.end - c.start).collect();
    for (i, &p) in t.parent.iter().enumerate() {
        if p != NONE {
            own[p as usize].sub_sat(calls[i].end - calls[i].start);
        }
    }
    for (i, c) in calls.iter().enumerate() {
        let g = group[i];
        acc[g].cpu_self_ns.add_sat(own[i]);
        if !ancestors(t, i as u32).any(|a| group[a as usize] == g) {
            acc[g].calls += 1;
            acc[g].cpu_inclusive_ns.add_sat(c.end - c.start);
        }
    }
    if let Some(l) = l {
        let mut seen: Vec<usize> = Vec::new();
        for (o, &op) in f.ops.iter().zip(&l.gpu) {
            if op == NONE || !o.kind.is_kernel() {
                continue;
            }
            let d = o.end - o.start;
            let m = t.op[op as usize];
            if m == NONE {
                out.outside_gpu_ns.add_sat(d);
                continue;
            }
            acc[group[m as usize]].gpu_self_ns.add_sat(d);
            seen.clear();
            for a in std::iter::once(m).chain(ancestors(t, m)) {
                let g = group[a as usize];
                if !seen.contains(&g) {
                    seen.push(g);
                    acc[g].gpu_inclusive_ns.add_sat(d);
                }
            }
        }
    }
    for (g, a) in acc.into_iter().enumerate() {
        let r = rows.entry(names_of[g].to_string()).or_default();
        r.name = names_of[g].to_string();
        r.calls += a.calls;
        r.cpu_inclusive_ns.add_sat(a.cpu_inclusive_ns);
        r.cpu_self_ns.add_sat(a.cpu_self_ns);
        r.gpu_inclusive_ns.add_sat(a.gpu_inclusive_ns);
        r.gpu_self_ns.add_sat(a.gpu_self_ns);
    }
}

/// The calls that hold call `i`, innermost first.
fn ancestors(t: &ModuleTree, i: u32) -> impl Iterator<Item = u32> + '_ {
    let up = |p: u32| Some(t.parent[p as usize]).filter(|&q| q != NONE);
    std::iter::successors(up(i), move |&p| up(p))
}
