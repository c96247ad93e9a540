//! Debug switch CUPROF_DUMP_BUFFERS=DIR: writes each CUPTI buffer as CUPTI filled it, so real
//! GPU runs can become test data for the libcupti double (tests/data/).
//!
//! Format (little-endian): magic `CUPROFB1`; u32 CUPTI version; u32 patch count; u64 data
//! length; the data with pointer fields zeroed; then per patch {u64 offset; u32 length; bytes}:
//! the string that pointer field pointed to. The double re-points the fields on replay.

use cuprof_core::decode::{kind, Decoder};
use std::ffi::{c_char, CStr};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Pointer fields (offsets within a record) cuprof reads, per kind.
fn pointer_fields(k: u32) -> &'static [usize] {
    match k {
        kind::CONCURRENT_KERNEL => &[104],
        kind::MARKER => &[40, 48],
        kind::MEMORY2 => &[64],
        _ => &[],
    }
}

/// Encodes one buffer; `records` are the offsets of its records.
pub fn encode(version: u32, data: &[u8], records: &[usize]) -> Vec<u8> {
    let mut body = data.to_vec();
    let mut patches: Vec<(u64, Vec<u8>)> = Vec::new();
    for &r in records {
        let Some(k) = Decoder::kind_of(&data[r..]) else {
            continue;
        };
        for &f in pointer_fields(k) {
            let at = r + f;
            if at + 8 > data.len() {
                continue;
            }
            let ptr = u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
            if ptr == 0 {
                continue;
            }
            // SAFETY: CUPTI's pointer fields point to NUL-terminated strings that live at least
            // as long as the buffer.
            let s = unsafe { CStr::from_ptr(ptr as *const c_char) }
                .to_bytes()
                .to_vec();
            body[at..at + 8].fill(0);
            patches.push((at as u64, s));
        }
    }
    let mut out = Vec::with_capacity(body.len() + 64);
    out.extend_from_slice(b"CUPROFB1");
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(patches.len() as u32).to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    for (off, s) in patches {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(&s);
    }
    out
}

/// Writes `dir/cupti-VERSION-pidP-N.bin`. Failures are silent: this is a debug aid.
pub fn dump(dir: &Path, version: u32, data: &[u8], records: &[usize]) {
    let n = SEQ.fetch_add(1, Relaxed);
    let path = dir.join(format!(
        "cupti-{version}-pid{}-{n:05}.bin",
        std::process::id()
    ));
    if let Ok(mut f) = std::fs::File::create(path) {
        let _ = f.write_all(&encode(version, data, records));
    }
}
