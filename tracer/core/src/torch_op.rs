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
    fn a_bad_sequence_number_stays_in_the_name() {
        let op = TorchOp::parse("f, seq = x, op_id = 2").unwrap();
        assert_eq!((op.name, op.seq), ("f, seq = x", None));
    }
}
