//! The names of the environment variables the library reads (README.md, "Configuration").

pub const ENABLED: &str = "CUPROF_ENABLED";
pub const DIR: &str = "CUPROF_DIR";
/// cache-dit's directory variable, used when `CUPROF_DIR` is unset.
pub const CACHE_DIT_DIR: &str = "CACHE_DIT_TORCH_PROFILER_DIR";
pub const NAME: &str = "CUPROF_NAME";
/// The run the traces belong to (`cuprof run` sets it; else derived: [`super::run_id`]).
pub const RUN_ID: &str = "CUPROF_RUN_ID";
pub const ACTIVITIES: &str = "CUPROF_ACTIVITIES";
pub const API: &str = "CUPROF_API";
pub const WITH_STACK: &str = "CUPROF_WITH_STACK";
pub const QUEUED: &str = "CUPROF_QUEUED";
pub const TORCH_OPS: &str = "CUPROF_TORCH_OPS";
pub const RECORD_SHAPES: &str = "CUPROF_RECORD_SHAPES";
pub const ALL_THREADS: &str = "CUPROF_ALL_THREADS";
pub const WITH_FLOPS: &str = "CUPROF_WITH_FLOPS";
pub const WITH_MODULES: &str = "CUPROF_WITH_MODULES";
pub const TENSORBOARD: &str = "CUPROF_TENSORBOARD";
pub const WAIT: &str = "CUPROF_WAIT";
pub const WARMUP: &str = "CUPROF_WARMUP";
pub const ACTIVE: &str = "CUPROF_ACTIVE";
pub const REPEAT: &str = "CUPROF_REPEAT";
pub const SKIP_FIRST: &str = "CUPROF_SKIP_FIRST";
pub const SKIP_FIRST_WAIT: &str = "CUPROF_SKIP_FIRST_WAIT";
pub const STEP_NVTX: &str = "CUPROF_STEP_NVTX";
pub const CAPTURE_RANGE: &str = "CUPROF_CAPTURE_RANGE";
pub const DELAY: &str = "CUPROF_DELAY";
pub const DURATION: &str = "CUPROF_DURATION";
pub const RANKS: &str = "CUPROF_RANKS";
pub const CUPTI_PATH: &str = "CUPROF_CUPTI_PATH";
pub const MAX_MEM_EVENTS: &str = "CUPROF_MAX_MEM_EVENTS";
pub const DUMP_BUFFERS: &str = "CUPROF_DUMP_BUFFERS";
pub const BUFFER_SIZE: &str = "CUPROF_BUFFER_SIZE";
pub const BUFFERS: &str = "CUPROF_BUFFERS";
pub const FLUSH_MS: &str = "CUPROF_FLUSH_MS";
pub const GZIP_LEVEL: &str = "CUPROF_GZIP_LEVEL";
pub const REPORT_FILE: &str = "CUPROF_REPORT_FILE";
pub const QUIET: &str = "CUPROF_QUIET";
pub const ON_DEMAND: &str = "CUPROF_ON_DEMAND";
pub const SHUTDOWN_WAIT: &str = "CUPROF_SHUTDOWN_WAIT";

/// Rank, in order of preference (torchrun, Slurm, Open MPI, MPICH/PMI).
pub const RANK_VARS: [&str; 4] = ["RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"];
pub const WORLD_SIZE_VARS: [&str; 4] = [
    "WORLD_SIZE",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
];
pub const LOCAL_RANK_VARS: [&str; 3] =
    ["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"];
