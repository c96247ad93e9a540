"""The PEP 517 build backend of cuprof's wheel (pyproject.toml): maturin, after libcuprof.so.

Why a wrapper. maturin packs one crate per wheel: with `bindings = "bin"` the `cuprof` command
(launcher/) goes to the wheel's scripts (pip puts it on the environment's PATH) and
python-source's `python/cuprof` package beside it. libcuprof.so is another crate's cdylib
(tracer/preload), which maturin does not build. The other ways were worse: a build.rs in the
launcher running a nested cargo (it blocks on the build directory's lock, and would run on
every developer `cargo build`), or the launcher embedding the library's bytes and writing
them out at run time (a copy per run, and no file for the Python module to load). So this
runs `cargo build --release -p cuprof-preload -p cuprof-launcher` first (the same build as the
workspace's, features included: launcher/Cargo.toml, "The test build's features"; maturin
then finds the launcher built), copies the library into the package as package data,
stripped (the release profile keeps line tables for developers; the wheel carries none), and
hands over to maturin's own hooks.

CUPROF_CARGO_PROFILE (default `release`) names another cargo profile for both builds: the test
command builds the wheel from its one `ci` build (scripts/test.sh) instead of compiling the
workspace a second time.
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import maturin
from maturin import *  # noqa: F401,F403 (every other PEP 517 hook is maturin's)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_LIB = ROOT / "python" / "cuprof" / "libcuprof.so"
PROFILE = os.environ.get("CUPROF_CARGO_PROFILE") or "release"


def _say(msg):
    sys.stderr.write(f"cuprof build: {msg}\n")
    sys.stderr.flush()


def build_library():
    """target/PROFILE/libcuprof.so, stripped, into python/cuprof/libcuprof.so."""
    cargo = os.environ.get("CARGO", "cargo")
    if shutil.which(cargo) is None:
        raise SystemExit(
            "cuprof build: building cuprof from source needs the Rust toolchain: install it (https://rustup.rs), or install a built wheel"
        )
    # With the launcher, whose dependencies decide features the library's share (syn's, for
    # one): built alone, the library would differ from the workspace's build and compile again;
    # maturin then finds the launcher built.
    _say(f"cargo build --profile {PROFILE} -p cuprof-preload -p cuprof-launcher")
    subprocess.run(
        [cargo, "build", "--profile", PROFILE, "-p", "cuprof-preload", "-p", "cuprof-launcher"],
        cwd=ROOT,
        check=True,
        stdout=sys.stderr,
    )
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
    if not target.is_absolute():
        target = ROOT / target
    built = target / PROFILE / "libcuprof.so"
    tmp = PACKAGE_LIB.with_name(".libcuprof.so.tmp")
    shutil.copyfile(built, tmp)
    strip = shutil.which("strip")
    if strip is None:
        tmp.unlink()
        raise SystemExit(
            "cuprof build: `strip` (binutils) is missing: install binutils, which the Rust toolchain's linker comes with"
        )
    # Symbols and debug info go; the dynamic symbol table (the entry points) stays.
    subprocess.run([strip, "--strip-unneeded", str(tmp)], check=True)
    os.replace(tmp, PACKAGE_LIB)


def _build_args(config_settings):
    """maturin's build arguments with the profile of build_library (maturin builds `--release`
    unless told otherwise) and pyproject.toml's `[tool.maturin] compatibility` and `auditwheel`
    unless the arguments name a compatibility: maturin's PEP 517 hook passes `--compatibility
    off` (a linux_x86_64 tag) when they do not, above pyproject.toml."""
    settings = dict(config_settings or {})
    key = "maturin.build-args" if "maturin.build-args" in settings else "build-args"
    args = settings.get(key, os.environ.get("MATURIN_PEP517_ARGS", ""))
    args = shlex.split(args) if isinstance(args, str) else list(args)
    if PROFILE != "release":
        args += ["--profile", PROFILE]
    if "--compatibility" not in args and "--manylinux" not in args:
        config = maturin.get_config()
        for name in ("compatibility", "auditwheel"):
            if name in config:
                args += [f"--{name}", config[name]]
    settings[key] = args
    return settings


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    build_library()
    return maturin.build_wheel(wheel_directory, _build_args(config_settings), metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    build_library()
    return maturin.build_editable(wheel_directory, _build_args(config_settings), metadata_directory)


if __name__ == "__main__":
    # `python scripts/wheel/cuprof_build.py`: only the library, for `maturin build` run by hand.
    build_library()
