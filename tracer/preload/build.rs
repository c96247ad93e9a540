fn main() {
    // Never unload libcuprof.so: CUPTI, NVTX and signal handlers keep pointers into it.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    println!("cargo:rerun-if-changed=build.rs");
}
