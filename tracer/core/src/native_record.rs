//! The native observer's operator records, as the program thread writes them, turned into the
//! text record [`crate::torch_op::TorchOp::parse_native`] reads, on the writer thread.
//!
//! The observer (the preload's `ops/observer.cpp`) runs inside every PyTorch operator call, so
//! it writes what costs least there: the name, then numbers and tensor sizes as raw integers,
//! copied as torch holds them (native byte order: the record never leaves the process). Kineto
//! does the same, and formats its JSON when the profiler stops. Printing each size as decimal
//! JSON on the program thread was the observer's largest part (BENCHMARKS.md, "PyTorch
//! operators"). The layout (keep `observer.cpp` in step):
//!
//! ```text
//! name 0x1f  seq:i64 fwd_thread:u64 handle:u64  flags:u8 flops:u64 [members]  shapes:u8 [inputs]
//! flags:   1 flops counted, 2 members follow
//! members: count:u32, then per field key_len:u32 key value_len:u32 value: more args, each value
//!          JSON as Kineto writes it (torch's `saveNcclMeta` of a `record_param_comms`
//!          operator, then the keyword inputs of a `_RecordFunctionFast`)
//! inputs:  count:u32, then per input a tag:u8 and its body
//!   1 tensor        dtype_len:u8 dtype strided:u8 ndim:u32 sizes:i64[ndim] (strides:i64[ndim] if strided)
//!   2 opaque tensor (undefined, nested or symbolic: no sizes)
//!   3 tensor list   count:u32, then each element as a tensor (1) or an opaque tensor (2)
//!   4 scalar        len:u32 text (already a JSON string, as IValue prints it)
//!   5 scalar list   len:u32 text
//!   6 anything else
//!   7 int scalar    value:i64
//!   8 int list      count:u32 values:i64[count] (a scalar list of ints: view sizes, dims)
//! ```
//!
//! Ints and int lists, the most common scalars, are raw too; doubles and the rest are printed
//! by the observer, where IValue's own printing is at hand.
//!
//! Every read is bounds-checked: a record that does not parse gives `None`, never a panic. The
//! text made is JSON where Kineto's is, by construction and by checking what the observer
//! printed (scalars) or named (dtypes), so the writer reads it back without checking it again
//! ([`crate::torch_op::TorchOp::parse_made`]).

use crate::torch_op::NATIVE_SEPARATOR;

const TENSOR: u8 = 1;
const OPAQUE_TENSOR: u8 = 2;
const TENSOR_LIST: u8 = 3;
const SCALAR: u8 = 4;
const SCALAR_LIST: u8 = 5;
const OTHER: u8 = 6;
const INT: u8 = 7;
const INT_LIST: u8 = 8;

/// `flags`: the record's flop count is torch's (`--with-flops`).
const FLOPS_COUNTED: u8 = 1;
/// `flags`: more args follow the flop count (a collective's metadata, keyword inputs).
const MEMBERS: u8 = 2;

/// Bounds-checked reads from the front of a record.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_ne_bytes(self.bytes(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_ne_bytes(self.bytes(8)?.try_into().ok()?))
    }

    fn i64s(&mut self, n: u32) -> Option<impl Iterator<Item = i64> + 'a> {
        let raw = self.bytes((n as usize).checked_mul(8)?)?;
        Some(
            raw.chunks_exact(8)
                .map(|c| i64::from_ne_bytes(c.try_into().unwrap_or_default())),
        )
    }
}

/// Kineto's four input arrays, written as they are read.
#[derive(Default)]
struct Arrays {
    dims: String,
    types: String,
    strides: String,
    concrete: String,
}

impl Arrays {
    fn open(&mut self) {
        for a in self.all() {
            a.push('[');
        }
    }

    fn close(&mut self) {
        for a in self.all() {
            a.push(']');
        }
    }

    fn comma(&mut self) {
        for a in self.all() {
            a.push_str(", ");
        }
    }

    fn all(&mut self) -> [&mut String; 4] {
        [
            &mut self.dims,
            &mut self.types,
            &mut self.strides,
            &mut self.concrete,
        ]
    }
}

fn put_ints(out: &mut String, values: impl Iterator<Item = i64>) {
    out.push('[');
    let mut buf = itoa::Buffer::new();
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(buf.format(v));
    }
    out.push(']');
}

/// A tensor's sizes and strides (`[]` and `[]` for an opaque one); its dtype's name, when it
/// has one.
fn tensor<'a>(
    r: &mut Reader<'a>,
    tag: u8,
    dims: &mut String,
    strides: &mut String,
) -> Option<&'a [u8]> {
    match tag {
        TENSOR => {
            let name_len = r.u8()?;
            let dtype = r.bytes(name_len as usize)?;
            let strided = r.u8()? != 0;
            let ndim = r.u32()?;
            put_ints(dims, r.i64s(ndim)?);
            if strided {
                put_ints(strides, r.i64s(ndim)?);
            } else {
                strides.push_str("[]");
            }
            Some(dtype)
        }
        OPAQUE_TENSOR => {
            dims.push_str("[]");
            strides.push_str("[]");
            Some(b"")
        }
        _ => None,
    }
}

fn input(r: &mut Reader<'_>, a: &mut Arrays) -> Option<()> {
    let tag = r.u8()?;
    match tag {
        TENSOR | OPAQUE_TENSOR => {
            let dtype = tensor(r, tag, &mut a.dims, &mut a.strides)?;
            // A name to write between quotes as it stands (torch's are: `c10::BFloat16`).
            let plain = |b: &u8| *b >= 0x20 && *b != b'"' && *b != b'\\';
            if !dtype.iter().all(plain) {
                return None;
            }
            a.types.push('"');
            a.types.push_str(std::str::from_utf8(dtype).ok()?);
            a.types.push('"');
            a.concrete.push_str("\"\"");
        }
        TENSOR_LIST => {
            let n = r.u32()?;
            a.dims.push('[');
            a.strides.push('[');
            for i in 0..n {
                if i > 0 {
                    a.dims.push_str(", ");
                    a.strides.push_str(", ");
                }
                let tag = r.u8()?;
                tensor(r, tag, &mut a.dims, &mut a.strides)?;
            }
            a.dims.push(']');
            a.strides.push(']');
            a.types.push_str("\"TensorList\"");
            a.concrete.push_str("\"\"");
        }
        SCALAR | SCALAR_LIST => {
            let len = r.u32()?;
            let text = std::str::from_utf8(r.bytes(len as usize)?).ok()?;
            // The observer printed it: the one text in the record that is not JSON by
            // construction here.
            if !crate::torch_op::is_json_string(text) {
                return None;
            }
            a.dims.push_str("[]");
            a.types.push_str(if tag == SCALAR {
                "\"Scalar\""
            } else {
                "\"ScalarList\""
            });
            a.strides.push_str("[]");
            a.concrete.push_str(text);
        }
        INT | INT_LIST => {
            a.dims.push_str("[]");
            a.strides.push_str("[]");
            // As IValue prints them, as JSON strings: "2", "[1, 2]".
            a.concrete.push('"');
            if tag == INT {
                let v = r.u64()? as i64;
                a.types.push_str("\"Scalar\"");
                a.concrete.push_str(itoa::Buffer::new().format(v));
            } else {
                let n = r.u32()?;
                a.types.push_str("\"ScalarList\"");
                put_ints(&mut a.concrete, r.i64s(n)?);
            }
            a.concrete.push('"');
        }
        OTHER => {
            a.dims.push_str("[]");
            a.types.push_str("\"\"");
            a.strides.push_str("[]");
            a.concrete.push_str("\"\"");
        }
        _ => return None,
    }
    Some(())
}

/// More args as the members of a JSON object (`"k": v, ...`), in torch's order: a collective's
/// metadata (`record_param_comms`: `Collective name`, `dtype`, `In msg nelems`, `Group size`,
/// `Process Group Name`...) and keyword inputs (a Triton launch's `kernel_file`, `stream`...).
/// torch formats each value as Kineto writes it, without escaping what it quotes (a process
/// group's description is the user's text): a value that is not JSON is written as the JSON
/// string of the text torch quoted, so the trace stays JSON whatever the program named its
/// groups (torch.profiler's own file does not, there).
fn members(r: &mut Reader<'_>) -> Option<String> {
    use serde::de::IgnoredAny;
    let n = r.u32()?;
    let mut out = String::new();
    for i in 0..n {
        let key_len = r.u32()? as usize;
        let key = String::from_utf8_lossy(r.bytes(key_len)?);
        let value_len = r.u32()? as usize;
        let value = String::from_utf8_lossy(r.bytes(value_len)?);
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&serde_json::to_string(key.as_ref()).ok()?);
        out.push_str(": ");
        if serde_json::from_str::<IgnoredAny>(&value).is_ok() {
            out.push_str(value.trim());
        } else {
            // torch quoted the text without escaping it: the text, escaped.
            let text = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(&value);
            out.push_str(&serde_json::to_string(text).ok()?);
        }
    }
    Some(out)
}

/// The text record (`name 0x1f seq 0x1f fwd_thread 0x1f handle 0x1f dims 0x1f types 0x1f
/// strides 0x1f concrete 0x1f flops`, then `0x1f members` for more args) of a
/// binary one; `None` when it does not parse.
pub fn to_text(record: &[u8]) -> Option<String> {
    let at = memchr::memchr(NATIVE_SEPARATOR, record)?;
    let name = String::from_utf8_lossy(&record[..at]);
    let mut r = Reader {
        rest: &record[at + 1..],
    };
    let seq = r.u64()? as i64;
    let fwd_thread = r.u64()?;
    let handle = r.u64()?;
    let flags = r.u8()?;
    if flags & !(FLOPS_COUNTED | MEMBERS) != 0 {
        return None;
    }
    let counted = flags & FLOPS_COUNTED != 0;
    let flops = r.u64()?;
    let members = match flags & MEMBERS {
        0 => None,
        _ => Some(members(&mut r)?).filter(|m| !m.is_empty()),
    };
    let shapes = r.u8()? != 0;
    let mut a = Arrays::default();
    if shapes {
        let n = r.u32()?;
        a.open();
        for i in 0..n {
            if i > 0 {
                a.comma();
            }
            input(&mut r, &mut a)?;
        }
        a.close();
    }
    if !r.rest.is_empty() {
        return None;
    }
    let sep = NATIVE_SEPARATOR as char;
    let mut out = String::with_capacity(
        name.len() + 64 + a.dims.len() + a.types.len() + a.strides.len() + a.concrete.len(),
    );
    let mut buf = itoa::Buffer::new();
    out.push_str(&name);
    out.push(sep);
    out.push_str(buf.format(seq));
    for field in [fwd_thread, handle] {
        out.push(sep);
        out.push_str(buf.format(field));
    }
    for array in [&a.dims, &a.types, &a.strides, &a.concrete] {
        out.push(sep);
        out.push_str(array);
    }
    out.push(sep);
    if counted {
        out.push_str(buf.format(flops));
    }
    if let Some(members) = members {
        out.push(sep);
        out.push_str(&members);
    }
    Some(out)
}

/// A PyTorch allocation or free as the native observer hears of it (torch's
/// `reportMemoryUsage`, what torch.profiler's `profile_memory` records): `bytes` negative for a
/// free, the allocator's totals after it, and the device (`c10::DeviceType`, index -1 for the
/// CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryReport {
    pub addr: u64,
    pub bytes: i64,
    pub total_allocated: i64,
    pub total_reserved: i64,
    pub device_type: i8,
    pub device_index: i8,
}

/// The bytes of a [`MemoryReport`] in a batch.
pub const MEMORY_RECORD_LEN: usize = 34;

impl MemoryReport {
    /// As it waits in the thread's batch (native byte order, as the other records).
    pub fn to_record(self) -> [u8; MEMORY_RECORD_LEN] {
        let mut out = [0u8; MEMORY_RECORD_LEN];
        out[..8].copy_from_slice(&self.addr.to_ne_bytes());
        out[8..16].copy_from_slice(&self.bytes.to_ne_bytes());
        out[16..24].copy_from_slice(&self.total_allocated.to_ne_bytes());
        out[24..32].copy_from_slice(&self.total_reserved.to_ne_bytes());
        out[32] = self.device_type as u8;
        out[33] = self.device_index as u8;
        out
    }

    fn from_record(record: &[u8]) -> Option<Self> {
        let mut r = Reader { rest: record };
        let report = MemoryReport {
            addr: r.u64()?,
            bytes: r.u64()? as i64,
            total_allocated: r.u64()? as i64,
            total_reserved: r.u64()? as i64,
            device_type: r.u8()? as i8,
            device_index: r.u8()? as i8,
        };
        r.rest.is_empty().then_some(report)
    }
}

/// A memory record's `args`, as Kineto writes a `[memory]` event's (its keys in its order;
/// Kineto's own event index, `Ev Idx`, is left out as on every event cuprof writes); `None`
/// when it does not parse.
pub fn memory_args(record: &[u8]) -> Option<String> {
    let m = MemoryReport::from_record(record)?;
    let mut buf = itoa::Buffer::new();
    let mut out = String::with_capacity(128);
    let fields: [(&str, i64); 5] = [
        ("Total Reserved", m.total_reserved),
        ("Total Allocated", m.total_allocated),
        ("Bytes", m.bytes),
        ("Device Id", m.device_index as i64),
        ("Device Type", m.device_type as i64),
    ];
    out.push('{');
    for (key, value) in fields {
        out.push('"');
        out.push_str(key);
        out.push_str("\": ");
        out.push_str(buf.format(value));
        out.push_str(", ");
    }
    out.push_str("\"Addr\": ");
    out.push_str(buf.format(m.addr));
    out.push('}');
    Some(out)
}

/// A binary record as `observer.cpp` writes it, for tests of what reads it.
#[cfg(test)]
pub(crate) mod encode {
    /// One input of an operator.
    pub enum Input<'a> {
        /// dtype, sizes, strides (`None`: not a strided layout).
        Tensor(&'a str, &'a [i64], Option<&'a [i64]>),
        Opaque,
        /// Each element: `Some((sizes, strides))`, or `None` for an opaque one.
        TensorList(&'a [Option<(&'a [i64], &'a [i64])>]),
        Scalar(&'a str),
        ScalarList(&'a str),
        Other,
        Int(i64),
        IntList(&'a [i64]),
    }

    fn tensor(out: &mut Vec<u8>, dtype: &str, sizes: &[i64], strides: Option<&[i64]>) {
        out.push(super::TENSOR);
        out.push(dtype.len() as u8);
        out.extend_from_slice(dtype.as_bytes());
        out.push(strides.is_some() as u8);
        out.extend_from_slice(&(sizes.len() as u32).to_ne_bytes());
        for v in sizes.iter().chain(strides.unwrap_or_default()) {
            out.extend_from_slice(&v.to_ne_bytes());
        }
    }

    fn text(out: &mut Vec<u8>, tag: u8, text: &str) {
        out.push(tag);
        out.extend_from_slice(&(text.len() as u32).to_ne_bytes());
        out.extend_from_slice(text.as_bytes());
    }

    /// The record of an operator; `inputs` `None` when shapes are not recorded.
    pub fn record(
        name: &str,
        seq: i64,
        fwd_thread: u64,
        handle: u64,
        flops: Option<u64>,
        inputs: Option<&[Input<'_>]>,
    ) -> Vec<u8> {
        collective(name, seq, fwd_thread, handle, flops, None, inputs)
    }

    /// The record of an operator, with a collective's metadata (`comms`, key and value pairs
    /// as torch's `saveNcclMeta` gives them) when it has some.
    pub fn collective(
        name: &str,
        seq: i64,
        fwd_thread: u64,
        handle: u64,
        flops: Option<u64>,
        comms: Option<&[(&str, &str)]>,
        inputs: Option<&[Input<'_>]>,
    ) -> Vec<u8> {
        let mut out = name.as_bytes().to_vec();
        out.push(crate::torch_op::NATIVE_SEPARATOR);
        for v in [seq as u64, fwd_thread, handle] {
            out.extend_from_slice(&v.to_ne_bytes());
        }
        let flags = if flops.is_some() {
            super::FLOPS_COUNTED
        } else {
            0
        } | if comms.is_some() { super::MEMBERS } else { 0 };
        out.push(flags);
        out.extend_from_slice(&flops.unwrap_or(0).to_ne_bytes());
        if let Some(comms) = comms {
            out.extend_from_slice(&(comms.len() as u32).to_ne_bytes());
            for (key, value) in comms {
                for text in [key, value] {
                    out.extend_from_slice(&(text.len() as u32).to_ne_bytes());
                    out.extend_from_slice(text.as_bytes());
                }
            }
        }
        out.push(inputs.is_some() as u8);
        let Some(inputs) = inputs else { return out };
        out.extend_from_slice(&(inputs.len() as u32).to_ne_bytes());
        for i in inputs {
            match i {
                Input::Tensor(dtype, sizes, strides) => tensor(&mut out, dtype, sizes, *strides),
                Input::Opaque => out.push(super::OPAQUE_TENSOR),
                Input::TensorList(list) => {
                    out.push(super::TENSOR_LIST);
                    out.extend_from_slice(&(list.len() as u32).to_ne_bytes());
                    for t in list.iter() {
                        match t {
                            Some((sizes, strides)) => {
                                tensor(&mut out, "float", sizes, Some(strides))
                            }
                            None => out.push(super::OPAQUE_TENSOR),
                        }
                    }
                }
                Input::Scalar(t) => text(&mut out, super::SCALAR, t),
                Input::ScalarList(t) => text(&mut out, super::SCALAR_LIST, t),
                Input::Other => out.push(super::OTHER),
                Input::Int(v) => {
                    out.push(super::INT);
                    out.extend_from_slice(&v.to_ne_bytes());
                }
                Input::IntList(values) => {
                    out.push(super::INT_LIST);
                    out.extend_from_slice(&(values.len() as u32).to_ne_bytes());
                    for v in values.iter() {
                        out.extend_from_slice(&v.to_ne_bytes());
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::encode::{collective, record, Input};
    use super::*;
    use crate::torch_op::TorchOp;

    #[test]
    fn an_operator_without_shapes_has_empty_arrays() {
        let r = record("aten::empty", -1, 0, 7, None, None);
        assert_eq!(
            to_text(&r).unwrap(),
            "aten::empty\x1f-1\x1f0\x1f7\x1f\x1f\x1f\x1f\x1f"
        );
        let r = record("MmBackward0", 4, 12, 9, Some(1024), None);
        assert_eq!(
            to_text(&r).unwrap(),
            "MmBackward0\x1f4\x1f12\x1f9\x1f\x1f\x1f\x1f\x1f1024"
        );
    }

    #[test]
    fn every_kind_of_input_is_written_as_kineto_writes_it() {
        let inputs = [
            Input::Tensor("float", &[2, 3], Some(&[3, 1])),
            Input::Tensor("c10::BFloat16", &[4], None),
            Input::Opaque,
            Input::TensorList(&[Some((&[2, 3], &[3, 1])), Some((&[4, 3], &[3, 1])), None]),
            Input::Scalar("\"1.5\""),
            Input::ScalarList("\"[1, 2]\""),
            Input::Other,
            Input::Tensor("long int", &[], Some(&[])),
        ];
        let r = record("aten::cat", 3, 0, 11, None, Some(&inputs));
        let text = to_text(&r).unwrap();
        let op = TorchOp::parse_native(&text).unwrap();
        assert_eq!(op.name, "aten::cat");
        assert_eq!((op.seq, op.fwd_thread, op.op_id), (Some(3), Some(0), 11));
        assert_eq!(
            op.sizes,
            Some("[[2, 3], [4], [], [[2, 3], [4, 3], []], [], [], [], []]")
        );
        assert_eq!(
            op.types,
            Some(
                "[\"float\", \"c10::BFloat16\", \"\", \"TensorList\", \"Scalar\", \"ScalarList\", \"\", \"long int\"]"
            )
        );
        assert_eq!(
            op.strides,
            Some("[[3, 1], [], [], [[3, 1], [3, 1], []], [], [], [], []]")
        );
        assert_eq!(
            op.concrete,
            Some("[\"\", \"\", \"\", \"\", \"1.5\", \"[1, 2]\", \"\", \"\"]")
        );
    }

    #[test]
    fn ints_and_int_lists_are_written_as_ivalue_prints_them() {
        let inputs = [
            Input::Tensor("float", &[6], Some(&[1])),
            Input::IntList(&[2, -3]),
            Input::Int(-7),
            Input::IntList(&[]),
            Input::Int(i64::MIN),
        ];
        let r = record("aten::view", -1, 0, 4, None, Some(&inputs));
        let text = to_text(&r).unwrap();
        let op = TorchOp::parse_native(&text).unwrap();
        assert_eq!(op.sizes, Some("[[6], [], [], [], []]"));
        assert_eq!(
            op.types,
            Some("[\"float\", \"ScalarList\", \"Scalar\", \"ScalarList\", \"Scalar\"]")
        );
        assert_eq!(op.strides, Some("[[1], [], [], [], []]"));
        assert_eq!(
            op.concrete,
            Some("[\"\", \"[2, -3]\", \"-7\", \"[]\", \"-9223372036854775808\"]")
        );
        // Cut anywhere, the record does not parse.
        for len in 0..r.len() {
            assert_eq!(to_text(&r[..len]), None, "cut at {len}");
        }
    }

    #[test]
    fn printed_text_that_is_not_json_is_refused() {
        let made =
            |inputs: &[Input<'_>]| to_text(&record("aten::add", 1, 0, 2, None, Some(inputs)));
        assert!(made(&[Input::Scalar("\"a\\\"b\\u00e9\"")]).is_some());
        assert!(made(&[Input::ScalarList("\"[1.5, 2.]\"")]).is_some());
        for bad in [
            "1.5",
            "\"1.5",
            "\"a\"b\"",
            "\"tab\there\"",
            "\"\\x\"",
            "\"1\" ",
        ] {
            assert_eq!(made(&[Input::Scalar(bad)]), None, "{bad:?}");
            assert_eq!(made(&[Input::ScalarList(bad)]), None, "{bad:?}");
        }
        assert!(made(&[Input::Tensor("c10::BFloat16", &[1], Some(&[1]))]).is_some());
        for bad in ["fl\"oat", "fl\\oat", "fl\noat"] {
            assert_eq!(
                made(&[Input::Tensor(bad, &[1], Some(&[1]))]),
                None,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn no_inputs_with_shapes_on_is_an_empty_array_each() {
        let r = record("aten::rand", -1, 0, 1, None, Some(&[]));
        assert_eq!(
            to_text(&r).unwrap(),
            "aten::rand\x1f-1\x1f0\x1f1\x1f[]\x1f[]\x1f[]\x1f[]\x1f"
        );
    }

    #[test]
    fn negative_and_large_numbers_keep_their_value() {
        let inputs = [Input::Tensor(
            "float",
            &[i64::MAX, 0],
            Some(&[-1, i64::MIN]),
        )];
        let r = record(
            "aten::as_strided",
            i64::MAX,
            5,
            u64::MAX,
            Some(u64::MAX),
            Some(&inputs),
        );
        let text = to_text(&r).unwrap();
        let op = TorchOp::parse_native(&text).unwrap();
        assert_eq!(op.sizes, Some("[[9223372036854775807, 0]]"));
        assert_eq!(op.strides, Some("[[-1, -9223372036854775808]]"));
        assert_eq!(op.seq, Some(i64::MAX));
        assert_eq!(op.op_id, u64::MAX);
        assert_eq!(op.flops, Some(u64::MAX));
    }

    #[test]
    fn a_collectives_metadata_is_written_after_its_flop_count() {
        // As torch's saveNcclMeta formats them: strings quoted, lists quoted, numbers bare; a
        // process group's description is the user's text, quoted by torch without escaping.
        let comms = [
            ("Collective name", "\"allreduce\""),
            ("dtype", "\"Float\""),
            ("In msg nelems", "1024"),
            ("In split size", "\"[]\""),
            ("Process Group Description", "\"my \"pg\"\""),
            ("Process Group Ranks", "\"[0, 1]\""),
        ];
        let r = collective("record_param_comms", -1, 0, 9, None, Some(&comms), None);
        let text = to_text(&r).unwrap();
        assert_eq!(
            text,
            "record_param_comms\x1f-1\x1f0\x1f9\x1f\x1f\x1f\x1f\x1f\x1f\
             \"Collective name\": \"allreduce\", \"dtype\": \"Float\", \"In msg nelems\": 1024, \
             \"In split size\": \"[]\", \"Process Group Description\": \"my \\\"pg\\\"\", \
             \"Process Group Ranks\": \"[0, 1]\""
        );
        let op = TorchOp::parse_native(&text).unwrap();
        assert_eq!(op.name, "record_param_comms");
        assert_eq!(op.flops, None);
        let object: serde_json::Value =
            serde_json::from_str(&format!("{{{}}}", op.members.unwrap())).unwrap();
        assert_eq!(object["Process Group Description"], "my \"pg\"");
        assert_eq!(object["In msg nelems"], 1024);
        // With a flop count and shapes, both keep their places.
        let inputs = [Input::Int(3)];
        let r = collective(
            "record_param_comms",
            2,
            0,
            9,
            Some(5),
            Some(&comms[..1]),
            Some(&inputs),
        );
        let op_text = to_text(&r).unwrap();
        let op = TorchOp::parse_native(&op_text).unwrap();
        assert_eq!(op.flops, Some(5));
        assert_eq!(op.sizes, Some("[[]]"));
        assert_eq!(op.members, Some("\"Collective name\": \"allreduce\""));
        for len in 0..r.len() {
            assert_eq!(to_text(&r[..len]), None, "cut at {len}");
        }
        // No metadata (torch found none on the thread): no field.
        let r = collective("record_param_comms", -1, 0, 9, None, Some(&[]), None);
        assert_eq!(
            to_text(&r).unwrap(),
            "record_param_comms\x1f-1\x1f0\x1f9\x1f\x1f\x1f\x1f\x1f"
        );
        // A flag this build does not know: refused.
        let mut r = record("aten::add", -1, 0, 9, None, None);
        let flags = "aten::add".len() + 1 + 24;
        r[flags] = 4;
        assert_eq!(to_text(&r), None);
    }

    #[test]
    fn a_damaged_record_gives_none_at_every_length() {
        let inputs = [
            Input::Tensor("float", &[2, 3], Some(&[3, 1])),
            Input::TensorList(&[Some((&[2], &[1])), None]),
            Input::Scalar("\"2\""),
        ];
        let r = record("aten::add", 1, 0, 2, None, Some(&inputs));
        assert!(to_text(&r).is_some());
        for len in 0..r.len() {
            assert_eq!(to_text(&r[..len]), None, "cut at {len}");
        }
        let mut longer = r.clone();
        longer.push(0);
        assert_eq!(to_text(&longer), None);
        let mut bad_tag = record("aten::add", 1, 0, 2, None, Some(&[Input::Other]));
        *bad_tag.last_mut().unwrap() = 9;
        assert_eq!(to_text(&bad_tag), None);
        let huge = record(
            "aten::add",
            1,
            0,
            2,
            None,
            Some(&[Input::Tensor("float", &[1], Some(&[1]))]),
        );
        let mut huge = huge;
        let ndim_at = huge.len() - 16 - 4;
        huge[ndim_at..ndim_at + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(to_text(&huge), None);
    }

    #[test]
    fn a_memory_report_reads_back_as_kinetos_memory_args() {
        let free = MemoryReport {
            addr: 94121390603520,
            bytes: -16384,
            total_allocated: 16384,
            total_reserved: 0,
            device_type: 0,
            device_index: -1,
        };
        assert_eq!(
            memory_args(&free.to_record()).unwrap(),
            r#"{"Total Reserved": 0, "Total Allocated": 16384, "Bytes": -16384, "Device Id": -1, "Device Type": 0, "Addr": 94121390603520}"#
        );
        let cuda = MemoryReport {
            addr: u64::MAX,
            bytes: i64::MAX,
            total_allocated: 1 << 40,
            total_reserved: 2 << 40,
            device_type: 1,
            device_index: 7,
        };
        let text = memory_args(&cuda.to_record()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["Addr"], u64::MAX);
        assert_eq!(v["Bytes"], i64::MAX);
        assert_eq!(v["Total Reserved"], 2i64 << 40);
        assert_eq!(
            (v["Device Type"].as_i64(), v["Device Id"].as_i64()),
            (Some(1), Some(7))
        );
        let record = cuda.to_record();
        for len in 0..record.len() {
            assert_eq!(memory_args(&record[..len]), None, "cut at {len}");
        }
        assert_eq!(memory_args(&[record.as_slice(), &[0]].concat()), None);
    }
}
