//! The one place cuprof talks to the CPython interpreter of the traced program, when there is
//! one: it runs the operator recorder (`sources::ops`, whose inputs `life::setup` hands over once
//! as a [`Recorder`]) when the window starts or stops collecting (so
//! PyTorch operators reach cuprof with no change to the program), and reads the Python call
//! stack for `--with-stack`.
//!
//! CPython's C API is found with `dlsym` in the running process (a `python` executable exports
//! it; a process without Python finds nothing and this module stays idle). Only functions of
//! CPython's stable API are used, so one libcuprof.so serves Python 3.9 to 3.14.
//!
//! The GIL: Python code runs only on a thread that holds the GIL already (an NVTX step range
//! popped from Python, torch's own CUDA initialisation) or, when the calling thread does not
//! (a `ctypes` call, which releases it), as a pending call on the main thread at its next
//! bytecode boundary. cuprof never waits for the GIL: inside `cuInit` that could deadlock
//! against a thread that holds the GIL and waits for CUDA.

use crate::host::process::{guard, say};
use crate::host::py_stacks::{Frames, Site, StackCache};
use cuprof_core::event::{Name, PyStack};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_long, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

type Obj = *mut c_void;

/// The CPython functions cuprof calls, resolved once.
struct Api {
    is_initialized: unsafe extern "C" fn() -> c_int,
    gil_check: unsafe extern "C" fn() -> c_int,
    gil_ensure: unsafe extern "C" fn() -> c_int,
    gil_release: unsafe extern "C" fn(c_int),
    add_pending_call:
        unsafe extern "C" fn(unsafe extern "C" fn(*mut c_void) -> c_int, *mut c_void) -> c_int,
    run_string: unsafe extern "C" fn(*const c_char, c_int, Obj, Obj, *mut c_void) -> Obj,
    dict_new: unsafe extern "C" fn() -> Obj,
    dec_ref: unsafe extern "C" fn(Obj),
    inc_ref: unsafe extern "C" fn(Obj),
    err_clear: unsafe extern "C" fn(),
    long_from: unsafe extern "C" fn(c_long) -> Obj,
    long_as: unsafe extern "C" fn(Obj) -> c_long,
    str_from: unsafe extern "C" fn(*const c_char, isize) -> Obj,
    dict_set: unsafe extern "C" fn(Obj, *const c_char, Obj) -> c_int,
    dict_get: unsafe extern "C" fn(Obj, *const c_char) -> Obj,
    /// Stack reading (Python 3.9+); absent on older Pythons.
    frames: Option<FrameApi>,
}

struct FrameApi {
    this_thread_state: unsafe extern "C" fn() -> Obj,
    thread_frame: unsafe extern "C" fn(Obj) -> Obj,
    frame_code: unsafe extern "C" fn(Obj) -> Obj,
    frame_line: unsafe extern "C" fn(Obj) -> c_int,
    /// `PyFrame_GetLasti` (Python 3.11+): the frame's last instruction, read in constant time
    /// where the line takes a walk over the code's line table (`py_stacks` says what that
    /// costs). Stacks are interned by instruction, and a line looked up once per instruction.
    frame_lasti: Option<unsafe extern "C" fn(Obj) -> c_int>,
    frame_back: unsafe extern "C" fn(Obj) -> Obj,
    get_attr: unsafe extern "C" fn(Obj, *const c_char) -> Obj,
    utf8: unsafe extern "C" fn(Obj, *mut isize) -> *const c_char,
}

// SAFETY: the struct holds plain function pointers into the process's libpython.
unsafe impl Send for Api {}
// SAFETY: as above; the functions themselves are called under the GIL rules above.
unsafe impl Sync for Api {}

fn sym(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym on RTLD_DEFAULT with a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

/// CPython's function `name` as the function-pointer type `F`.
///
/// # Safety
/// `F` must be the C signature of CPython's function of that name.
unsafe fn resolve<F>(name: &CStr) -> Option<F> {
    let p = sym(name)?;
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: per the function's contract, `p` is a function of type `F`.
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

macro_rules! resolve {
    ($name:literal) => {
        // SAFETY: each field's type is the C signature of the CPython function it is named for.
        unsafe { resolve($name)? }
    };
}

fn load() -> Option<Api> {
    let frames = (|| {
        Some(FrameApi {
            this_thread_state: resolve!(c"PyGILState_GetThisThreadState"),
            thread_frame: resolve!(c"PyThreadState_GetFrame"),
            frame_code: resolve!(c"PyFrame_GetCode"),
            frame_line: resolve!(c"PyFrame_GetLineNumber"),
            // SAFETY: PyFrame_GetLasti's C signature: int (PyFrameObject *).
            frame_lasti: unsafe { resolve(c"PyFrame_GetLasti") },
            frame_back: resolve!(c"PyFrame_GetBack"),
            get_attr: resolve!(c"PyObject_GetAttrString"),
            utf8: resolve!(c"PyUnicode_AsUTF8AndSize"),
        })
    })();
    Some(Api {
        is_initialized: resolve!(c"Py_IsInitialized"),
        gil_check: resolve!(c"PyGILState_Check"),
        gil_ensure: resolve!(c"PyGILState_Ensure"),
        gil_release: resolve!(c"PyGILState_Release"),
        add_pending_call: resolve!(c"Py_AddPendingCall"),
        run_string: resolve!(c"PyRun_StringFlags"),
        dict_new: resolve!(c"PyDict_New"),
        dec_ref: resolve!(c"Py_DecRef"),
        inc_ref: resolve!(c"Py_IncRef"),
        err_clear: resolve!(c"PyErr_Clear"),
        long_from: resolve!(c"PyLong_FromLong"),
        long_as: resolve!(c"PyLong_AsLong"),
        str_from: resolve!(c"PyUnicode_FromStringAndSize"),
        dict_set: resolve!(c"PyDict_SetItemString"),
        dict_get: resolve!(c"PyDict_GetItemString"),
        frames,
    })
}

/// CPython's API, if this process runs an initialised interpreter.
fn api() -> Option<&'static Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    let api = API.get_or_init(load).as_ref()?;
    // SAFETY: Py_IsInitialized may be called at any time, with or without the GIL.
    (unsafe { (api.is_initialized)() } != 0).then_some(api)
}

/// Py_file_input.
const FILE_INPUT: c_int = 257;

/// What the recorder needs from libcuprof.so, handed over once by `life::setup` before the
/// window first collects (so this module needs nothing of the operator sources above it).
pub struct Recorder {
    /// The recorder's Python source, run once in its own namespace.
    pub source: &'static str,
    /// The observer's C++ source, which the recorder builds.
    pub observer_source: &'static str,
    /// The address of the hooks the observer calls.
    pub hooks: usize,
    /// Notes the path the recorder took (its `_cuprof_path`) for the trace headers.
    pub set_path: fn(u8),
    /// Notes whether torch.distributed was initialised (its `_cuprof_distributed`) for the
    /// trace headers.
    pub set_distributed: fn(bool),
}

static RECORDER: OnceLock<Recorder> = OnceLock::new();

/// Hands over the recorder's inputs (the first call wins).
pub fn set_recorder(r: Recorder) {
    let _ = RECORDER.set(r);
}

/// The recorder's globals (a dict owned by cuprof, never the program's `__main__`).
struct Globals(Obj);
// SAFETY: the dict is only touched with the GIL held.
unsafe impl Send for Globals {}
static GLOBALS: Mutex<Option<Globals>> = Mutex::new(None);

/// Operators wanted: the recorder's level (`ops::Options::level`). Read by the pending call.
static WANTED: AtomicU8 = AtomicU8::new(0);
static PENDING: AtomicBool = AtomicBool::new(false);

/// Sets PyTorch operator recording to `level` (0 off), on this thread if it holds the GIL,
/// else on the main thread as soon as it runs Python.
pub fn operators(level: u8) {
    WANTED.store(level, Relaxed);
    let Some(api) = api() else { return };
    // SAFETY: PyGILState_Check may be called with or without the GIL.
    if unsafe { (api.gil_check)() } == 1 {
        apply(api);
    } else if !PENDING.swap(true, Relaxed) {
        // SAFETY: Py_AddPendingCall may be called from any thread, GIL or not.
        if unsafe { (api.add_pending_call)(pending, std::ptr::null_mut()) } != 0 {
            PENDING.store(false, Relaxed);
        }
    }
}

unsafe extern "C" fn pending(_: *mut c_void) -> c_int {
    guard(0, || {
        PENDING.store(false, Relaxed);
        if let Some(api) = api() {
            apply(api);
        }
        0
    })
}

/// Runs the recorder's `set(level)` (the caller holds the GIL).
fn apply(api: &Api) {
    let level = WANTED.load(Relaxed);
    // Only a GIL holder gets here, so the lock is contended only if the recorder's own Python
    // code re-entered cuprof on this thread: then the outer call finishes the job.
    let Ok(mut g) = GLOBALS.try_lock() else {
        return;
    };
    // SAFETY: the GIL is held (checked by the caller, or a pending call): the C API may be used.
    unsafe {
        let gil = (api.gil_ensure)();
        if g.is_none() {
            let dict = (api.dict_new)();
            if !dict.is_null()
                && RECORDER
                    .get()
                    .is_some_and(|rec| set_inputs(api, dict, rec) && run(api, rec.source, dict))
            {
                *g = Some(Globals(dict));
            } else {
                say("PyTorch operators are not recorded: cuprof's recorder failed to start in this Python");
            }
        }
        if let Some(Globals(dict)) = g.as_ref() {
            let n = (api.long_from)(level as c_long);
            if !n.is_null() {
                (api.dict_set)(*dict, c"_cuprof_level".as_ptr(), n);
                (api.dec_ref)(n);
            }
            run(api, "_cuprof_set(_cuprof_level)", *dict);
            let path = (api.dict_get)(*dict, c"_cuprof_path".as_ptr());
            if !path.is_null() {
                let path = (api.long_as)(path);
                (api.err_clear)();
                if let Some(rec) = RECORDER.get() {
                    (rec.set_path)(u8::try_from(path).unwrap_or(0));
                }
            }
            let distributed = (api.dict_get)(*dict, c"_cuprof_distributed".as_ptr());
            if !distributed.is_null() {
                let on = (api.long_as)(distributed) == 1;
                (api.err_clear)();
                if let Some(rec) = RECORDER.get() {
                    (rec.set_distributed)(on);
                }
            }
        }
        (api.gil_release)(gil);
    }
}

/// Gives the recorder what it needs from libcuprof.so: the observer's source and the address of
/// the hooks the observer calls.
///
/// # Safety
/// The GIL must be held; `dict` is a dict.
unsafe fn set_inputs(api: &Api, dict: Obj, rec: &Recorder) -> bool {
    let source = rec.observer_source;
    let hooks = rec.hooks as c_long;
    // SAFETY: per the function's contract; each new reference is released after the set.
    unsafe {
        let values = [
            (
                c"_cuprof_observer_source",
                (api.str_from)(source.as_ptr().cast(), source.len() as isize),
            ),
            (c"_cuprof_hooks", (api.long_from)(hooks)),
        ];
        let mut ok = true;
        for (name, value) in values {
            ok &= !value.is_null() && (api.dict_set)(dict, name.as_ptr(), value) == 0;
            if !value.is_null() {
                (api.dec_ref)(value);
            }
        }
        if !ok {
            (api.err_clear)();
        }
        ok
    }
}

/// Runs `src` in `globals`; false if it raised (the recorder catches its own errors, so this
/// is a syntax error or a Python too unlike CPython's).
///
/// # Safety
/// The GIL must be held; `globals` is a dict.
unsafe fn run(api: &Api, src: &str, globals: Obj) -> bool {
    let Ok(src) = CString::new(src) else {
        return false;
    };
    // SAFETY: per the function's contract.
    unsafe {
        let r = (api.run_string)(
            src.as_ptr(),
            FILE_INPUT,
            globals,
            globals,
            std::ptr::null_mut(),
        );
        if r.is_null() {
            (api.err_clear)();
            return false;
        }
        (api.dec_ref)(r);
    }
    true
}

/// The deepest Python stack kept (frames nearest the operator first).
const MAX_DEPTH: usize = 128;

/// What a read of this thread's stack reuses: the cache, and the frames and code objects of
/// the stack being read (no allocation per read).
#[derive(Default)]
struct Reader {
    cache: StackCache,
    sites: Vec<Site>,
    frames: Vec<Obj>,
    codes: Vec<Obj>,
}

thread_local! {
    static READER: RefCell<Reader> = RefCell::new(Reader::default());
}

/// The Python call stack of the calling thread, innermost frame first, if it is a Python
/// thread: one that holds the GIL, or one in C code that released it (PyTorch's bindings
/// release it around every operator), for which the GIL is taken for the read, as torch's own
/// `pythonCallstack` does. Threads that never ran Python (autograd's device threads) have none.
/// Called at the start of an outermost operator, where the binding holds no lock of its own.
pub fn stack() -> Option<PyStack> {
    let api = api()?;
    let f = frame_api(api)?;
    // SAFETY: both may be called with or without the GIL.
    let (held, ts) = unsafe { ((api.gil_check)() == 1, (f.this_thread_state)()) };
    if ts.is_null() {
        return None;
    }
    // SAFETY: this thread has a thread state (checked above), so Ensure only waits for the GIL.
    let gil = (!held).then(|| unsafe { (api.gil_ensure)() });
    let out = read_stack(api, f, ts);
    if let Some(gil) = gil {
        // SAFETY: releases what Ensure took.
        unsafe { (api.gil_release)(gil) };
    }
    out
}

/// The Python call stack of the calling thread if it holds the GIL now (never waits for it).
pub fn stack_if_held() -> Option<PyStack> {
    let api = api()?;
    let f = frame_api(api)?;
    // SAFETY: both may be called with or without the GIL.
    let (held, ts) = unsafe { ((api.gil_check)() == 1, (f.this_thread_state)()) };
    if !held || ts.is_null() {
        return None;
    }
    read_stack(api, f, ts)
}

/// The frame functions, or once a line saying why stacks are missing.
fn frame_api(api: &Api) -> Option<&FrameApi> {
    static SAID: AtomicBool = AtomicBool::new(false);
    if api.frames.is_none() && !SAID.swap(true, Relaxed) {
        say("Python call stacks need Python 3.9 or newer (PyFrame_GetBack is missing): operators and allocations are recorded without them");
    }
    api.frames.as_ref()
}

/// Reads the frames of thread state `ts` (the caller's, with the GIL held).
fn read_stack(api: &Api, f: &FrameApi, ts: Obj) -> Option<PyStack> {
    READER.with(|r| {
        // Busy only if reading a stack re-entered cuprof on this thread: that read goes without.
        let mut r = r.try_borrow_mut().ok()?;
        let Reader {
            cache,
            sites,
            frames,
            codes,
        } = &mut *r;
        sites.clear();
        // SAFETY: this thread holds the GIL (the caller's contract); every new reference taken
        // here (frames, code objects) is released below; the cache keeps its own.
        unsafe {
            let mut frame = (f.thread_frame)(ts);
            while !frame.is_null() && sites.len() < MAX_DEPTH {
                let code = (f.frame_code)(frame);
                let at = match f.frame_lasti {
                    Some(lasti) => lasti(frame),
                    None => (f.frame_line)(frame),
                };
                sites.push(Site {
                    code: code as usize,
                    at: at.max(0) as u32,
                });
                codes.push(code);
                frames.push(frame);
                frame = (f.frame_back)(frame);
            }
            if !frame.is_null() {
                (api.dec_ref)(frame);
            }
        }
        let stack = cache.stack(
            sites,
            &mut Live {
                api,
                f,
                frames,
                codes,
                sites,
            },
        );
        for obj in frames.drain(..).chain(codes.drain(..)) {
            // SAFETY: the references PyFrame_GetBack/PyThreadState_GetFrame and
            // PyFrame_GetCode returned; the GIL is held.
            unsafe { (api.dec_ref)(obj) };
        }
        Some(stack)
    })
}

/// The frames of a stack being read, held (with their code objects) by the reading thread,
/// which holds the GIL.
struct Live<'a> {
    api: &'a Api,
    f: &'a FrameApi,
    frames: &'a [Obj],
    codes: &'a [Obj],
    sites: &'a [Site],
}

impl Frames for Live<'_> {
    fn line(&mut self, i: usize) -> u32 {
        if self.f.frame_lasti.is_none() {
            // The site is the line already.
            return self.sites[i].at;
        }
        // SAFETY: the GIL is held and the frame is live (the reader holds a reference).
        unsafe { (self.f.frame_line)(self.frames[i]) }.max(0) as u32
    }

    fn names(&mut self, i: usize, keep: bool) -> (Name, Name) {
        let (api, f, code) = (self.api, self.f, self.codes[i]);
        // SAFETY: the GIL is held and the code object is live (the reader holds a reference);
        // a kept one gets a reference of the cache's own, never released, so its address is
        // never reused while it is a key.
        unsafe {
            if keep {
                (api.inc_ref)(code);
            }
            (
                str_attr(api, f, code, c"co_filename"),
                str_attr(api, f, code, c"co_name"),
            )
        }
    }
}

/// A string attribute of `obj`, or "" if it has none.
///
/// # Safety
/// The GIL must be held and `obj` must be a live object.
unsafe fn str_attr(api: &Api, f: &FrameApi, obj: Obj, attr: &CStr) -> Name {
    // SAFETY: per the function's contract; the attribute's new reference is released.
    unsafe {
        let v = (f.get_attr)(obj, attr.as_ptr());
        if v.is_null() {
            (api.err_clear)();
            return Name::from("");
        }
        let mut len: isize = 0;
        let p = (f.utf8)(v, &mut len);
        let out = if p.is_null() || len < 0 {
            (api.err_clear)();
            Name::from("")
        } else {
            let bytes = std::slice::from_raw_parts(p.cast::<u8>(), len as usize);
            Name::from(String::from_utf8_lossy(bytes).as_ref())
        };
        (api.dec_ref)(v);
        out
    }
}
