//! libcupti, loaded at run time (never linked): a table of the entry points cuprof calls.
//!
//! Search order (design note): a copy the process already has (RTLD_NOLOAD on libcupti.so.13,
//! .12 and the unversioned name), an explicit path (CUPROF_CUPTI_PATH), then the usual locations.
//! The library is never closed: CUPTI 13.0 leaves dangling pointers behind on dlclose.

use std::ffi::{c_char, c_int, c_void, CStr, CString};

pub type CuptiResult = u32;
pub const SUCCESS: CuptiResult = 0;
pub const ERROR_NOT_INITIALIZED: CuptiResult = 15;
pub const ERROR_INSUFFICIENT_PRIVILEGES: CuptiResult = 35;
pub const ERROR_MULTIPLE_SUBSCRIBERS: CuptiResult = 39;

pub type BufferRequested = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub type BufferCompleted = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
pub type CallbackFunc = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);

/// The subset of CUpti_CallbackData cuprof reads (prefix of the real struct, x86-64).
#[repr(C)]
pub struct CallbackData {
    pub callback_site: u32,
    pub function_name: *const c_char,
    pub function_params: *const c_void,
    pub function_return_value: *mut c_void,
    pub symbol_name: *const c_char,
    pub context: *mut c_void,
    pub context_uid: u32,
    pub correlation_data: *mut u64,
    pub correlation_id: u32,
}

pub const API_ENTER: u32 = 0;
pub const DOMAIN_DRIVER: u32 = 1;
pub const DOMAIN_RUNTIME: u32 = 2;
pub const DOMAIN_RESOURCE: u32 = 3;
pub const THREAD_ID_TYPE_SYSTEM: u32 = 1;
pub const FLUSH_FORCED: u32 = 1;
/// CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2: Kineto uses CUSTOM0 and CUSTOM1.
pub const EXTERNAL_KIND_CUPROF: u32 = 5;

macro_rules! cupti_table {
    ($($name:ident : fn($($arg:ty),*) ;)*) => {
        /// Function pointers into the loaded libcupti.
        #[allow(non_snake_case)]
        pub struct Cupti {
            pub path: String,
            handle: usize,
            $(pub $name: unsafe extern "C" fn($($arg),*) -> CuptiResult,)*
        }

        impl Cupti {
            /// # Safety
            /// `handle` must be a live dlopen handle of a CUPTI library.
            unsafe fn from_handle(handle: *mut c_void, path: String) -> Result<Cupti, String> {
                Ok(Cupti {
                    path,
                    handle: handle as usize,
                    $($name: {
                        let sym = CString::new(stringify!($name)).expect("no NUL in symbol names");
                        // SAFETY: handle is live; dlsym only reads the symbol table.
                        let p = unsafe { libc::dlsym(handle, sym.as_ptr()) };
                        if p.is_null() {
                            return Err(format!("has no symbol {}", stringify!($name)));
                        }
                        // SAFETY: the symbol is CUPTI's function of exactly this C signature.
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($arg),*) -> CuptiResult>(p) }
                    },)*
                })
            }
        }
    };
}

cupti_table! {
    cuptiGetVersion: fn(*mut u32);
    cuptiSubscribe: fn(*mut *mut c_void, CallbackFunc, *mut c_void);
    cuptiUnsubscribe: fn(*mut c_void);
    cuptiEnableCallback: fn(u32, *mut c_void, u32, u32);
    cuptiEnableDomain: fn(u32, *mut c_void, u32);
    cuptiSetThreadIdType: fn(u32);
    cuptiActivitySetAttribute: fn(u32, *mut usize, *mut c_void);
    cuptiActivityRegisterCallbacks: fn(BufferRequested, BufferCompleted);
    cuptiActivityEnable: fn(u32);
    cuptiActivityDisable: fn(u32);
    cuptiActivityFlushAll: fn(u32);
    cuptiActivityFlushPeriod: fn(u32);
    cuptiActivityGetNextRecord: fn(*mut u8, usize, *mut *mut u8);
    cuptiActivityGetNumDroppedRecords: fn(*mut c_void, u32, *mut usize);
    cuptiGetTimestamp: fn(*mut u64);
    cuptiGetCallbackName: fn(u32, u32, *mut *const c_char);
    cuptiGetResultString: fn(CuptiResult, *mut *const c_char);
    cuptiActivityPushExternalCorrelationId: fn(u32, u64);
    cuptiActivityPopExternalCorrelationId: fn(u32, *mut u64);
}

/// Optional entry points (CUPTI 12.5+): switch the records of one API call on or off.
pub struct ApiSwitches {
    pub runtime: unsafe extern "C" fn(u32, u8) -> CuptiResult,
    pub driver: unsafe extern "C" fn(u32, u8) -> CuptiResult,
}

const SONAMES: [&str; 3] = ["libcupti.so.13", "libcupti.so.12", "libcupti.so"];

fn dlerror_string() -> String {
    // SAFETY: dlerror returns NULL or a thread-local NUL-terminated string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null dlerror strings are valid C strings.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn dlopen(path: &str, flags: c_int) -> Result<*mut c_void, String> {
    let c = CString::new(path).map_err(|_| format!("{path:?} contains a NUL byte"))?;
    // SAFETY: c is a valid C string; dlopen has no other preconditions.
    let h = unsafe { libc::dlopen(c.as_ptr(), flags) };
    if h.is_null() {
        Err(dlerror_string())
    } else {
        Ok(h)
    }
}

/// Where libcupti may be, in the order they are tried.
fn candidates(explicit: Option<&str>) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(p) = explicit {
        v.push(p.to_string());
    }
    v.extend(SONAMES.iter().map(|s| s.to_string()));
    let mut roots: Vec<String> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(r) = std::env::var(var) {
            roots.push(r);
        }
    }
    roots.push("/usr/local/cuda".into());
    for r in roots {
        for sub in ["lib64", "extras/CUPTI/lib64", "targets/x86_64-linux/lib"] {
            for so in SONAMES {
                v.push(format!("{r}/{sub}/{so}"));
            }
        }
    }
    v
}

/// Finds and loads libcupti. The error lists what was tried.
pub fn load(explicit: Option<&str>) -> Result<(Cupti, Option<ApiSwitches>), String> {
    let flags_noload = libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL;
    let mut handle = None;
    if explicit.is_none() {
        for so in SONAMES {
            if let Ok(h) = dlopen(so, flags_noload) {
                handle = Some((h, format!("{so} (already loaded)")));
                break;
            }
        }
    }
    let mut errors = Vec::new();
    if handle.is_none() {
        for path in candidates(explicit) {
            match dlopen(&path, libc::RTLD_NOW | libc::RTLD_GLOBAL) {
                Ok(h) => {
                    handle = Some((h, path));
                    break;
                }
                Err(e) => {
                    if explicit.is_some() && errors.is_empty() {
                        // An explicit path that fails is the one error worth showing.
                        return Err(format!("could not load CUPROF_CUPTI_PATH={path}: {e}"));
                    }
                    errors.push(e);
                }
            }
        }
    }
    let Some((h, path)) = handle else {
        return Err("libcupti not found (tried libcupti.so.13, libcupti.so.12, $CUDA_HOME/lib64, /usr/local/cuda/lib64): install the CUDA toolkit's CUPTI or the nvidia-cuda-cupti wheel, or set CUPROF_CUPTI_PATH".to_string());
    };
    // SAFETY: h is a live handle from dlopen.
    let cupti = unsafe { Cupti::from_handle(h, path.clone()) }
        .map_err(|e| format!("{path} is not a usable libcupti: it {e}"))?;
    let sym = |name: &str| {
        let c = CString::new(name).expect("no NUL");
        // SAFETY: live handle, valid C string.
        unsafe { libc::dlsym(h, c.as_ptr()) }
    };
    let (rt, drv) = (
        sym("cuptiActivityEnableRuntimeApi"),
        sym("cuptiActivityEnableDriverApi"),
    );
    let filter = (!rt.is_null() && !drv.is_null()).then(|| ApiSwitches {
        // SAFETY: both are CUPTI functions `CUptiResult (CUpti_CallbackId, uint8_t)`.
        runtime: unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(u32, u8) -> CuptiResult>(rt)
        },
        // SAFETY: as above.
        driver: unsafe {
            std::mem::transmute::<*mut c_void, unsafe extern "C" fn(u32, u8) -> CuptiResult>(drv)
        },
    });
    Ok((cupti, filter))
}

impl Cupti {
    /// Any symbol of the loaded libcupti (for forwarding interposed calls).
    pub fn raw_symbol(&self, name: &CStr) -> Option<*mut c_void> {
        // SAFETY: the handle stays open for the life of the process.
        let p = unsafe { libc::dlsym(self.handle as *mut c_void, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    }

    pub fn result_string(&self, r: CuptiResult) -> String {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: CUPTI writes a pointer to a static string or leaves it NULL.
        let ok = unsafe { (self.cuptiGetResultString)(r, &mut s) } == SUCCESS;
        if ok && !s.is_null() {
            // SAFETY: CUPTI's result strings are static C strings.
            let text = unsafe { CStr::from_ptr(s) }.to_string_lossy();
            format!("{text} ({r})")
        } else {
            format!("CUPTI error {r}")
        }
    }

    pub fn timestamp(&self) -> u64 {
        let mut t = 0u64;
        // SAFETY: writes one u64.
        unsafe { (self.cuptiGetTimestamp)(&mut t) };
        t
    }

    pub fn callback_name(&self, domain: u32, cbid: u32) -> Option<String> {
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: CUPTI writes a pointer to a static name or fails.
        let r = unsafe { (self.cuptiGetCallbackName)(domain, cbid, &mut s) };
        if r != SUCCESS || s.is_null() {
            return None;
        }
        // SAFETY: CUPTI's callback names are static C strings.
        Some(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::CallbackData;
    use std::mem::offset_of;

    #[test]
    fn callback_data_matches_cuptis_layout() {
        use cupti_sys::CUpti_CallbackData as C;
        assert_eq!(
            offset_of!(CallbackData, callback_site),
            offset_of!(C, callbackSite)
        );
        assert_eq!(
            offset_of!(CallbackData, function_name),
            offset_of!(C, functionName)
        );
        assert_eq!(
            offset_of!(CallbackData, symbol_name),
            offset_of!(C, symbolName)
        );
        assert_eq!(
            offset_of!(CallbackData, correlation_data),
            offset_of!(C, correlationData)
        );
        assert_eq!(
            offset_of!(CallbackData, correlation_id),
            offset_of!(C, correlationId)
        );
        assert_eq!(offset_of!(CallbackData, correlation_id), 64);
    }
}
