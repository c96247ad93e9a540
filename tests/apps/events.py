"""CUDA events on the libcupti double: event 3 recorded on stream 7 and then on stream 9 (the
later recording is the one waited on), event 4 recorded on stream 7; stream 11 waits on event 4
(cudaStreamWaitEvent), the host waits on event 3 (cudaEventSynchronize) and on event 5, which
was never recorded. Prints the correlation ids as JSON."""
import json

import double as dbl

d = dbl.load()
assert d.cuInit(0) == 0
corr = {}
d.launch(b"_Z8producerv", stream=7)
corr["record3_first"] = d.double_event_record(7, 3)
d.launch(b"_Z8producerv", stream=9)
corr["record3"] = d.double_event_record(9, 3)
corr["record4"] = d.double_event_record(7, 4)
corr["wait4"] = d.double_wait_event(dbl.SYNC_STREAM_WAIT_EVENT, 11, 4, 2_000)
corr["sync3"] = d.double_wait_event(dbl.SYNC_EVENT, 0, 3, 5_000)
corr["sync5"] = d.double_wait_event(dbl.SYNC_EVENT, 0, 5, 1_000)
print(json.dumps(corr))
