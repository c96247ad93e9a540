//! The C entry points of libcuprof.so that the loader, CUDA, NVTX and the program call (the
//! exit paths are [`crate::life::lifecycle`]'s, CUPTI's callbacks [`crate::sources::buffers`]' and
//! [`crate::sources::callbacks`]', NVTX's [`crate::sources::nvtx`]'s). Each one catches panics (`guard`): a panic
//! unwinding into C would abort the host program.

use crate::cupti::libcupti::forward;
use crate::host::process::{guard, say};
use crate::life::lifecycle;
use crate::pipe::tracer::running;
use crate::state::phase::{phase, Phase};
use crate::window::boundaries as window;
use cuprof_core::block::Block;
use cuprof_core::config::Config;
use cuprof_core::window::RangeSource;
use cupti_sys::{
    CUptiResult, CUpti_BuffersCallbackCompleteFunc, CUpti_BuffersCallbackRequestFunc,
    CUpti_CallbackFunc, CUpti_SubscriberHandle, CUpti_SubscriberParams,
};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The configuration read when the library was armed; `cuprof_reload_env` may replace it until
/// CUDA initialises, when `InitializeInjection` takes it into [`CONFIG`].
static ARMED: Mutex<Option<Config>> = Mutex::new(None);
/// The configuration tracing started with.
static CONFIG: OnceLock<Config> = OnceLock::new();
/// What reading it had to say, said at CUDA initialisation.
static WARNINGS: OnceLock<Vec<String>> = OnceLock::new();

/// This library's own path, for pointing the injection variables at it.
fn own_path() -> Option<CString> {
    // SAFETY: Dl_info is plain data (pointers and integers): all zeroes is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr on a function of this library fills `info` with static strings.
    let ok = unsafe { libc::dladdr(own_path as *const c_void, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader.
    Some(unsafe { CStr::from_ptr(info.dli_fname) }.to_owned())
}

fn armed() -> MutexGuard<'static, Option<Config>> {
    ARMED.lock().unwrap_or_else(|e| e.into_inner())
}

fn env_is(name: &str, value: &CStr) -> bool {
    std::env::var_os(name).is_some_and(|v| v.as_encoded_bytes() == value.to_bytes())
}

/// Runs when the library is loaded (LD_PRELOAD: before main; injection: inside cuInit).
/// Under the dynamic loader's lock: nothing here may block or start threads.
#[ctor::ctor(unsafe)]
fn on_load() {
    guard((), || {
        let (cfg, warnings) = Config::from_env();
        crate::host::process::set_quiet(cfg.quiet);
        if !cfg.enabled {
            // Only a malformed CUPROF_ENABLED gets here with something to say. Said once per
            // process tree (a `python3` may be a shim that starts dozens of processes): the
            // marker is inherited by the children.
            if !warnings.is_empty() && std::env::var_os("CUPROF_WARNED").is_none() {
                for w in &warnings {
                    say(w.trim_start_matches("cuprof: "));
                }
                // SAFETY: setenv with valid C strings, before the program's threads exist.
                unsafe { libc::setenv(c"CUPROF_WARNED".as_ptr(), c"1".as_ptr(), 1) };
            }
            return;
        }
        // Said at CUDA initialisation, once per CUDA process, not in every helper process.
        let _ = WARNINGS.set(warnings);
        if !cfg.traces_this_process() {
            return;
        }
        // A panic inside cuprof is caught at its entry points (`guard`); the default hook would
        // still print it into the host's stderr. This hook is cuprof's own (its own copy of std),
        // so a Rust host keeps its hook.
        std::panic::set_hook(Box::new(|info| {
            tracing::error!("cuprof: internal error: {info}")
        }));
        let Some(me) = own_path() else { return };
        // SAFETY: setenv with valid C strings; the constructor runs before the program's own
        // threads, so nothing reads the environment concurrently.
        unsafe {
            for var in [c"CUDA_INJECTION64_PATH", c"NVTX_INJECTION64_PATH"] {
                let name = var.to_str().unwrap_or_default();
                match std::env::var_os(name) {
                    None => {
                        libc::setenv(var.as_ptr(), me.as_ptr(), 1);
                    }
                    Some(_) if env_is(name, &me) => {}
                    Some(other) => say(&format!(
                        "{name} is already set to {} (another tool?); cuprof leaves it alone{}",
                        other.to_string_lossy(),
                        if name.starts_with("NVTX") {
                            ": NVTX ranges will not be traced"
                        } else {
                            ""
                        }
                    )),
                }
            }
        }
        *armed() = Some(cfg);
        lifecycle::arm();
    })
}

/// libcuda calls this inside `cuInit` when CUDA_INJECTION64_PATH names this library: the moment
/// CUDA starts in this process, and so the moment cuprof starts.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    guard(1, || {
        if phase() == Phase::Inert && armed().is_none() {
            // Loaded through CUDA_INJECTION64_PATH alone: tracing is on unless CUPROF_ENABLED=0.
            if std::env::var("CUPROF_ENABLED").is_ok_and(|v| v.trim() == "0") {
                return 1;
            }
            // Parse as if CUPROF_ENABLED=1, so that the other CUPROF_* variables count.
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let (cfg, warnings) = Config::from_lookup(
                |k| {
                    if k == "CUPROF_ENABLED" {
                        Some("1".into())
                    } else {
                        std::env::var_os(k)
                    }
                },
                now,
            );
            let _ = WARNINGS.set(warnings);
            if !cfg.traces_this_process() {
                return 1;
            }
            *armed() = Some(cfg);
            lifecycle::arm();
        }
        if !lifecycle::claim_start() {
            return 1;
        }
        // Only an armed library gets past claim_start, and arming stores a configuration.
        let Some(cfg) = armed().take() else { return 1 };
        let cfg = CONFIG.get_or_init(|| cfg);
        for w in WARNINGS.get().into_iter().flatten() {
            say(w.trim_start_matches("cuprof: "));
        }
        if let Err(e) = lifecycle::start(cfg) {
            say(&e.to_string());
            if let Some(rf) = &cfg.report_file {
                let note =
                    cuprof_core::config::report::ReportLine::Note(format!("not traced: {e}"));
                let _ = cuprof_core::config::report::append(rf, &note);
            }
        }
        1
    })
}

/// The NVTX3 loader calls this on the program's first NVTX call (NVTX_INJECTION64_PATH).
///
/// # Safety
/// Called by the NVTX loader with its export-table function.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtx2(
    get_export_table: Option<unsafe extern "C" fn(u32) -> *const c_void>,
) -> c_int {
    guard(0, || match get_export_table {
        // SAFETY: the loader's export-table function.
        Some(f) if phase() != Phase::Inert => unsafe { crate::sources::nvtx::initialize(f) },
        _ => 0,
    })
}

/// Marks a step boundary: the running step ends and the next begins (torch's `prof.step()`).
/// From Python: `ctypes.CDLL(None).cuprof_step()`.
#[no_mangle]
pub extern "C" fn cuprof_step() {
    guard((), || {
        if let Some(t) = running() {
            window::api_step(t)
        } else if phase() == Phase::Armed {
            window::pending_step()
        }
    })
}

/// Adds `n` units of work (tokens, samples) to the running step, for throughput figures.
#[no_mangle]
pub extern "C" fn cuprof_step_tokens(n: u64) {
    guard((), || window::add_work(n as f64))
}

/// The first refused step figure was said (later ones are not: a program refusing one each
/// step would flood stderr).
static FIGURE_REFUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Attaches the number `value`, named `name`, to the running step (`args.figures` of its
/// `ProfilerStep#N`; `tokens` adds to its work, as `cuprof_step_tokens`). Returns 0, or -1 when
/// refused (an empty name, a name over 64 bytes, a value that is not finite, a 17th figure in
/// one step), said once on stderr.
///
/// # Safety
/// `name` is null (read as empty) or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cuprof_step_figure(name: *const c_char, value: f64) -> c_int {
    guard(0, || {
        let name = if name.is_null() {
            std::borrow::Cow::Borrowed("")
        } else {
            // SAFETY: the caller passes a NUL-terminated string.
            unsafe { CStr::from_ptr(name) }.to_string_lossy()
        };
        match window::add_figure(&name, value) {
            Ok(()) => 0,
            Err(e) => {
                if !FIGURE_REFUSED.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    say(&format!("cuprof_step_figure: {e} (said once)"));
                }
                -1
            }
        }
    })
}

/// Starts a capture range (with CUPROF_CAPTURE_RANGE=cuprof).
#[no_mangle]
pub extern "C" fn cuprof_start() {
    guard((), || {
        if let Some(t) = running() {
            window::range_start(t, RangeSource::Cuprof)
        }
    })
}

/// Ends a capture range (with CUPROF_CAPTURE_RANGE=cuprof).
#[no_mangle]
pub extern "C" fn cuprof_stop() {
    guard((), || {
        if let Some(t) = running() {
            window::range_stop(t, RangeSource::Cuprof, None)
        }
    })
}

/// Begins a Python `profile()` block's window (`cuprof.profile`'s `__enter__`): `spec` is
/// [`Block`]'s text form (`wait=1 warmup=1 active=2 repeat=0 options=shapes=1`; empty: record
/// the whole block). What an earlier window records ends here. Returns 1: the block records
/// now; 3: the same, and what the earlier window was recording ended where the block began
/// (its file is closed by `cuprof_wait_files`); 2: kept until CUDA initialises (the library is
/// armed), when it begins; 0: this
/// process is not traced; -1: `spec` is malformed (said on stderr); -2: the process is traced
/// on demand, where `cuprof capture` chooses what is recorded.
///
/// # Safety
/// `spec` is null (read as empty) or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn cuprof_begin_window(spec: *const c_char) -> c_int {
    guard(0, || {
        let text = if spec.is_null() {
            String::new()
        } else {
            // SAFETY: the caller passes a NUL-terminated string.
            unsafe { CStr::from_ptr(spec) }
                .to_string_lossy()
                .into_owned()
        };
        let block = match Block::parse(&text) {
            Ok(b) => b,
            Err(e) => {
                say(&format!(
                    "cuprof_begin_window(\"{}\"): {e}",
                    text.escape_debug()
                ));
                return -1;
            }
        };
        if let Some(t) = running() {
            return match window::begin_block(t, block, 0) {
                window::BlockStart::Began => 1,
                window::BlockStart::BeganAfterRecording => 3,
                window::BlockStart::OnDemand => -2,
            };
        }
        if phase() == Phase::Armed {
            window::set_pending_block(Some(block));
            return 2;
        }
        0
    })
}

/// Ends a Python `profile()` block's window (`cuprof.profile`'s `__exit__`): what it records
/// ends now, CUPTI's records are flushed, and the writer closes the block's files before this
/// returns (waiting up to `timeout_ms`). Returns 1: a cycle was recorded and its files are
/// complete (`cuprof_trace_files` lists them); 0: nothing was being recorded (the schedule had
/// not reached a recorded step); -1: CUDA was never initialised, so nothing was recorded;
/// -2: the writer did not finish in time; -3: this process is not traced.
#[no_mangle]
pub extern "C" fn cuprof_end_window(timeout_ms: u32) -> c_int {
    guard(-3, || {
        let Some(t) = running() else {
            if phase() == Phase::Armed {
                window::set_pending_block(None);
                return -1;
            }
            return -3;
        };
        let recorded = window::end_block(t);
        if !close_ended(t, timeout_ms) {
            return -2;
        }
        c_int::from(recorded)
    })
}

/// Completes the files of the cycles whose recording ended (a schedule's cycle saved at a
/// `step()`), before `on_trace_ready` reads them: CUPTI's records are flushed and the writer
/// closes those cycles, waiting up to `timeout_ms`. Returns 1: done; -2: the writer did not
/// finish in time; -3: this process is not traced.
#[no_mangle]
pub extern "C" fn cuprof_wait_files(timeout_ms: u32) -> c_int {
    guard(-3, || match running() {
        Some(t) if close_ended(t, timeout_ms) => 1,
        Some(_) => -2,
        None => -3,
    })
}

/// Flushes CUPTI (its buffers reach the channel before the request that follows them) and
/// has the writer close every ended cycle.
fn close_ended(t: &crate::pipe::tracer::Tracer, timeout_ms: u32) -> bool {
    t.flush_cupti(true);
    t.channel
        .close_ended(std::time::Duration::from_millis(u64::from(timeout_ms)))
}

/// Where the library stands, [`Phase`] as a number (0 inert, 1 armed and waiting for CUDA,
/// 2 starting, 3 running, 4 and up finished or stepped aside). The Python module's
/// `cuprof.enabled()`.
#[no_mangle]
pub extern "C" fn cuprof_state() -> c_int {
    guard(0, || phase() as c_int)
}

/// Reads the `CUPROF_*` environment again while the library waits for CUDA (armed, CUDA not yet
/// initialised): the Python module's `cuprof.profile(...)` sets the variables its arguments
/// stand for, then calls this. 1: tracing will start with the new settings; 0: too late (CUDA
/// initialised already) or not armed, or the new settings do not trace this process (the
/// previous ones stay).
#[no_mangle]
pub extern "C" fn cuprof_reload_env() -> c_int {
    guard(0, || {
        let mut slot = armed();
        if phase() != Phase::Armed || slot.is_none() {
            return 0;
        }
        let (cfg, warnings) = Config::from_env();
        for w in &warnings {
            say(w.trim_start_matches("cuprof: "));
        }
        if !cfg.enabled || !cfg.traces_this_process() {
            return 0;
        }
        crate::host::process::set_quiet(cfg.quiet);
        *slot = Some(cfg);
        1
    })
}

/// The trace files written so far, one path per line, into `buf` (NUL-terminated when
/// `cap` leaves room). Returns the length of the whole list (without the NUL): a caller
/// whose `cap` was smaller calls again with a larger buffer.
///
/// # Safety
/// `buf` is null (`cap` is then ignored), or points to `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn cuprof_trace_files(buf: *mut c_char, cap: usize) -> usize {
    guard(0, || {
        let list = crate::writer::report::files_written();
        let bytes = list.as_bytes();
        if !buf.is_null() && cap > bytes.len() {
            // SAFETY: the caller gives `cap` writable bytes at `buf`, and `cap > bytes.len()`
            // leaves room for the list and its NUL.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
                *buf.add(bytes.len()) = 0;
            }
        }
        bytes.len()
    })
}

/// Interposed `cuptiSubscribe`: a second CUPTI client is starting.
///
/// # Safety
/// Same contract as CUPTI's `cuptiSubscribe`.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut CUpti_SubscriberHandle,
    callback: CUpti_CallbackFunc,
    userdata: *mut c_void,
) -> CUptiResult {
    guard(forward::NOT_INITIALIZED, || {
        lifecycle::step_aside("cuptiSubscribe");
        // SAFETY: the caller's arguments, under CUPTI's contract.
        unsafe { forward::subscribe(subscriber, callback, userdata) }
    })
}

/// Interposed `cuptiSubscribe_v2` (CUPTI 13+): a second CUPTI client is starting.
///
/// # Safety
/// Same contract as CUPTI's `cuptiSubscribe_v2`.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe_v2(
    subscriber: *mut CUpti_SubscriberHandle,
    callback: CUpti_CallbackFunc,
    userdata: *mut c_void,
    params: *mut CUpti_SubscriberParams,
) -> CUptiResult {
    guard(forward::NOT_INITIALIZED, || {
        lifecycle::step_aside("cuptiSubscribe_v2");
        // SAFETY: the caller's arguments, under CUPTI's contract.
        unsafe { forward::subscribe_v2(subscriber, callback, userdata, params) }
    })
}

/// Interposed `cuptiActivityRegisterCallbacks`: a second activity client is starting.
///
/// # Safety
/// Same contract as CUPTI's `cuptiActivityRegisterCallbacks`.
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    requested: CUpti_BuffersCallbackRequestFunc,
    completed: CUpti_BuffersCallbackCompleteFunc,
) -> CUptiResult {
    guard(forward::NOT_INITIALIZED, || {
        lifecycle::step_aside("cuptiActivityRegisterCallbacks");
        // SAFETY: the caller's arguments, under CUPTI's contract.
        unsafe { forward::register_callbacks(requested, completed) }
    })
}
