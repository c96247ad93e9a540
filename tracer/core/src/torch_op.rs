//! PyTorch operators as PyTorch's NVTX observer names its ranges.
//!
//! With the observer on (`ProfilerState.NVTX`, what `torch.autograd.profiler.emit_nvtx` turns
//! on, and what cuprof turns on by itself in a PyTorch process), every RecordFunction (ATen
//! operators, autograd nodes, `record_function` scopes) becomes one NVTX push/pop named
//!
//! ```text
//! aten::addmm, seq = 1, op_id = 5, sizes = [[32], [8, 64], [64, 32], [], []], input_op_ids = [(0,-1), ...]
//! ```
//!
//! (`torch/csrc/profiler/util.cpp`, `getNvtxStr`): the operator's name, its autograd sequence
//! number when it has one, the RecordFunction handle (always, the observer asks for ids), and,
//! with shapes on, the input sizes and the ops that produced the inputs. The name carries no
//! dtypes and no strides. A range without `, op_id = ` is not an operator.
//!
//! cuprof's recorder leaves `record_function` scopes out of the observer (their NVTX push and
//! pop interleave with those of the `profiler::_record_function_enter_new` operator that opens
//! them, so the observer's ranges would swap names) and emits them as plain NVTX ranges, which
//! become `user_annotation`s as in Kineto: every observer range is an operator (`cpu_op`).
//!
//! cuprof's native observer (the preload's `ops/observer.cpp`, PyTorch's RecordFunction
//! callbacks) hands over a binary record instead, which the writer thread turns into text
//! ([`crate::native_record`]), its fields separated by 0x1f, the arrays JSON as Kineto writes
//! them:
//!
//! ```text
//! name 0x1f seq 0x1f fwd_thread 0x1f handle 0x1f dims 0x1f types 0x1f strides 0x1f concrete 0x1f flops [0x1f members]
//! ```
//!
//! (`seq` -1 when the operator has none; the four arrays empty without shapes; `flops` empty
//! unless counted; `members`, more args: a collective's metadata on `record_param_comms`, the
//! keyword inputs of a `_RecordFunctionFast`). [`TorchOp::parse_native`] reads it and checks every array before it is
//! written as it stands; [`TorchOp::parse_made`] reads what `native_record` made, whose arrays
//! are JSON by construction (it checks the only text the observer printed, scalars and dtype
//! names, as it decodes them).

/// One operator range's name, split into its parts (borrowed from the range name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TorchOp<'a> {
    /// The operator (`aten::addmm`, `autograd::engine::evaluate_function: AddmmBackward0`).
    pub name: &'a str,
    /// The autograd sequence number (forward op and its backward node share it).
    pub seq: Option<i64>,
    /// The RecordFunction handle: unique per operator call in the process.
    pub op_id: u64,
    /// The input sizes as JSON (`[[8, 64], [], ...]`), when shapes are recorded.
    pub sizes: Option<&'a str>,
    /// Native records only: Kineto's `Fwd thread id` as PyTorch has it (0 on a forward op).
    pub fwd_thread: Option<u32>,
    /// Native records only: `Input type` (dtype names, `Scalar`, `TensorList`...) as JSON.
    pub types: Option<&'a str>,
    /// Native records only: `Input Strides` as JSON (nested like `Input Dims`).
    pub strides: Option<&'a str>,
    /// Native records only: `Concrete Inputs` (scalars and scalar lists as text) as JSON.
    pub concrete: Option<&'a str>,
    /// Native records only, with `--with-flops`: torch's own FLOP count for the operator.
    pub flops: Option<u64>,
    /// Native records only: more args, the members of a JSON object as torch.profiler writes
    /// them: a collective's metadata (`record_param_comms`: `"Collective name": "allreduce",
    /// ...`), keyword inputs (a Triton launch's `"kernel_file": ...`).
    pub members: Option<&'a str>,
}

/// What records PyTorch operators in a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorPath {
    /// cuprof's native observer (PyTorch's RecordFunction callbacks).
    Native = 1,
    /// PyTorch's NVTX observer, the fallback.
    Nvtx = 2,
}

impl OperatorPath {
    pub fn from_u8(v: u8) -> Option<OperatorPath> {
        match v {
            1 => Some(OperatorPath::Native),
            2 => Some(OperatorPath::Nvtx),
            _ => None,
        }
    }

    /// As the trace's `cuprof` header says it.
    pub fn name(self) -> &'static str {
        match self {
            OperatorPath::Native => "native",
            OperatorPath::Nvtx => "nvtx",
        }
    }
}

/// The native record's field separator.
pub const NATIVE_SEPARATOR: u8 = 0x1f;

/// The operator name at the front of a native record (the whole of anything else).
pub fn native_record_name(record: &[u8]) -> &[u8] {
    match memchr::memchr(NATIVE_SEPARATOR, record) {
        Some(at) => &record[..at],
        None => record,
    }
}

const OP_ID: &str = ", op_id = ";
const SEQ: &str = ", seq = ";
const SIZES: &str = ", sizes = ";
const INPUT_OP_IDS: &str = ", input_op_ids = ";

impl<'a> TorchOp<'a> {
    /// Parses an NVTX range name; `None` when it is not an operator range.
    pub fn parse(range_name: &'a str) -> Option<TorchOp<'a>> {
        // Operator names may hold almost anything (`record_function` labels): find the last
        // `, op_id = ` the observer appended, then read the parts on either side of it.
        let at = rfind_op_id(range_name)?;
        let (head, tail) = (&range_name[..at], &range_name[at + OP_ID.len()..]);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let op_id = tail[..digits].parse().ok()?;
        let rest = &tail[digits..];
        let sizes = if rest.is_empty() {
            None
        } else {
            let s = rest.strip_prefix(SIZES)?;
            let s = match s.find(INPUT_OP_IDS) {
                Some(i) => &s[..i],
                None => s,
            };
            if !is_sizes_json(s) {
                return None;
            }
            Some(s)
        };
        let (name, seq) = match head.rfind(SEQ) {
            Some(i) => match head[i + SEQ.len()..].parse::<i64>() {
                Ok(seq) => (&head[..i], Some(seq)),
                Err(_) => (head, None),
            },
            None => (head, None),
        };
        Some(TorchOp {
            name,
            seq,
            op_id,
            sizes,
            fwd_thread: None,
            types: None,
            strides: None,
            concrete: None,
            flops: None,
            members: None,
        })
    }

    /// Reads a native observer record; `None` when it is malformed (any array that is not the
    /// JSON it must be, a number that is not one).
    pub fn parse_native(record: &'a str) -> Option<TorchOp<'a>> {
        let op = Self::parse_made(record)?;
        let ok = match (op.sizes, op.types, op.strides, op.concrete) {
            (Some(dims), Some(types), Some(strides), Some(concrete)) => {
                is_sizes_json(dims)
                    && is_sizes_json(strides)
                    && is_string_array_json(types)
                    && is_string_array_json(concrete)
            }
            _ => true,
        } && op.members.is_none_or(|members| {
            serde_json::from_str::<serde::de::IgnoredAny>(&format!("{{{members}}}")).is_ok()
        });
        ok.then_some(op)
    }

    /// Reads a record [`crate::native_record::to_text`] made, without checking its arrays
    /// again (the writer thread checked every record's text twice over, a tenth of its time);
    /// `None` when its fields are not all there.
    pub fn parse_made(record: &'a str) -> Option<TorchOp<'a>> {
        let mut f = record.split(NATIVE_SEPARATOR as char);
        let name = f.next()?;
        let seq: i64 = f.next()?.parse().ok()?;
        let fwd_thread: u32 = f.next()?.parse().ok()?;
        let op_id: u64 = f.next()?.parse().ok()?;
        let arrays = [f.next()?, f.next()?, f.next()?, f.next()?];
        let flops = match f.next()? {
            "" => None,
            n => Some(n.parse().ok()?),
        };
        let members = f.next();
        if members.is_some_and(str::is_empty) || f.next().is_some() {
            return None;
        }
        let [dims, types, strides, concrete] = arrays;
        let (sizes, types, strides, concrete) = if dims.is_empty() {
            if [types, strides, concrete].iter().any(|a| !a.is_empty()) {
                return None;
            }
            (None, None, None, None)
        } else {
            (Some(dims), Some(types), Some(strides), Some(concrete))
        };
        Some(TorchOp {
            name,
            seq: (seq >= 0).then_some(seq),
            op_id,
            sizes,
            fwd_thread: Some(fwd_thread),
            types,
            strides,
            concrete,
            flops,
            members,
        })
    }

    /// An autograd node run by the backward pass (it carries its forward op's sequence number).
    pub fn is_backward(&self) -> bool {
        self.name
            .starts_with("autograd::engine::evaluate_function: ")
            || self
                .name
                .trim_end_matches(|c: char| c.is_ascii_digit())
                .ends_with("Backward")
    }
}

/// Whether a range name could be an operator's (cheap: for the application thread).
pub fn is_op_range(range_name: &str) -> bool {
    is_op_name(range_name.as_bytes())
}

/// [`is_op_range`] on the name's bytes as NVTX passes them, before any UTF-8 check: the
/// application thread asks this of every range, so the search is memchr's SIMD one with its
/// needle prepared once, and it looks from the front, where the observer puts `op_id` (the
/// shapes and input ids after it run to hundreds of bytes); the last occurrence decides when
/// the first is not followed by a number, as in [`TorchOp::parse`].
pub fn is_op_name(name: &[u8]) -> bool {
    use memchr::memmem::{Finder, FinderRev};
    use std::sync::OnceLock;
    static FORWARD: OnceLock<Finder<'static>> = OnceLock::new();
    static BACKWARD: OnceLock<FinderRev<'static>> = OnceLock::new();
    let followed_by_digit = |at: usize| name.get(at + OP_ID.len()).is_some_and(u8::is_ascii_digit);
    let forward = FORWARD.get_or_init(|| Finder::new(OP_ID.as_bytes()));
    match forward.find(name) {
        None => false,
        Some(at) if followed_by_digit(at) => true,
        Some(_) => BACKWARD
            .get_or_init(|| FinderRev::new(OP_ID.as_bytes()))
            .rfind(name)
            .is_some_and(followed_by_digit),
    }
}

fn rfind_op_id(s: &str) -> Option<usize> {
    let at = s.rfind(OP_ID)?;
    let after = s.as_bytes().get(at + OP_ID.len())?;
    after.is_ascii_digit().then_some(at)
}

/// `[[8, 64], [], [3]]`: the observer's sizes, which are JSON as they stand.
fn is_sizes_json(s: &str) -> bool {
    s.starts_with('[')
        && s.ends_with(']')
        && s.bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'[' | b']' | b',' | b' ' | b'-'))
        && balanced(s)
}

/// `["float", "", "Scalar"]`: a flat JSON array of strings, escapes included.
fn is_string_array_json(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 2 || b[0] != b'[' || b[b.len() - 1] != b']' {
        return false;
    }
    let mut i = 1;
    let end = b.len() - 1;
    let mut expect_value = true;
    let mut first = true;
    while i < end {
        match b[i] {
            b' ' => i += 1,
            b',' if !expect_value => {
                expect_value = true;
                i += 1;
            }
            b'"' if expect_value => {
                match json_string_end(b, i) {
                    Some(after) if after <= end => i = after,
                    _ => return false,
                }
                expect_value = false;
                first = false;
            }
            _ => return false,
        }
    }
    // `[]`, or values with no trailing comma.
    first || !expect_value
}

/// One JSON string, escapes included (`"1.5"`, `"a\\"b"`), and nothing else.
pub(crate) fn is_json_string(s: &str) -> bool {
    json_string_end(s.as_bytes(), 0) == Some(s.len())
}

/// Where the JSON string that opens at `b[at]` ends (the index after its closing quote).
fn json_string_end(b: &[u8], at: usize) -> Option<usize> {
    if b.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        match b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => match b.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' if b.len() > i + 5 && b[i + 2..i + 6].iter().all(u8::is_ascii_hexdigit) => {
                    i += 6
                }
                _ => return None,
            },
            c if *c >= 0x20 => i += 1,
            _ => return None,
        }
    }
}

fn balanced(s: &str) -> bool {
    let mut depth = 0i32;
    for b in s.bytes() {
        match b {
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_name_with_shapes_and_inputs() {
        let op = TorchOp::parse("aten::addmm, seq = 1, op_id = 5, sizes = [[32], [8, 64], [64, 32], [], []], input_op_ids = [(0,-1), (0,-1), (2,0), (0,-1), (0,-1)]").unwrap();
        assert_eq!(
            op,
            TorchOp {
                name: "aten::addmm",
                seq: Some(1),
                op_id: 5,
                sizes: Some("[[32], [8, 64], [64, 32], [], []]"),
                fwd_thread: None,
                types: None,
                strides: None,
                concrete: None,
                flops: None,
                members: None,
            }
        );
        assert!(!op.is_backward());
    }

    #[test]
    fn shapes_off_and_no_sequence_number() {
        let op = TorchOp::parse("aten::empty, op_id = 1").unwrap();
        assert_eq!(
            (op.name, op.seq, op.op_id, op.sizes),
            ("aten::empty", None, 1, None)
        );
    }

    #[test]
    fn backward_nodes() {
        let node = TorchOp::parse(
            "AddmmBackward0, seq = 1, op_id = 35, sizes = [[8, 32]], input_op_ids = [(32,0)]",
        )
        .unwrap();
        assert!(node.is_backward());
        assert_eq!(node.seq, Some(1));
        let eval = TorchOp::parse("autograd::engine::evaluate_function: SumBackward0, op_id = 30")
            .unwrap();
        assert_eq!(
            eval.name,
            "autograd::engine::evaluate_function: SumBackward0"
        );
        assert!(eval.is_backward());
    }

    #[test]
    fn labels_holding_the_separator() {
        let plain = TorchOp::parse("detach, op_id = 12").unwrap();
        assert_eq!((plain.name, plain.op_id), ("detach", 12));
        // A label holding the observer's own separator keeps everything before the last one.
        let odd = TorchOp::parse("a, op_id = b, op_id = 7").unwrap();
        assert_eq!((odd.name, odd.op_id), ("a, op_id = b", 7));
    }

    #[test]
    fn not_operator_ranges() {
        for name in [
            "step",
            "train, op_id = ",
            "x, op_id = 3, sizes = [[1]]; DROP",
            "x, op_id = 3, sizes = [[1]",
            "x, op_id = 3 extra",
        ] {
            assert_eq!(TorchOp::parse(name), None, "{name}");
        }
        assert!(!is_op_range("step"));
        assert!(is_op_range("aten::mm, op_id = 9"));
        assert!(is_op_range("my, op_id = x, op_id = 9"));
        assert!(!is_op_range("my, op_id = y"));
        assert!(!is_op_range("aten::mm, op_id = "));
    }

    #[test]
    fn native_records_with_and_without_shapes() {
        let r = "aten::cat\x1f3\x1f0\x1f0\x1f[[[2, 3], [4, 3]], []]\x1f[\"TensorList\", \"Scalar\"]\x1f[[[3, 1], [3, 1]], []]\x1f[\"\", \"0\"]\x1f";
        let op = TorchOp::parse_native(r).unwrap();
        assert_eq!(
            op,
            TorchOp {
                name: "aten::cat",
                seq: Some(3),
                op_id: 0,
                sizes: Some("[[[2, 3], [4, 3]], []]"),
                fwd_thread: Some(0),
                types: Some("[\"TensorList\", \"Scalar\"]"),
                strides: Some("[[[3, 1], [3, 1]], []]"),
                concrete: Some("[\"\", \"0\"]"),
                flops: None,
                members: None,
            }
        );
        let bare =
            TorchOp::parse_native("MmBackward0\x1f-1\x1f1\x1f7\x1f\x1f\x1f\x1f\x1f12").unwrap();
        assert_eq!(
            (
                bare.name,
                bare.seq,
                bare.fwd_thread,
                bare.op_id,
                bare.sizes,
                bare.flops
            ),
            ("MmBackward0", None, Some(1), 7, None, Some(12))
        );
        assert_eq!(native_record_name(r.as_bytes()), b"aten::cat");
        assert_eq!(native_record_name(b"plain"), b"plain");
    }

    #[test]
    fn malformed_native_records() {
        for r in [
            "aten::add",
            "aten::add\x1fx\x1f0\x1f0\x1f\x1f\x1f\x1f\x1f",
            "aten::add\x1f1\x1f0\x1f0\x1f\x1f\x1f\x1f\x1f\x1f",
            "aten::add\x1f1\x1f0\x1f0\x1f[[1]]\x1f[\"a\x1f[[1]]\x1f[\"\"]\x1f",
            "aten::add\x1f1\x1f0\x1f0\x1f[[1]]\x1f[\"a\"}]\x1f[[1]]\x1f[\"\"]\x1f",
            "aten::add\x1f1\x1f0\x1f0\x1f[[1]]\x1f[\"a\",]\x1f[[1]]\x1f[\"\"]\x1f",
            "aten::add\x1f1\x1f0\x1f0\x1f[[1]]\x1f[\"\\q\"]\x1f[[1]]\x1f[\"\"]\x1f",
            "aten::add\x1f1\x1f0\x1f0\x1f[[1]\x1f[\"\"]\x1f[[1]]\x1f[\"\"]\x1f",
            "aten::add\x1f1\x1f0\x1f0\x1f\x1f[\"\"]\x1f\x1f\x1f",
            "aten::add\x1f1\x1f0\x1f0\x1f\x1f\x1f\x1f\x1fx",
        ] {
            assert_eq!(TorchOp::parse_native(r), None, "{r:?}");
        }
        assert!(is_string_array_json("[]"));
        assert!(is_string_array_json("[\"a\\u0001\", \"\\\"\"]"));
        assert!(!is_string_array_json("[,]"));
        assert!(!is_string_array_json("[\"a\" \"b\"]"));
    }

    #[test]
    fn a_bad_sequence_number_stays_in_the_name() {
        let op = TorchOp::parse("f, seq = x, op_id = 2").unwrap();
        assert_eq!((op.name, op.seq), ("f, seq = x", None));
    }
}
