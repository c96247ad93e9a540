//! Which runtime and driver API calls CUPTI records: by default only the ones that make, move
//! or wait for GPU work, because CUPTI's cost grows with every recorded call (PyTorch makes
//! about six runtime calls per operator, most of them queries).

use crate::cupti::{self, DOMAIN_DRIVER, DOMAIN_RUNTIME};
use cuprof_core::config::{ApiFilter, ApiSelect, Config};
use cuprof_core::decode::kind;

/// Runtime calls recorded by default: the ones that make or wait for GPU work.
pub fn keep_runtime(name: &str) -> bool {
    const KEEP: [&str; 12] = [
        "cudaLaunch",
        "cudaGraphLaunch",
        "cudaMemcpy",
        "cudaMemset",
        "cudaMalloc",
        "cudaFree",
        "cudaStreamWaitEvent",
        "cudaEventRecord",
        "cudaProfilerSt",
        "cudaDeviceReset",
        "cudaDeviceSynchronize",
        "cudaHostAlloc",
    ];
    KEEP.iter().any(|k| name.starts_with(k)) || name.ends_with("Synchronize")
}

/// Driver calls recorded by default: direct launches (Triton, CUTLASS Python) and graph
/// launches; the driver calls the runtime makes underneath are already covered.
pub fn keep_driver(name: &str) -> bool {
    const KEEP: [&str; 4] = [
        "cuLaunch",
        "cuGraphLaunch",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
    ];
    KEEP.iter().any(|k| name.starts_with(k))
}

/// The per-call switches, worked out once at start-up (CUPTI 12.5+ only: older CUPTI records
/// every call of the enabled API kinds).
pub struct ApiPlan {
    set: cupti::ApiFilter,
    select: ApiSelect,
    /// (domain, callback id, kept), for every call CUPTI names.
    calls: Vec<(u32, u32, bool)>,
}

impl ApiPlan {
    /// `None` when every call of the API kinds is recorded: no CPU activity, `CUPROF_API=all`,
    /// or a CUPTI without per-call switches.
    pub fn new(
        cfg: &Config,
        set: Option<cupti::ApiFilter>,
        names: &crate::resolve::Names,
    ) -> Option<ApiPlan> {
        let set = set.filter(|_| cfg.activities.cpu && cfg.api != ApiFilter::All)?;
        let mut calls = Vec::new();
        let runtime = names.api_names(cuprof_core::event::ApiDomain::Runtime);
        for (cbid, name) in runtime.iter().enumerate().skip(1) {
            calls.push((DOMAIN_RUNTIME, cbid as u32, keep_runtime(name)));
        }
        // With CUPROF_API=runtime no driver call is recorded, and the DRIVER kind stays off.
        if cfg.api == ApiFilter::Filtered {
            let driver = names.api_names(cuprof_core::event::ApiDomain::Driver);
            for (cbid, name) in driver.iter().enumerate().skip(1) {
                calls.push((DOMAIN_DRIVER, cbid as u32, keep_driver(name)));
            }
        }
        Some(ApiPlan {
            set,
            select: cfg.api_select,
            calls,
        })
    }

    /// Applies the switches when the activity kinds go on (after them: enabling a whole API kind
    /// resets its per-call switches) or off.
    pub fn apply(&self, on: bool) {
        for &(domain, cbid, kept) in &self.calls {
            let value = match self.select {
                ApiSelect::Silence if on && !kept => 0,
                ApiSelect::Enable if kept => u8::from(on),
                _ => continue,
            };
            let set = if domain == DOMAIN_RUNTIME {
                self.set.runtime
            } else {
                self.set.driver
            };
            // SAFETY: CUPTI's per-call switch, integer arguments.
            unsafe { set(cbid, value) };
        }
    }
}

/// The whole API activity kinds to enable: none when the plan switches calls on one by one.
pub fn api_kinds(cfg: &Config, plan: Option<&ApiPlan>) -> Vec<u32> {
    if !cfg.activities.cpu || plan.is_some_and(|p| p.select == ApiSelect::Enable) {
        return Vec::new();
    }
    if cfg.api == ApiFilter::Runtime {
        vec![kind::RUNTIME]
    } else {
        vec![kind::RUNTIME, kind::DRIVER]
    }
}
