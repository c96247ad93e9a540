//! A plain-data unpickler (protocols 2 to 5 as CPython writes dicts, lists, tuples, strings,
//! bytes, numbers, booleans and None) into an arena of nodes.
//!
//! Objects live in the arena and containers hold node ids, so an object memoized once and
//! referenced many times (torch shares one frames list between a block and its trace entries;
//! a crafted file can reference a list of lists of ... 2^40 times) is stored once and never
//! copied, and nothing walks the structure recursively: the decoder is a loop over opcodes
//! and readers follow ids. A crafted file meets these limits, each a one-line error:
//!
//! * a length a string or bytes opcode claims must lie within the file (nothing is allocated
//!   for it before that is checked);
//! * at most [`Limits::max_nodes`] objects, [`Limits::max_memo`] memo entries, and containers
//!   nested at most [`Limits::max_depth`] deep (as built: depth is counted when an item is
//!   added to a container), MARKs open at most as deep.

use std::collections::HashMap;

/// Why a pickle was refused; `at` is the byte offset of the opcode.
#[derive(Debug)]
pub struct UnpickleError {
    pub what: String,
    pub at: usize,
}

impl std::fmt::Display for UnpickleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

impl std::error::Error for UnpickleError {}

/// What a file may make the decoder hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_nodes: usize,
    pub max_memo: usize,
    pub max_depth: u32,
}

impl Default for Limits {
    /// A torch snapshot of 100,000 trace entries with deep stacks holds a few million
    /// objects, nested 5 deep.
    fn default() -> Self {
        Limits {
            max_nodes: 64 << 20,
            max_memo: 64 << 20,
            max_depth: 1000,
        }
    }
}

/// Index of a node in [`Pickle`].
pub type NodeId = u32;

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Box<str>),
    Bytes(Box<[u8]>),
    List(Vec<NodeId>),
    Tuple(Vec<NodeId>),
    /// Key, value pairs in the order they were set.
    Dict(Vec<(NodeId, NodeId)>),
}

/// A decoded pickle: every object once, and the root.
#[derive(Debug)]
pub struct Pickle {
    nodes: Vec<Node>,
    pub root: NodeId,
}

impl Pickle {
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// The value of `key` in the dict `id` (the last one set, as in Python); `None` when `id`
    /// is not a dict or has no such key.
    pub fn get(&self, id: NodeId, key: &str) -> Option<NodeId> {
        match self.node(id) {
            Node::Dict(pairs) => pairs
                .iter()
                .rev()
                .find(|(k, _)| matches!(self.node(*k), Node::Str(s) if &**s == key))
                .map(|&(_, v)| v),
            _ => None,
        }
    }

    /// The items of a list or tuple.
    pub fn items(&self, id: NodeId) -> Option<&[NodeId]> {
        match self.node(id) {
            Node::List(l) | Node::Tuple(l) => Some(l),
            _ => None,
        }
    }
}

/// Decodes `data` within `limits`.
pub fn decode(data: &[u8], limits: Limits) -> Result<Pickle, UnpickleError> {
    let mut d = Decoder {
        data,
        pos: 0,
        op_at: 0,
        limits,
        nodes: Vec::new(),
        depth: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    match d.run() {
        Ok(root) => Ok(Pickle {
            nodes: d.nodes,
            root,
        }),
        Err(what) => Err(UnpickleError { what, at: d.op_at }),
    }
}

type Step<T = ()> = Result<T, String>;

struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
    /// Offset of the opcode being run, for errors.
    op_at: usize,
    limits: Limits,
    nodes: Vec<Node>,
    /// Nesting depth of each node: 0 for a scalar or an empty container.
    depth: Vec<u32>,
    stack: Vec<NodeId>,
    marks: Vec<usize>,
    memo: HashMap<u32, NodeId>,
}

impl Decoder<'_> {
    fn take(&mut self, n: u64) -> Step<&[u8]> {
        let left = (self.data.len() - self.pos) as u64;
        if n > left {
            return Err(if n > 1 << 20 {
                format!("a length of {n} bytes, more than the {left} left in the file")
            } else {
                "truncated pickle".to_string()
            });
        }
        let s = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn u8(&mut self) -> Step<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Step<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Step<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn push(&mut self, node: Node) -> Step {
        if self.nodes.len() >= self.limits.max_nodes {
            return Err(format!(
                "more than {} objects (the limit)",
                self.limits.max_nodes
            ));
        }
        self.nodes.push(node);
        self.depth.push(0);
        self.stack.push((self.nodes.len() - 1) as NodeId);
        Ok(())
    }

    fn string(&mut self, n: u64) -> Step {
        let s = std::str::from_utf8(self.take(n)?).map_err(|_| "a string that is not UTF-8")?;
        let s: Box<str> = s.into();
        self.push(Node::Str(s))
    }

    fn bytes(&mut self, n: u64) -> Step {
        let b: Box<[u8]> = self.take(n)?.into();
        self.push(Node::Bytes(b))
    }

    fn pop(&mut self) -> Step<NodeId> {
        self.stack
            .pop()
            .ok_or_else(|| "stack underflow".to_string())
    }

    fn top(&self) -> Step<NodeId> {
        self.stack
            .last()
            .copied()
            .ok_or_else(|| "stack underflow".to_string())
    }

    /// The items above the last MARK, removed from the stack.
    fn pop_mark(&mut self) -> Step<Vec<NodeId>> {
        let mark = self.marks.pop().ok_or("no MARK")?;
        if mark > self.stack.len() {
            return Err("MARK above the stack".into());
        }
        Ok(self.stack.split_off(mark))
    }

    /// Records that `items` are now inside `container`.
    fn nest(&mut self, container: NodeId, items: &[NodeId]) -> Step {
        let inner = items
            .iter()
            .map(|&i| self.depth[i as usize])
            .max()
            .unwrap_or(0);
        let d = &mut self.depth[container as usize];
        *d = (*d).max(inner + 1);
        if *d > self.limits.max_depth {
            return Err(format!(
                "containers nested more than {} deep (the limit)",
                self.limits.max_depth
            ));
        }
        Ok(())
    }

    fn container(&mut self, node: Node, items: &[NodeId]) -> Step {
        self.push(node)?;
        let id = self.top()?;
        self.nest(id, items)
    }

    fn extend_list(&mut self, list: NodeId, items: Vec<NodeId>) -> Step {
        self.nest(list, &items)?;
        match &mut self.nodes[list as usize] {
            Node::List(l) => l.extend(items),
            _ => return Err("APPEND to a non-list".into()),
        }
        Ok(())
    }

    fn extend_dict(&mut self, dict: NodeId, items: Vec<NodeId>) -> Step {
        if !items.len().is_multiple_of(2) {
            return Err("odd number of items for a dict".into());
        }
        self.nest(dict, &items)?;
        let pairs = items.chunks(2).map(|p| (p[0], p[1]));
        match &mut self.nodes[dict as usize] {
            Node::Dict(d) => d.extend(pairs),
            _ => return Err("SETITEM on a non-dict".into()),
        }
        Ok(())
    }

    fn memoize(&mut self, idx: u32) -> Step {
        let top = self.top()?;
        if self.memo.len() >= self.limits.max_memo && !self.memo.contains_key(&idx) {
            return Err(format!(
                "more than {} memo entries (the limit)",
                self.limits.max_memo
            ));
        }
        self.memo.insert(idx, top);
        Ok(())
    }

    fn get(&mut self, idx: u32) -> Step {
        let node = *self
            .memo
            .get(&idx)
            .ok_or_else(|| format!("memo {idx} missing"))?;
        self.stack.push(node);
        Ok(())
    }

    fn run(&mut self) -> Step<NodeId> {
        loop {
            self.op_at = self.pos;
            let op = self.u8()?;
            match op {
                0x80 => {
                    let proto = self.u8()?;
                    if proto > 5 {
                        return Err(format!("pickle protocol {proto}"));
                    }
                }
                0x95 => {
                    self.u64()?; // FRAME: length of the frame that follows
                }
                b'.' => return self.pop(),
                b'(' => {
                    if self.marks.len() >= self.limits.max_depth as usize {
                        return Err(format!(
                            "MARKs nested more than {} deep (the limit)",
                            self.limits.max_depth
                        ));
                    }
                    self.marks.push(self.stack.len())
                }
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'}' => self.push(Node::Dict(Vec::new()))?,
                b']' => self.push(Node::List(Vec::new()))?,
                b')' => self.push(Node::Tuple(Vec::new()))?,
                b'd' => {
                    let items = self.pop_mark()?;
                    self.push(Node::Dict(Vec::new()))?;
                    let d = self.top()?;
                    self.extend_dict(d, items)?;
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    self.container(Node::List(items.clone()), &items)?;
                }
                b't' => {
                    let items = self.pop_mark()?;
                    self.container(Node::Tuple(items.clone()), &items)?;
                }
                0x85..=0x87 => {
                    let n = usize::from(op - 0x84);
                    if self.stack.len() < n {
                        return Err("stack underflow".into());
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.container(Node::Tuple(items.clone()), &items)?;
                }
                b'a' => {
                    let v = self.pop()?;
                    let l = self.top()?;
                    self.extend_list(l, vec![v])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    let l = self.top()?;
                    self.extend_list(l, items)?;
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let d = self.top()?;
                    self.extend_dict(d, vec![k, v])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    let d = self.top()?;
                    self.extend_dict(d, items)?;
                }
                b'N' => self.push(Node::None)?,
                0x88 => self.push(Node::Bool(true))?,
                0x89 => self.push(Node::Bool(false))?,
                b'K' => {
                    let v = self.u8()?;
                    self.push(Node::Int(i64::from(v)))?;
                }
                b'M' => {
                    let b = self.take(2)?;
                    let v = u16::from_le_bytes([b[0], b[1]]);
                    self.push(Node::Int(i64::from(v)))?;
                }
                b'J' => {
                    let v = self.u32()? as i32;
                    self.push(Node::Int(i64::from(v)))?;
                }
                0x8a => {
                    let n = self.u8()?;
                    if n > 8 {
                        return Err(format!("integer of {n} bytes: wider than 64 bits"));
                    }
                    let b = self.take(u64::from(n))?;
                    let fill = if b.last().is_some_and(|&x| x & 0x80 != 0) {
                        0xff
                    } else {
                        0
                    };
                    let mut le = [fill; 8];
                    le[..b.len()].copy_from_slice(b);
                    self.push(Node::Int(i64::from_le_bytes(le)))?;
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes"));
                    self.push(Node::Float(v))?;
                }
                0x8c => {
                    let n = self.u8()?;
                    self.string(u64::from(n))?;
                }
                b'X' => {
                    let n = self.u32()?;
                    self.string(u64::from(n))?;
                }
                0x8d => {
                    let n = self.u64()?;
                    self.string(n)?;
                }
                b'C' => {
                    let n = self.u8()?;
                    self.bytes(u64::from(n))?;
                }
                b'B' => {
                    let n = self.u32()?;
                    self.bytes(u64::from(n))?;
                }
                0x8e => {
                    let n = self.u64()?;
                    self.bytes(n)?;
                }
                0x94 => {
                    let idx = u32::try_from(self.memo.len()).map_err(|_| "memo too large")?;
                    self.memoize(idx)?;
                }
                b'q' => {
                    let idx = u32::from(self.u8()?);
                    self.memoize(idx)?;
                }
                b'r' => {
                    let idx = self.u32()?;
                    self.memoize(idx)?;
                }
                b'h' => {
                    let idx = u32::from(self.u8()?);
                    self.get(idx)?;
                }
                b'j' => {
                    let idx = self.u32()?;
                    self.get(idx)?;
                }
                _ => {
                    return Err(format!(
                        "unsupported pickle opcode {op:#04x} (not plain data)"
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(data: &[u8], limits: Limits) -> String {
        decode(data, limits).unwrap_err().to_string()
    }

    #[test]
    fn crafted_inputs_meet_limits() {
        let l = Limits::default();
        // A 4 GiB string claimed by a 12-byte file: refused before any allocation.
        assert_eq!(
            err(b"\x80\x02X\xff\xff\xff\xffab.", l),
            "a length of 4294967295 bytes, more than the 3 left in the file at byte 2"
        );
        // 2^40 references to one list: stored once.
        let mut p = b"\x80\x02]q\x00".to_vec();
        for i in 1..40u8 {
            p.extend_from_slice(&[b']', b'(', b'h', i - 1, b'h', i - 1, b'e', b'q', i]);
        }
        p.push(b'.');
        let pk = decode(&p, l).unwrap();
        assert_eq!(pk.items(pk.root).unwrap().len(), 2);
        // 20,000 nested lists.
        let mut p = b"\x80\x02".to_vec();
        p.extend(std::iter::repeat_n(b']', 20_000));
        p.extend(std::iter::repeat_n(b'a', 19_999));
        p.push(b'.');
        assert_eq!(
            err(&p, l),
            format!(
                "containers nested more than 1000 deep (the limit) at byte {}",
                2 + 20_000 + 1000
            )
        );
        let small = Limits {
            max_nodes: 3,
            max_memo: 1,
            max_depth: 2,
        };
        assert_eq!(
            err(b"\x80\x02NNNN.", small),
            "more than 3 objects (the limit) at byte 5"
        );
        assert_eq!(
            err(b"\x80\x02N\x94\x94.", small),
            "more than 1 memo entries (the limit) at byte 4"
        );
        assert_eq!(
            err(b"\x80\x02(((.", small),
            "MARKs nested more than 2 deep (the limit) at byte 4"
        );
    }
}
