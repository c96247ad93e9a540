"""Launches argv[1] kernels on each of argv[2] threads at once, reports CUPTI drops through the
double (double_set_dropped(argv[3])), and prints what the double produced and delivered."""
import json
import sys
import threading

import double as dbl

per_thread, threads, cupti_dropped = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
d = dbl.load()
assert d.cuInit(0) == 0
barrier = threading.Barrier(threads)


def work(stream):
    barrier.wait()
    for _ in range(per_thread):
        d.double_launch_kernel(b"_Z5floodv", 0, stream, 1, 1, 1, 32, 1, 1, 1_000)


ts = [threading.Thread(target=work, args=(10 + i,)) for i in range(threads)]
for t in ts:
    t.start()
for t in ts:
    t.join()
d.double_set_dropped(cupti_dropped)
d.cuptiActivityFlushAll(1)
print(json.dumps({
    "kernels": per_thread * threads,
    "produced": d.double_records_produced(0),
    "delivered": d.double_records_delivered(0),
    "dropped_by_double": d.double_records_dropped(),
}))
