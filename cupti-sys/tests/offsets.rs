//! Byte offsets (x86-64) of the activity-record fields cuprof decodes, and the
//! numeric values of the constants it uses.
//!
//! Every number is a literal. Unless a comment says "header", it is copied from
//! docs/design/cupti.md ("x86-64 offsets of the fields a tracer
//! reads"). Numbers marked "header" are not in the design note and were read
//! from the CUPTI 13.0.85 headers (bindgen's layout, i.e. clang's): they are
//! asserted here so that the decoder can rely on them too.
//!
//! bindgen's own layout asserts (every field of every struct) are compile-time
//! checks inside `src/bindings.rs`; these tests pin the subset the decoder
//! reads to the numbers in the design note, independently of the generator.

use core::mem::{align_of, offset_of, size_of, MaybeUninit};
use cupti_sys::*;

/// `assert_eq!` on `offset_of!` for a list of top-level fields.
macro_rules! offsets {
    ($t:ty { $($field:ident @ $off:literal),* $(,)? }) => {
        $(
            assert_eq!(
                offset_of!($t, $field),
                $off,
                concat!("offset of ", stringify!($t), "::", stringify!($field))
            );
        )*
    };
}

/// Offset of a nested field path (through anonymous structs and unions),
/// written the way decoder code reads it: `rec.memoryPoolConfig.pool.size`.
/// Uses only a raw pointer into uninitialised memory (no read, no reference).
macro_rules! nested_offset {
    ($t:ty, $($path:tt)+) => {{
        let rec = MaybeUninit::<$t>::uninit();
        let base = rec.as_ptr();
        // SAFETY: addr_of! computes a place's address without reading it or
        // creating a reference; the place lies inside `rec`.
        let field = unsafe { core::ptr::addr_of!((*base).$($path)+) };
        field as usize - base as usize
    }};
}

/// Compile-time check of a field's type: `field_type!(T, field: u16)`.
macro_rules! field_type {
    ($t:ty, $($field:ident : $fty:ty),* $(,)?) => {
        $( let _: fn(&$t) -> $fty = |r| r.$field; )*
    };
}

/// Kernel9 and Kernel10 share this prefix (design note, Kernel9 line).
macro_rules! kernel_prefix {
    ($t:ty) => {{
        offsets!($t {
            kind @ 0,
            registersPerThread @ 6,
            start @ 16,
            end @ 24,
            completed @ 32,
            deviceId @ 40,
            contextId @ 44,
            streamId @ 48,
            gridX @ 52,
            gridY @ 56,
            gridZ @ 60,
            blockX @ 64,
            blockY @ 68,
            blockZ @ 72,
            staticSharedMemory @ 76,
            dynamicSharedMemory @ 80,
            correlationId @ 92,
            gridId @ 96,
            name @ 104,
            queued @ 120,
            submitted @ 128,
            launchType @ 136,
            graphNodeId @ 144,
            graphId @ 156,
            channelID @ 168,
            channelType @ 172,
            clusterX @ 176,
            clusterY @ 180,
            clusterZ @ 184,
        });
        field_type!($t,
            kind: CUpti_ActivityKind,
            registersPerThread: u16,
            start: u64,
            end: u64,
            completed: u64,
            deviceId: u32,
            contextId: u32,
            streamId: u32,
            gridX: i32,
            gridY: i32,
            gridZ: i32,
            blockX: i32,
            blockY: i32,
            blockZ: i32,
            staticSharedMemory: i32,
            dynamicSharedMemory: i32,
            correlationId: u32,
            gridId: i64,
            name: *const core::ffi::c_char,
            queued: u64,
            submitted: u64,
            launchType: u8,
            graphNodeId: u64,
            graphId: u32,
            channelID: u32,
            channelType: CUpti_ChannelType,
            clusterX: u32,
            clusterY: u32,
            clusterZ: u32,
        );
        assert_eq!(align_of::<$t>(), 8);
    }};
}

#[test]
fn activity_header() {
    offsets!(CUpti_Activity { kind @ 0 });
    assert_eq!(size_of::<CUpti_ActivityKind>(), 4); // header: a C enum
    assert_eq!(size_of::<CUpti_Activity>(), 8); // header: aligned(8)
}

#[test]
fn kernel9() {
    kernel_prefix!(CUpti_ActivityKernel9);
    assert_eq!(size_of::<CUpti_ActivityKernel9>(), 208);
}

#[test]
fn kernel10() {
    kernel_prefix!(CUpti_ActivityKernel10);
    offsets!(CUpti_ActivityKernel10 { isDeviceLaunched @ 208 });
    field_type!(CUpti_ActivityKernel10, isDeviceLaunched: u8);
    assert_eq!(size_of::<CUpti_ActivityKernel10>(), 216); // header
}

/// Memcpy5 and Memcpy6 share this prefix (design note, Memcpy5 line).
macro_rules! memcpy_prefix {
    ($t:ty) => {{
        offsets!($t {
            kind @ 0,
            copyKind @ 4,
            srcKind @ 5,
            dstKind @ 6,
            flags @ 7,
            bytes @ 8,
            start @ 16,
            end @ 24,
            deviceId @ 32,
            contextId @ 36,
            streamId @ 40,
            correlationId @ 44,
            runtimeCorrelationId @ 48,
            graphNodeId @ 64,
            graphId @ 72,
            channelID @ 76, // header
            channelType @ 80, // header
        });
        field_type!($t,
            copyKind: u8,
            srcKind: u8,
            dstKind: u8,
            flags: u8,
            bytes: u64,
            start: u64,
            end: u64,
            deviceId: u32,
            contextId: u32,
            streamId: u32,
            correlationId: u32,
            runtimeCorrelationId: u32,
            graphNodeId: u64,
            graphId: u32,
        );
        assert_eq!(align_of::<$t>(), 8);
    }};
}

#[test]
fn memcpy5() {
    memcpy_prefix!(CUpti_ActivityMemcpy5);
    // header: byte 84 is padding in the 12.x struct.
    offsets!(CUpti_ActivityMemcpy5 { pad2 @ 84 });
    assert_eq!(size_of::<CUpti_ActivityMemcpy5>(), 88); // header
}

#[test]
fn memcpy6() {
    memcpy_prefix!(CUpti_ActivityMemcpy6);
    // Design note: byte 84 (padding in 12.x) is isDeviceLaunched in 13.0.
    offsets!(CUpti_ActivityMemcpy6 { isDeviceLaunched @ 84 });
    field_type!(CUpti_ActivityMemcpy6, isDeviceLaunched: u8, copyCount: u64);
    offsets!(CUpti_ActivityMemcpy6 { copyCount @ 88 }); // header
    assert_eq!(size_of::<CUpti_ActivityMemcpy6>(), 96); // header
}

/// Peer-to-peer copies (kind MEMCPY2 = 22). Not in the design note: all from
/// the header. Note correlationId is at 60 here, not 44 as in Memcpy5/6, and
/// there is no runtimeCorrelationId.
#[test]
fn memcpy_ptop4() {
    offsets!(CUpti_ActivityMemcpyPtoP4 {
        kind @ 0,
        copyKind @ 4,
        srcKind @ 5,
        dstKind @ 6,
        flags @ 7,
        bytes @ 8,
        start @ 16,
        end @ 24,
        deviceId @ 32,
        contextId @ 36,
        streamId @ 40,
        srcDeviceId @ 44,
        srcContextId @ 48,
        dstDeviceId @ 52,
        dstContextId @ 56,
        correlationId @ 60,
        graphNodeId @ 72,
        graphId @ 80,
        channelID @ 84,
        channelType @ 88,
    });
    field_type!(CUpti_ActivityMemcpyPtoP4,
        srcDeviceId: u32,
        dstDeviceId: u32,
        correlationId: u32,
        graphNodeId: u64,
    );
    assert_eq!(size_of::<CUpti_ActivityMemcpyPtoP4>(), 96);
}

#[test]
fn memset4() {
    offsets!(CUpti_ActivityMemset4 {
        kind @ 0,
        value @ 4,
        bytes @ 8,
        start @ 16,
        end @ 24,
        deviceId @ 32,
        contextId @ 36,
        streamId @ 40,
        correlationId @ 44,
        flags @ 48,
        memoryKind @ 50,
        graphNodeId @ 64,
        graphId @ 72,
        isDeviceLaunched @ 84, // design note ("byte 84 of Memcpy6/Memset4")
    });
    field_type!(CUpti_ActivityMemset4,
        value: u32,
        bytes: u64,
        correlationId: u32,
        flags: u16,
        memoryKind: u16,
        graphNodeId: u64,
        graphId: u32,
        isDeviceLaunched: u8,
    );
    assert_eq!(size_of::<CUpti_ActivityMemset4>(), 88); // header
}

/// Memory3 and Memory4 share this layout up to byte 120 (design note, Memory3).
macro_rules! memory_prefix {
    ($t:ty, $pool_cfg:ty, $pool_union:ty) => {{
        offsets!($t {
            kind @ 0,
            memoryOperationType @ 4,
            memoryKind @ 8,
            correlationId @ 12,
            address @ 16,
            bytes @ 24,
            timestamp @ 32,
            PC @ 40,
            processId @ 48,
            deviceId @ 52,
            contextId @ 56,
            streamId @ 60,
            name @ 64,
            isAsync @ 72,
            memoryPoolConfig @ 80,
        });
        // memoryPoolConfig is an anonymous struct (bindgen names it
        // `<record>__bindgen_ty_1`); `size` sits in an anonymous union `pool`
        // with `processId` (the latter for IPC-imported pools; header).
        assert_eq!(offset_of!($t, memoryPoolConfig) + offset_of!($pool_cfg, memoryPoolType), 80);
        assert_eq!(offset_of!($t, memoryPoolConfig) + offset_of!($pool_cfg, address), 88);
        assert_eq!(offset_of!($t, memoryPoolConfig) + offset_of!($pool_cfg, releaseThreshold), 96);
        assert_eq!(
            offset_of!($t, memoryPoolConfig) + offset_of!($pool_cfg, pool) + offset_of!($pool_union, size),
            104
        );
        assert_eq!(offset_of!($t, memoryPoolConfig) + offset_of!($pool_cfg, utilizedSize), 112);
        // The same through field paths, as decoder code writes them.
        assert_eq!(nested_offset!($t, memoryPoolConfig.memoryPoolType), 80);
        assert_eq!(nested_offset!($t, memoryPoolConfig.address), 88);
        assert_eq!(nested_offset!($t, memoryPoolConfig.releaseThreshold), 96);
        assert_eq!(nested_offset!($t, memoryPoolConfig.pool.size), 104);
        assert_eq!(nested_offset!($t, memoryPoolConfig.pool.processId), 104); // header
        assert_eq!(nested_offset!($t, memoryPoolConfig.utilizedSize), 112);
        field_type!($t,
            memoryOperationType: CUpti_ActivityMemoryOperationType,
            memoryKind: CUpti_ActivityMemoryKind,
            correlationId: u32,
            address: u64,
            bytes: u64,
            timestamp: u64,
            PC: u64,
            processId: u32,
            deviceId: u32,
            contextId: u32,
            streamId: u32,
            name: *const core::ffi::c_char,
            isAsync: u32,
        );
        field_type!($pool_cfg,
            memoryPoolType: CUpti_ActivityMemoryPoolType,
            address: u64,
            releaseThreshold: u64,
            utilizedSize: u64,
        );
        assert_eq!(size_of::<$pool_union>(), 8); // header: union { u64 size; u64 processId; }
    }};
}

#[test]
fn memory3() {
    memory_prefix!(
        CUpti_ActivityMemory3,
        CUpti_ActivityMemory3__bindgen_ty_1,
        CUpti_ActivityMemory3__bindgen_ty_1__bindgen_ty_1
    );
    assert_eq!(size_of::<CUpti_ActivityMemory3>(), 120); // header
}

#[test]
fn memory4() {
    memory_prefix!(
        CUpti_ActivityMemory4,
        CUpti_ActivityMemory4__bindgen_ty_1,
        CUpti_ActivityMemory4__bindgen_ty_1__bindgen_ty_1
    );
    offsets!(CUpti_ActivityMemory4 { source @ 120 }); // header: appended in Memory4
    assert_eq!(size_of::<CUpti_ActivityMemory4>(), 128); // header
}

#[test]
fn activity_api() {
    offsets!(CUpti_ActivityAPI {
        kind @ 0,
        cbid @ 4,
        start @ 8,
        end @ 16,
        processId @ 24,
        threadId @ 28,
        correlationId @ 32,
        returnValue @ 36,
    });
    field_type!(CUpti_ActivityAPI,
        cbid: CUpti_CallbackId,
        start: u64,
        end: u64,
        processId: u32,
        threadId: u32,
        correlationId: u32,
        returnValue: u32,
    );
    let _: CUpti_CallbackId = 0u32; // header: cbid is a plain uint32_t
    assert_eq!(size_of::<CUpti_ActivityAPI>(), 40); // header
}

#[test]
fn marker2() {
    offsets!(CUpti_ActivityMarker2 {
        kind @ 0,
        flags @ 4,
        timestamp @ 8,
        id @ 16,
        objectKind @ 20,
        objectId @ 24, // header: the union starts at 24
        name @ 40,
        domain @ 48,
    });
    // objectId is the union CUpti_ActivityObjectKindId: `pt` (process/thread)
    // or `dcs` (device/context/stream).
    assert_eq!(
        offset_of!(CUpti_ActivityMarker2, objectId)
            + offset_of!(CUpti_ActivityObjectKindId, pt)
            + offset_of!(CUpti_ActivityObjectKindId__bindgen_ty_1, processId),
        24
    );
    assert_eq!(
        offset_of!(CUpti_ActivityMarker2, objectId)
            + offset_of!(CUpti_ActivityObjectKindId, pt)
            + offset_of!(CUpti_ActivityObjectKindId__bindgen_ty_1, threadId),
        28
    );
    assert_eq!(
        nested_offset!(CUpti_ActivityMarker2, objectId.pt.processId),
        24
    );
    assert_eq!(
        nested_offset!(CUpti_ActivityMarker2, objectId.pt.threadId),
        28
    );
    // header: the device/context/stream arm of the union.
    assert_eq!(
        nested_offset!(CUpti_ActivityMarker2, objectId.dcs.deviceId),
        24
    );
    assert_eq!(
        nested_offset!(CUpti_ActivityMarker2, objectId.dcs.contextId),
        28
    );
    assert_eq!(
        nested_offset!(CUpti_ActivityMarker2, objectId.dcs.streamId),
        32
    );
    field_type!(CUpti_ActivityMarker2,
        flags: CUpti_ActivityFlag,
        timestamp: u64,
        id: u32,
        objectKind: CUpti_ActivityObjectKind,
        name: *const core::ffi::c_char,
        domain: *const core::ffi::c_char,
    );
    field_type!(CUpti_ActivityObjectKindId__bindgen_ty_1, processId: u32, threadId: u32);
    assert_eq!(size_of::<CUpti_ActivityObjectKindId>(), 12); // header
    assert_eq!(size_of::<CUpti_ActivityMarker2>(), 56); // header
}

/// MarkerData (12.x) and MarkerData2 (13.0): not in the design note's offset
/// list, all from the header.
#[test]
fn marker_data() {
    macro_rules! prefix {
        ($t:ty) => {
            offsets!($t {
                kind @ 0,
                flags @ 4,
                id @ 8,
                payloadKind @ 12,
                payload @ 16,
                color @ 24,
                category @ 28,
            });
            field_type!($t, flags: CUpti_ActivityFlag, id: u32, color: u32, category: u32);
        };
    }
    prefix!(CUpti_ActivityMarkerData);
    prefix!(CUpti_ActivityMarkerData2);
    offsets!(CUpti_ActivityMarkerData2 { cuptiDomainId @ 32 });
    assert_eq!(size_of::<CUpti_ActivityMarkerData>(), 32);
    assert_eq!(size_of::<CUpti_ActivityMarkerData2>(), 40);
}

#[test]
fn synchronization() {
    macro_rules! prefix {
        ($t:ty) => {
            offsets!($t {
                kind @ 0,
                type_ @ 4, // C field `type`
                start @ 8,
                end @ 16,
                correlationId @ 24,
                contextId @ 28,
                streamId @ 32,
                cudaEventId @ 36,
            });
            field_type!($t,
                type_: CUpti_ActivitySynchronizationType,
                start: u64,
                end: u64,
                correlationId: u32,
                contextId: u32,
                streamId: u32,
                cudaEventId: u32,
            );
        };
    }
    prefix!(CUpti_ActivitySynchronization);
    prefix!(CUpti_ActivitySynchronization2);
    // header: the v1 size, and the fields appended in v2.
    assert_eq!(size_of::<CUpti_ActivitySynchronization>(), 40);
    offsets!(CUpti_ActivitySynchronization2 { cudaEventSyncId @ 40, returnValue @ 48 });
    assert_eq!(size_of::<CUpti_ActivitySynchronization2>(), 56); // header
}

#[test]
fn external_correlation() {
    offsets!(CUpti_ActivityExternalCorrelation {
        kind @ 0,
        externalKind @ 4,
        externalId @ 8,
        correlationId @ 16,
    });
    field_type!(CUpti_ActivityExternalCorrelation,
        externalKind: CUpti_ExternalCorrelationKind,
        externalId: u64,
        correlationId: u32,
    );
    assert_eq!(size_of::<CUpti_ActivityExternalCorrelation>(), 24); // header
}

#[test]
fn overhead3() {
    offsets!(CUpti_ActivityOverhead3 {
        kind @ 0,
        overheadKind @ 4,
        objectKind @ 8,
        objectId @ 12, // header
        start @ 24,
        end @ 32,
        correlationId @ 40, // header
        overheadData @ 48, // header
    });
    field_type!(CUpti_ActivityOverhead3,
        overheadKind: CUpti_ActivityOverheadKind,
        objectKind: CUpti_ActivityObjectKind,
        start: u64,
        end: u64,
        correlationId: u32,
    );
    assert_eq!(size_of::<CUpti_ActivityOverhead3>(), 56); // header
}

/// MemoryPool2 (12.x) and MemoryPool3 (13.0): the design note lists no
/// offsets, all from the header. MemoryPool3 appends isManagedPool@72.
#[test]
fn memory_pool() {
    macro_rules! prefix {
        ($t:ty) => {
            offsets!($t {
                kind @ 0,
                memoryPoolOperationType @ 4,
                memoryPoolType @ 8,
                correlationId @ 12,
                processId @ 16,
                deviceId @ 20,
                minBytesToKeep @ 24,
                address @ 32,
                size @ 40,
                releaseThreshold @ 48,
                timestamp @ 56,
                utilizedSize @ 64,
            });
            field_type!($t,
                memoryPoolOperationType: CUpti_ActivityMemoryPoolOperationType,
                memoryPoolType: CUpti_ActivityMemoryPoolType,
                correlationId: u32,
                processId: u32,
                deviceId: u32,
                minBytesToKeep: usize,
                address: u64,
                size: u64,
                releaseThreshold: u64,
                timestamp: u64,
                utilizedSize: u64,
            );
        };
    }
    prefix!(CUpti_ActivityMemoryPool2);
    prefix!(CUpti_ActivityMemoryPool3);
    offsets!(CUpti_ActivityMemoryPool3 { isManagedPool @ 72 });
    assert_eq!(size_of::<CUpti_ActivityMemoryPool2>(), 72);
    assert_eq!(size_of::<CUpti_ActivityMemoryPool3>(), 80);
}

#[test]
fn activity_kinds() {
    type K = CUpti_ActivityKind;
    assert_eq!(K::CUPTI_ACTIVITY_KIND_MEMCPY.0, 1);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_MEMSET.0, 2);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_KERNEL.0, 3); // header (never enabled: serialises)
    assert_eq!(K::CUPTI_ACTIVITY_KIND_DRIVER.0, 4);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_RUNTIME.0, 5);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL.0, 10);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_NAME.0, 11); // header
    assert_eq!(K::CUPTI_ACTIVITY_KIND_MARKER.0, 12);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_MARKER_DATA.0, 13);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_OVERHEAD.0, 17);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_MEMCPY2.0, 22); // header: peer copies
    assert_eq!(K::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION.0, 38);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION.0, 39);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_MEMORY2.0, 49);
    assert_eq!(K::CUPTI_ACTIVITY_KIND_MEMORY_POOL.0, 50);
    assert_eq!(size_of::<K>(), 4);
}

#[test]
fn results_and_domains() {
    assert_eq!(CUptiResult::CUPTI_SUCCESS.0, 0); // header
    assert_eq!(CUptiResult::CUPTI_ERROR_NOT_INITIALIZED.0, 15);
    assert_eq!(CUptiResult::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES.0, 35);
    assert_eq!(
        CUptiResult::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED.0,
        39
    );
    assert_eq!(CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED.0, 12); // header
    assert_eq!(CUptiResult::CUPTI_ERROR_QUEUE_EMPTY.0, 18); // header: GetNextRecord at buffer end
    assert_eq!(CUptiResult::CUPTI_ERROR_NOT_SUPPORTED.0, 27); // header
    assert_eq!(CUptiResult::CUPTI_ERROR_UNKNOWN.0, 999); // header

    type D = CUpti_CallbackDomain;
    assert_eq!(D::CUPTI_CB_DOMAIN_DRIVER_API.0, 1);
    assert_eq!(D::CUPTI_CB_DOMAIN_RUNTIME_API.0, 2);
    assert_eq!(D::CUPTI_CB_DOMAIN_RESOURCE.0, 3);
    assert_eq!(D::CUPTI_CB_DOMAIN_SYNCHRONIZE.0, 4);
    assert_eq!(D::CUPTI_CB_DOMAIN_NVTX.0, 5);
}

#[test]
fn record_field_enums() {
    type C = CUpti_ActivityMemcpyKind;
    let copy_kinds = [
        (C::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 1),
        (C::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 2),
        (C::CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, 3),
        (C::CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, 4),
        (C::CUPTI_ACTIVITY_MEMCPY_KIND_ATOA, 5),
        (C::CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, 6),
        (C::CUPTI_ACTIVITY_MEMCPY_KIND_DTOA, 7),
        (C::CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, 8),
        (C::CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, 9),
        (C::CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, 10),
    ];
    for (kind, value) in copy_kinds {
        assert_eq!(kind.0, value);
    }

    type F = CUpti_ActivityFlag;
    assert_eq!(F::CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS.0, 1);
    assert_eq!(F::CUPTI_ACTIVITY_FLAG_MARKER_START.0, 2);
    assert_eq!(F::CUPTI_ACTIVITY_FLAG_MARKER_END.0, 4);
    assert_eq!(F::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED.0, 1); // header

    type S = CUpti_ActivitySynchronizationType;
    assert_eq!(
        S::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE.0,
        1
    );
    assert_eq!(
        S::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT.0,
        2
    );
    assert_eq!(
        S::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE.0,
        3
    );
    assert_eq!(
        S::CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE.0,
        4
    );

    type M = CUpti_ActivityMemoryOperationType;
    assert_eq!(M::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION.0, 1);
    assert_eq!(M::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE.0, 2);

    // header
    type A = CUpti_ActivityAttribute;
    assert_eq!(A::CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE.0, 0);
    assert_eq!(A::CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT.0, 2);
    assert_eq!(A::CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER.0, 9);
    assert_eq!(
        CUpti_ActivityThreadIdType::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM.0,
        1
    );
    assert_eq!(
        CUpti_ActivityMemoryPoolType::CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL.0,
        1
    );
    assert_eq!(
        CUpti_ActivityMemoryPoolOperationType::CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED.0,
        1
    );
    assert_eq!(
        CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0.0,
        3
    );
}

/// A few of the callback ids tabled in the crate docs (header; the numbers are
/// the same in the 12.9 headers).
#[test]
fn callback_ids() {
    type R = CUpti_runtime_api_trace_cbid;
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000.0, 211);
    assert_eq!(
        R::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000.0,
        214
    );
    assert_eq!(
        R::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060.0,
        430
    );
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020.0, 31);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020.0, 41);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020.0, 49);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020.0, 51);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020.0, 20);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020.0, 22);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020.0, 373);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020.0, 375);
    assert_eq!(
        R::CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020.0,
        165
    );
    assert_eq!(
        R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020.0,
        131
    );
    assert_eq!(
        R::CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020.0,
        137
    );
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020.0, 147);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020.0, 135);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000.0, 311);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000.0, 171);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000.0, 172);
    assert_eq!(R::CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020.0, 164);

    type Dr = CUpti_driver_api_trace_cbid;
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel.0, 307);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz.0, 442);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx.0, 652);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync.0, 306);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2.0, 277);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2.0, 279);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2.0, 281);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2.0, 243);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2.0, 245);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch.0, 514);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize.0, 17);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2.0, 800);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize.0, 126);
    assert_eq!(Dr::CUPTI_DRIVER_TRACE_CBID_cuCtxDestroy_v2.0, 322);
}

/// Header (not in the design note): the parameter block of cuptiSubscribe_v2.
#[test]
fn subscriber_params() {
    offsets!(CUpti_SubscriberParams {
        structSize @ 0,
        subscriberName @ 8,
        oldSubscriberName @ 16,
        oldSubscriberSize @ 24,
    });
    assert_eq!(size_of::<CUpti_SubscriberParams>(), 32);
    assert_eq!(CUPTI_SUBSCRIBER_NAME_MAX_LEN, 53);
    assert_eq!(CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN, 64);
}

#[test]
fn header_version() {
    assert_eq!(HEADER_VERSION, "13.0.85");
    assert_eq!(HEADER_API_VERSION, 130001);
    assert_eq!(CUPTI_API_VERSION, 130001);
}

#[test]
fn symbol_names() {
    assert_eq!(symbols::ALL.len(), 23);
    assert_eq!(
        symbols::cuptiActivityEnable.to_bytes(),
        b"cuptiActivityEnable"
    );
    assert_eq!(
        symbols::cuptiActivityPopExternalCorrelationId.to_bytes_with_nul(),
        b"cuptiActivityPopExternalCorrelationId\0"
    );
    for name in symbols::ALL {
        assert!(name.to_bytes().starts_with(b"cupti"));
    }
    // The function-pointer types are plain pointers (Option<fn> is too).
    assert_eq!(size_of::<cuptiActivityEnable_t>(), 8);
    assert_eq!(size_of::<Option<cuptiActivityGetNextRecord_t>>(), 8);
}
