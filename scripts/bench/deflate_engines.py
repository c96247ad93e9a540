"""Deflate engines on the writer's own JSON, one process, interleaved rounds, thread CPU time.

    CUPROF_BENCH_NO_CRITERION=1 CUPROF_BENCH_DUMP=/tmp/mix.json cargo bench -p cuprof-core --bench pipeline
    pip install isal zlib-ng deflate        # into a scratch venv: not the project's dependencies
    python3 scripts/bench/deflate_engines.py /tmp/mix.json 5 487

DUMP is the mix's JSON as the pipeline bench writes it, ROUNDS the rounds, BYTES_PER_RECORD
the bench's "bytes of JSON per record" line (to give ns and gzip bytes per record). Each
streaming engine gets the JSON in 64 KiB pieces, as the trace writer hands it over; libdeflate
cannot stream and gets whole 1 MiB blocks (an upper bound on its speed here). Prints one
Markdown row per engine: MB/s, ns/record, gzip bytes/record (BENCHMARKS.md, issue 53 item 2).
"""
import statistics
import sys
import time
import zlib

import deflate
from isal import isal_zlib
from zlib_ng import zlib_ng

path, rounds, per_record = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
data = open(path, "rb").read()
PIECE = 64 << 10


def stream(module, level):
    c = module.compressobj(level, module.DEFLATED, 31)
    n = sum(len(c.compress(data[i : i + PIECE])) for i in range(0, len(data), PIECE))
    return n + len(c.flush())


def libdeflate(level):
    block = 1 << 20
    return sum(
        len(deflate.gzip_compress(data[i : i + block], level))
        for i in range(0, len(data), block)
    )


engines = {
    "zlib-ng 1 (zlib-rs level 1 is its port)": lambda: stream(zlib_ng, 1),
    "system zlib 1": lambda: stream(zlib, 1),
    "ISA-L 0": lambda: stream(isal_zlib, 0),
    "ISA-L 1": lambda: stream(isal_zlib, 1),
    "libdeflate 1 (1 MiB blocks)": lambda: libdeflate(1),
}
times = {k: [] for k in engines}
size = {}
for _ in range(rounds):
    for k, f in engines.items():
        t = time.thread_time()
        size[k] = f()
        times[k].append(time.thread_time() - t)
records = len(data) / per_record
for k in engines:
    m = statistics.median(times[k])
    print(f"| {k} | {len(data) / m / 1e6:.0f} | {m / records * 1e9:.0f} | {size[k] / records:.1f} |")
