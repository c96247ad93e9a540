"""A torchrun-like parent: never touches CUDA, starts two "ranks" (RANK=0, 1) that do."""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
procs = []
for rank in range(2):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
    procs.append(subprocess.Popen([sys.executable, os.path.join(here, "steps.py"), "api", "3"], env=env))
codes = [p.wait() for p in procs]
print('{"codes": %s}' % codes)
sys.exit(max(codes))
