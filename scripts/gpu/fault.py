"""The fault matrix's host program: runs GPU steps, then ends the way argv[1] says.

Cases: normal, sigterm, sigint, sigkill, abort, os_exit, fork, torch_profiler.
Prints `kernels N` (kernels launched) before its ending, flushed.
"""
import os, signal, sys, time, torch
case = sys.argv[1]
x = torch.zeros(1024, device="cuda")
n = 0
for _ in range(200):
    x.add_(1); n += 1
torch.cuda.synchronize()
if case == "fork":
    pid = os.fork()
    if pid == 0:
        y = sum(range(1000))
        os._exit(0)
    os.waitpid(pid, 0)
if case == "torch_profiler":
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(50):
            x.add_(1)
        torch.cuda.synchronize()
    k = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    print(f"torch_profiler_kernels {k}", flush=True)
print(f"kernels {n}", flush=True)
time.sleep(1.5)  # past one sync-flush interval
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
time.sleep(0.2)
