//! Kineto's `Fwd thread id`: 0 on a forward operator, and on a backward operator (an autograd
//! node run by the engine, on whatever thread) the id of the thread that ran its forward
//! operator. PyTorch numbers threads 1, 2, ... in the order they first record an operator
//! (`RecordFunction::currentThreadId`); cuprof numbers the OS threads that ran forward
//! operators in the order it sees them, which is the same numbering in the usual program
//! (one thread runs the model).

use crate::event::Name;
use crate::torch_op::TorchOp;
use std::collections::HashMap;

const EVALUATE: &str = "autograd::engine::evaluate_function: ";

/// Bound on remembered sequence numbers; past it the map starts over.
const MAX_SEQUENCES: usize = 1 << 16;

#[derive(Debug, Default)]
pub(super) struct ForwardThreads {
    /// OS thread id -> PyTorch-style thread number (from 1).
    numbers: HashMap<u32, u32>,
    /// Sequence number -> the number of the thread whose forward operator last had it.
    by_sequence: HashMap<i64, u32>,
    /// OS thread id -> the autograd node that last ended on it, its sequence number and (from
    /// the native observer) its forward thread id.
    last_node: HashMap<u32, (Name, i64, Option<u32>)>,
}

impl ForwardThreads {
    /// The sequence number of operator `op` on OS thread `tid`: its own, or for the engine's
    /// `evaluate_function: Node` (which the observer names without one) that of the node it
    /// ran, which ended just before it on the same thread. Kineto gives it the node's too.
    pub(super) fn sequence(&mut self, op: &TorchOp, tid: u32) -> Option<i64> {
        self.node_of(op, tid).map(|(seq, _)| seq)
    }

    /// The `Sequence number` and `Fwd thread id` of an operator from the native observer,
    /// which has both from PyTorch except on `evaluate_function: Node`, which takes its node's
    /// (as [`Self::sequence`]).
    pub(super) fn native(&mut self, op: &TorchOp, tid: u32) -> (Option<i64>, Option<u32>) {
        match self.node_of(op, tid) {
            Some((seq, fwd)) => (Some(seq), fwd),
            None => (None, None),
        }
    }

    fn node_of(&mut self, op: &TorchOp, tid: u32) -> Option<(i64, Option<u32>)> {
        if let Some(seq) = op.seq {
            if op.is_backward() {
                if self.last_node.len() >= MAX_SEQUENCES {
                    self.last_node.clear();
                }
                self.last_node
                    .insert(tid, (Name::from(op.name), seq, op.fwd_thread));
            }
            return Some((seq, op.fwd_thread));
        }
        let node = op.name.strip_prefix(EVALUATE)?;
        match self.last_node.get(&tid) {
            Some((name, seq, fwd)) if &**name == node => Some((*seq, *fwd)),
            _ => None,
        }
    }

    /// The `Fwd thread id` of operator `op` with sequence number `seq`, run on OS thread `tid`.
    pub(super) fn of(&mut self, op: &TorchOp, seq: i64, tid: u32) -> u32 {
        if !op.is_backward() {
            let next = self.numbers.len() as u32 + 1;
            let n = *self.numbers.entry(tid).or_insert(next);
            if self.by_sequence.len() >= MAX_SEQUENCES {
                self.by_sequence.clear();
            }
            self.by_sequence.insert(seq, n);
            return 0;
        }
        match self.by_sequence.get(&seq) {
            Some(&n) => n,
            // Its forward ran before recording began: with one forward thread, that one.
            None if self.numbers.len() <= 1 => 1,
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluate_function_takes_the_sequence_number_of_its_node() {
        let mut f = ForwardThreads::default();
        let node = TorchOp::parse("AddmmBackward0, seq = 4, op_id = 30").unwrap();
        let eval =
            TorchOp::parse("autograd::engine::evaluate_function: AddmmBackward0, op_id = 29")
                .unwrap();
        let other =
            TorchOp::parse("autograd::engine::evaluate_function: TBackward0, op_id = 31").unwrap();
        assert_eq!(f.sequence(&node, 9), Some(4));
        assert_eq!(f.sequence(&eval, 9), Some(4));
        assert_eq!(f.sequence(&eval, 10), None);
        assert_eq!(f.sequence(&other, 9), None);
    }

    #[test]
    fn native_evaluate_function_takes_its_nodes_numbers() {
        let mut f = ForwardThreads::default();
        let node =
            TorchOp::parse_native("AddmmBackward0\x1f4\x1f1\x1f0\x1f\x1f\x1f\x1f\x1f").unwrap();
        let eval = TorchOp::parse_native(
            "autograd::engine::evaluate_function: AddmmBackward0\x1f-1\x1f0\x1f0\x1f\x1f\x1f\x1f\x1f",
        )
        .unwrap();
        let fwd = TorchOp::parse_native("aten::mm\x1f4\x1f0\x1f0\x1f\x1f\x1f\x1f\x1f").unwrap();
        let plain =
            TorchOp::parse_native("aten::empty\x1f-1\x1f0\x1f0\x1f\x1f\x1f\x1f\x1f").unwrap();
        assert_eq!(f.native(&fwd, 9), (Some(4), Some(0)));
        assert_eq!(f.native(&node, 9), (Some(4), Some(1)));
        assert_eq!(f.native(&eval, 9), (Some(4), Some(1)));
        assert_eq!(f.native(&eval, 10), (None, None));
        assert_eq!(f.native(&plain, 9), (None, None));
    }

    #[test]
    fn backward_ops_name_the_thread_of_their_forward_op() {
        let mut f = ForwardThreads::default();
        let fwd = TorchOp::parse("aten::addmm, seq = 4, op_id = 9").unwrap();
        let bwd = TorchOp::parse("AddmmBackward0, seq = 4, op_id = 30").unwrap();
        let other = TorchOp::parse("aten::mul, seq = 7, op_id = 12").unwrap();
        assert_eq!(f.of(&fwd, 4, 100), 0);
        assert_eq!(f.of(&other, 7, 200), 0);
        assert_eq!(f.of(&bwd, 4, 300), 1);
        let bwd7 = TorchOp::parse("MulBackward0, seq = 7, op_id = 31").unwrap();
        assert_eq!(f.of(&bwd7, 7, 300), 2);
        assert_eq!(f.of(&bwd7, 99, 300), 0);
    }
}
