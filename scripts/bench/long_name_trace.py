"""Writes a gzip trace holding one kernel whose name is 100 MB (BENCHMARKS.md, "One huge name").

    python3 scripts/bench/long_name_trace.py OUT.trace.json.gz [MB]
"""
import gzip
import sys

mb = int(sys.argv[2]) if len(sys.argv) > 2 else 100
name = "k" * (mb * 1000 * 1000)
with gzip.open(sys.argv[1], "wt", compresslevel=1) as f:
    f.write('{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [\n')
    f.write(
        '{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": 1000.0, '
        '"dur": 5.0, "args": {"device": 0, "stream": 7, "correlation": 1}}' % name
    )
    f.write("\n]}\n")
