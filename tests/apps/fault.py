"""The fault matrix's host program on the libcupti double: launches kernels, then ends the way
argv[1] says: normal, sigterm, sigint, sigkill, abort, os_exit, fork, second_client, full_disk.
Prints {"kernels": N, ...} (flushed) before its ending."""
import ctypes
import json
import os
import resource
import signal
import sys
import time

import double as dbl

case = sys.argv[1]
if case == "full_disk":
    # A disk that fills up after 4 KiB: writes past it fail with EFBIG (SIGXFSZ ignored, as a
    # program writing to a full disk would see ENOSPC).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
d = dbl.load()
assert d.cuInit(0) == 0
n = 0
for i in range(300):
    d.double_launch_kernel(b"_Z4workv", 0, 7, 64, 1, 1, 256, 1, 1, 2_000)
    n += 1
info = {"kernels": n}
if case == "fork":
    pid = os.fork()
    if pid == 0:
        # The child runs Python code and exits through os._exit, as multiprocessing does.
        sum(range(1000))
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    info["child_status"] = status
if case == "second_client":
    # A second profiler (torch.profiler's way): subscribe and register buffer callbacks.
    info["second_subscribe"] = d.double_second_client_subscribe()
    for i in range(50):
        d.double_launch_kernel(b"_Z11after_takeoverv", 0, 7, 1, 1, 1, 32, 1, 1, 1_000)
    d.cuptiActivityFlushAll(1)
    info["second_client_records"] = d.double_second_client_records()
    info["second_client_unknown_buffers"] = d.double_second_client_unknown_buffers()
print(json.dumps(info), flush=True)
time.sleep(2.5)  # past two sync-flush intervals
if case == "sigterm":
    os.kill(os.getpid(), signal.SIGTERM)
elif case == "sigint":
    # Python's own handler, as it installs it at start unless SIGINT is ignored (a shell starts
    # a background job with SIGINT ignored, and Python then leaves it ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.kill(os.getpid(), signal.SIGINT)
elif case == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
elif case == "abort":
    os.abort()
elif case == "os_exit":
    os._exit(7)
time.sleep(0.5)
