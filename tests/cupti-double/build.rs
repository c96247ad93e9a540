fn main() {
    // The double also plays libcuda: with this soname, the tracer's
    // dlopen("libcuda.so.1", RTLD_NOLOAD) finds it once the test app loaded it.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
