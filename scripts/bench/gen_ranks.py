"""Writes RANKS cuprof-shaped rank traces of about EVENTS events each, for scripts/bench-export.sh:
PyTorch operators launching kernels (runtime call, flow pair, kernel with every argument cuprof
writes), a memcpy every 50 kernels, an NVTX range and a ProfilerStep#N per 200 kernels. Durations
and gaps are random to the nanosecond (seeded by rank), as measured times are: a trace of
repeating values would compress far better than a real one.

Usage: gen_ranks.py DIR RANKS EVENTS"""

import gzip
import json
import random
import sys

PID = 4242
KERNELS = [
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8::Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
    "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, false, true, false, false, true, true, false>",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "void at::native::(anonymous namespace)::layer_norm_kernel<c10::BFloat16, float>(long, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
]
OPS = ["aten::mm", "aten::add", "aten::_flash_attention_forward", "c10d::allreduce_", "aten::native_layer_norm"]


def us(ns):
    return f"{ns // 1000}.{ns % 1000:03d}"


def header(rank, ranks):
    return (
        '{"schemaVersion": 1,\n "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912, "numSms": 132}],\n'
        f' "distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": {ranks}, "local_rank": {rank}}},\n'
        f' "cuprof": {{"version": "0.1.0", "pid": {PID}, "hostname": "bench", "cupti_version": 130001, "cycle": 1, "clock": {{"realtime_ns": 1700000001000000000, "monotonic_ns": 5000000000}}, "window": "bench"}},\n'
        ' "displayTimeUnit": "ms",\n "baseTimeNanoseconds": 1700000000000000000,\n "traceEvents": [\n'
    )


def rank_events(rank, target):
    rnd = random.Random(rank)
    t, corr, step, ext, n = 1_000_000, 1, 0, 1, 0
    while n < target:
        step_start = t
        out = []
        for k in range(200):
            i = k % len(KERNELS)
            name, stream = KERNELS[i], (13 if i == 3 else 7)
            dur = rnd.randrange(2_000, 60_000)
            cpu = rnd.randrange(3_000, 9_000)
            api, gpu = t + cpu - 2_600, t + cpu + rnd.randrange(1_000, 5_000)
            out.append(
                f'{{"ph": "X", "cat": "cpu_op", "name": "{OPS[i]}", "pid": {PID}, "tid": {PID}, "ts": {us(t)}, "dur": {us(cpu)}, "args": {{"External id": {ext}, "Record function id": 0, "Sequence number": {ext}, "Fwd thread id": 0, "Input Dims": [[4096, 4096], [4096, 4096]]}}}}'
            )
            out.append(
                f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": {PID}, "tid": {PID}, "ts": {us(api)}, "dur": {us(rnd.randrange(2_000, 2_600))}, "args": {{"External id": {ext}, "cbid": 211, "correlation": {corr}}}}}'
            )
            out.append(
                f'{{"ph": "s", "id": {corr}, "pid": {PID}, "tid": {PID}, "ts": {us(api)}, "cat": "ac2g", "name": "ac2g"}}'
            )
            out.append(
                f'{{"ph": "X", "cat": "kernel", "name": {json.dumps(name)}, "pid": 0, "tid": {stream}, "ts": {us(gpu)}, "dur": {us(dur)}, "args": {{"External id": {ext}, "queued": 0, "device": 0, "context": 1, "stream": {stream}, "correlation": {corr}, "registers per thread": 128, "shared memory": 49152, "blocks per SM": 1.939394, "warps per SM": 7.757576, "grid": [256, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 12}}}}'
            )
            out.append(
                f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": {stream}, "ts": {us(gpu)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}'
            )
            corr, ext, t = corr + 1, ext + 1, gpu + dur + rnd.randrange(500, 3_000)
            if k % 50 == 49:
                out.append(
                    f'{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "pid": 0, "tid": 7, "ts": {us(t)}, "dur": {us(rnd.randrange(11_000, 13_000))}, "args": {{"device": 0, "context": 1, "stream": 7, "correlation": {corr}, "bytes": 4194304, "memory bandwidth (GB/s)": 349.525333}}}}'
                )
                corr, t = corr + 1, t + 20_000
        out.append(
            f'{{"ph": "X", "cat": "user_annotation", "name": "forward", "pid": {PID}, "tid": {PID}, "ts": {us(step_start)}, "dur": {us(t - step_start)}}}'
        )
        out.append(
            f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": {PID}, "tid": {PID}, "ts": {us(step_start)}, "dur": {us(t - step_start)}, "args": {{"work": 4096.000000}}}}'
        )
        step += 1
        n += len(out)
        yield out


def main():
    d, ranks, events = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for r in range(ranks):
        with gzip.open(f"{d}/bench-rank{r}.trace.json.gz", "wt", compresslevel=1) as f:
            f.write(header(r, ranks))
            first = True
            for chunk in rank_events(r, events):
                f.write(("" if first else ",\n") + ",\n".join(chunk))
                first = False
            f.write(
                '\n],\n "cuprofStats": {"events": 0, "dropped_channel": 0, "dropped_cupti": 0, "dropped_buffers": 0, "kernels_without_timestamps": 0, "memory_events_dropped": 0, "complete": true},\n'
                f' "traceName": "bench-rank{r}.trace.json.gz"}}\n'
            )


main()
