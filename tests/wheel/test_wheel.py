"""cuprof's wheel, built and used the way a PyTorch user gets it (issue 28; scripts/test.sh runs
this after its one build, which it reuses: CUPROF_CARGO_PROFILE names the profile, default
release).

    python3 tests/wheel/test_wheel.py

1. Builds the wheel as `pip wheel .` does, through the project's PEP 517 backend (maturin,
   whose manylinux check pyproject.toml turns on), and checks its tag
   (py3-none-manylinux_2_34: one wheel for every Python 3, the glibc floor README.md states),
   that `auditwheel show` names the same policy for every ELF file in it, its contents, and
   that neither binary carries debug info.
2. Installs it into a fresh virtual environment (torch comes from the test environment
   through a .pth file, so it is not installed again) and runs everything there with a PATH
   of that environment's bin and /usr/bin:/bin only: no cargo, no target/.
3. There: `cuprof --version`, `python -m cuprof --help`, `cuprof run` on a program through the
   libcupti double (its kernels exact), tests/apps/profile_api.py under
   `cuprof run --wait 1 --warmup 1 --active 2` (steps marked with cuprof_step()), with
   `cuprof.profile(wait=1, warmup=1, active=2)` under a bare `cuprof run`, and with it started
   plainly (cuprof arms itself): the same steps, operators, kernels and `cuprof.annotate`
   ranges in all three; then the bad
   inputs (the library missing, a nested profile(), .step() after the block): one line each,
   and the program goes on.

The libcupti double is a test artifact: it is named by CUPTI_DOUBLE_LIB and CUPROF_CUPTI_PATH
(the environment contract), not found on PATH.
"""

import collections
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "tests" / "apps"
PROFILE = os.environ.get("CUPROF_CARGO_PROFILE") or "release"
DOUBLE = ROOT / "target" / PROFILE / "libcupti_double.so"
VERSION = "0.1.0"


def fail(msg):
    sys.stderr.write(f"wheel test FAILED: {msg}\n")
    sys.exit(1)


def expect(actual, expected, what):
    if actual != expected:
        fail(f"{what}: expected {expected!r}, got {actual!r}")


def run(cmd, env, ok=True, **kw):
    p = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, **kw)
    if ok and p.returncode != 0:
        fail(f"{' '.join(map(str, cmd))} exited {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def build_wheel(out):
    """The wheel, as `pip wheel .` builds it (no build arguments: pyproject.toml's
    `[tool.maturin] compatibility` tags it, maturin's own manylinux audit checks it)."""
    env = dict(os.environ)
    run(
        [
            sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "--no-build-isolation",
            "--disable-pip-version-check", "-w", out,
        ],
        env,
    )
    wheels = sorted(Path(out).glob("*.whl"))
    expect(len(wheels), 1, "wheels built")
    return wheels[0]


def check_wheel(wheel):
    m = re.fullmatch(rf"cuprof-{VERSION}-py3-none-(manylinux_2_34)_x86_64\.whl", wheel.name)
    if not m:
        fail(f"wheel tag: {wheel.name} is not cuprof-{VERSION}-py3-none-manylinux_2_34_x86_64")
    shown = run([sys.executable, "-m", "auditwheel", "show", wheel], dict(os.environ)).stdout
    policy = re.search(r'consistent with the\s+following platform tag: "([^"]+)"', shown)
    expect(policy and policy.group(1), f"{m.group(1)}_x86_64", "auditwheel show's policy")
    with zipfile.ZipFile(wheel) as z:
        names = sorted(n for n in z.namelist() if "/sboms/" not in n)
        expect(
            names,
            [
                "cuprof-0.1.0.data/scripts/cuprof",
                "cuprof-0.1.0.dist-info/METADATA",
                "cuprof-0.1.0.dist-info/RECORD",
                "cuprof-0.1.0.dist-info/WHEEL",
                "cuprof/__init__.py",
                "cuprof/__main__.py",
                "cuprof/_figures.py",
                "cuprof/_native.py",
                "cuprof/_profile.py",
                "cuprof/_site/sitecustomize.py",
                "cuprof/_torch_hook.py",
                "cuprof/averages.py",
                "cuprof/libcuprof.so",
            ],
            "wheel contents",
        )
        with tempfile.TemporaryDirectory() as d:
            for n in ("cuprof-0.1.0.data/scripts/cuprof", "cuprof/libcuprof.so"):
                path = z.extract(n, d)
                sections = run(["readelf", "-S", "-W", path], dict(os.environ)).stdout
                # (.debug_gdb_scripts is rustc's few-byte pointer to gdb's pretty-printers.)
                found = re.findall(r"\.(?:debug_\w+|symtab)\b", sections)
                expect([s for s in found if s != ".debug_gdb_scripts"], [], f"{n}'s debug info and symbols")
    return policy.group(1), wheel.stat().st_size


def fresh_venv(where, wheel):
    """A new virtual environment with the wheel installed (no index), seeing the test
    environment's packages (torch) through a .pth file."""
    run([sys.executable, "-m", "venv", where], dict(os.environ))
    py = Path(where) / "bin" / "python"
    purelib = run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], dict(os.environ)).stdout.strip()
    Path(purelib, "test_env.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run([py, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "--quiet", wheel], dict(os.environ))
    env = {
        "PATH": f"{Path(where) / 'bin'}:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(APPS),
        "PYTHONUNBUFFERED": "1",
        "CUPTI_DOUBLE_LIB": str(DOUBLE),
        "CUPROF_CUPTI_PATH": str(DOUBLE),
    }
    if run(["sh", "-c", "command -v cargo"], env, ok=False).returncode == 0:
        fail("cargo is on the test environment's PATH")
    return Path(purelib), env


def trace(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)


def counts(t, cat):
    return collections.Counter(e["name"] for e in t["traceEvents"] if e.get("cat") == cat)


def steps(t):
    return sorted(e["name"] for e in t["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))


def recorded(t):
    """Steps, operators, kernels and cuprof.annotate's ranges (on the CPU and the GPU)."""
    return steps(t), counts(t, "cpu_op"), counts(t, "kernel"), counts(t, "user_annotation"), counts(t, "gpu_user_annotation")


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def main():
    if not DOUBLE.is_file():
        fail(f"{DOUBLE} missing: run `cargo build --workspace --profile {PROFILE}` first (scripts/test.sh does)")
    tmp = Path(tempfile.mkdtemp(prefix="cuprof-wheel-"))
    try:
        wheel = build_wheel(tmp / "dist")
        policy, size = check_wheel(wheel)
        purelib, env = fresh_venv(tmp / "venv", wheel)

        out = run(["cuprof", "--version"], env).stdout
        expect(out, f"cuprof {VERSION}\n", "cuprof --version")
        out = run(["python", "-m", "cuprof", "--help"], env).stdout
        expect(out.splitlines()[:3], ["GPU activity tracer for CUDA and PyTorch programs", "", "Usage: cuprof <COMMAND>"], "python -m cuprof --help")

        # cuprof run finds the library inside the installed package.
        d = tmp / "kernels"
        run(["cuprof", "run", "--no-report", "--dir", d, "--name", "k", "--", "python", APPS / "workload.py"], env)
        t = trace(d / "k-rank0.trace.json.gz")
        expect(
            counts(t, "kernel"),
            {
                "kernel(float*, int)": 3,
                "void at::native::vectorized_elementwise_kernel<4>(int)": 2,
                "graphnode()": 4,
                "ncclDevKernel_AllReduce_Sum_f32": 2,
                'weird"name\\\x01\n': 1,
            },
            "kernels of workload.py under cuprof run",
        )
        expect(counts(t, "user_annotation")["train"], 1, "workload.py's NVTX range 'train'")

        # The same steps and operators three ways.
        results = {}
        for label, cmd in [
            ("cuprof run --wait 1 --warmup 1 --active 2", ["cuprof", "run", "--no-report", "--wait", "1", "--warmup", "1", "--active", "2", "--dir", tmp / "raw", "--name", "t", "--", "python", APPS / "profile_api.py", "raw", tmp / "raw", "t"]),
            ("cuprof.profile under cuprof run", ["cuprof", "run", "--no-report", "--dir", tmp / "run", "--name", "t", "--", "python", APPS / "profile_api.py", "profile", tmp / "run", "t"]),
            ("cuprof.profile started plainly", ["python", APPS / "profile_api.py", "profile", tmp / "plain", "t"]),
        ]:
            p = run(cmd, env)
            d = Path(cmd[-2])
            t = trace(d / "t-rank0.trace.json.gz")
            results[label] = recorded(t)
            printed = last_json(p.stdout)
            expect(printed["enabled"], True, f"cuprof.enabled() ({label})")
            if cmd[0] == "python":
                expect(printed["files"], [str(d / "t-rank0.trace.json.gz")], "cuprof.trace_files() of the plain run")
                expect(printed["block"], [str(d / "t-rank0.trace.json.gz")], "the block's files, complete as it ended, in the plain run")
                expect([l for l in p.stderr.splitlines() if l.startswith("cuprof: ") and "wrote" not in l], [], "cuprof lines of the plain run")
        reference = results["cuprof run --wait 1 --warmup 1 --active 2"]
        expect(reference[0], ["ProfilerStep#2", "ProfilerStep#3"], "recorded steps")
        expect(reference[2], {"step_kernel()": 2}, "kernels of the recorded steps")
        expect(reference[1]["aten::linear"], 4, "aten::linear in the two recorded steps")
        expect(reference[3], {"ProfilerStep#2": 1, "ProfilerStep#3": 1, "train_step": 2, "loss": 2}, "ranges of the recorded steps")
        expect(reference[4], {"train_step": 2}, "cuprof.annotate's range on the GPU")
        for label, r in results.items():
            expect(r, reference, f"steps, operators and kernels of '{label}'")

        # Bad input. The library missing: a copy of the package without it.
        broken = tmp / "broken"
        shutil.copytree(purelib / "cuprof", broken / "cuprof")
        (broken / "cuprof" / "libcuprof.so").unlink()
        p = run(["python", APPS / "profile_api.py", "profile", tmp / "broken-out", "t"], dict(env, PYTHONPATH=f"{broken}:{APPS}"))
        lines = [l for l in p.stderr.splitlines() if l.startswith("cuprof: ")]
        expect(lines, [f"cuprof: {broken / 'cuprof' / 'libcuprof.so'} is missing: reinstall cuprof (pip install --force-reinstall cuprof); the program runs untraced"], "lines with the library missing")
        expect(last_json(p.stdout), {"mode": "profile", "enabled": False, "files": [], "block": []}, "the untraced program's output")
        expect(os.path.exists(tmp / "broken-out"), False, "a trace directory without the library")
        # A nested profile() and a .step() after the block: one line each; the outer window
        # records as before.
        p = run(["python", APPS / "profile_api.py", "misuse", tmp / "misuse", "t"], env)
        lines = [l for l in p.stderr.splitlines() if l.startswith("cuprof: ") and "wrote" not in l]
        expect(
            lines,
            [
                "cuprof: cuprof.profile() entered while another is active (nested, or entered twice): this one does nothing, the outer one goes on",
                "cuprof: profile.step() called outside its `with cuprof.profile(...)` block: ignored",
            ],
            "lines of the misused API",
        )
        expect(recorded(trace(tmp / "misuse" / "t-rank0.trace.json.gz")), reference, "steps, operators and kernels of the misused API")

        print(f"wheel test: ok: {wheel.name} ({policy}, {size} bytes)")
    finally:
        if not os.environ.get("CUPROF_KEEP_TEST_DIRS"):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
