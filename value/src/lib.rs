//! The dynamically typed value that crosses sandwit's component boundary.
//!
//! WIT has no recursive types, so a [`Value`] travels as a flat list of
//! [`Node`]s, root first, containers naming their children by index. This crate
//! converts between the two. Decoding treats the nodes as hostile: every child
//! index must be greater than its parent's, every node but the root must be
//! referred to exactly once, and the depth and size are bounded, so a decoded
//! tree is always finite, acyclic and built without recursion.
//!
//! The Python sandbox passes values in another form, Python's `marshal`
//! format ([`Value::to_marshal`], [`Value::from_marshal`]), which CPython
//! writes and reads in C.
//!
//! It has no dependencies and is shared by the host and the guest SDK.
#![deny(missing_docs)]

use std::fmt;

mod marshal;

pub use marshal::{code, marshal_text_tuple};

/// A dynamically typed value: what Python's `None`, `bool`, `int`, `float`,
/// `str`, `bytes`, `list` and `dict` (with string keys) map to.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `None` / `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed 64-bit integer.
    Int(i64),
    /// A 64-bit float.
    Float(f64),
    /// A UTF-8 string.
    Text(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<Value>),
    /// A map with string keys, in insertion order.
    Object(Vec<(String, Value)>),
}

/// One node of a flattened value; mirrors the WIT `node` variant.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// `None` / `null`.
    Null,
    /// A boolean.
    Boolean(bool),
    /// A signed 64-bit integer.
    Integer(i64),
    /// A 64-bit float.
    Float(f64),
    /// A UTF-8 string.
    Text(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// A list of node indices.
    Array(Vec<u32>),
    /// Keys with node indices.
    Object(Vec<(String, u32)>),
}

/// Bounds applied when decoding nodes that came from a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// The most nodes a value may have.
    pub max_nodes: usize,
    /// The deepest nesting allowed; the root is at depth 0.
    pub max_depth: usize,
    /// The most bytes a value may take, as [`encoded_size`] counts them.
    pub max_bytes: usize,
}

impl Default for DecodeLimits {
    /// 1,000,000 nodes, depth 64, 16 MiB.
    fn default() -> Self {
        DecodeLimits {
            max_nodes: 1_000_000,
            max_depth: 64,
            max_bytes: 16 << 20,
        }
    }
}

/// Why a list of nodes is not a valid value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The list is empty.
    Empty,
    /// More nodes than [`DecodeLimits::max_nodes`].
    TooManyNodes {
        /// How many there were.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// More bytes than [`DecodeLimits::max_bytes`].
    TooLarge {
        /// How many there were.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// Nested deeper than [`DecodeLimits::max_depth`].
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// A container refers to an index that is out of range or not after its own.
    BadIndex {
        /// The container's index.
        parent: usize,
        /// The index it refers to.
        child: u32,
    },
    /// A node is referred to more than once.
    SharedNode {
        /// The node's index.
        index: usize,
    },
    /// A node is not reachable from the root.
    Unreachable {
        /// The node's index.
        index: usize,
    },
    /// Marshal: a byte that is not the code of a value's type.
    BadCode {
        /// Where the value starts in the input.
        offset: usize,
        /// The code.
        code: u8,
    },
    /// Marshal: the input ends inside a value, or a count or length claims
    /// more than the input holds.
    Truncated,
    /// Marshal: bytes follow the end of the value.
    TrailingBytes {
        /// Where they start.
        offset: usize,
    },
    /// Marshal: a string that is not UTF-8.
    BadText {
        /// Where the string starts in the input.
        offset: usize,
    },
    /// Marshal: an integer that does not fit in 64 bits, or a malformed
    /// `LONG` (a digit of 2^15 or more, a zero top digit).
    BadInteger {
        /// Where the integer starts in the input.
        offset: usize,
    },
    /// Marshal: an object's key that is not a string.
    BadKey {
        /// Where the key starts in the input.
        offset: usize,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Empty => write!(f, "value has no nodes"),
            DecodeError::TooManyNodes { count, max } => {
                write!(f, "value has {count} nodes, more than the limit of {max}")
            }
            DecodeError::TooLarge { bytes, max } => {
                write!(f, "value takes {bytes} bytes, more than the limit of {max}")
            }
            DecodeError::TooDeep { max } => {
                write!(f, "value is nested deeper than the limit of {max}")
            }
            DecodeError::BadIndex { parent, child } => write!(
                f,
                "node {parent} refers to node {child}, which is out of range or not after it"
            ),
            DecodeError::SharedNode { index } => {
                write!(f, "node {index} is referred to more than once")
            }
            DecodeError::Unreachable { index } => {
                write!(f, "node {index} is not reachable from the root")
            }
            DecodeError::BadCode { offset, code } => {
                write!(f, "byte {offset}: {code:#04x} does not start a value")
            }
            DecodeError::Truncated => {
                write!(f, "the value ends early or claims more than it holds")
            }
            DecodeError::TrailingBytes { offset } => {
                write!(f, "bytes follow the end of the value, at byte {offset}")
            }
            DecodeError::BadText { offset } => {
                write!(f, "byte {offset}: a string that is not UTF-8")
            }
            DecodeError::BadInteger { offset } => write!(
                f,
                "byte {offset}: an integer that is malformed or does not fit in 64 bits"
            ),
            DecodeError::BadKey { offset } => {
                write!(f, "byte {offset}: an object key that is not a string")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// The bytes a list of nodes takes, counting 16 per node plus the length of
/// every string, byte string and key, and 4 per child index.
pub fn encoded_size(nodes: &[Node]) -> usize {
    nodes.iter().map(node_size).sum()
}

fn node_size(node: &Node) -> usize {
    16 + match node {
        Node::Text(s) => s.len(),
        Node::Bytes(b) => b.len(),
        Node::Array(items) => 4 * items.len(),
        Node::Object(entries) => entries.iter().map(|(k, _)| k.len() + 4).sum(),
        Node::Null | Node::Boolean(_) | Node::Integer(_) | Node::Float(_) => 0,
    }
}

impl Value {
    /// Flattens the value into nodes, root first, moving strings and bytes
    /// rather than copying them.
    pub fn into_nodes(self) -> Vec<Node> {
        let mut out = Vec::new();
        push(self, &mut out);
        out
    }

    /// Decodes nodes that may come from a guest, checking their shape and the
    /// limits. Runs in time and stack linear in the number of nodes.
    pub fn from_nodes(nodes: Vec<Node>, limits: &DecodeLimits) -> Result<Value, DecodeError> {
        check_shape(&nodes, limits)?;
        // Children always come after their parent, so building from the back
        // finds every child already built.
        let mut built: Vec<Option<Value>> = Vec::with_capacity(nodes.len());
        built.resize_with(nodes.len(), || None);
        for (index, node) in nodes.into_iter().enumerate().rev() {
            let mut take = |i: u32| {
                built[i as usize]
                    .take()
                    .expect("checked: each node used once")
            };
            let value = match node {
                Node::Null => Value::Null,
                Node::Boolean(b) => Value::Bool(b),
                Node::Integer(i) => Value::Int(i),
                Node::Float(x) => Value::Float(x),
                Node::Text(s) => Value::Text(s),
                Node::Bytes(b) => Value::Bytes(b),
                Node::Array(items) => Value::List(items.into_iter().map(&mut take).collect()),
                Node::Object(entries) => {
                    Value::Object(entries.into_iter().map(|(k, i)| (k, take(i))).collect())
                }
            };
            built[index] = Some(value);
        }
        Ok(built[0].take().expect("checked: not empty"))
    }

    /// A short name of the value's type, as Python would say it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Text(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Object(_) => "dict",
        }
    }

    /// How many nodes it has: itself and everything inside it (counted
    /// without recursion, so any depth is safe).
    pub fn node_count(&self) -> usize {
        let mut count = 0;
        let mut stack = vec![self];
        while let Some(v) = stack.pop() {
            count += 1;
            match v {
                Value::List(items) => stack.extend(items),
                Value::Object(entries) => stack.extend(entries.iter().map(|(_, v)| v)),
                _ => {}
            }
        }
        count
    }

    /// The entry `key` of an object, if this is an object that has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

fn push(value: Value, out: &mut Vec<Node>) -> u32 {
    let index = out.len();
    out.push(Node::Null);
    let node = match value {
        Value::Null => Node::Null,
        Value::Bool(b) => Node::Boolean(b),
        Value::Int(i) => Node::Integer(i),
        Value::Float(x) => Node::Float(x),
        Value::Text(s) => Node::Text(s),
        Value::Bytes(b) => Node::Bytes(b),
        Value::List(items) => Node::Array(items.into_iter().map(|v| push(v, out)).collect()),
        Value::Object(entries) => Node::Object(
            entries
                .into_iter()
                .map(|(k, v)| (k, push(v, out)))
                .collect(),
        ),
    };
    out[index] = node;
    index as u32
}

fn check_shape(nodes: &[Node], limits: &DecodeLimits) -> Result<(), DecodeError> {
    if nodes.is_empty() {
        return Err(DecodeError::Empty);
    }
    if nodes.len() > limits.max_nodes {
        return Err(DecodeError::TooManyNodes {
            count: nodes.len(),
            max: limits.max_nodes,
        });
    }
    let bytes = encoded_size(nodes);
    if bytes > limits.max_bytes {
        return Err(DecodeError::TooLarge {
            bytes,
            max: limits.max_bytes,
        });
    }
    // depth[i] is set when node i's parent is visited; parents come first.
    let mut depth: Vec<Option<u32>> = vec![None; nodes.len()];
    depth[0] = Some(0);
    for (parent, node) in nodes.iter().enumerate() {
        let Some(parent_depth) = depth[parent] else {
            return Err(DecodeError::Unreachable { index: parent });
        };
        let mut visit = |child: u32| {
            let c = child as usize;
            if c <= parent || c >= nodes.len() {
                return Err(DecodeError::BadIndex { parent, child });
            }
            if depth[c].is_some() {
                return Err(DecodeError::SharedNode { index: c });
            }
            if parent_depth as usize + 1 > limits.max_depth {
                return Err(DecodeError::TooDeep {
                    max: limits.max_depth,
                });
            }
            depth[c] = Some(parent_depth + 1);
            Ok(())
        };
        match node {
            Node::Array(items) => items.iter().try_for_each(|&c| visit(c))?,
            Node::Object(entries) => entries.iter().try_for_each(|(_, c)| visit(*c))?,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> Value {
        Value::Object(vec![
            ("a".into(), Value::Int(1)),
            (
                "b".into(),
                Value::List(vec![
                    Value::Text("x".into()),
                    Value::Bytes(vec![1, 2]),
                    Value::Null,
                ]),
            ),
            (
                "c".into(),
                Value::Object(vec![("d".into(), Value::Float(0.5))]),
            ),
            ("e".into(), Value::Bool(true)),
        ])
    }

    #[test]
    fn round_trips() {
        let nodes = sample().into_nodes();
        assert_eq!(nodes.len(), 9);
        let back = Value::from_nodes(nodes, &DecodeLimits::default()).unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn rejects_cycles_back_references_and_sharing() {
        let limits = DecodeLimits::default();
        let cycle = vec![Node::Array(vec![0])];
        assert_eq!(
            Value::from_nodes(cycle, &limits),
            Err(DecodeError::BadIndex {
                parent: 0,
                child: 0
            })
        );
        let out_of_range = vec![Node::Array(vec![5])];
        assert!(matches!(
            Value::from_nodes(out_of_range, &limits),
            Err(DecodeError::BadIndex { .. })
        ));
        // A DAG that would unfold exponentially.
        let shared = vec![Node::Array(vec![1, 1]), Node::Null];
        assert_eq!(
            Value::from_nodes(shared, &limits),
            Err(DecodeError::SharedNode { index: 1 })
        );
        let orphan = vec![Node::Null, Node::Null];
        assert_eq!(
            Value::from_nodes(orphan, &limits),
            Err(DecodeError::Unreachable { index: 1 })
        );
        assert_eq!(Value::from_nodes(vec![], &limits), Err(DecodeError::Empty));
    }

    #[test]
    fn enforces_limits() {
        let deep = (0..10)
            .map(|i| {
                if i < 9 {
                    Node::Array(vec![i + 1])
                } else {
                    Node::Null
                }
            })
            .collect::<Vec<_>>();
        let limits = DecodeLimits {
            max_depth: 5,
            ..DecodeLimits::default()
        };
        assert_eq!(
            Value::from_nodes(deep.clone(), &limits),
            Err(DecodeError::TooDeep { max: 5 })
        );
        assert!(Value::from_nodes(deep, &DecodeLimits::default()).is_ok());

        let big = vec![Node::Text("x".repeat(100))];
        let limits = DecodeLimits {
            max_bytes: 50,
            ..DecodeLimits::default()
        };
        assert!(matches!(
            Value::from_nodes(big, &limits),
            Err(DecodeError::TooLarge {
                bytes: 116,
                max: 50
            })
        ));
        let many = vec![Node::Array(vec![1, 2]), Node::Null, Node::Null];
        let limits = DecodeLimits {
            max_nodes: 2,
            ..DecodeLimits::default()
        };
        assert!(matches!(
            Value::from_nodes(many, &limits),
            Err(DecodeError::TooManyNodes { count: 3, max: 2 })
        ));
    }

    #[test]
    fn decodes_a_long_chain_without_recursion() {
        let n = 200_000u32;
        let nodes: Vec<Node> = (0..n)
            .map(|i| {
                if i + 1 < n {
                    Node::Array(vec![i + 1])
                } else {
                    Node::Integer(7)
                }
            })
            .collect();
        let limits = DecodeLimits {
            max_depth: n as usize,
            ..DecodeLimits::default()
        };
        let value = Value::from_nodes(nodes, &limits).unwrap();
        // Drop iteratively too: unwrap the chain by hand.
        let mut cur = value;
        let mut steps = 0;
        while let Value::List(mut items) = cur {
            cur = items.pop().unwrap();
            steps += 1;
        }
        assert_eq!((steps, cur), (n - 1, Value::Int(7)));
    }
}
