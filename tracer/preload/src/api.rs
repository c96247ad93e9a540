//! Which runtime and driver API calls CUPTI records: by default only the ones that make, move
//! or wait for GPU work, because CUPTI's cost grows with every recorded call (PyTorch makes
//! about six runtime calls per operator, most of them queries).

use crate::cupti;
use cuprof_core::config::{ApiFilter, ApiSelect, Config};
use cuprof_core::decode::kind;
use cuprof_core::event::ApiDomain;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

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

/// Driver calls that load GPU code: a program making them (Triton, NVRTC users, CuPy) will
/// launch that code through the driver, so with `CUPROF_API=auto` they switch driver launch
/// records on.
pub fn loads_code(name: &str) -> bool {
    name.starts_with("cuModuleLoad") || name.starts_with("cuLibraryLoad")
}

/// One API domain's per-call switches.
struct Domain {
    /// `cuptiActivityEnableRuntimeApi` or `cuptiActivityEnableDriverApi`.
    set: unsafe extern "C" fn(u32, u8) -> cupti::CuptiResult,
    select: ApiSelect,
    /// (callback id, kept), for every call CUPTI names.
    calls: Vec<(u32, bool)>,
}

impl Domain {
    fn new(
        set: unsafe extern "C" fn(u32, u8) -> cupti::CuptiResult,
        select: ApiSelect,
        names: &[cuprof_core::event::Name],
        keep: fn(&str) -> bool,
    ) -> Domain {
        let calls = (names.iter().enumerate().skip(1))
            .map(|(cbid, name)| (cbid as u32, keep(name)))
            .collect();
        Domain { set, select, calls }
    }

    fn apply(&self, on: bool) {
        for &(cbid, kept) in &self.calls {
            let value = match self.select {
                ApiSelect::Silence if on && !kept => 0,
                ApiSelect::Enable if kept => u8::from(on),
                _ => continue,
            };
            // SAFETY: CUPTI's per-call switch, integer arguments.
            unsafe { (self.set)(cbid, value) };
        }
    }
}

/// The per-call switches, worked out once at start-up (CUPTI 12.5+ only: older CUPTI records
/// every call of the enabled API kinds).
pub struct ApiPlan {
    runtime: Domain,
    driver: Option<Domain>,
    /// Driver calls whose callbacks switch driver records on (`CUPROF_API=auto`).
    code_loads: Vec<u32>,
    /// The activity kinds are on (the window records).
    kinds_on: AtomicBool,
    /// Driver records are wanted: from the start with `filtered`, after a code load with `auto`.
    driver_wanted: AtomicBool,
    /// `auto`: a code-loading driver call was seen.
    code_loaded: AtomicBool,
}

impl ApiPlan {
    /// `None` when every call of the API kinds is recorded: no CPU activity, `CUPROF_API=all`,
    /// or a CUPTI without per-call switches (`auto` then records every driver call too).
    pub fn new(
        cfg: &Config,
        set: Option<cupti::ApiSwitches>,
        names: &crate::resolve::Names,
    ) -> Option<ApiPlan> {
        let set = set.filter(|_| cfg.activities.cpu && cfg.api != ApiFilter::All)?;
        let runtime_names = names.api_names(ApiDomain::Runtime);
        let driver_names = names.api_names(ApiDomain::Driver);
        let runtime = Domain::new(set.runtime, cfg.api_select, runtime_names, keep_runtime);
        // `auto` switches driver records on while the kinds may be on already: only per call.
        let driver = match cfg.api {
            ApiFilter::Filtered => Some(cfg.api_select),
            ApiFilter::Auto => Some(ApiSelect::Enable),
            ApiFilter::Runtime | ApiFilter::All => None,
        }
        .map(|select| Domain::new(set.driver, select, driver_names, keep_driver));
        let code_loads = match cfg.api {
            ApiFilter::Auto => (driver_names.iter().enumerate())
                .filter(|(_, name)| loads_code(name))
                .map(|(cbid, _)| cbid as u32)
                .collect(),
            _ => Vec::new(),
        };
        Some(ApiPlan {
            runtime,
            driver,
            code_loads,
            kinds_on: AtomicBool::new(false),
            driver_wanted: AtomicBool::new(cfg.api == ApiFilter::Filtered),
            code_loaded: AtomicBool::new(false),
        })
    }

    /// Applies the switches when the activity kinds go on (after them: enabling a whole API kind
    /// resets its per-call switches) or off.
    pub fn apply(&self, on: bool) {
        // SeqCst with `settle`: of a transition and driver records being switched on at the same
        // time, at least one sees the other and switches the driver calls.
        self.kinds_on.store(on, SeqCst);
        self.runtime.apply(on);
        if let Some(driver) = self.driver.as_ref() {
            if self.driver_wanted.load(SeqCst) {
                driver.apply(on);
            }
        }
    }

    /// The driver calls whose callbacks tell that the program loads GPU code itself.
    pub fn code_loads(&self) -> &[u32] {
        &self.code_loads
    }

    /// A code-loading driver call returned (CUPTI callback, application thread). True the first
    /// time: the writer is then asked to switch driver launch records on (not here, inside
    /// CUPTI's callback).
    pub fn note_code_load(&self) -> bool {
        !self.code_loaded.swap(true, SeqCst)
    }

    /// On the writer thread: switches driver launch records on once a code load was noted.
    /// True the one time it does.
    pub fn settle(&self) -> bool {
        let Some(driver) = &self.driver else {
            return false;
        };
        if !self.code_loaded.load(SeqCst) || self.driver_wanted.swap(true, SeqCst) {
            return false;
        }
        // A window transition may run meanwhile (it takes no lock of ours, and may itself be
        // inside a CUPTI callback): follow the kinds' state until it holds still.
        let mut on = self.kinds_on.load(SeqCst);
        if on {
            driver.apply(true);
        }
        loop {
            let now = self.kinds_on.load(SeqCst);
            if now == on {
                return true;
            }
            on = now;
            driver.apply(on);
        }
    }
}

/// The whole API activity kinds to enable: none when the plan switches calls on one by one.
pub fn api_kinds(cfg: &Config, plan: Option<&ApiPlan>) -> Vec<u32> {
    if !cfg.activities.cpu {
        return Vec::new();
    }
    let Some(plan) = plan else {
        // No per-call switches: whole kinds (`runtime` still leaves the driver out).
        return match cfg.api {
            ApiFilter::Runtime => vec![kind::RUNTIME],
            _ => vec![kind::RUNTIME, kind::DRIVER],
        };
    };
    let mut k = Vec::new();
    if plan.runtime.select == ApiSelect::Silence {
        k.push(kind::RUNTIME);
    }
    if plan
        .driver
        .as_ref()
        .is_some_and(|d| d.select == ApiSelect::Silence)
    {
        k.push(kind::DRIVER);
    }
    k
}
