//! `cuprof ARGS` for the CLI suite: the binary itself, spawned (the figure tests call the
//! library in-process instead, analysis/tests/figures/command.rs).

use std::process::{Command, Output};

pub fn cuprof(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cuprof"))
        .args(args)
        .output()
        .expect("run cuprof")
}
