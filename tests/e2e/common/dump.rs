//! Reads the raw CUPTI buffers libcuprof.so dumps (CUPROF_DUMP_BUFFERS), independently of the
//! tracer's decoder: records are read through cupti-sys's bindgen structs, so a test can hold
//! the written trace against exactly what CUPTI (here, the double) handed over.

use std::collections::BTreeMap;
use std::path::Path;

/// One kernel record, as CUPTI wrote it.
#[derive(Debug, Clone)]
pub struct KernelRec {
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub stream: u32,
    pub correlation: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub registers: u16,
    pub shared: i32,
    pub graph_node_id: u64,
}

#[derive(Debug, Clone)]
pub struct ApiRec {
    pub cbid: u32,
    pub start: u64,
    pub end: u64,
    pub tid: u32,
    pub correlation: u32,
}

#[derive(Debug, Clone)]
pub struct CopyRec {
    pub kind: u32,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub correlation: u32,
}

#[derive(Debug, Default)]
pub struct Records {
    pub version: u32,
    pub kernels: Vec<KernelRec>,
    pub apis: Vec<ApiRec>,
    /// (kind 1 memcpy / 2 memset, record)
    pub copies: Vec<CopyRec>,
    pub syncs: Vec<(u64, u64, u32)>,
    pub other: BTreeMap<u32, usize>,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

/// Reads every dump file in `dir`.
pub fn read_dir(dir: &Path) -> Records {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut out = Records::default();
    for f in files {
        read_file(&std::fs::read(&f).unwrap(), &mut out);
    }
    out
}

fn read_file(b: &[u8], out: &mut Records) {
    assert_eq!(&b[..8], b"CUPROFB1", "dump magic");
    let version = u32_at(b, 8);
    let patches = u32_at(b, 12) as usize;
    let len = u64::from_le_bytes(b[16..24].try_into().unwrap()) as usize;
    let data = &b[24..24 + len];
    let mut strings = BTreeMap::new();
    let mut p = 24 + len;
    for _ in 0..patches {
        let off = u64::from_le_bytes(b[p..p + 8].try_into().unwrap()) as usize;
        let n = u32_at(b, p + 8) as usize;
        strings.insert(
            off,
            String::from_utf8_lossy(&b[p + 12..p + 12 + n]).into_owned(),
        );
        p += 12 + n;
    }
    out.version = version;
    let v13 = version >= 130000;
    // 12.8 (API 26) moved to Memcpy6 and Synchronization2, 12.6 (API 24) to Memory4.
    let v12_8 = v13 || version >= 26;
    let v12_6 = v13 || version >= 24;
    let mut at = 0;
    while at + 4 <= data.len() {
        let kind = u32_at(data, at);
        let rec = &data[at..];
        // SAFETY (test): read_unaligned copies a plain-old-data C struct out of the bytes.
        let size = unsafe {
            use cupti_sys::*;
            match kind {
                10 => {
                    let k: CUpti_ActivityKernel9 = std::ptr::read_unaligned(rec.as_ptr().cast());
                    out.kernels.push(KernelRec {
                        name: strings.get(&(at + 104)).cloned().unwrap_or_default(),
                        start: k.start,
                        end: k.end,
                        stream: k.streamId,
                        correlation: k.correlationId,
                        grid: [k.gridX, k.gridY, k.gridZ],
                        block: [k.blockX, k.blockY, k.blockZ],
                        registers: k.registersPerThread,
                        shared: k.staticSharedMemory + k.dynamicSharedMemory,
                        graph_node_id: k.graphNodeId,
                    });
                    if v13 {
                        std::mem::size_of::<CUpti_ActivityKernel10>()
                    } else {
                        std::mem::size_of::<CUpti_ActivityKernel9>()
                    }
                }
                4 | 5 => {
                    let a: CUpti_ActivityAPI = std::ptr::read_unaligned(rec.as_ptr().cast());
                    out.apis.push(ApiRec {
                        cbid: a.cbid,
                        start: a.start,
                        end: a.end,
                        tid: a.threadId,
                        correlation: a.correlationId,
                    });
                    std::mem::size_of::<CUpti_ActivityAPI>()
                }
                1 => {
                    let m: CUpti_ActivityMemcpy5 = std::ptr::read_unaligned(rec.as_ptr().cast());
                    let corr = if m.runtimeCorrelationId != 0 {
                        m.runtimeCorrelationId
                    } else {
                        m.correlationId
                    };
                    out.copies.push(CopyRec {
                        kind: 1,
                        bytes: m.bytes,
                        start: m.start,
                        end: m.end,
                        correlation: corr,
                    });
                    if v12_8 {
                        std::mem::size_of::<CUpti_ActivityMemcpy6>()
                    } else {
                        std::mem::size_of::<CUpti_ActivityMemcpy5>()
                    }
                }
                2 => {
                    let m: CUpti_ActivityMemset4 = std::ptr::read_unaligned(rec.as_ptr().cast());
                    out.copies.push(CopyRec {
                        kind: 2,
                        bytes: m.bytes,
                        start: m.start,
                        end: m.end,
                        correlation: m.correlationId,
                    });
                    std::mem::size_of::<CUpti_ActivityMemset4>()
                }
                38 => {
                    let s: CUpti_ActivitySynchronization =
                        std::ptr::read_unaligned(rec.as_ptr().cast());
                    out.syncs.push((s.start, s.end, s.correlationId));
                    if v12_8 {
                        std::mem::size_of::<CUpti_ActivitySynchronization2>()
                    } else {
                        std::mem::size_of::<CUpti_ActivitySynchronization>()
                    }
                }
                39 => {
                    *out.other.entry(kind).or_default() += 1;
                    std::mem::size_of::<CUpti_ActivityExternalCorrelation>()
                }
                49 => {
                    *out.other.entry(kind).or_default() += 1;
                    if v12_6 {
                        std::mem::size_of::<CUpti_ActivityMemory4>()
                    } else {
                        std::mem::size_of::<CUpti_ActivityMemory3>()
                    }
                }
                other => panic!("unexpected record kind {other} in a dump"),
            }
        };
        at += size.div_ceil(8) * 8;
    }
}
