//! Names for decoded records: kernel names interned by pointer (CUPTI keeps one string per
//! function), demangled once; API names looked up once per callback id at start-up, so the
//! buffer callback never calls into CUPTI for them.

use cuprof_core::decode::Resolve;
use cuprof_core::event::{ApiDomain, Name};
use std::collections::HashMap;
use std::ffi::{c_char, CStr};

pub struct Names {
    /// Pointer -> (the bytes it held, the demangled name). The bytes are compared on every hit:
    /// an unloaded module's address may be reused by another kernel's name.
    kernels: HashMap<u64, (Box<[u8]>, Name)>,
    strings: HashMap<u64, (Box<[u8]>, Name)>,
    runtime: Vec<Name>,
    driver: Vec<Name>,
}

type CxaDemangle = unsafe extern "C" fn(
    *const std::ffi::c_char,
    *mut std::ffi::c_char,
    *mut usize,
    *mut std::ffi::c_int,
) -> *mut std::ffi::c_char;

/// libstdc++'s `__cxa_demangle`, the demangler Kineto uses, so kernel names match torch.profiler's
/// traces character for character (cpp_demangle renders some literals differently).
fn cxa_demangle() -> Option<CxaDemangle> {
    static F: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let p = *F.get_or_init(|| {
        for flags in [libc::RTLD_NOW | libc::RTLD_NOLOAD, libc::RTLD_NOW] {
            // SAFETY: dlopen of the C++ runtime by its soname; never closed.
            let h = unsafe { libc::dlopen(c"libstdc++.so.6".as_ptr(), flags) };
            if !h.is_null() {
                // SAFETY: live handle, valid name.
                let f = unsafe { libc::dlsym(h, c"__cxa_demangle".as_ptr()) };
                return (!f.is_null()).then_some(f as usize);
            }
        }
        None
    });
    // SAFETY: the symbol is `__cxa_demangle` with exactly this signature.
    p.map(|p| unsafe { std::mem::transmute::<usize, CxaDemangle>(p) })
}

fn demangle_cxa(raw: &str) -> Option<String> {
    let f = cxa_demangle()?;
    let c = std::ffi::CString::new(raw).ok()?;
    let mut status: std::ffi::c_int = 0;
    // SAFETY: a NUL-terminated input; NULL buffer asks __cxa_demangle to malloc the result,
    // which is freed here.
    unsafe {
        let out = f(
            c.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        );
        if out.is_null() {
            return None;
        }
        let s = CStr::from_ptr(out).to_string_lossy().into_owned();
        libc::free(out.cast());
        (status == 0).then_some(s)
    }
}

/// `_Z...` and `__Z...` names demangled (as libstdc++ does, else with cpp_demangle); others
/// (already readable) kept.
pub fn demangle(raw: &str) -> String {
    if raw.starts_with("_Z") || raw.starts_with("__Z") {
        if let Some(s) = demangle_cxa(raw) {
            return s;
        }
        if let Ok(sym) = cpp_demangle::Symbol::new(raw) {
            let opts = cpp_demangle::DemangleOptions::new();
            if let Ok(s) = sym.demangle(&opts) {
                return s;
            }
        }
    }
    raw.to_string()
}

/// The bytes of a C string at `ptr`, without the NUL.
///
/// # Safety
/// `ptr` must point to a NUL-terminated string that stays valid during the call.
unsafe fn c_bytes<'a>(ptr: u64) -> &'a [u8] {
    // SAFETY: guaranteed by the caller.
    unsafe { CStr::from_ptr(ptr as *const c_char) }.to_bytes()
}

fn intern(
    map: &mut HashMap<u64, (Box<[u8]>, Name)>,
    ptr: u64,
    make: impl Fn(&str) -> String,
) -> Name {
    // SAFETY: CUPTI hands out pointers to NUL-terminated names that live at least as long as
    // the buffer being decoded.
    let bytes = unsafe { c_bytes(ptr) };
    if let Some((seen, name)) = map.get(&ptr) {
        if **seen == *bytes {
            return name.clone();
        }
    }
    let name: Name = Name::from(make(&String::from_utf8_lossy(bytes)));
    map.insert(ptr, (bytes.into(), name.clone()));
    name
}

impl Names {
    /// `lookup(domain, cbid)` names a callback id (cuptiGetCallbackName), for ids below `max`.
    pub fn new(
        lookup: impl Fn(ApiDomain, u32) -> Option<String>,
        max_runtime: u32,
        max_driver: u32,
    ) -> Self {
        let table = |domain: ApiDomain, max: u32, prefix: &str| -> Vec<Name> {
            (0..max)
                .map(|cbid| {
                    let raw = lookup(domain, cbid).unwrap_or_else(|| format!("{prefix}{cbid}"));
                    Name::from(strip_version(&raw))
                })
                .collect()
        };
        Names {
            kernels: HashMap::new(),
            strings: HashMap::new(),
            runtime: table(ApiDomain::Runtime, max_runtime, "cudaApi#"),
            driver: table(ApiDomain::Driver, max_driver, "cuApi#"),
        }
    }

    pub fn api_names(&self, domain: ApiDomain) -> &[Name] {
        match domain {
            ApiDomain::Runtime => &self.runtime,
            ApiDomain::Driver => &self.driver,
        }
    }
}

/// `cudaLaunchKernel_v7000` -> `cudaLaunchKernel`: the name users know (and Kineto writes).
pub fn strip_version(raw: &str) -> &str {
    match raw.rfind("_v") {
        Some(i)
            if i > 0 && raw[i + 2..].chars().all(|c| c.is_ascii_digit()) && raw.len() > i + 2 =>
        {
            &raw[..i]
        }
        _ => raw,
    }
}

impl Resolve for Names {
    fn kernel_name(&mut self, ptr: u64) -> Name {
        intern(&mut self.kernels, ptr, demangle)
    }

    fn string(&mut self, ptr: u64) -> Name {
        intern(&mut self.strings, ptr, |s| s.to_string())
    }

    fn api_name(&mut self, domain: ApiDomain, cbid: u32) -> Name {
        let table = match domain {
            ApiDomain::Runtime => &self.runtime,
            ApiDomain::Driver => &self.driver,
        };
        match table.get(cbid as usize) {
            Some(n) => n.clone(),
            None => Name::from(format!("{domain:?}#{cbid}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_stripped_from_api_names() {
        assert_eq!(strip_version("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
        assert_eq!(strip_version("cuMemAlloc_v2"), "cuMemAlloc");
        assert_eq!(strip_version("cudaMalloc"), "cudaMalloc");
        assert_eq!(strip_version("cuda_vX"), "cuda_vX");
    }

    #[test]
    fn mangled_kernel_names_are_demangled_as_libstdcxx_does() {
        assert_eq!(demangle("_Z6kernelPfi"), "kernel(float*, int)");
        assert_eq!(
            demangle("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"),
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
        );
        assert_eq!(demangle("ampere_sgemm_128x64_nn"), "ampere_sgemm_128x64_nn");
    }

    #[test]
    fn a_reused_pointer_with_new_bytes_gets_its_new_name() {
        let mut names = Names::new(|_, _| None, 0, 0);
        let mut buf = *b"_Z3foov\0";
        let p = buf.as_ptr() as u64;
        assert_eq!(&*names.kernel_name(p), "foo()");
        buf[..8].copy_from_slice(b"_Z3barv\0");
        let p2 = buf.as_ptr() as u64;
        assert_eq!(&*names.kernel_name(p2), "bar()");
    }
}
