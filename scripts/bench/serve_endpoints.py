"""Times `cuprof serve`'s endpoints with 512 ranks x 10,000 steps loaded (issue 51: each under
200 ms after load): writes the traces (a step, an operator, its launch and its kernel per step
and rank: 20,480,000 events; the header and the time format of gen_ranks.py), starts
`cuprof serve DIR --port 0`, waits for its first line (the load), then asks each endpoint
ROUNDS times one after the other, as a browser asks (accepting gzip), and prints the bytes
sent and each one's median, min and max wall time as the client sees it (connect, request,
whole answer read; not inflated). Then CLIENTS clients at once, each asking every endpoint in
turn ROUNDS times: the median and max wall time of each endpoint among them.

Usage: serve_endpoints.py CUPROF DIR [ROUNDS]   (DIR: made and filled unless it already holds
the 512 traces)"""

import gzip
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_ranks import PID, header, us  # noqa: E402

RANKS, STEPS = 512, 10_000
STEP_NS = 1_000_000


def write_rank(args):
    d, r = args
    path = f"{d}/serve-rank{r}.trace.json.gz"
    if os.path.exists(path):
        return
    out = []
    for n in range(STEPS):
        s = 1_000_000 + n * STEP_NS + (r * 7 + n * 13) % 5_000
        c = n + 1
        kdur = 300_000 + (r * 31 + n * 17) % 200_000
        out.append(
            f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{n}", "pid": {PID}, "tid": {PID}, "ts": {us(s)}, "dur": {us(900_000)}}}'
        )
        out.append(
            f'{{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": {PID}, "tid": {PID}, "ts": {us(s + 10_000)}, "dur": {us(50_000)}, "args": {{"External id": {c}}}}}'
        )
        out.append(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {PID}, "tid": {PID}, "ts": {us(s + 20_000)}, "dur": {us(5_000)}, "args": {{"External id": {c}, "cbid": 211, "correlation": {c}}}}}'
        )
        out.append(
            f'{{"ph": "X", "cat": "kernel", "name": "gemm_{n % 7}", "pid": 0, "tid": 7, "ts": {us(s + 100_000)}, "dur": {us(kdur)}, "args": {{"External id": {c}, "device": 0, "stream": 7, "correlation": {c}}}}}'
        )
    with gzip.open(path + ".tmp", "wt", compresslevel=1) as f:
        f.write(header(r, RANKS))
        f.write(",\n".join(out))
        f.write(
            '\n],\n "cuprofStats": {"events": 0, "dropped_channel": 0, "dropped_cupti": 0, "dropped_buffers": 0, "kernels_without_timestamps": 0, "memory_events_dropped": 0, "complete": true}}\n'
        )
    os.rename(path + ".tmp", path)


def get(addr, path):
    """One GET: its wall time, status and body."""
    t = time.perf_counter()
    with socket.create_connection(addr) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n".encode())
        data = bytearray()
        while chunk := s.recv(1 << 20):
            data += chunk
    wall = time.perf_counter() - t
    head, body = bytes(data).split(b"\r\n\r\n", 1)
    return wall, int(head.split(b" ", 2)[1]), body


def main():
    cuprof, d = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    os.makedirs(d, exist_ok=True)
    t = time.perf_counter()
    with multiprocessing.Pool() as p:
        p.map(write_rank, [(d, r) for r in range(RANKS)])
    print(f"traces: {time.perf_counter() - t:.1f} s to write (or find)", flush=True)
    t = time.perf_counter()
    srv = subprocess.Popen([cuprof, "serve", d, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        first = srv.stdout.readline()
        print(f"load: {time.perf_counter() - t:.1f} s; {first.strip()}", flush=True)
        host, port = first.split("http://")[1].split("/")[0].rsplit(":", 1)
        addr = (host, int(port))
        status = json.loads(get(addr, "/api/status")[2])  # never gzipped: made per request
        r0 = status["ranks"][0]
        mid = (r0["start"] + r0["end"]) // 2
        endpoints = [
            "/api/status",
            "/api/summary",
            "/api/kernels",
            "/api/operators",
            "/api/memory",
            "/api/flame",
            "/api/torch_compile",
            "/report",
            f"/api/window?rank=0&t0={mid}&t1={mid + 1_000_000}&px=2000",
            f"/api/window?rank=511&t0={mid}&t1={mid + 100_000_000}&px=2000",
            f"/api/window?rank=255&t0={r0['start']}&t1={r0['end']}&px=2000",
        ]
        print("| endpoint | bytes | median | min | max |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for e in endpoints:
            walls, size = [], 0
            for _ in range(rounds):
                wall, code, body = get(addr, e)
                assert code == 200, (e, code, body[:200])
                size = len(body)
                walls.append(wall * 1000)
            print(
                f"| `{e}` | {size:,} | {statistics.median(walls):.1f} ms | {min(walls):.1f} ms | {max(walls):.1f} ms |",
                flush=True,
            )
        clients = 8
        walls = {e: [] for e in endpoints}

        def client():
            for _ in range(rounds):
                for e in endpoints:
                    wall, code, _ = get(addr, e)
                    assert code == 200, (e, code)
                    walls[e].append(wall * 1000)

        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"\n{clients} clients at once:\n")
        print("| endpoint | median | max |")
        print("| --- | ---: | ---: |")
        for e in endpoints:
            print(f"| `{e}` | {statistics.median(walls[e]):.1f} ms | {max(walls[e]):.1f} ms |", flush=True)
    finally:
        srv.kill()
        srv.wait()


if __name__ == "__main__":
    main()
