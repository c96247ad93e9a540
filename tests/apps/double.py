"""ctypes wrapper around the libcupti test double (tests/cupti-double).

Test programs drive the double like a CUDA program drives libcuda + the CUDA runtime:

    import double
    d = double.load()              # the .so named by $CUPTI_DOUBLE_LIB
    d.cuInit(0)                    # runs CUDA_INJECTION64_PATH's InitializeInjection
    d.double_launch_kernel(b"_Z6kernelPfi", 0, 7, 1, 1, 1, 128, 1, 1, 10_000)
    d.launch(b"_Z6kernelPfi", stream=7)       # the same, with defaults
    d.flush()                      # cuptiActivityFlushAll(FORCED), as a tool would

`load()` returns a `Double`: every exported C function is reachable as an attribute
(argtypes/restype declared below), plus the small helpers defined on the class. The
library is loaded RTLD_GLOBAL, so `dlopen("libcuda.so.1", RTLD_NOLOAD)` (its soname) and
`dlsym(RTLD_DEFAULT, "cupti...")` find it, as they would find NVIDIA's libraries.
"""

import ctypes
import os
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint8, c_uint32, c_uint64

# CUpti_ActivityKind
KIND_MEMCPY = 1
KIND_MEMSET = 2
KIND_KERNEL = 3
KIND_DRIVER = 4
KIND_RUNTIME = 5
KIND_CONCURRENT_KERNEL = 10
KIND_NAME = 11
KIND_MARKER = 12
KIND_OVERHEAD = 17
KIND_SYNCHRONIZATION = 38
KIND_EXTERNAL_CORRELATION = 39
KIND_MEMORY2 = 49

# CUpti_ActivityMemcpyKind
HTOD, DTOH, HTOA, ATOH, ATOA, ATOD, DTOA, DTOD, HTOH, PTOP = range(1, 11)
# CUpti_ActivityMemoryKind
MEM_PAGEABLE, MEM_PINNED, MEM_DEVICE, MEM_ARRAY, MEM_MANAGED = range(1, 6)
# CUpti_ActivitySynchronizationType (double_sync's first argument)
SYNC_EVENT, SYNC_STREAM_WAIT_EVENT, SYNC_STREAM, SYNC_DEVICE = range(1, 5)
# CUpti_ExternalCorrelationKind
EXT_UNKNOWN, EXT_OPENACC, EXT_CUSTOM0, EXT_CUSTOM1, EXT_CUSTOM2 = range(1, 6)
# CUpti_CallbackDomain
DOMAIN_DRIVER, DOMAIN_RUNTIME = 1, 2
# Runtime cbids the double simulates (cupti_runtime_cbid.h)
CBID_MALLOC, CBID_FREE, CBID_MEMCPY, CBID_MEMCPY_ASYNC, CBID_MEMSET_ASYNC = 20, 22, 31, 41, 51
CBID_STREAM_SYNC, CBID_EVENT_SYNC, CBID_STREAM_WAIT_EVENT = 131, 137, 147
CBID_DEVICE_RESET, CBID_DEVICE_SYNC = 164, 165
CBID_PROFILER_START, CBID_PROFILER_STOP = 171, 172
CBID_LAUNCH_KERNEL, CBID_GRAPH_LAUNCH = 211, 311
CBID_MALLOC_ASYNC, CBID_FREE_ASYNC = 373, 375

FLUSH_FORCED = 1

_U32, _U64, _INT = c_uint32, c_uint64, c_int

_SIGNATURES = {
    # fake libcuda
    "cuInit": (_INT, [c_uint32]),
    "cuDriverGetVersion": (_INT, [POINTER(c_int)]),
    "cuDeviceGetCount": (_INT, [POINTER(c_int)]),
    "cuDeviceGet": (_INT, [POINTER(c_int), c_int]),
    "cuDeviceGetName": (_INT, [c_char_p, c_int, c_int]),
    "cuDeviceTotalMem_v2": (_INT, [POINTER(c_size_t), c_int]),
    "cuDeviceGetAttribute": (_INT, [POINTER(c_int), c_int, c_int]),
    # CUPTI calls a program (or a second tool) may make itself
    "cuptiGetVersion": (_U32, [POINTER(c_uint32)]),
    "cuptiGetTimestamp": (_U32, [POINTER(c_uint64)]),
    "cuptiActivityFlushAll": (_U32, [c_uint32]),
    "cuptiActivityPushExternalCorrelationId": (_U32, [c_uint32, c_uint64]),
    "cuptiActivityPopExternalCorrelationId": (_U32, [c_uint32, POINTER(c_uint64)]),
    "cuptiActivityEnable": (_U32, [c_uint32]),
    "cuptiActivityDisable": (_U32, [c_uint32]),
    "cuptiActivityEnableRuntimeApi": (_U32, [c_uint32, c_uint8]),
    "cuptiFinalize": (_U32, []),
    # simulated CUDA calls (on the calling thread)
    "double_launch_kernel": (
        _U32,
        [c_char_p, c_uint32, c_uint32, c_int, c_int, c_int, c_int, c_int, c_int, c_uint64],
    ),
    "double_driver_launch_kernel": (
        _U32,
        [c_char_p, c_uint32, c_uint32, c_int, c_int, c_int, c_int, c_int, c_int, c_uint64],
    ),
    "double_launch_graph": (_U32, [c_uint32, c_uint32, c_uint32, c_char_p, c_uint64]),
    "double_memcpy": (
        _U32,
        [c_uint32, c_uint32, c_uint32, c_uint64, c_uint32, c_uint32, c_uint64, c_int],
    ),
    "double_memset": (_U32, [c_uint64, c_uint32, c_uint32, c_uint32, c_uint64]),
    "double_sync": (_U32, [c_uint32, c_uint32, c_uint64]),
    "double_wait_event": (_U32, [c_uint32, c_uint32, c_uint32, c_uint64]),
    "double_event_record": (_U32, [c_uint32, c_uint32]),
    "double_api_call": (_U32, [c_uint32, c_uint32, c_uint64]),
    "double_malloc": (_U64, [c_uint32, c_uint64]),
    "double_free": (None, [c_uint32, c_uint64]),
    "double_malloc_async": (_U64, [c_uint32, c_uint32, c_uint64, c_uint64]),
    "double_free_async": (None, [c_uint32, c_uint32, c_uint64, c_uint64]),
    "double_profiler_start": (None, []),
    "double_profiler_stop": (None, []),
    "double_device_reset": (None, []),
    "double_burst": (_U64, [c_uint64, c_uint32]),
    # fault injection, replay, a second profiler
    "double_set_dropped": (None, [c_uint64]),
    "double_zero_kernel_timestamps": (None, [c_uint64]),
    "double_replay": (_INT, [c_char_p]),
    "double_second_client_subscribe": (_INT, []),
    "double_take_over": (_INT, []),
    "double_second_client_records": (_U64, []),
    "double_second_client_unknown_buffers": (_U64, []),
    # counters and state
    "double_records_produced": (_U64, [c_uint32]),
    "double_records_delivered": (_U64, [c_uint32]),
    "double_records_dropped": (_U64, []),
    "double_buffers_requested": (_U64, []),
    "double_buffers_completed": (_U64, []),
    "double_buffers_lost": (_U64, []),
    "double_finalize_calls": (_U64, []),
    "double_subscribe_calls": (_U64, []),
    "double_register_calls": (_U64, []),
    "double_kind_enabled": (_INT, [c_uint32]),
    "double_api_enabled": (_INT, [c_uint32, c_uint32]),
    "double_callback_enabled": (_INT, [c_uint32, c_uint32]),
    "double_subscribed": (_INT, []),
    "double_version": (_U32, []),
}


def _bytes(name):
    return name.encode() if isinstance(name, str) else name


class Double:
    """The loaded double: C functions as attributes, plus helpers."""

    def __init__(self, lib):
        self.lib = lib
        for name, (restype, argtypes) in _SIGNATURES.items():
            f = getattr(lib, name)
            f.restype = restype
            f.argtypes = argtypes

    def __getattr__(self, name):
        return getattr(self.lib, name)

    # -- simulated CUDA work -------------------------------------------------------

    def launch(self, name, stream=0, device=0, grid=(1, 1, 1), block=(128, 1, 1),
               duration_ns=10_000):
        """cudaLaunchKernel; returns the correlation id."""
        return self.lib.double_launch_kernel(_bytes(name), device, stream, *grid, *block,
                                             duration_ns)

    def graph(self, name, n_kernels, stream=0, device=0, duration_ns=10_000):
        """cudaGraphLaunch of n kernel nodes; returns the correlation id."""
        return self.lib.double_launch_graph(device, stream, n_kernels, _bytes(name),
                                            duration_ns)

    def memcpy(self, copy_kind, nbytes, stream=0, device=0, duration_ns=10_000,
               is_async=True, src_kind=None, dst_kind=None):
        """cudaMemcpy[Async]; returns the runtime correlation id."""
        host = {HTOD: (MEM_PINNED, MEM_DEVICE), DTOH: (MEM_DEVICE, MEM_PINNED),
                DTOD: (MEM_DEVICE, MEM_DEVICE), HTOH: (MEM_PINNED, MEM_PINNED)}
        s, d = host.get(copy_kind, (MEM_DEVICE, MEM_DEVICE))
        return self.lib.double_memcpy(copy_kind, src_kind or s, dst_kind or d, nbytes,
                                      device, stream, duration_ns, int(bool(is_async)))

    def memset(self, nbytes, value=0, stream=0, device=0, duration_ns=10_000):
        return self.lib.double_memset(nbytes, value, device, stream, duration_ns)

    def sync(self, sync_type=SYNC_DEVICE, stream=0, duration_ns=10_000):
        return self.lib.double_sync(sync_type, stream, duration_ns)

    def malloc(self, nbytes, device=0, stream=None, stream_handle=0):
        """cudaMalloc, or cudaMallocAsync when a stream is given (CUPTI's id; the program's
        cudaStream_t is stream_handle); returns the address."""
        if stream is None:
            return self.lib.double_malloc(device, nbytes)
        return self.lib.double_malloc_async(device, stream, stream_handle, nbytes)

    def free(self, address, device=0, stream=None, stream_handle=0):
        if stream is None:
            self.lib.double_free(device, address)
        else:
            self.lib.double_free_async(device, stream, stream_handle, address)

    # -- CUPTI calls a program or a tool makes -------------------------------------

    def flush(self, forced=True):
        """cuptiActivityFlushAll; returns the CUptiResult."""
        return self.lib.cuptiActivityFlushAll(FLUSH_FORCED if forced else 0)

    def push_external(self, ext_id, kind=EXT_CUSTOM0):
        return self.lib.cuptiActivityPushExternalCorrelationId(kind, ext_id)

    def pop_external(self, kind=EXT_CUSTOM0):
        """Returns the popped id, or None when the stack was empty."""
        last = c_uint64(0)
        rc = self.lib.cuptiActivityPopExternalCorrelationId(kind, ctypes.byref(last))
        return last.value if rc == 0 else None

    def replay(self, path):
        return self.lib.double_replay(os.fsencode(path))

    # -- fake libcuda ----------------------------------------------------------------

    def device_count(self):
        n = c_int(0)
        rc = self.lib.cuDeviceGetCount(ctypes.byref(n))
        return n.value if rc == 0 else -rc

    def device_name(self, device=0):
        buf = ctypes.create_string_buffer(256)
        self.lib.cuDeviceGetName(buf, len(buf), device)
        return buf.value.decode()

    # -- counters ----------------------------------------------------------------------

    def counts(self, kind=0):
        """Produced/delivered record counts (kind 0 = all) and buffer counts."""
        return {
            "produced": self.lib.double_records_produced(kind),
            "delivered": self.lib.double_records_delivered(kind),
            "dropped": self.lib.double_records_dropped(),
            "buffers_requested": self.lib.double_buffers_requested(),
            "buffers_completed": self.lib.double_buffers_completed(),
        }


def load(path=None):
    """Loads the double (default: $CUPTI_DOUBLE_LIB, an absolute path) RTLD_GLOBAL."""
    path = path or os.environ["CUPTI_DOUBLE_LIB"]
    return Double(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
