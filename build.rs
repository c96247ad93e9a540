//! Tells the end-to-end tests where this profile's artifacts (libcuprof.so,
//! the libcupti double, the `cuprof` binary) are, so they never guess.
fn main() {
    // OUT_DIR is target/<profile>/build/cuprof-e2e-<hash>/out: three levels up
    // is target/<profile>, where cargo puts the workspace's cdylibs and bins.
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let profile_dir = out
        .ancestors()
        .nth(3)
        .expect("OUT_DIR is nested under target/<profile>")
        .to_path_buf();
    println!(
        "cargo:rustc-env=CUPROF_ARTIFACT_DIR={}",
        profile_dir.display()
    );
    println!("cargo:rerun-if-changed=build.rs");
}
