"""A process that never initialises CUDA; says whether libcupti got loaded into it."""
import json
maps = open("/proc/self/maps").read()
print(json.dumps({"cupti_loaded": "cupti" in maps}))
