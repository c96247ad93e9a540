"""Steps on the libcupti double, marked by `cuprof_step()` (default) or by NVTX ranges named
`step` (argv[1] == "nvtx"). Each step launches: 2 compute kernels on stream 7, one NCCL kernel on
stream 13, an HtoD copy and a memset on stream 7. argv[2] = number of steps (default 6).
With --gpu-behind, gemm lasts 30 ms: the GPU falls behind the program, so a step's work runs
during later steps (as on a real GPU when the program runs ahead).
With --figures (api mode), steps attach figures: even steps through the Python API
(`cuprof.step(tokens=128, kv_len=256*i, accepted=i//2)`), odd ones through the C ABI
(`cuprof_step_tokens(128)`, `cuprof_step_figure("kv_len", 256*i)`); bad arguments are tried
first (out["errors"]), and one NaN figure through the C ABI (out["refused"]: its return).
Prints {"steps": N, "corr": [[...], ...]} (correlation ids per step)."""
import ctypes
import json
import sys

import nvtx

import double as dbl

mode = sys.argv[1] if len(sys.argv) > 1 else "api"
steps = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 6
d = dbl.load()
assert d.cuInit(0) == 0
me = ctypes.CDLL(None)
me.cuprof_step_figure.argtypes = [ctypes.c_char_p, ctypes.c_double]
me.cuprof_step_figure.restype = ctypes.c_int
out = []
figures = "--figures" in sys.argv
result = {}
if figures:
    import cuprof

    def raised(call):
        try:
            call()
        except (TypeError, ValueError) as e:
            return f"{type(e).__name__}: {e}"
        return None

    result["errors"] = {
        "tokens=-1": raised(lambda: cuprof.step(tokens=-1)),
        "tokens=1.5": raised(lambda: cuprof.step(tokens=1.5)),
        "tokens=True": raised(lambda: cuprof.step(tokens=True)),
        "kv_len=nan": raised(lambda: cuprof.step(kv_len=float("nan"))),
        "kv_len='x'": raised(lambda: cuprof.step(kv_len="x")),
        "long name": raised(lambda: cuprof.step(**{"n" * 65: 1})),
        "17 figures": raised(lambda: cuprof.step(**{f"f{i}": i for i in range(17)})),
    }


# 30 ms: far more than a step takes on the CPU even on a loaded machine (3 ms was not, at load
# 10 on 2 cores), so the backlog always outlasts the two steps between the cycles.
gemm_ns = 30_000_000 if "--gpu-behind" in sys.argv else 40_000


def body(i):
    c = []
    c.append(d.double_launch_kernel(b"_Z4gemmv", 0, 7, 132, 1, 1, 256, 1, 1, gemm_ns + 1_000 * i))
    c.append(d.double_launch_kernel(b"_Z7softmaxv", 0, 7, 64, 1, 1, 128, 1, 1, 10_000))
    c.append(d.double_launch_kernel(b"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 0, 13, 8, 1, 1, 512, 1, 1, 25_000))
    c.append(d.double_memcpy(dbl.HTOD, dbl.MEM_PINNED, dbl.MEM_DEVICE, 1 << 20, 0, 7, 8_000, 1))
    c.append(d.double_memset(1 << 16, 0, 0, 7, 2_000))
    if "--no-sync" not in sys.argv:
        d.double_sync(dbl.SYNC_DEVICE, 0, 5_000)
    return c


for i in range(steps):
    if mode == "nvtx":
        with nvtx.annotate("step"):
            out.append(body(i))
    elif figures and i % 2 == 0:
        out.append(body(i))
        cuprof.step(tokens=128, kv_len=256 * i, accepted=i // 2)
    else:
        out.append(body(i))
        me.cuprof_step_tokens(128)
        if figures:
            me.cuprof_step_figure(b"kv_len", 256 * i)
            if i == 1:
                result["refused"] = me.cuprof_step_figure(b"bad", float("nan"))
        me.cuprof_step()
print(json.dumps({"steps": steps, "corr": out, **result}))
