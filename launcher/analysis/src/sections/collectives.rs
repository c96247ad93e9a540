//! `cuprof report`'s collectives: NCCL's collectives (and any other backend's that opens
//! torch's `record_param_comms` operator around them) by collective name, element type and
//! group size, with what nccl-tests reports for one: calls, message size, the GPU time of the
//! kernels launched inside them, and algorithm and bus bandwidth.
//!
//! Each collective's operator carries torch's `saveNcclMeta` fields in torch.profiler's traces
//! and cuprof's (`Collective name`, `dtype`, `In msg nelems`, `Out msg nelems`, `Group size`);
//! its kernels are those attributed to it as to any operator ([`crate::model::links::links`]).
//! A message's size is nccl-tests' `size`: the larger of the elements sent and received (an
//! all-gather's whole output, a reduce-scatter's whole input), times the element's size. Bus bandwidth is algorithm bandwidth times nccl-tests'
//! factor for the collective (`2(n-1)/n` for an all-reduce, `(n-1)/n` for all-gather,
//! reduce-scatter and all-to-all, 1 for broadcast and reduce), which makes it comparable with
//! the link's speed whatever the group's size. A kernel's time includes its wait for the other
//! ranks to arrive, as nccl-tests' does.
//!
//! That wait is also what [`waits`] measures per rank, with no clock shared between ranks: a
//! collective's kernels end together on every rank of its group, so a rank whose kernel ran
//! longer than the shortest of them waited for the others that long. The same collective is
//! found on each rank by its group's name and its number in the group (`Process Group Name`,
//! `Seq`). The rank that waits least is the one the others wait for.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::load::{FileData, Interner, NO_NAME};
use crate::model::links::{LaunchedKernels, Links};
use crate::saturating::AddSat;

/// One collective name, element type and group size over every file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveRow {
    /// `Collective name` as torch names it (`allreduce`, `allgather_into_tensor_coalesced`...).
    pub name: String,
    /// Element type as torch prints it (`Float`, `BFloat16`); empty when not written.
    pub dtype: String,
    /// Ranks in the process group; absent when not written.
    pub group_size: Option<i64>,
    pub count: u64,
    /// Message bytes summed over the calls; absent when the element type's size is unknown.
    pub bytes: Option<i64>,
    /// The collective operators' own spans on the CPU, summed.
    pub cpu_ns: i64,
    /// The GPU time of the kernels launched inside them.
    pub gpu_ns: i64,
    pub kernels: u64,
    /// `bytes` over `gpu_ns`, GB/s (10^9 bytes per second); absent without both.
    pub algbw_gbps: Option<f64>,
    /// `algbw_gbps` times nccl-tests' factor for the collective and group size; absent for a
    /// collective nccl-tests has no factor for (send, receive, barrier, gather...).
    pub busbw_gbps: Option<f64>,
}

/// One rank's waiting in the collectives it shares with other ranks of the traces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveWait {
    pub rank: i64,
    /// Collectives found on this rank and on at least one other.
    pub matched: u64,
    /// The GPU time of this rank's kernels in them.
    pub gpu_ns: i64,
    /// Of it, the time beyond the shortest rank's kernel of each collective: waiting for the
    /// ranks that came later.
    pub wait_ns: i64,
}

/// Bytes of one element of a dtype as torch names it (`c10::toString` of the scalar type).
fn element_bytes(dtype: &str) -> Option<i64> {
    Some(match dtype {
        "Byte" | "Char" | "Bool" | "QInt8" | "QUInt8" => 1,
        d if d.starts_with("Float8") => 1,
        "Short" | "Half" | "BFloat16" | "UInt16" => 2,
        "Int" | "Float" | "ComplexHalf" | "QInt32" | "UInt32" => 4,
        "Long" | "Double" | "ComplexFloat" | "UInt64" => 8,
        "ComplexDouble" => 16,
        _ => return None,
    })
}

/// nccl-tests' bus bandwidth factor for a collective in a group of `n` ranks.
fn bus_factor(name: &str, n: i64) -> Option<f64> {
    if n < 1 {
        return None;
    }
    let plain: String = name
        .chars()
        .filter(|c| *c != '_')
        .collect::<String>()
        .to_ascii_lowercase();
    let base = ["coalesced", "base", "intotensor", "tensor", "v"]
        .iter()
        .fold(plain.as_str(), |s, suffix| {
            s.strip_suffix(suffix).unwrap_or(s)
        });
    let share = (n - 1) as f64 / n as f64;
    Some(match base {
        "allreduce" => 2.0 * share,
        "allgather" | "reducescatter" | "alltoall" => share,
        "broadcast" | "reduce" => 1.0,
        _ => return None,
    })
}

/// Each rank's waiting in the collectives found on two ranks or more (the same group name,
/// `Seq` and collective name), by rank; empty when no collective is found twice.
pub fn waits(files: &[FileData], links: &[Option<Links>]) -> Vec<CollectiveWait> {
    // (group, seq, name) -> (rank, GPU time of its kernels in it)
    let mut by: FxHashMap<(u32, i64, u32), Vec<(i64, i64)>> = FxHashMap::default();
    for (f, links) in files.iter().zip(links) {
        let (Some(rank), Some(links)) = (f.rank, links.as_ref()) else {
            continue;
        };
        if f.collectives.is_empty() {
            continue;
        }
        let kernels = LaunchedKernels::of_file(f, links);
        for c in f
            .collectives
            .iter()
            .filter(|c| c.seq >= 0 && c.group != NO_NAME)
        {
            if let Some((ns, _)) = kernels.of(c.op) {
                by.entry((c.group, c.seq, c.name))
                    .or_default()
                    .push((rank, ns));
            }
        }
    }
    let mut per: std::collections::BTreeMap<i64, CollectiveWait> = Default::default();
    for ranks in by.values() {
        let mut distinct: Vec<i64> = ranks.iter().map(|r| r.0).collect();
        distinct.sort_unstable();
        distinct.dedup();
        // On two ranks or more, each once (a rank with two traces of one collective cannot
        // say which is which).
        if distinct.len() < 2 || distinct.len() != ranks.len() {
            continue;
        }
        let shortest = ranks.iter().map(|r| r.1).min().unwrap_or(0);
        for &(rank, ns) in ranks {
            let w = per.entry(rank).or_insert(CollectiveWait {
                rank,
                matched: 0,
                gpu_ns: 0,
                wait_ns: 0,
            });
            w.matched += 1;
            w.gpu_ns.add_sat(ns);
            w.wait_ns.add_sat(ns - shortest);
        }
    }
    per.into_values().collect()
}

/// The collectives of `files` (`links`: each file's operator links), by GPU time (then name,
/// dtype and group size).
pub fn collectives(
    names: &Interner,
    files: &[FileData],
    links: &[Option<Links>],
) -> Vec<CollectiveRow> {
    #[derive(Default)]
    struct Acc {
        count: u64,
        bytes: Option<i64>,
        cpu_ns: i64,
        gpu_ns: i64,
        kernels: u64,
    }
    let mut by: FxHashMap<(u32, u32, i64), Acc> = FxHashMap::default();
    for (f, links) in files.iter().zip(links) {
        let Some(links) = links.as_ref().filter(|_| !f.collectives.is_empty()) else {
            continue;
        };
        let kernels = LaunchedKernels::of_file(f, links);
        for c in &f.collectives {
            let a = by
                .entry((c.name, c.dtype, c.group_size))
                .or_insert_with(|| Acc {
                    bytes: Some(0),
                    ..Acc::default()
                });
            a.count += 1;
            let op = &f.cpu_ops[c.op as usize];
            a.cpu_ns.add_sat(op.end - op.start);
            let size = if c.dtype == NO_NAME {
                None
            } else {
                element_bytes(names.name(c.dtype))
            };
            let elements = c.in_nelems.max(c.out_nelems);
            a.bytes = match (a.bytes, size) {
                (Some(b), Some(size)) if elements >= 0 => {
                    Some(b.saturating_add(elements.saturating_mul(size)))
                }
                _ => None,
            };
            if let Some((ns, k)) = kernels.of(c.op) {
                a.gpu_ns.add_sat(ns);
                a.kernels += k;
            }
        }
    }
    let mut rows: Vec<CollectiveRow> = by
        .into_iter()
        .map(|((name, dtype, group), a)| {
            let name = names.name(name).to_string();
            let algbw = match a.bytes {
                Some(b) if a.gpu_ns > 0 => Some(b as f64 / a.gpu_ns as f64),
                _ => None,
            };
            let busbw = algbw.and_then(|bw| Some(bw * bus_factor(&name, group)?));
            CollectiveRow {
                dtype: if dtype == NO_NAME {
                    String::new()
                } else {
                    names.name(dtype).to_string()
                },
                name,
                group_size: (group >= 0).then_some(group),
                count: a.count,
                bytes: a.bytes,
                cpu_ns: a.cpu_ns,
                gpu_ns: a.gpu_ns,
                kernels: a.kernels,
                algbw_gbps: algbw,
                busbw_gbps: busbw,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.gpu_ns
            .cmp(&a.gpu_ns)
            .then_with(|| b.cpu_ns.cmp(&a.cpu_ns))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.dtype.cmp(&b.dtype))
            .then_with(|| a.group_size.cmp(&b.group_size))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_factors_are_nccl_tests() {
        assert_eq!(bus_factor("allreduce", 8), Some(1.75));
        assert_eq!(bus_factor("allreduce_coalesced", 2), Some(1.0));
        assert_eq!(bus_factor("allgather_into_tensor_coalesced", 4), Some(0.75));
        assert_eq!(bus_factor("_allgather_base", 4), Some(0.75));
        assert_eq!(
            bus_factor("reduce_scatter_tensor_coalesced", 8),
            Some(0.875)
        );
        assert_eq!(bus_factor("all_to_allv", 4), Some(0.75));
        assert_eq!(bus_factor("broadcast", 8), Some(1.0));
        assert_eq!(bus_factor("reduce", 8), Some(1.0));
        assert_eq!(bus_factor("send", 2), None);
        assert_eq!(bus_factor("barrier", 8), None);
        assert_eq!(bus_factor("allreduce", -1), None);
        assert_eq!(bus_factor("allreduce", 1), Some(0.0));
    }

    #[test]
    fn element_sizes_are_torchs() {
        assert_eq!(element_bytes("Float"), Some(4));
        assert_eq!(element_bytes("BFloat16"), Some(2));
        assert_eq!(element_bytes("Float8_e4m3fn"), Some(1));
        assert_eq!(element_bytes("Long"), Some(8));
        assert_eq!(element_bytes("float"), None);
    }
}
