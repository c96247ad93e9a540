"""Which driver calls CUPTI reports through its callbacks while PyTorch runs eager ops
(runtime launches, cuBLAS, cuDNN) and a torch.compile'd (Triton) function.

It answers one design question for issue 8: can cuprof leave driver-API records off until a
program loads GPU code through the driver itself (Triton, NVRTC, CuPy), by watching the
module-loading calls? That works only if the runtime's own (lazy) module loading does not show
up as those calls. Run without cuprof (one CUPTI subscriber per process). Prints one JSON line:
per phase, the callbacks seen, by function name.
"""
import ctypes
import glob
import json
import os
import sys
from collections import Counter

DOMAIN_DRIVER = 1
WATCHED = ("cuModuleLoad", "cuLibraryLoad", "cuModuleGetFunction", "cuLibraryGetKernel", "cuLaunchKernel")


def find_cupti():
    cands = [os.environ.get("CUPTI_LIB", "")]
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    cands += sorted(glob.glob(f"{cuda}/lib64/libcupti.so*")) + sorted(glob.glob(f"{cuda}/extras/CUPTI/lib64/libcupti.so*"))
    for p in sys.path:
        cands += sorted(glob.glob(f"{p}/nvidia/cu*/lib/libcupti.so*")) + sorted(glob.glob(f"{p}/nvidia/cuda_cupti/lib/libcupti.so*"))
    for c in cands:
        if c and os.path.exists(c):
            return c
    sys.exit("driver_probe: libcupti not found (set CUPTI_LIB)")


cupti = ctypes.CDLL(find_cupti())
CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p)
names = {}
for cbid in range(1, 1200):
    s = ctypes.c_char_p()
    if cupti.cuptiGetCallbackName(DOMAIN_DRIVER, cbid, ctypes.byref(s)) == 0 and s.value:
        names[cbid] = s.value.decode()
phase = ["setup"]
seen = {}


def on_callback(_user, domain, cbid, data):
    # CUpti_CallbackData starts with the callback site (0 = API enter).
    if data and ctypes.cast(data, ctypes.POINTER(ctypes.c_uint32))[0] == 0:
        seen.setdefault(phase[0], Counter())[names.get(cbid, str(cbid))] += 1


handler = CALLBACK(on_callback)
sub = ctypes.c_void_p()
r = cupti.cuptiSubscribe(ctypes.byref(sub), handler, None)
if r != 0:
    sys.exit(f"driver_probe: cuptiSubscribe failed ({r}): is another profiler in this process?")
watched = [c for c, n in names.items() if n.startswith(WATCHED)]
for cbid in watched:
    cupti.cuptiEnableCallback(1, sub, DOMAIN_DRIVER, cbid)

import torch  # noqa: E402  (after subscribing: CUDA initialises under the probe)

x = torch.randn(256, 256, device="cuda")
img = torch.randn(8, 16, 32, 32, device="cuda")
conv = torch.nn.Conv2d(16, 16, 3, padding=1).cuda()


def eager():
    y = torch.softmax(x @ x, -1).add_(1)
    z = conv(img).relu()
    torch.cuda.synchronize()
    return float(y.sum() + z.sum())


@torch.compile
def fused(a):
    return (a.sin() * 2 + a.cos()).relu()


for name, work in [("eager_first", eager), ("eager_again", eager),
                   ("compile_first", lambda: fused(x)), ("compile_again", lambda: fused(x))]:
    phase[0] = name
    work()
    torch.cuda.synchronize()
phase[0] = "done"
cupti.cuptiUnsubscribe(sub)
print(json.dumps({"watched": len(watched), "phases": {k: dict(v) for k, v in seen.items()}}))
