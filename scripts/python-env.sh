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
stamp="$venv/.cuprof-requirements"
# Spark (pyspark, for the export tests) runs on a JVM: install one only when none is there.
if ! command -v java >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq >&2 && apt-get install -y -qq default-jre-headless >&2
fi
if [ ! -x "$venv/bin/python3" ]; then
    python3 -m venv "$venv" >&2
fi
if ! cmp -s "$req" "$stamp"; then
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
        --root-user-action=ignore -r "$req" >&2
    cp "$req" "$stamp"
fi
echo "$venv/bin"
