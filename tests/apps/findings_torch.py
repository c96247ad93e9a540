"""PyTorch operators that make three of the patterns `cuprof report`'s findings name, on the
libcupti double: `cuproftest::read_back` copies 4 KiB to pageable host memory, synchronizes its
stream (what `.item()` does), then allocates and frees 1 MiB through the driver;
`cuproftest::upload` copies 64 KiB from pageable memory; each called 3 times from its own line.
PyTorch records a custom operator as the autograd node that runs it
(`GeneratedBackwardFor_cuproftest_read_back_default`, as torch.profiler shows it) when its input
requires grad, so it does. Traced by cuprof with --with-stack, one recorded step.

    python3 findings_torch.py   # under libcuprof.so + the libcupti double
"""

import ctypes

import torch

import double

d = double.load()
d.cuInit(0)
step_boundary = ctypes.CDLL(None).cuprof_step


@torch.library.custom_op("cuproftest::read_back", mutates_args=())
def read_back(x: torch.Tensor) -> torch.Tensor:
    d.memcpy(double.DTOH, 4096, stream=7, duration_ns=3_000, dst_kind=double.MEM_PAGEABLE)
    d.sync(double.SYNC_STREAM, stream=7, duration_ns=40_000)
    d.free(d.malloc(1 << 20))
    return x.clone()


@torch.library.custom_op("cuproftest::upload", mutates_args=())
def upload(x: torch.Tensor) -> torch.Tensor:
    d.memcpy(double.HTOD, 1 << 16, stream=7, duration_ns=5_000, src_kind=double.MEM_PAGEABLE)
    return x.clone()


read_back.register_autograd(lambda ctx, grad: grad)
upload.register_autograd(lambda ctx, grad: grad)

x = torch.ones(4, requires_grad=True)
for _ in range(3):
    y = upload(x)
    z = read_back(y)
step_boundary()
d.flush()
print("{}")
