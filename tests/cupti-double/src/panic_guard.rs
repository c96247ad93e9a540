//! The guard around every exported entry point: no panic may cross the C ABI.

/// Runs `f`, turning a panic into `fallback`: no panic may cross the C ABI.
pub(crate) fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(fallback)
}
