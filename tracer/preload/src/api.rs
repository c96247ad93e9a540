//! Which runtime and driver API calls CUPTI records: by default only the ones that make, move
//! or wait for GPU work, because CUPTI's cost grows with every recorded call (PyTorch makes
//! about six runtime calls per operator, most of them queries).

use crate::cupti;
use cuprof_core::config::{ApiFilter, Config};
use cuprof_core::decode::kind;
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
    /// `cuptiActivityEnableRuntimeApi` or `cuptiActivityEnableDriverApi`.
    set: unsafe extern "C" fn(u32, u8) -> cupti::CuptiResult,
    /// The callback ids of the calls that are not kept.
    silenced: Vec<u32>,
}

impl Domain {
    fn new(
        set: unsafe extern "C" fn(u32, u8) -> cupti::CuptiResult,
        names: &[cuprof_core::event::Name],
        keep: fn(&str) -> bool,
    ) -> Domain {
        let silenced = (names.iter().enumerate().skip(1))
            .filter(|(_, name)| !keep(name))
            .map(|(cbid, _)| cbid as u32)
            .collect();
        Domain { set, silenced }
    }

    fn silence(&self) {
        for &cbid in &self.silenced {
            // SAFETY: CUPTI's per-call switch, integer arguments.
            unsafe { (self.set)(cbid, 0) };
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
    pub fn new(
        cfg: &Config,
        set: Option<cupti::ApiSwitches>,
        names: &crate::resolve::Names,
    ) -> Option<ApiPlan> {
        let set = set.filter(|_| cfg.activities.cpu && cfg.api != ApiFilter::All)?;
        let runtime = Domain::new(
            set.runtime,
            names.api_names(ApiDomain::Runtime),
            keep_runtime,
        );
        let driver = (cfg.api == ApiFilter::Filtered)
            .then(|| Domain::new(set.driver, names.api_names(ApiDomain::Driver), keep_driver));
        Some(ApiPlan { runtime, driver })
    }

    /// Switches the unkept calls off after the activity kinds went on: enabling a whole API kind
    /// resets its per-call switches, so this follows every enable.
    pub fn silence(&self) {
        self.runtime.silence();
        if let Some(driver) = &self.driver {
            driver.silence();
        }
    }
}

/// The API activity kinds to enable when CPU activity is traced.
pub fn api_kinds(api: ApiFilter) -> &'static [u32] {
    match api {
        ApiFilter::Runtime => &[kind::RUNTIME],
        ApiFilter::Filtered | ApiFilter::All => &[kind::RUNTIME, kind::DRIVER],
    }
}
