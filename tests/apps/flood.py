"""Launches argv[1] kernels on each of argv[2] threads at once (every thread launches its first,
so holds a CUPTI 13 buffer, before any launches its second), reports CUPTI drops through the
double (double_set_dropped(argv[3])), and prints what the double produced and delivered, the
process's peak RSS (VmHWM, KiB) and the seconds from the first launch to the last join (what
an untraced run of the same program is compared with)."""
import json
import sys
import threading
import time

import double as dbl

per_thread, threads, cupti_dropped = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
# argv[4] == "reclaimed": after the launches, wait (up to 60 s) until the tracer has brought back
# at least one buffer on its own (no buffer here fills; only a flush returns one), and report
# how many came back before this program's own flush.
wait_reclaimed = sys.argv[4:] == ["reclaimed"]
d = dbl.load()
assert d.cuInit(0) == 0
start = threading.Barrier(threads)
first_done = threading.Barrier(threads)


def launch(stream):
    d.double_launch_kernel(b"_Z5floodv", 0, stream, 1, 1, 1, 32, 1, 1, 1_000)


def work(stream):
    start.wait()
    if per_thread > 0:
        launch(stream)
    first_done.wait()
    for _ in range(per_thread - 1):
        launch(stream)


def peak_rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


ts = [threading.Thread(target=work, args=(10 + i,)) for i in range(threads)]
for t in ts:
    t.start()
began = time.monotonic()
for t in ts:
    t.join()
seconds = time.monotonic() - began
if wait_reclaimed:
    deadline = time.monotonic() + 60
    while d.double_buffers_completed() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
completed_before_flush = d.double_buffers_completed()
d.double_set_dropped(cupti_dropped)
d.cuptiActivityFlushAll(1)
print(json.dumps({
    "kernels": per_thread * threads,
    "produced": d.double_records_produced(0),
    "delivered": d.double_records_delivered(0),
    "dropped_by_double": d.double_records_dropped(),
    "completed_before_flush": completed_before_flush,
    "peak_rss_kib": peak_rss_kib(),
    "seconds": round(seconds, 3),
}))
