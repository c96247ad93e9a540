#!/usr/bin/env bash
# Creates (once) and updates the Python virtual environment the tests use, and prints its bin/
# directory. Kept outside the checkout (CUPROF_VENV, default ~/.cache/cuprof/venv) so that a
# fresh clone on the same machine reuses it: torch with its nvidia-* wheels is about 5 GB.
# The packages are real consumers of cuprof's files and real producers of what it records:
# the NVTX3 loader (nvtx), PyTorch (CPU operators, its profiler and NVTX observer),
# HolisticTraceAnalysis, TensorBoard's profiler plugin, DuckDB and Spark (readers of the
# datasets `cuprof export` writes).
set -euo pipefail
venv="${CUPROF_VENV:-$HOME/.cache/cuprof/venv}"
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/python-requirements.txt"
nodeps="$here/python-requirements-nodeps.txt"
stamp="$venv/.cuprof-requirements"
# Spark (pyspark, for the export tests) runs on a JVM: install one only when none is there.
if ! command -v java >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >&2 && apt-get install -y -qq default-jre-headless >&2
fi
if [ ! -x "$venv/bin/python3" ]; then
    python3 -m venv "$venv" >&2
fi
if ! cat "$req" "$nodeps" | cmp -s - "$stamp"; then
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
        --root-user-action=ignore -r "$req" >&2
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
        --root-user-action=ignore --no-deps -r "$nodeps" >&2
    cat "$req" "$nodeps" > "$stamp"
fi
# Headers of the torch versions the native observer must also compile against
# (tests/e2e/torch_native.rs), besides the venv's own torch: 2.11 is the CUDA machines' torch.
# Only torch/include is kept (about 62 MB a version), taken from the wheel without installing it.
headers_root="${CUPROF_TORCH_HEADERS:-$HOME/.cache/cuprof/torch-headers}"
for v in 2.11.0; do
    if [ ! -f "$headers_root/$v/include/ATen/record_function.h" ]; then
        mkdir -p "$headers_root"
        dl="$(mktemp -d "$headers_root/.download.XXXXXX")"
        "$venv/bin/python3" -m pip download --quiet --disable-pip-version-check --no-deps \
            --only-binary=:all: "torch==$v" -d "$dl" >&2
        "$venv/bin/python3" - "$dl" "$headers_root/$v" <<'PY'
import glob, os, shutil, sys, zipfile
dl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(glob.glob(os.path.join(dl, "torch-*.whl"))[0]) as z:
    z.extractall(dl, [n for n in z.namelist() if n.startswith("torch/include/")])
shutil.rmtree(dest, ignore_errors=True)
os.rename(os.path.join(dl, "torch"), dest)
PY
        rm -rf "$dl"
    fi
done
echo "$venv/bin"
