//! The run id: what every rank's trace of one run shares, so that analysis never adds two runs
//! together. `cuprof run` chooses it ([`launcher_run_id`]) and hands it down in
//! `CUPROF_RUN_ID`; a library started without the launcher derives it ([`derive`]).
//!
//! The rule, in order (README.md, `CUPROF_RUN_ID`):
//! 1. `CUPROF_RUN_ID`, when set (the launcher sets it; a user may, to join processes no
//!    launcher relates, like the nodes of a job without a rendezvous id);
//! 2. the job's own identity ([`job_run_id`]): torchrun's rendezvous id
//!    (`TORCHELASTIC_RUN_ID`, unless `none`, its default without `--rdzv-id`/`--standalone`):
//!    `torchelastic-ID`; else a Slurm step (`SLURM_JOB_ID` with `SLURM_STEP_ID`, set in the
//!    tasks of `srun`): `slurm-JOB.STEP`;
//! 3. the library alone: a rank of a job of several processes (world size above 1) takes its
//!    parent's identity, `HOST-PPID-TICKS` (the parent's pid and start time: torchrun's agent or
//!    `mp.spawn`'s parent, shared by the ranks of one host); a lone process its own,
//!    `HOST-PID-TICKS`. The launcher, the root of its job, takes `HOST-PID-UNIXTIME` of itself.

use std::ffi::OsString;

/// The process facts [`derive`] needs, read from `/proc` by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessFacts {
    pub hostname: String,
    pub pid: u32,
    /// `/proc/self/stat`'s start time (clock ticks after boot).
    pub start_ticks: u64,
    pub ppid: u32,
    /// The parent's start time.
    pub parent_start_ticks: u64,
}

/// The identity of the job the process belongs to, where its launcher gives one: `torchrun`'s
/// rendezvous id, else a Slurm step (module documentation, rule 2).
pub fn job_run_id(lookup: impl Fn(&str) -> Option<OsString>) -> Option<String> {
    let text = |var: &str| {
        lookup(var)
            .and_then(|v| v.into_string().ok())
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if let Some(id) = text("TORCHELASTIC_RUN_ID").filter(|id| id != "none") {
        return Some(format!("torchelastic-{id}"));
    }
    let job = text("SLURM_JOB_ID").or_else(|| text("SLURM_JOBID"))?;
    let step = text("SLURM_STEP_ID").or_else(|| text("SLURM_STEPID"))?;
    Some(format!("slurm-{job}.{step}"))
}

/// The run id of a traced process (module documentation): `CUPROF_RUN_ID`, else the job's,
/// else its parent's (a rank of a job of `world_size` above 1) or its own identity.
pub fn derive(
    lookup: impl Fn(&str) -> Option<OsString>,
    world_size: u32,
    facts: &ProcessFacts,
) -> String {
    if let Some(id) = lookup(super::vars::RUN_ID)
        .and_then(|v| v.into_string().ok())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
    {
        return id;
    }
    if let Some(id) = job_run_id(&lookup) {
        return id;
    }
    let host = &facts.hostname;
    if world_size > 1 {
        format!("{host}-{}-{}", facts.ppid, facts.parent_start_ticks)
    } else {
        format!("{host}-{}-{}", facts.pid, facts.start_ticks)
    }
}

/// The run id `cuprof run` gives its program: its own `CUPROF_RUN_ID` when set (an outer
/// launcher's or the user's), else the job's ([`job_run_id`]: every task of `srun cuprof run`
/// computes the same), else `HOST-PID-UNIXTIME` of the launcher.
pub fn launcher_run_id(
    lookup: impl Fn(&str) -> Option<OsString>,
    hostname: &str,
    pid: u32,
    now_unix: u64,
) -> String {
    let facts = ProcessFacts {
        hostname: hostname.to_owned(),
        pid,
        start_ticks: now_unix,
        ..ProcessFacts::default()
    };
    derive(lookup, 1, &facts)
}

/// The parent's pid and the process's start time (clock ticks after boot) in the text of
/// `/proc/PID/stat`: fields 4 and 22, counted after the command name, which may hold spaces
/// and parentheses and ends at the last `)`.
pub fn parse_stat(stat: &str) -> Option<(u32, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state).
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((ppid, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: Vec<(String, OsString)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |k| map.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    fn facts() -> ProcessFacts {
        ProcessFacts {
            hostname: "node3".into(),
            pid: 400,
            start_ticks: 9000,
            ppid: 300,
            parent_start_ticks: 8000,
        }
    }

    #[test]
    fn rule_in_order() {
        let all = [
            ("CUPROF_RUN_ID", "given"),
            ("TORCHELASTIC_RUN_ID", "abc"),
            ("SLURM_JOB_ID", "77"),
            ("SLURM_STEP_ID", "2"),
        ];
        assert_eq!(derive(env(&all), 2, &facts()), "given");
        assert_eq!(derive(env(&all[1..]), 2, &facts()), "torchelastic-abc");
        assert_eq!(derive(env(&all[2..]), 2, &facts()), "slurm-77.2");
        // torchrun's default rendezvous id names no run.
        let none = [("TORCHELASTIC_RUN_ID", "none"), ("SLURM_JOB_ID", "77")];
        assert_eq!(derive(env(&none), 2, &facts()), "node3-300-8000");
        // A Slurm job without a step (the batch script) is no run: it runs many programs.
        assert_eq!(derive(env(&none), 1, &facts()), "node3-400-9000");
        assert_eq!(
            derive(
                env(&[("SLURM_JOBID", "5"), ("SLURM_STEPID", "0")]),
                1,
                &facts()
            ),
            "slurm-5.0"
        );
    }

    #[test]
    fn launcher_ids() {
        let srun = [("SLURM_JOB_ID", "77"), ("SLURM_STEP_ID", "0")];
        assert_eq!(launcher_run_id(env(&srun), "n1", 10, 1), "slurm-77.0");
        assert_eq!(launcher_run_id(env(&[]), "n1", 10, 1700), "n1-10-1700");
        let given = [("CUPROF_RUN_ID", " mine ")];
        assert_eq!(launcher_run_id(env(&given), "n1", 10, 1700), "mine");
    }

    #[test]
    fn stat_fields() {
        let stat = "4242 (py (x) y) S 4200 4242 4200 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 \
                    123456 1000 200 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((4200, 123456)));
        assert_eq!(parse_stat("4242 (py"), None);
    }
}
