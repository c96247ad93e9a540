//! Why tracing could not start. Each is one line for stderr and the launcher's report file
//! (`not traced: ...`), saying what is off and what to do; the program then runs untraced.

use std::fmt;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("could not load CUPROF_CUPTI_PATH={path}: {reason}")]
    CuptiPath { path: String, reason: String },
    #[error("libcupti not found (tried libcupti.so.13, libcupti.so.12, $CUDA_HOME/lib64, /usr/local/cuda/lib64): install the CUDA toolkit's CUPTI or the nvidia-cuda-cupti wheel, or set CUPROF_CUPTI_PATH")]
    CuptiNotFound,
    #[error("{path} is not a usable libcupti: it has no symbol {symbol}")]
    CuptiSymbol { path: String, symbol: &'static str },
    #[error(transparent)]
    CuptiVersion(#[from] cuprof_core::decode::DecodeError),
    #[error("another profiler already holds CUPTI in this process ({holder}; {result}); cuprof stays passive and the program runs untraced by it")]
    CuptiHeld { holder: String, result: CuptiResult },
    #[error("CUPTI refused: {0} (GPU profiling may be restricted to admin users: NVreg_RestrictProfilingToAdminUsers); tracing is off")]
    CuptiPrivileges(CuptiResult),
    #[error("CUPTI subscribe failed: {0}; tracing is off")]
    Subscribe(CuptiResult),
    #[error("CUPTI refused the activity callbacks: {0}; tracing is off")]
    BufferCallbacks(CuptiResult),
    #[error("could not start the writer thread: {0}")]
    WriterThread(#[source] std::io::Error),
}

/// A CUPTI call's failure in CUPTI's words, with its code: `CUPTI_ERROR_NOT_INITIALIZED (15)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuptiResult(pub String);

impl fmt::Display for CuptiResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CuptiResult {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reason_is_one_line_naming_what_to_do() {
        let held = StartError::CuptiHeld {
            holder: "held by \"nsys\"".into(),
            result: CuptiResult("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39)".into()),
        };
        assert_eq!(
            held.to_string(),
            "another profiler already holds CUPTI in this process (held by \"nsys\"; CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39)); cuprof stays passive and the program runs untraced by it"
        );
        let symbol = StartError::CuptiSymbol {
            path: "/x/libcupti.so".into(),
            symbol: "cuptiSubscribe",
        };
        assert_eq!(
            symbol.to_string(),
            "/x/libcupti.so is not a usable libcupti: it has no symbol cuptiSubscribe"
        );
        for e in [held, symbol, StartError::CuptiNotFound] {
            assert!(!e.to_string().contains('\n'));
        }
    }
}
