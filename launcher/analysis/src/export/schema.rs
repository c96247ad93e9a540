//! The tables of an exported dataset and their columns: the contract of `docs/tables.md`.
//!
//! Times are integer nanoseconds after the file's `baseTimeNanoseconds` (every rank of a job
//! shares that base; `files.base_time_ns` has it), converted from the trace's microseconds
//! text digit by digit, never through a float. `end_ns = start_ns + max(dur, 0)`, as `cuprof
//! report` counts it. The partition columns `rank` and `cycle` are in the directory names
//! (`kernels/rank=0/cycle=1/NAME.parquet`), not in the files.

/// The Arrow type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Float,
    Text,
    Bool,
}

/// How Parquet encodes a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enc {
    /// Dictionary: names, ids and other repeated values.
    Dict,
    /// Delta: times, correlation ids (growing values).
    Delta,
    /// Plain: floats and unique text.
    Plain,
}

#[derive(Debug)]
pub struct Col {
    pub name: &'static str,
    pub kind: Kind,
    pub enc: Enc,
    pub nullable: bool,
}

const fn col(name: &'static str, kind: Kind, enc: Enc, nullable: bool) -> Col {
    Col {
        name,
        kind,
        enc,
        nullable,
    }
}

use Enc::{Delta, Dict, Plain};
use Kind::{Bool, Float, Int, Text};

/// `kernel` events.
pub const KERNELS: &[Col] = &[
    col("name", Text, Dict, false),
    col("device", Int, Dict, false),
    col("stream", Int, Dict, true),
    col("start_ns", Int, Delta, false),
    col("end_ns", Int, Delta, false),
    col("correlation", Int, Delta, true),
    col("external_id", Int, Delta, true),
    col("grid_x", Int, Dict, true),
    col("grid_y", Int, Dict, true),
    col("grid_z", Int, Dict, true),
    col("block_x", Int, Dict, true),
    col("block_y", Int, Dict, true),
    col("block_z", Int, Dict, true),
    col("registers_per_thread", Int, Dict, true),
    col("shared_memory", Int, Dict, true),
    col("graph_id", Int, Dict, true),
];

/// `gpu_memcpy` and `gpu_memset` events.
pub const COPIES: &[Col] = &[
    col("kind", Text, Dict, false),
    col("name", Text, Dict, false),
    col("device", Int, Dict, false),
    col("stream", Int, Dict, true),
    col("start_ns", Int, Delta, false),
    col("end_ns", Int, Delta, false),
    col("bytes", Int, Dict, true),
    col("bandwidth_gbps", Float, Plain, true),
    col("correlation", Int, Delta, true),
    col("external_id", Int, Delta, true),
];

/// `cuda_runtime` and `cuda_driver` events.
pub const API_CALLS: &[Col] = &[
    col("kind", Text, Dict, false),
    col("name", Text, Dict, false),
    col("pid", Int, Dict, true),
    col("tid", Int, Dict, true),
    col("start_ns", Int, Delta, false),
    col("end_ns", Int, Delta, false),
    col("correlation", Int, Delta, true),
    col("external_id", Int, Delta, true),
    col("cbid", Int, Dict, true),
];

/// `cpu_op` events (PyTorch operators).
pub const OPERATORS: &[Col] = &[
    col("name", Text, Dict, false),
    col("pid", Int, Dict, true),
    col("tid", Int, Dict, true),
    col("start_ns", Int, Delta, false),
    col("end_ns", Int, Delta, false),
    col("external_id", Int, Delta, true),
    col("sequence_number", Int, Delta, true),
    col("fwd_thread_id", Int, Dict, true),
    col("input_dims", Text, Dict, true),
    col("call_stack", Text, Dict, true),
    col("flops", Int, Dict, true),
    col("collective", Text, Dict, true),
    col("dtype", Text, Dict, true),
    col("in_msg_nelems", Int, Dict, true),
    col("out_msg_nelems", Int, Dict, true),
    col("group_size", Int, Dict, true),
    col("kernel_file", Text, Dict, true),
    col("kernel_num_gb", Float, Plain, true),
    col("kernel_flop", Int, Dict, true),
    col("num_warps", Int, Dict, true),
    col("num_stages", Int, Dict, true),
    col("kernel_kwargs", Text, Dict, true),
];

/// `user_annotation` (NVTX ranges, `record_function`) other than steps, and
/// `gpu_user_annotation` (the same ranges on the GPU timeline: pid/tid are device/stream).
pub const RANGES: &[Col] = &[
    col("kind", Text, Dict, false),
    col("name", Text, Dict, false),
    col("pid", Int, Dict, true),
    col("tid", Int, Dict, true),
    col("start_ns", Int, Delta, false),
    col("end_ns", Int, Delta, false),
    col("domain", Text, Dict, true),
    col("payload", Float, Plain, true),
];

/// `ProfilerStep#N` annotations.
pub const STEPS: &[Col] = &[
    col("step", Int, Delta, false),
    col("pid", Int, Dict, true),
    col("tid", Int, Dict, true),
    col("start_ns", Int, Delta, false),
    col("end_ns", Int, Delta, false),
    col("work", Float, Plain, true),
];

/// Memory counters: cuprof's `cuda_memory` counters (one row per counter of the event) and
/// Kineto's `[memory]` instants (one row each for `Bytes`, `Total Allocated`, `Total
/// Reserved`).
pub const MEMORY: &[Col] = &[
    col("name", Text, Dict, false),
    col("device", Int, Dict, true),
    col("ts_ns", Int, Delta, false),
    col("counter", Text, Dict, false),
    col("value", Int, Delta, false),
    col("addr", Int, Plain, true),
];

/// `nn.Module` forward calls: `python_function` events named `nn.Module: CLASS_N`
/// (torch.profiler's `with_stack`, cuprof's `--with-modules`).
pub const MODULES: &[Col] = &[
    col("name", Text, Dict, false),
    col("class", Text, Dict, false),
    col("path", Text, Dict, true),
    col("pid", Int, Dict, true),
    col("tid", Int, Dict, true),
    col("start_ns", Int, Delta, false),
    col("end_ns", Int, Delta, false),
    col("python_id", Int, Delta, true),
    col("python_parent_id", Int, Delta, true),
];

/// One row per input file (not partitioned: `rank` and `cycle` are columns here).
pub const FILES: &[Col] = &[
    col("path", Text, Plain, false),
    col("rank", Int, Plain, false),
    col("cycle", Int, Plain, false),
    col("world_size", Int, Plain, true),
    col("hostname", Text, Dict, true),
    col("pid", Int, Plain, true),
    col("cuprof_version", Text, Dict, true),
    col("window", Text, Dict, true),
    col("trace_name", Text, Plain, true),
    col("devices", Text, Dict, true),
    col("base_time_ns", Int, Plain, true),
    col("clock_realtime_ns", Int, Plain, true),
    col("clock_monotonic_ns", Int, Plain, true),
    col("events", Int, Plain, false),
    col("compressed_bytes", Int, Plain, false),
    col("uncompressed_bytes", Int, Plain, false),
    col("truncated", Text, Plain, true),
    col("stats_events", Int, Plain, true),
    col("dropped_channel", Int, Plain, true),
    col("dropped_cupti", Int, Plain, true),
    col("dropped_buffers", Int, Plain, true),
    col("kernels_without_timestamps", Int, Plain, true),
    col("memory_events_dropped", Int, Plain, true),
    col("complete", Bool, Plain, true),
    col("operator_link", Text, Dict, false),
];

/// Every table, by directory name.
pub const TABLES: &[(&str, &[Col])] = &[
    ("kernels", KERNELS),
    ("copies", COPIES),
    ("api_calls", API_CALLS),
    ("operators", OPERATORS),
    ("ranges", RANGES),
    ("steps", STEPS),
    ("memory", MEMORY),
    ("modules", MODULES),
    ("files", FILES),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/tables.md documents every column of every table, as `| column |` rows under the
    /// table's `## name` heading.
    #[test]
    fn docs_list_every_column() {
        let doc = include_str!("../../../../docs/tables.md");
        for (table, cols) in TABLES {
            let head = format!("\n## `{table}`");
            let at = doc
                .find(&head)
                .unwrap_or_else(|| panic!("docs/tables.md has no {head:?} section"));
            let section = &doc[at + head.len()..];
            let section = &section[..section.find("\n## ").unwrap_or(section.len())];
            for c in *cols {
                assert!(
                    section.contains(&format!("| `{}` |", c.name)),
                    "docs/tables.md: `{table}` does not document column `{}`",
                    c.name
                );
            }
        }
    }
}
