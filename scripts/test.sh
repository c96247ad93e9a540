#!/usr/bin/env bash
# The project's test command (README.md): formatting, lints, then every test. The workspace is
# built first because the end-to-end tests run the real libcuprof.so and the libcupti double.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace
cargo test --workspace
