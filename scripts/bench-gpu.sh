#!/usr/bin/env bash
# cuprof's overhead on a CUDA machine, side by side with CUPTI's own floor and torch.profiler
# (issue 8). For an H100 with CUDA 13.0 and PyTorch 2.11; needs no Rust and no network.
#
#   bash scripts/bench-gpu.sh [rounds]
#
# Relative paths in BENCH_DIR, CUPROF_BIN and OUT are taken from the repository root.
# BENCH_DIR (default scripts/gpu/reference): the reference workloads and tracers
#   (workloads.py, launch_bench.cu, cupti_floor.c; scripts/gpu/reference/README.md).
# CUPROF_BIN (default target/release): the folder holding libcuprof.so (built elsewhere, copied).
# CUDA_HOME (default /usr/local/cuda): nvcc, cupti.h and libcupti (lib64 or extras/CUPTI).
# OUT (default the repository root): where bench-gpu.json goes (and bench-gpu.log, the build
#   output and every run's command, stdout and stderr).
# ROUNDS (or the first argument, which wins; default 3), LAUNCH_STEPS (default 8),
#   TRANSFORMER_STEPS (default 12), NATIVE_LAUNCHES (default 100000), RUN_TIMEOUT (seconds per
#   run, default 120), BUDGET (seconds from the start, builds included, default 540: the whole
#   script stays inside 10 minutes; a run that would end after it, judged by the slowest earlier
#   run of the same workload and mode or 30 s for the first, is skipped and reported).
# BENCH_CPUS (a taskset CPU list; default 0-(k-1), the first k of the CPUs this process may use
#   with k = min(8, their number), when taskset is on PATH; empty or "none": no pinning): every
#   measured run, of every workload and mode, starts under taskset -c $BENCH_CPUS. Why: unpinned,
#   on a 16-core H100 machine, native runs fell anywhere from about 4,100 to 8,800 ns/launch
#   by where the process was scheduled, so the rounds of one mode spread by tens of percent;
#   with every run on CPUs 0-7 the spreads were much narrower (BENCHMARKS.md has both runs).
# BENCH_WORKLOADS, BENCH_MODES: space-separated names that narrow the runs (none always runs).
# PYTHON, NVCC, CC: the tools (default python3, $CUDA_HOME/bin/nvcc or nvcc, gcc; the floor is
#   built with nvcc when CC fails).
# LD_PRELOAD, CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH, CUPROF_ENABLED, CUPROF_ACTIVITIES,
#   CUPROF_API, FLOOR_PRELOAD and FLOOR_KINDS are not passed on from the
#   caller: each mode sets its own.
#
# Workloads and their modes:
#   native       launch_bench.cu, NATIVE_LAUNCHES launches: ns per launch
#                none floor floor-k cuprof cuprof-gpu cuprof-rt
#   launch       workloads.py --workload launch: 20,000 one-element kernels per step, ms per step
#                none floor cuprof cuprof-gpu torch cuprof-rt cuprof-noops torch-all
#   transformer  workloads.py --workload transformer: a 12-layer bf16 encoder training step
#                none floor cuprof cuprof-gpu torch cuprof-rt cuprof-noops torch-all
# Modes, interleaved and repeated (A B C ... A B C ...; the order rotates each round):
#   none        the workload alone
#   floor       cupti_floor.c preloaded: kernel + memcpy + memset + runtime-API records, counted
#   floor-k     the same with FLOOR_KINDS=kernel (native only)
#   cuprof      LD_PRELOAD=libcuprof.so CUPROF_ENABLED=1 (default activities, whole run, with
#               PyTorch operators; the trace goes to a scratch folder, its size is recorded, then
#               it is deleted)
#   cuprof-gpu  the same with CUPROF_ACTIVITIES=GPU (kernels, copies, sets, syncs; no API records)
#   cuprof-rt   default activities with CUPROF_API=runtime (no driver API records: the cost of
#               the DRIVER activity kind)
#   torch       workloads.py --mode torch-cuda (python workloads only)
#   cuprof-noops  default activities with CUPROF_TORCH_OPS=0 (no PyTorch operators: with
#               `cuprof`, the cost of operator recording, issue 13)
#   torch-all   workloads.py --mode torch-all: torch.profiler with CPU+CUDA activities (its
#               operator recording; compare with `cuprof`)
# Prints the median per (workload, mode), its spread over the rounds, the ratio to none, the
# overhead relative to the floor's, to the kernel-only floor's (native) and to torch.profiler's,
# what operator recording costs per operator (cuprof - cuprof-noops and torch-all - torch, over
# the operators per step torch-all counts), and the issue's targets; writes all of it, with
# every run and the settings (the pinning included), as JSON.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
export ROUNDS=${1:-${ROUNDS:-3}}
export CUPROF_BIN=${CUPROF_BIN:-target/release}
case $CUPROF_BIN in /*) ;; *) CUPROF_BIN=$repo/$CUPROF_BIN ;; esac
BENCH_DIR=${BENCH_DIR:-$repo/scripts/gpu/reference}
case $BENCH_DIR in /*) ;; *) BENCH_DIR=$repo/$BENCH_DIR ;; esac
if [ ! -f "$BENCH_DIR/workloads.py" ]; then
  echo "bench-gpu: $BENCH_DIR has no workloads.py: set BENCH_DIR to a folder holding workloads.py, launch_bench.cu and cupti_floor.c" >&2
  exit 2
fi
export BENCH_DIR=$(cd "$BENCH_DIR" && pwd)
if [ ! -f "$CUPROF_BIN/libcuprof.so" ]; then
  echo "bench-gpu: $CUPROF_BIN/libcuprof.so missing: build with cargo build --release and copy target/release here (or set CUPROF_BIN)" >&2
  exit 2
fi
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export OUT=${OUT:-$(pwd)}
mkdir -p "$OUT"
export OUT=$(cd "$OUT" && pwd)
export PYTHON=${PYTHON:-python3}
if [ -z "${NVCC:-}" ]; then
  if [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC=$CUDA_HOME/bin/nvcc; else NVCC=nvcc; fi
fi
export NVCC CC=${CC:-gcc}
export PYTHONUNBUFFERED=1
exec "$PYTHON" - "$@" <<'PY'
import json, os, shutil, statistics, subprocess, sys, tempfile, time

T0 = time.monotonic()
env0 = dict(os.environ)
for v in ("LD_PRELOAD", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "CUPROF_ENABLED",
          "CUPROF_ACTIVITIES", "CUPROF_API", "FLOOR_PRELOAD", "FLOOR_KINDS"):
    env0.pop(v, None)
bench = env0["BENCH_DIR"]
cuda = env0["CUDA_HOME"]
out_dir = env0["OUT"]
py = env0["PYTHON"]
rounds = int(env0["ROUNDS"])
launch_steps = int(env0.get("LAUNCH_STEPS", "8"))
transformer_steps = int(env0.get("TRANSFORMER_STEPS", "12"))
native_launches = int(env0.get("NATIVE_LAUNCHES", "100000"))
run_timeout = float(env0.get("RUN_TIMEOUT", "120"))
budget = float(env0.get("BUDGET", "540"))
lib = os.path.join(env0["CUPROF_BIN"], "libcuprof.so")
tmp = tempfile.mkdtemp(prefix="cuprof-bench-gpu-")
log_path = os.path.join(out_dir, "bench-gpu.log")
log = open(log_path, "w")


def say(*a):
    print(*a, flush=True)


def first_existing(paths):
    return next((p for p in paths if os.path.exists(p)), None)


# ------------------------------------------------------------------ build what runs here
inc = first_existing([os.path.join(cuda, d, "cupti.h") for d in ("include", "extras/CUPTI/include")])
libdirs = [d for d in (os.path.join(cuda, "lib64"), os.path.join(cuda, "extras/CUPTI/lib64"),
                       os.path.join(cuda, "targets/x86_64-linux/lib"))
           if any(f.startswith("libcupti.so") for f in (os.listdir(d) if os.path.isdir(d) else []))]
if inc is None or not libdirs:
    sys.exit(f"bench-gpu: cupti.h or libcupti not found under CUDA_HOME={cuda} (include, extras/CUPTI)")
floor_so = os.path.join(tmp, "libfloor.so")
launch_bin = os.path.join(tmp, "launch_bench")
cupti_flags = ["-I" + os.path.dirname(inc), "-I" + os.path.join(cuda, "include")] + \
    [f"-L{d}" for d in libdirs] + ["-lcupti"]
floor_src = os.path.join(bench, "cupti_floor.c")
# libcupti is found through the floor's RPATH, so that no mode runs with a different
# LD_LIBRARY_PATH than the others (compare.sh exported $CUDA_HOME/lib64 to every run instead).
builds = [
    # The floor as a preloaded library: gcc, or nvcc as compare.sh does when there is no gcc.
    ([env0["CC"], "-O2", "-shared", "-fPIC", floor_src, "-o", floor_so] + cupti_flags
     + [f"-Wl,-rpath,{d}" for d in libdirs],
     [env0["NVCC"], "-O2", "-shared", "-Xcompiler", "-fPIC", floor_src, "-o", floor_so] + cupti_flags
     + [a for d in libdirs for a in ("-Xlinker", "-rpath", "-Xlinker", d)]),
    ([env0["NVCC"], "-O2", os.path.join(bench, "launch_bench.cu"), "-o", launch_bin], None),
]
for cmd, fallback in builds:
    try:
        r = subprocess.run(cmd, stdout=log, stderr=log).returncode
    except OSError as e:
        log.write(f"{cmd[0]}: {e}\n")
        r = 127
    if r != 0 and fallback:
        cmd = fallback
        try:
            r = subprocess.run(cmd, stdout=log, stderr=log).returncode
        except OSError as e:
            log.write(f"{cmd[0]}: {e}\n")
            r = 127
    if r != 0:
        log.flush()
        sys.exit(f"bench-gpu: build failed: {' '.join(cmd)} (see {log_path})")


# ------------------------------------------------------------------ the pinning
def cpu_list(cpus):
    """[0, 1, 2, 3, 6] -> "0-3,6"."""
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


allowed = sorted(os.sched_getaffinity(0))
taskset = shutil.which("taskset")
cpus_env = env0.get("BENCH_CPUS")
if cpus_env is None:
    # The first min(8, n) CPUs this process may use: 0-(k-1) on an unrestricted machine.
    cpus = cpu_list(allowed[:min(8, len(allowed))]) if taskset else None
    cpus_from = "default" if taskset else "default: no taskset on PATH"
elif cpus_env.strip().lower() in ("", "none"):
    cpus, cpus_from = None, "BENCH_CPUS=" + cpus_env.strip()
else:
    cpus, cpus_from = cpus_env.strip(), "BENCH_CPUS"
    if not taskset:
        sys.exit(f"bench-gpu: BENCH_CPUS={cpus} needs taskset on PATH (or set BENCH_CPUS=none)")
pin = [taskset, "-c", cpus] if cpus else []
if pin:
    r = subprocess.run(pin + ["true"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit(f"bench-gpu: taskset -c {cpus} fails here ({r.stdout.strip()}); this process may use "
                 f"CPUs {cpu_list(allowed)}: set BENCH_CPUS to some of them, or to none")
pin_desc = f"CPUs {cpus} (taskset -c {cpus}, {cpus_from})" if pin else f"not pinned ({cpus_from})"


# ------------------------------------------------------------------ the runs
def workload_cmd(w, mode):
    if w == "native":
        return pin + [launch_bin, str(native_launches)]
    steps = launch_steps if w == "launch" else transformer_steps
    return pin + [py, os.path.join(bench, "workloads.py"), "--workload", w, "--mode", mode, "--steps", str(steps)]


MODES = {
    "none": ({}, "none"),
    "floor": ({"FLOOR_PRELOAD": "1", "LD_PRELOAD": floor_so}, "none"),
    "floor-k": ({"FLOOR_PRELOAD": "1", "FLOOR_KINDS": "kernel", "LD_PRELOAD": floor_so}, "none"),
    "cuprof": ({"LD_PRELOAD": lib, "CUPROF_ENABLED": "1"}, "none"),
    "cuprof-gpu": ({"LD_PRELOAD": lib, "CUPROF_ENABLED": "1", "CUPROF_ACTIVITIES": "GPU"}, "none"),
    "cuprof-rt": ({"LD_PRELOAD": lib, "CUPROF_ENABLED": "1", "CUPROF_API": "runtime"}, "none"),
    "torch": ({}, "torch-cuda"),
    "cuprof-noops": ({"LD_PRELOAD": lib, "CUPROF_ENABLED": "1", "CUPROF_TORCH_OPS": "0"}, "none"),
    "torch-all": ({}, "torch-all"),
}
WORKLOADS = {
    "native": ["none", "floor", "floor-k", "cuprof", "cuprof-gpu", "cuprof-rt"],
    "launch": ["none", "floor", "cuprof", "cuprof-gpu", "torch", "cuprof-rt", "cuprof-noops", "torch-all"],
    "transformer": ["none", "floor", "cuprof", "cuprof-gpu", "torch", "cuprof-rt", "cuprof-noops", "torch-all"],
}
# BENCH_WORKLOADS and BENCH_MODES (space-separated names) narrow the runs to fit a short lease;
# "none" is always kept, since every ratio is taken against it.
for var, known in (("BENCH_WORKLOADS", WORKLOADS), ("BENCH_MODES", MODES)):
    unknown = [n for n in env0.get(var, "").split() if n not in known]
    if unknown:
        sys.exit(f"bench-gpu: {var} names {' '.join(unknown)}, not among {' '.join(known)}")
if env0.get("BENCH_WORKLOADS", "").split():
    WORKLOADS = {w: m for w, m in WORKLOADS.items() if w in env0["BENCH_WORKLOADS"].split()}
if env0.get("BENCH_MODES", "").split():
    keep = set(env0["BENCH_MODES"].split()) | {"none"}
    WORKLOADS = {w: [m for m in ms if m in keep] for w, ms in WORKLOADS.items()}
UNIT = {"native": "ns/launch", "launch": "ms/step", "transformer": "ms/step"}
runs, skipped = [], []


def run_one(w, mode, rnd):
    extra, wmode = MODES[mode]
    env = dict(env0)
    env.update(extra)
    rundir = os.path.join(tmp, f"{w}-{mode}-{rnd}")
    os.makedirs(rundir, exist_ok=True)
    if mode.startswith("cuprof"):
        env.update({"CUPROF_DIR": rundir, "CUPROF_NAME": f"{w}-{mode}"})
    cmd = workload_cmd(w, wmode)
    log.write(f"\n### round {rnd} {w} {mode}: {' '.join(cmd)}\n")
    log.flush()
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, cwd=rundir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=run_timeout)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.monotonic() - t
    log.write(so)
    log.write(se)
    value, doc = None, None
    for line in so.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            value = doc.get("median_ms", doc.get("ns_per_launch_median"))
    rec = {"round": rnd, "workload": w, "mode": mode, "value": value, "rc": rc, "wall_s": round(wall, 2),
           "result": doc}
    # What cuprof and the floor said about themselves (records kept, lost).
    notes = [l for l in se.splitlines() if l.startswith("cuprof:") or l.startswith("[floor]")]
    if notes:
        rec["notes"] = notes[-6:]
    if mode.startswith("cuprof"):
        rec["trace_bytes"] = sum(os.path.getsize(os.path.join(rundir, f)) for f in os.listdir(rundir)
                                 if f.endswith(".json.gz"))
    shutil.rmtree(rundir, ignore_errors=True)
    runs.append(rec)
    shown = "FAILED" if value is None else f"{value:.2f} {UNIT[w]}"
    say(f"  round {rnd} {w:12} {mode:11} {shown:>20}  ({wall:.1f} s{'' if rc == 0 else ', rc=' + str(rc)})")


say(f"bench-gpu: {rounds} rounds; launch {launch_steps} steps, transformer {transformer_steps} steps, "
    f"native {native_launches} launches; {pin_desc}; budget {budget:.0f} s; "
    f"stderr of every run in {log_path}")
for rnd in range(1, rounds + 1):
    for w, modes in WORKLOADS.items():
        k = (rnd - 1) % len(modes)
        for mode in modes[k:] + modes[:k]:
            walls = [r["wall_s"] for r in runs if r["workload"] == w and r["mode"] == mode]
            expected = max(walls) if walls else 30.0
            if time.monotonic() - T0 + expected > budget:
                skipped.append({"round": rnd, "workload": w, "mode": mode})
                continue
            run_one(w, mode, rnd)

# ------------------------------------------------------------------ the table
def values(w, mode):
    return [r["value"] for r in runs if r["workload"] == w and r["mode"] == mode and r["value"] is not None]


def med(w, mode):
    xs = values(w, mode)
    return (statistics.median(xs), len(xs)) if xs else (None, 0)


def spread(w, mode):
    """(max - min) / min over the rounds: how far apart the runs of one mode fell, to judge
    whether a difference between modes is larger than the machine's noise."""
    xs = values(w, mode)
    return (max(xs) - min(xs)) / min(xs) if len(xs) > 1 and min(xs) > 0 else None


table = []
say("")
say(f"{'workload':12} {'mode':11} {'median':>10} {'n':>2} {'spread':>7} {'vs none':>9} {'overhead':>9} {'/ floor':>8} {'/ floor-k':>9} {'/ torch':>8}")
for w, modes in WORKLOADS.items():
    # A reference this workload does not run (floor-k outside native, torch on native) is None:
    # its columns show "-" and its JSON fields are null.
    ref = lambda mode: med(w, mode)[0] if mode in modes else None
    base, fl, flk, tor = ref("none"), ref("floor"), ref("floor-k"), ref("torch")
    ov = lambda m: None if (m is None or not base) else m / base - 1.0
    for mode in modes:
        m, n = med(w, mode)
        row = {"workload": w, "mode": mode, "unit": UNIT[w], "median": m, "n": n, "spread": spread(w, mode),
               "ratio_vs_none": None if m is None or not base else m / base, "overhead": ov(m)}

        def rel(ref):
            o, r = ov(m), ov(ref)
            return None if o is None or r is None or r <= 0 else o / r
        row["overhead_vs_floor"] = rel(fl)
        row["overhead_vs_floor_kernel"] = rel(flk)
        row["overhead_vs_torch"] = rel(tor)
        table.append(row)
        # A missing value is a "-" right-aligned in its column; p() is a percentage.
        f = lambda v, fmt: "-".rjust(len(format(0.0, fmt))) if v is None else format(v, fmt)
        p = lambda v, fmt: f(None, fmt) + " " if v is None else format(100 * v, fmt) + "%"
        say(f"{w:12} {mode:11} {f(m, '10.2f')} {n:>2} {p(row['spread'], '6.1f')} {f(row['ratio_vs_none'], '9.3f')} "
            f"{p(row['overhead'], '+8.1f')} "
            f"{f(row['overhead_vs_floor'], '8.2f')} {f(row['overhead_vs_floor_kernel'], '9.2f')} {f(row['overhead_vs_torch'], '8.2f')}")

# Operator recording per operator (issue 25): the step time cuprof's operators add
# (cuprof - cuprof-noops) and torch.profiler's CPU activity adds (torch-all - torch), each
# divided by the operators per step torch.profiler counted in its torch-all runs.
op_costs = []
for w in ("launch", "transformer"):
    counts = [r["result"]["ops_per_step"] for r in runs
              if r["workload"] == w and r["mode"] == "torch-all" and (r["result"] or {}).get("ops_per_step")]
    if not counts:
        continue
    ops = statistics.median(counts)
    row = {"workload": w, "ops_per_step": ops}
    for name, with_ops, without in (("cuprof", "cuprof", "cuprof-noops"), ("torch.profiler", "torch-all", "torch")):
        a_, b_ = med(w, with_ops)[0], med(w, without)[0]
        row[name + "_us_per_op"] = None if a_ is None or b_ is None else (a_ - b_) * 1e3 / ops
    op_costs.append(row)
    show = lambda v: "-" if v is None else f"{v:.2f} µs"
    say(f"{w}: {ops:.0f} operators a step; operators cost cuprof {show(row['cuprof_us_per_op'])} each "
        f"(cuprof - cuprof-noops), torch.profiler {show(row['torch.profiler_us_per_op'])} (torch-all - torch)")

# The issue's targets: cuprof's overhead <= 1.10x the floor's on native and python launch,
# <= 2% on the transformer step, and below one third of torch.profiler's on each.
targets = []
get = lambda w, mode: next((r for r in table if r["workload"] == w and r["mode"] == mode), {})
for w in ("native", "launch"):
    r = get(w, "cuprof")
    v = r.get("overhead_vs_floor")
    targets.append({"target": f"{w}: cuprof overhead <= 1.10 x floor's", "value": v,
                    "pass": None if v is None else v <= 1.10})
r = get("transformer", "cuprof")
targets.append({"target": "transformer: cuprof overhead <= 2%", "value": r.get("overhead"),
                "pass": None if r.get("overhead") is None else r["overhead"] <= 0.02})
for w in ("launch", "transformer"):
    r = get(w, "cuprof")
    v = r.get("overhead_vs_torch")
    targets.append({"target": f"{w}: cuprof overhead < 1/3 of torch.profiler's", "value": v,
                    "pass": None if v is None else v < 1 / 3})
say("")
for t in targets:
    v = "-" if t["value"] is None else f"{t['value']:.3f}"
    say(f"{'PASS' if t['pass'] else ('FAIL' if t['pass'] is False else 'N/A '):4}  {t['target']}: {v}")
if skipped:
    say(f"\n{len(skipped)} runs skipped: the {budget:.0f} s budget ran out (lower ROUNDS or the step counts)")


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return None


doc = {
    "machine": {
        "gpu": sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), None),
        "cores": os.cpu_count(),
        "torch": sh([py, "-c", "import torch; print(torch.__version__, torch.version.cuda)"]),
        "nvcc": (sh([env0["NVCC"], "--version"]) or "").splitlines()[-1:] or None,
    },
    "settings": {"rounds": rounds, "launch_steps": launch_steps, "transformer_steps": transformer_steps,
                 "native_launches": native_launches, "run_timeout_s": run_timeout, "budget_s": budget,
                 "cpus": cpus, "cpus_from": cpus_from, "pin": pin or None,
                 "cpus_allowed": cpu_list(allowed), "cuprof_lib": lib, "bench_dir": bench},
    "table": table, "targets": targets, "operator_costs": op_costs, "runs": runs, "skipped": skipped,
    "total_s": round(time.monotonic() - T0, 1),
}
path = os.path.join(out_dir, "bench-gpu.json")
with open(path, "w") as f:
    json.dump(doc, f, indent=1)
say(f"\nwrote {path} ({doc['total_s']} s in all)")
shutil.rmtree(tmp, ignore_errors=True)
PY
