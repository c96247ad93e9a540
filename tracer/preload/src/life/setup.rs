//! Bringing CUPTI up at CUDA initialisation, in the order the design note gives: load,
//! version, subscribe, thread ids, buffer callbacks, callbacks, API filter, kinds; and the
//! tracer and channel built around it.

use crate::cupti::libcupti::{self as cupti, ActivityKind};
use crate::host::error::StartError;
use crate::host::process::say;
use crate::pipe::channel::{self, Inbox};
use crate::pipe::tracer::Tracer;
use crate::sources::ops;
use cuprof_core::collect::{Collect, TorchOptions};
use cuprof_core::config::Config;
use cuprof_core::decode::{Decoder, LayoutFamily};
use cupti_sys::CUpti_driver_api_trace_cbid_enum as Drv;
use cupti_sys::CUpti_runtime_api_trace_cbid_enum as Rt;
use std::sync::{Arc, Mutex};

/// Messages the channel holds at least: each is one CUPTI buffer's batch or one NVTX range.
const CHANNEL_CAPACITY: usize = 4096;

/// CUPROF_LOG=error|warn|info|debug|trace: cuprof's own diagnostics on stderr (CUPTI setup,
/// window transitions, flushes, files). Off by default: the host's stderr is not ours.
fn init_logging() {
    let level = match std::env::var("CUPROF_LOG").as_deref().map(str::trim) {
        Ok("error") => tracing::Level::ERROR,
        Ok("warn") => tracing::Level::WARN,
        Ok("info") => tracing::Level::INFO,
        Ok("debug") => tracing::Level::DEBUG,
        Ok("trace") => tracing::Level::TRACE,
        _ => return,
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_target(false)
        .try_init();
}

/// The GPU group's activity kinds.
fn gpu_kinds() -> Vec<ActivityKind> {
    vec![
        ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
        ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
        ActivityKind::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
        // Where awaited events were recorded: the wait_on_* fields of event syncs.
        ActivityKind::CUPTI_ACTIVITY_KIND_CUDA_EVENT,
    ]
}

/// The CPU group's activity kinds.
fn cpu_kinds(cfg: &Config) -> Vec<ActivityKind> {
    let mut k = crate::cupti::api::api_kinds(cfg.api).to_vec();
    k.push(ActivityKind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    k
}

/// Loads and configures CUPTI; returns the tracer and the writer's end of its channel.
/// Errors are one line for stderr.
pub fn connect(cfg: &Config) -> Result<(Tracer, Inbox), StartError> {
    init_logging();
    let explicit = cfg
        .cupti_path
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned());
    let cupti = cupti::load(explicit.as_deref())?;
    let version = cupti.version();
    let family = LayoutFamily::from_version(version)?;
    tracing::debug!(path = %cupti.path, version, ?family, "libcupti loaded");
    crate::sources::callbacks::subscribe(&cupti)?;
    cupti.use_system_thread_ids();
    cupti
        .register_buffer_callbacks(
            crate::sources::buffers::requested,
            crate::sources::buffers::completed,
        )
        .map_err(StartError::BufferCallbacks)?;
    let names = crate::host::resolve::Names::new(
        |d, c| cupti.callback_name(d, c),
        Rt::CUPTI_RUNTIME_TRACE_CBID_SIZE.0,
        Drv::CUPTI_DRIVER_TRACE_CBID_SIZE.0,
    );
    crate::sources::callbacks::enable(
        &cupti,
        cfg.with_stack && cfg.activities.mem,
        cfg.activities.mem,
    );
    // Queued/submitted times on kernel records (Kineto's `queued` arg) exist only when asked for,
    // and cost time on every launch (about 1.2 us on an H100): only with CUPROF_QUEUED.
    if cfg.queued {
        cupti.enable_latency_timestamps();
    }
    // Memory records stay on for the whole run: a snapshot needs every live allocation, and
    // allocations are rare in caching allocators.
    if cfg.activities.mem {
        if let Err(e) = cupti.enable_kind(ActivityKind::CUPTI_ACTIVITY_KIND_MEMORY2) {
            say(&format!("CUPTI refused device-memory records: {e}"));
        }
    }
    let api = crate::cupti::api::ApiPlan::new(cfg, &cupti, &names);
    // The recorder's inputs, for the Python bridge to run it when the window first collects.
    crate::host::python::set_recorder(crate::host::python::Recorder {
        source: ops::RECORDER,
        observer_source: ops::OBSERVER_SOURCE,
        hooks: std::ptr::addr_of!(ops::HOOKS) as usize,
        set_path: ops::set_path,
        set_distributed: ops::set_distributed,
    });
    let options = Collect {
        cpu: cfg.activities.cpu,
        gpu: cfg.activities.gpu,
        torch_ops: cfg.torch_ops,
        torch: TorchOptions {
            shapes: cfg.record_shapes,
            all_threads: cfg.all_threads,
            flops: cfg.with_flops,
            memory: cfg.activities.mem,
            modules: cfg.with_modules,
        },
        with_stack: cfg.with_stack,
    };
    let (cpu_kinds, gpu_kinds) = (cpu_kinds(cfg), gpu_kinds());
    tracing::debug!(?options, cpu_kinds = ?cpu_kinds.iter().map(|k| k.0).collect::<Vec<_>>(), memory = cfg.activities.mem, with_stack = cfg.with_stack, api = ?cfg.api, per_call = api.is_some(), "activity kinds");
    let pool = crate::cupti::pool::Pool::new(cfg.buffer_size, cfg.buffers);
    // A flush from the writer thread (periodic, or to reclaim buffers) sends every partly filled
    // buffer into the writer's own channel before it can drain any: room for all, twice.
    let capacity = CHANNEL_CAPACITY.max(2 * pool.max_out());
    let counters: Arc<cuprof_core::session::Counters> = Arc::new(Default::default());
    let (outbox, inbox) = channel::bounded(capacity, counters.clone());
    let tracer = Tracer {
        api,
        cupti_version: version,
        decoder: Mutex::new(Decoder::new(family)),
        names: Mutex::new(names),
        pool,
        channel: outbox,
        counters,
        cpu_kinds,
        gpu_kinds,
        options,
        dump_dir: cfg.dump_buffers.clone(),
        pid: std::process::id(),
        report_file: cfg.report_file.clone(),
        shutdown_wait: cfg.shutdown_wait,
        kinds_on: Default::default(),
        cupti,
    };
    Ok((tracer, inbox))
}
