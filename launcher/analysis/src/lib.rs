//! cuprof's offline analysis: reads traces and computes, renders, compares, merges and exports
//! them (`cuprof report | flame | compare | merge | export`). The `cuprof` binary is glue over it.
//!
//! Each command is one call: [`report`], [`flame`], [`compare`], [`merge`], [`export`], each
//! taking its options and the writers for what the command prints (stdout, then stderr's
//! notices), and returning its error rather than printing it (the binary prints
//! [`io::console::error_line`] and exits with status 1). The binary passes its own stdout and
//! stderr, a test passes buffers. What belongs to a process rather than to a call is asked for
//! by the program: progress bars ([`load::show_progress_bars`]) and the removal of temporary
//! outputs on Ctrl-C ([`io::output::remove_temporaries_on_signal`]).
//!
//! Every command streams each file once through [`cuprof_core::reader`] into compact columns
//! ([`load`]), one file per worker ([`crate::io::jobs`], `-j N`), then computes from those. Each
//! worker interns names on its own; the names are merged in file order, so every figure and
//! every tie is what one thread reading the files in order gives. The definitions below are the contract the tests check
//! (`docs/analysis.md` says the same for users).
//!
//! * **Steps**: `ProfilerStep#N` events of category `user_annotation` (`ph: "X"`). Latency is
//!   their `dur`; percentiles interpolate linearly between closest ranks (numpy's default).
//!   Throughput is the sum of `args.work` over the steps that carry it divided by their summed
//!   duration, in work units per second (per rank; the all-ranks figure pools every rank's
//!   steps).
//! * **GPU operations**: events of category `kernel`, `gpu_memcpy`, `gpu_memset`, on the device
//!   `args.device` (else `pid`). A kernel whose name contains `nccl` (any case) is
//!   communication, any other kernel compute.
//! * **Breakdown per device**: the window runs from the start of the device's first operation
//!   to the end of its last (`wall`). Each instant of the window is counted once: compute if a
//!   compute kernel runs on any stream, else communication if one runs, else memcpy, else
//!   memset, else idle. So concurrent streams are a union, and the five parts sum exactly to
//!   `wall`. Idle instants that fall inside a `cuda_sync` event of that device, or inside a CPU
//!   call of `cudaDeviceSynchronize`/`cudaStreamSynchronize`/`cudaEventSynchronize` (or their
//!   driver twins) on any thread of the process, are *sync wait*; the other idle instants are
//!   *host-bound* (the GPU waited for work to be submitted). Several files of one rank
//!   (profiling cycles) add up window by window.
//! * **Top kernels**: per demangled name, count and the plain sum of durations (overlapping
//!   kernels each count in full); share = total / sum over all kernels.
//! * **NVTX buckets**: each GPU operation's duration goes to the innermost `user_annotation`
//!   range (other than `ProfilerStep#N`) open, `start <= t <= end`, on the thread of the
//!   `cuda_runtime`/`cuda_driver` event whose `args.correlation` equals the operation's, at that
//!   call's start `t`. No such call: `(no launch record)`; no open range: `(no NVTX range)`.
//! * **Operators** (`cpu_op` events, [`operators`]): nested per thread by containment; self
//!   time = duration minus the operators directly inside. A GPU operation belongs to the
//!   operator its `External id` names, else to the one its launch's `External id` names (by
//!   correlation), else to `(no operator)`.
//! * **Modules** ([`sections::modules`]): `nn.Module` calls (`python_function` events named
//!   `nn.Module: ...`) nested per thread by containment, each with its `Module path` or the
//!   names of the calls around it; an operator belongs to the innermost call holding it, and
//!   its kernels' time with it. Per path (or depth, class, attribute): calls, CPU and GPU time,
//!   self and inclusive.
//! * **CUDA API calls, NVTX ranges and labels** ([`sections::durations`]): per call name and per range
//!   name, count, total, share, mean, median, min and max, as Nsight Systems' `cuda_api_sum`
//!   and `nvtx_sum`.
//! * **Collectives** ([`sections::collectives`]): per collective name, dtype and group size (the metadata
//!   on `record_param_comms` operators), nccl-tests' message bytes, the GPU time of the kernels
//!   attributed to them, algorithm and bus bandwidth; per rank, the time its kernels in the
//!   collectives it shares with other ranks ran beyond the shortest rank's (waiting for them).
//! * **Triton kernels** ([`sections::triton`]): torch.compile's generated kernels, per kernel and the
//!   file inductor wrote it to (the keyword inputs on each launch's operator): launches, the
//!   GPU time of the kernels attributed to them, and GB/s and TFLOP/s against inductor's
//!   estimates of one launch's bytes and operations.
//! * **Kernel launches** ([`sections::launches`]): HTA's launch statistics, each kernel's launch call
//!   time and the delay from its end to the kernel's start, with HTA's outlier counts.
//! * **Findings** ([`sections::findings`]): host synchronizations, pageable copies, the GPU's host-bound
//!   gaps, kernels shorter than their launch and driver allocations inside steps, each tied to
//!   operators and Python lines.
//! * **Series** ([`sections::series`]): each rank's step durations, and each device's memory counter
//!   (`reserved_bytes`) thinned to at most 2,000 points keeping each time bucket's extremes;
//!   `report --html` ([`views::html`]) plots these and the figures above.
//! * **Across ranks**: imbalance = max / mean over ranks (of mean step time, of GPU busy
//!   time); for each step number seen on two ranks or more, the rank whose step took longest
//!   (ties: lowest rank); comm/compute overlap = time communication and compute kernels ran
//!   together / total communication time (union).

//!
//! The crate's folders, each importing only those after it: [`report`], [`run_summary`],
//! [`compare`], [`merge`], [`export`] (the commands) -> [`views`] (text, Markdown, HTML, flame
//! graphs, the files of a report) -> [`summary`] (summary.json's schema and the summary of all
//! sections) -> [`sections`] (one figure each) -> [`model`] (the loaded files and what is
//! derived from them once) -> [`load`] (trace files into columns) -> [`format`], [`saturating`],
//! [`io`] (stdout, output files, workers) -> [`escape`] (one escaping layer per output syntax:
//! terminal, Markdown, XML/HTML, JSON, folded stacks). `docs/architecture.md` has the tree.

pub mod compare;
pub mod escape;
pub mod export;
pub mod format;
pub mod io;
pub mod load;
pub mod merge;
pub mod model;
pub mod report;
pub mod run_summary;
pub mod saturating;
pub mod sections;
pub mod summary;
pub mod views;

pub use compare::{compare, CompareOptions};
pub use export::{export, ExportOptions};
pub use io::jobs::Jobs;
pub use load::trace_files;
pub use merge::{merge, MergeOptions};
pub use report::{report, ReportOptions};
pub use run_summary::{after_run, ReportOf};
pub use views::flame::{flame, FlameOptions};
