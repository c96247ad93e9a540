//! libcuprof.so exports the documented C ABI and nothing else (a Rust cdylib exports only
//! `#[no_mangle]` items, but a stray one would interpose on the host's symbols).

use crate::common::*;
use std::process::Command;

#[test]
fn the_library_exports_exactly_the_documented_entry_points() {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib())
        .output()
        .expect("nm (binutils) runs");
    assert!(out.status.success());
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, kind, name) = (f.next()?, f.next()?, f.next()?);
            (kind == "T").then(|| name.to_string())
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            "InitializeInjection",
            "InitializeInjectionNvtx2",
            "_exit",
            "cuprof_begin_window",
            "cuprof_end_window",
            "cuprof_reload_env",
            "cuprof_start",
            "cuprof_state",
            "cuprof_step",
            "cuprof_step_figure",
            "cuprof_step_tokens",
            "cuprof_stop",
            "cuprof_trace_files",
            "cuprof_wait_files",
            "cuptiActivityRegisterCallbacks",
            "cuptiSubscribe",
            "cuptiSubscribe_v2",
            "kill",
        ]
    );
}
