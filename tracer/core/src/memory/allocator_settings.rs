//! [`AllocatorSettings`]: the `allocator_settings` dict of a snapshot, held by each timeline.

/// The `allocator_settings` dict. torch writes its caching allocator's configuration
/// here; cuprof describes how its segments are to be read, with torch's defaults (the
/// values of the reference snapshot): no `max_split_size` (-1), no garbage collection
/// threshold, no expandable segments (cuprof's segments are plain `cudaMalloc`s or pool
/// allocations, never mapped piecewise), one pinned-memory registration thread, no
/// power-of-two rounding divisions. `pytorch_cuda_alloc_conf` is written verbatim as
/// `PYTORCH_CUDA_ALLOC_CONF`: empty by default; the tracer may set it to the traced
/// process's environment variable so a reader knows how torch was configured.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocatorSettings {
    pub pytorch_cuda_alloc_conf: String,
    pub max_split_size: i64,
    pub garbage_collection_threshold: f64,
    pub expandable_segments: bool,
    pub pinned_num_register_threads: i64,
    pub release_lock_on_cudamalloc: bool,
    pub pinned_use_cuda_host_register: bool,
    pub graph_capture_record_stream_reuse: bool,
    /// `roundup_power2_divisions`: size in MiB (a power of two, written as a string key,
    /// as torch does) -> divisions. Default: 1, 2, 4, ... 32768, each 0.
    pub roundup_power2_divisions: Vec<(u64, i64)>,
}

impl Default for AllocatorSettings {
    fn default() -> Self {
        AllocatorSettings {
            pytorch_cuda_alloc_conf: String::new(),
            max_split_size: -1,
            garbage_collection_threshold: 0.0,
            expandable_segments: false,
            pinned_num_register_threads: 1,
            release_lock_on_cudamalloc: false,
            pinned_use_cuda_host_register: false,
            graph_capture_record_stream_reuse: false,
            roundup_power2_divisions: (0..16).map(|i| (1u64 << i, 0)).collect(),
        }
    }
}
