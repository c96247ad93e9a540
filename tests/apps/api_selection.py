"""Kept and unkept API calls, inside and outside a cudaProfilerStart/Stop range, and what the
tracer switched on in CUPTI meanwhile. Prints JSON: correlation ids and switch states."""
import json

import double as dbl

RUNTIME, DRIVER = 2, 1
KIND_RUNTIME, KIND_DRIVER = 5, 4
LAUNCH, GET_DEVICE, CU_LAUNCH, CU_CTX_GET_CURRENT = 211, 17, 307, 304

d = dbl.load()
assert d.cuInit(0) == 0


def switches():
    return {
        "kind_runtime": d.double_kind_enabled(KIND_RUNTIME),
        "kind_driver": d.double_kind_enabled(KIND_DRIVER),
        "cudaLaunchKernel": d.double_api_enabled(RUNTIME, LAUNCH),
        "cudaGetDevice": d.double_api_enabled(RUNTIME, GET_DEVICE),
        "cuLaunchKernel": d.double_api_enabled(DRIVER, CU_LAUNCH),
        "cuCtxGetCurrent": d.double_api_enabled(DRIVER, CU_CTX_GET_CURRENT),
    }


def work():
    return {
        "cudaGetDevice": d.double_api_call(RUNTIME, GET_DEVICE, 300),
        "cuCtxGetCurrent": d.double_api_call(DRIVER, CU_CTX_GET_CURRENT, 200),
        "cudaLaunchKernel": d.double_launch_kernel(b"_Z6kernelPfi", 0, 7, 1, 1, 1, 32, 1, 1, 1_000),
        "cuLaunchKernel": d.double_driver_launch_kernel(b"triton_poi_fused_0", 0, 7, 1, 1, 1, 32, 1, 1, 1_000),
    }


before = {"switches": switches(), "corr": work()}
d.double_profiler_start()
inside = {"switches": switches(), "corr": work()}
d.double_profiler_stop()
after = {"switches": switches(), "corr": work()}
print(json.dumps({"before": before, "inside": inside, "after": after}))
