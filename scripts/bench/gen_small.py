"""Writes one cuprof-shaped rank trace of KERNELS small events, for scripts/bench-merge-small.sh:
kernels alone, each with the few `args` a CUPTI kernel record always has (about 190 bytes of
JSON), at random durations and gaps (seeded) so that it compresses like a measured trace. Many
small events are where a per-event cost shows most (issue 26: merge at 0.41-0.45x report).

Without HOST the header has no `cuprof` member (as a trace torch.profiler or another tool wrote):
no host name to place the rank by. With HOST, cuprof's member names that host.

With `launches`, each kernel comes with its `cudaLaunchKernel` call and its two flow events, as
cuprof writes a launch: four events per kernel, the flows under 100 bytes each.

Usage: gen_small.py FILE KERNELS [HOST [launches]]   (HOST may be "" for none)"""

import gzip
import random
import sys


def us(ns):
    return f"{ns // 1000}.{ns % 1000:03d}"


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    host = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
    # `launches`: each kernel with its launch call and flow arrow (4 events, as cuprof writes
    # a launch), the smallest events of a trace.
    launches = len(sys.argv) > 4 and sys.argv[4] == "launches"
    rnd = random.Random(26)
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write(
            '{"schemaVersion": 1,\n "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],\n'
            ' "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1, "local_rank": 0},\n'
            + (
                f' "cuprof": {{"version": "0.1.0", "pid": 4242, "hostname": "{host}", "cycle": 1, "clock": {{"realtime_ns": 1700000001000000000, "monotonic_ns": 5000000000}}, "window": "bench"}},\n'
                if host
                else ""
            )
            +
            ' "displayTimeUnit": "ms",\n "baseTimeNanoseconds": 1700000000000000000,\n "traceEvents": [\n'
        )
        t = 1_000_000
        out = []
        first = True
        for i in range(n):
            dur = rnd.randrange(1_000, 20_000)
            if launches:
                api = t - rnd.randrange(3_000, 9_000)
                out.append(
                    f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242, "ts": {us(api)}, "dur": 2.000, "args": {{"cbid": 211, "correlation": {i + 1}}}}}'
                )
            out.append(
                f'{{"ph": "X", "cat": "kernel", "name": "gemm_kernel_{i % 7}", "pid": 0, "tid": 7, "ts": {us(t)}, "dur": {us(dur)}, "args": {{"device": 0, "stream": 7, "correlation": {i + 1}, "grid": [132, 1, 1], "block": [128, 1, 1]}}}}'
            )
            if launches:
                out.append(
                    f'{{"ph": "s", "id": {i + 1}, "pid": 4242, "tid": 4242, "ts": {us(api)}, "cat": "ac2g", "name": "ac2g"}}'
                )
                out.append(
                    f'{{"ph": "f", "id": {i + 1}, "pid": 0, "tid": 7, "ts": {us(t)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}'
                )
            t += dur + rnd.randrange(200, 3_000)
            if len(out) >= 10_000:
                f.write(("" if first else ",\n") + ",\n".join(out))
                first, out = False, []
        if out:
            f.write(("" if first else ",\n") + ",\n".join(out))
        f.write('\n],\n "traceName": "small-rank0.trace.json.gz"}\n')


main()
