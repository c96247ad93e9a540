"""Three kernels launched straight through the driver (cuLaunchKernel, as Triton does) and one
through the runtime. Prints the correlation ids."""
import json

import double as dbl

d = dbl.load()
assert d.cuInit(0) == 0
driver = [d.double_driver_launch_kernel(b"triton_poi_fused_add_0", 0, 7, 8, 1, 1, 128, 1, 1, 4_000) for _ in range(3)]
runtime = d.double_launch_kernel(b"_Z6kernelPfi", 0, 7, 1, 1, 1, 32, 1, 1, 1_000)
print(json.dumps({"driver": driver, "runtime": runtime}))
