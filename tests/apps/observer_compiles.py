"""Compiles cuprof's native observer (observer.cpp) with the flags build.py gives it, syntax
only, against the torch headers in a folder (argv[1]: a torch wheel's torch/include), without
importing that torch: the tests check torch versions they do not run. Prints one line; exits
with the compiler's status."""
import os
import subprocess
import sys

repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ops = os.path.join(repo, "tracer", "preload", "src", "sources", "ops")
sys.path.insert(0, ops)
import build  # noqa: E402  (tracer/preload/src/sources/ops/build.py)

include = sys.argv[1]
# PyPI's torch wheels are built with the C++11 ABI.
flags = [f for f in build.compile_flags(include, 1) if f != "-shared"]
r = subprocess.run(["c++"] + flags + ["-fsyntax-only", os.path.join(ops, "observer.cpp")],
                   capture_output=True, text=True)
if r.returncode == 0:
    print("observer.cpp compiles against %s" % include)
else:
    errors = [l for l in r.stderr.splitlines() if "error" in l] or r.stderr.splitlines()[-1:]
    print("observer.cpp does not compile against %s: %s" % (include, errors[0] if errors else r.returncode))
sys.exit(r.returncode)
