#!/usr/bin/env bash
# The project's test command (README.md): formatting, lints, then every test, over ONE build.
#
# The workspace is compiled once, in the `ci` profile (Cargo.toml: libcuprof.so's crates
# optimised as users' release builds, the command and its analysis not; debug assertions and
# overflow checks on), with clippy-driver as the workspace's compiler: its lints run inside the
# compile that produces the test artifacts, instead of a separate `cargo clippy` pass that
# shares nothing with the build. Every test binary, the end-to-end tests (which run the real
# libcuprof.so and the libcupti double) and the wheel test use that one build. See README.md for
# how long a run takes.
#
# The Python packages the tests use (the NVTX3 loader, PyTorch, HTA, TensorBoard's profiler
# plugin, DuckDB, Spark) are installed into a virtual environment by scripts/python-env.sh,
# which goes first on PATH: every test's `python3` is that one.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
phase() { printf 'test.sh: %s (%ds)\n' "$1" "$((SECONDS - start))" >&2; }
# The report page's test opens `cuprof report --html`'s page in headless Chromium (Debian's
# package); installed here only when missing.
if [ ! -x /usr/bin/chromium ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y chromium >&2 || { $sudo apt-get update >&2 && $sudo apt-get install -y chromium >&2; }
fi
venv_bin="$(bash scripts/python-env.sh)"
export PATH="$venv_bin:$PATH"
phase "python environment ready"
cargo fmt --all -- --check

clippy_driver="$(dirname "$(rustup which cargo 2>/dev/null || command -v cargo)")/clippy-driver"
[ -x "$clippy_driver" ] || { echo "test.sh: clippy-driver missing: rustup component add clippy" >&2; exit 2; }
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
# `cargo clippy -- -D warnings` for the workspace's crates (dependencies' lints are capped by
# cargo whatever the flags).
export RUSTFLAGS="-D warnings"
# The wheel test's build backend builds in this profile too (scripts/wheel/cuprof_build.py).
export CUPROF_CARGO_PROFILE=ci
cargo build --profile ci --workspace --all-targets
phase "built and linted"
# Unit, integration and end-to-end tests (no doctests: the crates' code blocks are text).
cargo test --profile ci --workspace --lib --bins --tests
phase "tests passed"
# The wheel users install: built by pip through the project's backend (maturin) from this
# build, its manylinux policy checked, installed into a fresh environment without cargo on
# PATH and used there.
python3 tests/wheel/test_wheel.py
phase "wheel test passed"
