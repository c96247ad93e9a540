#!/usr/bin/env bash
# The project's test command (README.md): formatting, lints, then every test. The workspace is
# built first because the end-to-end tests run the real libcuprof.so and the libcupti double.
# The Python packages the tests use (the NVTX3 loader, PyTorch, HTA, TensorBoard's profiler
# plugin) are installed into a virtual environment by scripts/python-env.sh, which goes first
# on PATH: every test's `python3` is that one.
set -euo pipefail
cd "$(dirname "$0")/.."
# launcher/tests/report_html.rs opens `cuprof report --html`'s page in headless Chromium
# (Debian's package); installed here only when missing.
if [ ! -x /usr/bin/chromium ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y chromium >&2 || { $sudo apt-get update >&2 && $sudo apt-get install -y chromium >&2; }
fi
venv_bin="$(bash scripts/python-env.sh)"
export PATH="$venv_bin:$PATH"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace
cargo test --workspace
# Users run release builds: the end-to-end tests again, against the release libcuprof.so and
# double (timing-dependent paths differ when optimised).
cargo build --workspace --release
cargo test --release -p cuprof-e2e
# The wheel users install: built by pip from this release build (maturin through the project's
# backend), its manylinux policy checked, installed into a fresh environment without cargo on
# PATH and used there (tests/wheel/test_wheel.py).
python3 tests/wheel/test_wheel.py
