"""A program whose libraries leave no static TLS spare, traced with operators on.

    python3 static_tls.py DIR

After importing torch it loads, largest first, libraries that each hold an initial-exec
thread-local of a power-of-two size (built into DIR with the C compiler), keeping each that
loads, until less than 8 bytes of glibc's spare static TLS are left: the native observer's
build whose thread-local is initial-exec then cannot load. cuprof starts (the double's cuInit)
and runs a Linear forward. Prints one JSON line: the bytes taken, the output's shape and the
observer libraries mapped into the process.
"""

import ctypes
import json
import os
import subprocess
import sys

import torch

import double

out = sys.argv[1]
source = os.path.join(out, "fill.c")
with open(source, "w") as f:
    f.write(
        '__attribute__((tls_model("initial-exec"), aligned(8))) __thread char pad[PAD];\n'
        "char* touch(void) { return pad; }\n"
    )
taken = 0
for size in (4096, 2048, 1024, 512, 256, 128, 64, 32, 16, 8):
    lib = os.path.join(out, "fill%d.so" % size)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", "-DPAD=%d" % size, source, "-o", lib], check=True)
    try:
        ctypes.CDLL(lib)
        taken += size
    except OSError:
        pass

d = double.load()
d.cuInit(0)
torch.manual_seed(0)
y = torch.nn.Linear(16, 4)(torch.randn(2, 16))
with open("/proc/self/maps") as maps:
    observers = sorted({l.split()[-1] for l in maps if l.rstrip().endswith("libcuprof_observer.so")})
print(json.dumps({"static_tls_taken": taken, "shape": list(y.shape), "observers": observers}))
