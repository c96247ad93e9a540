"""CUPROF_API=auto: a direct driver launch before the program loads any GPU code through the
driver, then cuModuleLoadData (as Triton does before its launches), then two more direct
launches. With argv[1] == "no-load" the module load is left out. Prints JSON: correlation ids
and whether cuLaunchKernel records were switched on, before and after."""
import json
import sys
import time

import double as dbl

RUNTIME, DRIVER = 2, 1
CU_LAUNCH, CU_MODULE_LOAD_DATA, CU_CTX_GET_CURRENT = 307, 19, 304

d = dbl.load()
assert d.cuInit(0) == 0
load = sys.argv[1:] != ["no-load"]


def driver_launch():
    return d.double_driver_launch_kernel(b"triton_poi_fused_0", 0, 7, 1, 1, 1, 32, 1, 1, 1_000)


out = {"runtime": d.double_launch_kernel(b"_Z6kernelPfi", 0, 7, 1, 1, 1, 32, 1, 1, 1_000),
       "before": driver_launch(), "on_before": d.double_api_enabled(DRIVER, CU_LAUNCH)}
if load:
    out["load"] = d.double_api_call(DRIVER, CU_MODULE_LOAD_DATA, 5_000)
    # The writer thread switches the records on; a launch right after the load may race it.
    deadline = time.monotonic() + 5
    while not d.double_api_enabled(DRIVER, CU_LAUNCH) and time.monotonic() < deadline:
        time.sleep(0.001)
out["on_after"] = d.double_api_enabled(DRIVER, CU_LAUNCH)
out["query"] = d.double_api_call(DRIVER, CU_CTX_GET_CURRENT, 100)
out["after"] = [driver_launch() for _ in range(2)]
print(json.dumps(out))
