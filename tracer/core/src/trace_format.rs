//! The trace file's top level, in one place: the members around `traceEvents` (Kineto's schema
//! plus cuprof's own), the header and footer as the writer writes them, and the types of the
//! members that the writer ([`crate::trace_writer`]), the reader ([`crate::reader`]) and
//! [`crate::repair`] share. The events themselves are docs/trace-format.md's.
//!
//! A cuprof trace is, in this order: [`member::SCHEMA_VERSION`], [`member::DEVICE_PROPERTIES`],
//! [`member::DISTRIBUTED_INFO`] (only for a rank of a job: [`Header::distributed`]), [`member::CUPROF`], [`member::DISPLAY_TIME_UNIT`],
//! [`member::BASE_TIME_NS`], [`member::TRACE_EVENTS`], then [`member::STATS`] and
//! [`member::TRACE_NAME`].

use std::io;

use serde::{Deserialize, Serialize};

/// The top-level members' names.
pub mod member {
    pub const SCHEMA_VERSION: &str = "schemaVersion";
    pub const DEVICE_PROPERTIES: &str = "deviceProperties";
    pub const DISTRIBUTED_INFO: &str = "distributedInfo";
    /// cuprof's own: who wrote the file, and when in the run ([`super::CuprofMember`]).
    pub const CUPROF: &str = "cuprof";
    pub const DISPLAY_TIME_UNIT: &str = "displayTimeUnit";
    pub const BASE_TIME_NS: &str = "baseTimeNanoseconds";
    pub const TRACE_EVENTS: &str = "traceEvents";
    /// cuprof's own: what the tracer knows it lost ([`super::TraceStats`]).
    pub const STATS: &str = "cuprofStats";
    pub const TRACE_NAME: &str = "traceName";
}

/// Kineto floors wall-clock time to this boundary so that every rank computes the same base.
pub const BASE_TIME_BOUNDARY_NS: u64 = 7_889_238 * 1_000_000_000;

/// The trace's `baseTimeNanoseconds` for a wall-clock time.
pub fn base_time_ns(realtime_ns: u64) -> u64 {
    realtime_ns / BASE_TIME_BOUNDARY_NS * BASE_TIME_BOUNDARY_NS
}

/// The `cuprofStats` that repair adds to a cut trace that lost its own.
pub const REPAIRED_STATS: &str = "{\"complete\": false, \"repaired\": true}";

/// One entry of `deviceProperties`, as the writer has it from the driver by ordinal.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeviceProps {
    pub id: u32,
    pub name: String,
    pub total_global_mem: u64,
    pub compute_major: i32,
    pub compute_minor: i32,
    pub max_threads_per_block: i32,
    pub max_threads_per_multiprocessor: i32,
    pub regs_per_block: i32,
    pub warp_size: i32,
    pub shared_mem_per_block: i32,
    pub num_sms: i32,
    pub regs_per_multiprocessor: i32,
    pub shared_mem_per_block_optin: i32,
    pub shared_mem_per_multiprocessor: i32,
    #[serde(skip)]
    pub max_blocks_per_multiprocessor: i32,
}

/// One entry of `deviceProperties` as a reader finds it: only the members analysis shows, each
/// absent from some other tool's traces.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct DeviceProperties {
    pub id: Option<i64>,
    pub name: Option<String>,
    #[serde(rename = "totalGlobalMem")]
    pub total_global_mem: Option<u64>,
    #[serde(rename = "numSms")]
    pub num_sms: Option<u64>,
}

/// `distributedInfo`, as far as a reader needs it. The writer spells it out in
/// [`Header::prefix`] instead: HTA finds the rank with the regex `"rank":\s+(\d+)`, which
/// serde_json's compact output would not match.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct DistributedInfo {
    pub rank: Option<i64>,
    pub world_size: Option<i64>,
}

/// `cuprof.clock`: CLOCK_REALTIME and CLOCK_MONOTONIC read at one instant by the traced process.
/// Both are required: an anchor with one clock aligns nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockAnchor {
    // Alphabetical, like every object cuprof has written (serde_json maps are sorted).
    pub monotonic_ns: i64,
    pub realtime_ns: i64,
}

/// The `cuprof` member. Its fields are in alphabetical order: the order of the files written
/// when it was a `serde_json::json!` map.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CuprofMember {
    pub clock: Option<ClockAnchor>,
    pub cupti_version: Option<i64>,
    pub cycle: Option<i64>,
    pub hostname: Option<String>,
    /// The file name prefix every rank of the run shares (`CUPROF_NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What recorded PyTorch operators when the file was opened: `native` (cuprof's
    /// RecordFunction observer) or `nvtx` (PyTorch's NVTX observer, the fallback); absent when
    /// none had started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operators: Option<String>,
    pub pid: Option<i64>,
    /// The run the file belongs to, the same in every rank's file (`CUPROF_RUN_ID`, else
    /// derived from the job: [`crate::config::run_id`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// cuprof's version.
    pub version: Option<String>,
    /// The profiling window, as the configuration describes it.
    pub window: Option<String>,
}

/// `cuprofStats`, written at the end of a file: the events in it and what the tracer knows it
/// lost. Read with every member optional (a repaired file has only `complete`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceStats {
    pub events: u64,
    pub dropped_channel: u64,
    pub dropped_cupti: u64,
    pub dropped_buffers: u64,
    pub kernels_without_timestamps: u64,
    pub memory_events_dropped: u64,
    /// The writer closed the file itself; `false` in a repaired one, `None` where not said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
}

impl TraceStats {
    /// Records lost on the way (channel, CUPTI, buffers).
    pub fn dropped(&self) -> u64 {
        self.dropped_channel + self.dropped_cupti + self.dropped_buffers
    }
}

/// What the writer puts in a trace's header: the process, its rank, its devices, the window.
#[derive(Debug, Clone, Default)]
pub struct Header {
    pub devices: Vec<DeviceProps>,
    pub rank: u32,
    pub world_size: u32,
    pub local_rank: u32,
    /// torch.distributed was initialised when the operator recorder last started (or stopped).
    /// With it, or a `world_size` above 1 (one rank of a job, as its launcher's environment
    /// says), the header has `distributedInfo`; a single process that never used
    /// torch.distributed has none, as torch.profiler writes it.
    pub distributed: bool,
    pub pid: u32,
    /// Names the process's track (a metadata event), not a header member.
    pub process_name: String,
    pub hostname: String,
    /// [`CuprofMember::name`].
    pub name: String,
    /// [`CuprofMember::run_id`].
    pub run_id: String,
    pub cupti_version: u32,
    pub cycle: u32,
    /// CLOCK_REALTIME and CLOCK_MONOTONIC read at one instant, for aligning ranks when merging.
    pub clock_realtime_ns: u64,
    pub clock_monotonic_ns: u64,
    pub window: String,
    /// [`CuprofMember::operators`].
    pub operators: Option<&'static str>,
    pub base_time_ns: u64,
    /// Written in the footer ([`footer`]).
    pub trace_name: String,
}

impl Header {
    /// The file's beginning, up to and including the opening of `traceEvents`.
    pub fn prefix(&self) -> io::Result<String> {
        let devices = serde_json::to_string(&self.devices).map_err(io::Error::other)?;
        let cuprof = CuprofMember {
            clock: Some(ClockAnchor {
                monotonic_ns: self.clock_monotonic_ns as i64,
                realtime_ns: self.clock_realtime_ns as i64,
            }),
            cupti_version: Some(self.cupti_version.into()),
            cycle: Some(self.cycle.into()),
            hostname: Some(self.hostname.clone()),
            name: Some(self.name.clone()),
            operators: self.operators.map(str::to_owned),
            pid: Some(self.pid.into()),
            run_id: Some(self.run_id.clone()),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            window: Some(self.window.clone()),
        };
        let cuprof = serde_json::to_string(&cuprof).map_err(io::Error::other)?;
        // `"rank": N` with a space: HTA finds the rank with the regex `"rank":\s+(\d+)`. No
        // `backend`: the tracer sees the rank only through the launcher's environment, never
        // which torch.distributed backend the process used, and a guess of `nccl` would be
        // wrong for a gloo job.
        let distributed = if self.distributed || self.world_size > 1 {
            format!(
                " \"distributedInfo\": {{\"rank\": {}, \"world_size\": {}, \"local_rank\": {}}},\n",
                self.rank, self.world_size, self.local_rank
            )
        } else {
            String::new()
        };
        Ok(format!(
            "{{\"schemaVersion\": 1,\n \"deviceProperties\": {devices},\n{distributed} \"cuprof\": {cuprof},\n \"displayTimeUnit\": \"ms\",\n \"baseTimeNanoseconds\": {},\n \"traceEvents\": [\n",
            self.base_time_ns
        ))
    }
}

/// The file's end, after the last event: closes `traceEvents`, then the stats and the name.
pub fn footer(stats: &TraceStats, trace_name: &str) -> io::Result<String> {
    Ok(format!(
        "\n],\n \"cuprofStats\": {},\n \"traceName\": {}}}\n",
        serde_json::to_string(stats).map_err(io::Error::other)?,
        serde_json::to_string(trace_name).map_err(io::Error::other)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header parses as JSON up to `traceEvents`, with the members in the documented order.
    #[test]
    fn header_and_footer_close_into_json() {
        let h = Header {
            rank: 3,
            world_size: 4,
            hostname: "h".into(),
            name: "job".into(),
            run_id: "slurm-7.0".into(),
            ..Header::default()
        };
        let text = h.prefix().unwrap() + &footer(&TraceStats::default(), "t").unwrap();
        assert!(text.contains("\"rank\": 3"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v[member::DISTRIBUTED_INFO],
            serde_json::json!({"rank": 3, "world_size": 4, "local_rank": 0})
        );
        let cuprof: CuprofMember = serde_json::from_value(v[member::CUPROF].clone()).unwrap();
        assert_eq!(cuprof.hostname.as_deref(), Some("h"));
        assert_eq!(cuprof.name.as_deref(), Some("job"));
        assert_eq!(cuprof.run_id.as_deref(), Some("slurm-7.0"));
        assert_eq!(v[member::TRACE_NAME], "t");
        assert_eq!(v[member::STATS]["events"], 0);
        // A single process that never initialised torch.distributed has no distributedInfo;
        // one that did has it, with world size 1.
        let single = Header::default();
        let text = single.prefix().unwrap() + &footer(&TraceStats::default(), "t").unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(v.get(member::DISTRIBUTED_INFO).is_none(), "{text}");
        let initialised = Header {
            distributed: true,
            world_size: 1,
            ..Header::default()
        };
        let text = initialised.prefix().unwrap() + &footer(&TraceStats::default(), "t").unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v[member::DISTRIBUTED_INFO],
            serde_json::json!({"rank": 0, "world_size": 1, "local_rank": 0})
        );
        let stats: TraceStats = serde_json::from_str(REPAIRED_STATS).unwrap();
        assert_eq!(stats.complete, Some(false));
    }
}
