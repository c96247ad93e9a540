//! Which runtime and driver API calls CUPTI records: by default only the ones that make, move
//! or wait for GPU work, because CUPTI's cost grows with every recorded call (PyTorch makes
//! about six runtime calls per operator, most of them queries).

use crate::cupti::libcupti::{ActivityKind, Cupti};
use crate::host::resolve::Names;
use cuprof_core::config::{ApiFilter, Config};
use cuprof_core::event::ApiDomain;

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

/// One API domain's per-call switches.
struct Domain {
    domain: ApiDomain,
    /// The callback ids of the calls that are not kept.
    silenced: Vec<u32>,
}

impl Domain {
    fn new(domain: ApiDomain, names: &Names, keep: fn(&str) -> bool) -> Domain {
        let silenced = (names.api_names(domain).iter().enumerate().skip(1))
            .filter(|(_, name)| !keep(name))
            .map(|(cbid, _)| cbid as u32)
            .collect();
        Domain { domain, silenced }
    }

    fn silence(&self, cupti: &Cupti) {
        for &cbid in &self.silenced {
            cupti.switch_api_call(self.domain, cbid, false);
        }
    }
}

/// The per-call switches, worked out once at start-up (CUPTI 12.5+ only: older CUPTI records
/// every call of the enabled API kinds).
///
/// CUPTI offers two ways to record a few calls: enable the whole kind and switch the others
/// off, or leave the kind off and switch the kept calls on (what `cupti_activity.h` advises for
/// a small set). Only the first works: on an H100 with CUPTI 13.0 the second recorded no API
/// call at all (BENCHMARKS.md, "GPU figures").
pub struct ApiPlan {
    runtime: Domain,
    /// `None` with `CUPROF_API=runtime` (the DRIVER kind stays off).
    driver: Option<Domain>,
}

impl ApiPlan {
    /// `None` when every call of the API kinds is recorded: no CPU activity, `CUPROF_API=all`,
    /// or a CUPTI without per-call switches.
    pub fn new(cfg: &Config, cupti: &Cupti, names: &Names) -> Option<ApiPlan> {
        if !(cupti.has_api_switches() && cfg.activities.cpu && cfg.api != ApiFilter::All) {
            return None;
        }
        let runtime = Domain::new(ApiDomain::Runtime, names, keep_runtime);
        let driver = (cfg.api == ApiFilter::Filtered)
            .then(|| Domain::new(ApiDomain::Driver, names, keep_driver));
        Some(ApiPlan { runtime, driver })
    }

    /// Switches the unkept calls off after the activity kinds went on: enabling a whole API kind
    /// resets its per-call switches, so this follows every enable.
    pub fn silence(&self, cupti: &Cupti) {
        self.runtime.silence(cupti);
        if let Some(driver) = &self.driver {
            driver.silence(cupti);
        }
    }
}

/// The API activity kinds to enable when CPU activity is traced.
pub fn api_kinds(api: ApiFilter) -> &'static [ActivityKind] {
    match api {
        ApiFilter::Runtime => &[ActivityKind::CUPTI_ACTIVITY_KIND_RUNTIME],
        ApiFilter::Filtered | ApiFilter::All => &[
            ActivityKind::CUPTI_ACTIVITY_KIND_RUNTIME,
            ActivityKind::CUPTI_ACTIVITY_KIND_DRIVER,
        ],
    }
}
