//! The column encoding of a [`Value`], which the Python sandbox uses.
//!
//! The nodes are in preorder (a container is followed by its elements'
//! subtrees, in order); each node has a kind byte, and each kind's payloads
//! sit in a column of their own, in the same order. A column of scalars
//! crosses the component boundary as one list, which the Python side turns
//! into `bytes` or a `list` without making an object per node.
//!
//! Decoding treats the columns as hostile, as [`Value::from_nodes`] does:
//! kinds, column lengths, depth, node count and size are checked, and nothing
//! recurses.

use crate::{DecodeError, DecodeLimits, Value};

/// Node kinds, as in the `columns` record of `wit/python.wit`.
pub mod kind {
    /// `None`.
    pub const NULL: u8 = 0;
    /// `False`.
    pub const FALSE: u8 = 1;
    /// `True`.
    pub const TRUE: u8 = 2;
    /// An integer, in [`Columns::integers`](super::Columns::integers).
    pub const INTEGER: u8 = 3;
    /// A float, in [`Columns::floats`](super::Columns::floats).
    pub const FLOAT: u8 = 4;
    /// A string, in [`Columns::texts`](super::Columns::texts).
    pub const TEXT: u8 = 5;
    /// A byte string, in [`Columns::blobs`](super::Columns::blobs).
    pub const BYTES: u8 = 6;
    /// An array; its length is in [`Columns::lengths`](super::Columns::lengths).
    pub const ARRAY: u8 = 7;
    /// An object; its entry count is in [`Columns::lengths`](super::Columns::lengths),
    /// each key in [`Columns::texts`](super::Columns::texts) just before its value.
    pub const OBJECT: u8 = 8;
}

/// A value in columns; mirrors the `columns` WIT record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    /// One [`kind`] per node, in preorder.
    pub kinds: Vec<u8>,
    /// The integer nodes' values.
    pub integers: Vec<i64>,
    /// The float nodes' values.
    pub floats: Vec<f64>,
    /// The text nodes' strings and the objects' keys, in preorder.
    pub texts: Vec<String>,
    /// The byte-string nodes' contents.
    pub blobs: Vec<Vec<u8>>,
    /// The length of each array and object.
    pub lengths: Vec<u32>,
}

impl Columns {
    /// The bytes the value takes, counted as [`encoded_size`](crate::encoded_size)
    /// counts its nodes: 16 per node, the length of every string, byte
    /// string and key, and 4 per element or entry.
    pub fn encoded_size(&self) -> usize {
        size(self.kinds.len(), &self.texts, &self.blobs, &self.lengths)
    }

    /// The bytes the columns themselves hold: what crossing the boundary
    /// copies. Unlike [`Columns::encoded_size`] it does not trust the
    /// lengths column, so columns that claim billions of elements cost what
    /// they are, not what they claim.
    pub fn wire_bytes(&self) -> usize {
        self.kinds.len()
            + 8 * (self.integers.len() + self.floats.len())
            + self.texts.iter().map(|t| t.len() + 8).sum::<usize>()
            + self.blobs.iter().map(|b| b.len() + 8).sum::<usize>()
            + 4 * self.lengths.len()
    }
}

fn size(nodes: usize, texts: &[String], blobs: &[Vec<u8>], lengths: &[u32]) -> usize {
    let elements: usize = lengths.iter().map(|&n| n as usize).sum();
    16usize
        .saturating_mul(nodes)
        .saturating_add(texts.iter().map(String::len).sum())
        .saturating_add(blobs.iter().map(Vec::len).sum())
        .saturating_add(elements.saturating_mul(4))
}

/// Which column ran short or had entries left over.
fn column_name(kind: u8) -> &'static str {
    match kind {
        kind::INTEGER => "integers",
        kind::FLOAT => "floats",
        kind::TEXT => "texts",
        kind::BYTES => "blobs",
        _ => "lengths",
    }
}

/// A container being filled while decoding.
struct Open {
    /// Its key in the object it belongs to, if it belongs to one.
    key: Option<String>,
    /// How many elements or entries it still lacks (never 0).
    left: u32,
    body: Body,
}

enum Body {
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The value in columns, moving strings and bytes rather than copying.
    pub fn into_columns(self) -> Columns {
        let mut out = Columns::default();
        // Preorder with an explicit stack: elements are pushed in reverse so
        // the first comes off first; an object's key goes out with its value.
        let mut stack = vec![(None, self)];
        while let Some((key, value)) = stack.pop() {
            if let Some(key) = key {
                out.texts.push(key);
            }
            let k = match value {
                Value::Null => kind::NULL,
                Value::Bool(false) => kind::FALSE,
                Value::Bool(true) => kind::TRUE,
                Value::Int(i) => {
                    out.integers.push(i);
                    kind::INTEGER
                }
                Value::Float(x) => {
                    out.floats.push(x);
                    kind::FLOAT
                }
                Value::Text(s) => {
                    out.texts.push(s);
                    kind::TEXT
                }
                Value::Bytes(b) => {
                    out.blobs.push(b);
                    kind::BYTES
                }
                Value::List(items) => {
                    out.lengths.push(items.len() as u32);
                    stack.extend(items.into_iter().rev().map(|v| (None, v)));
                    kind::ARRAY
                }
                Value::Object(entries) => {
                    out.lengths.push(entries.len() as u32);
                    stack.extend(entries.into_iter().rev().map(|(k, v)| (Some(k), v)));
                    kind::OBJECT
                }
            };
            out.kinds.push(k);
        }
        out
    }

    /// Decodes columns that may come from a guest, checking their shape and
    /// the limits, in time linear in the number of nodes and without
    /// recursion.
    pub fn from_columns(columns: Columns, limits: &DecodeLimits) -> Result<Value, DecodeError> {
        if columns.kinds.is_empty() {
            return Err(DecodeError::Empty);
        }
        if columns.kinds.len() > limits.max_nodes {
            return Err(DecodeError::TooManyNodes {
                count: columns.kinds.len(),
                max: limits.max_nodes,
            });
        }
        let bytes = columns.encoded_size();
        if bytes > limits.max_bytes {
            return Err(DecodeError::TooLarge {
                bytes,
                max: limits.max_bytes,
            });
        }
        let short = |k: u8| DecodeError::ShortColumn {
            column: column_name(k),
        };
        let mut integers = columns.integers.into_iter();
        let mut floats = columns.floats.into_iter();
        let mut texts = columns.texts.into_iter();
        let mut blobs = columns.blobs.into_iter();
        let mut lengths = columns.lengths.into_iter();
        let mut nodes = columns.kinds.into_iter().enumerate();
        let mut open: Vec<Open> = Vec::new();
        let root = loop {
            let Some((index, k)) = nodes.next() else {
                return Err(DecodeError::Unfinished);
            };
            let mut key = match open.last() {
                Some(Open {
                    body: Body::Object(_),
                    ..
                }) => Some(texts.next().ok_or_else(|| short(kind::TEXT))?),
                _ => None,
            };
            let mut value = match k {
                kind::NULL => Value::Null,
                kind::FALSE => Value::Bool(false),
                kind::TRUE => Value::Bool(true),
                kind::INTEGER => Value::Int(integers.next().ok_or_else(|| short(k))?),
                kind::FLOAT => Value::Float(floats.next().ok_or_else(|| short(k))?),
                kind::TEXT => Value::Text(texts.next().ok_or_else(|| short(k))?),
                kind::BYTES => Value::Bytes(blobs.next().ok_or_else(|| short(k))?),
                kind::ARRAY | kind::OBJECT => {
                    let n = lengths.next().ok_or_else(|| short(k))?;
                    if n > 0 {
                        if open.len() + 1 > limits.max_depth {
                            return Err(DecodeError::TooDeep {
                                max: limits.max_depth,
                            });
                        }
                        // A hostile length reserves no more than a page's worth.
                        let room = (n as usize).min(256);
                        let body = if k == kind::ARRAY {
                            Body::Array(Vec::with_capacity(room))
                        } else {
                            Body::Object(Vec::with_capacity(room))
                        };
                        open.push(Open { key, left: n, body });
                        continue;
                    }
                    if k == kind::ARRAY {
                        Value::List(Vec::new())
                    } else {
                        Value::Object(Vec::new())
                    }
                }
                other => return Err(DecodeError::BadKind { index, kind: other }),
            };
            // Put the value in its container, closing every container it
            // completes; the root ends the decoding.
            let root = loop {
                let Some(parent) = open.last_mut() else {
                    break Some(value);
                };
                match &mut parent.body {
                    Body::Array(items) => items.push(value),
                    Body::Object(entries) => {
                        entries.push((key.take().expect("read with the value"), value))
                    }
                }
                parent.left -= 1;
                if parent.left > 0 {
                    break None;
                }
                let done = open.pop().expect("matched above");
                value = match done.body {
                    Body::Array(items) => Value::List(items),
                    Body::Object(entries) => Value::Object(entries),
                };
                key = done.key;
            };
            if let Some(root) = root {
                break root;
            }
        };
        if nodes.next().is_some() {
            return Err(DecodeError::TrailingNodes);
        }
        for (k, left) in [
            (kind::INTEGER, integers.len()),
            (kind::FLOAT, floats.len()),
            (kind::TEXT, texts.len()),
            (kind::BYTES, blobs.len()),
            (kind::ARRAY, lengths.len()),
        ] {
            if left > 0 {
                return Err(DecodeError::LongColumn {
                    column: column_name(k),
                });
            }
        }
        Ok(root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::sample;

    fn decode(columns: Columns) -> Result<Value, DecodeError> {
        Value::from_columns(columns, &DecodeLimits::default())
    }

    #[test]
    fn round_trips_in_preorder() {
        let columns = sample().into_columns();
        assert_eq!(
            columns.kinds,
            [8, 3, 7, 5, 6, 0, 8, 4, 2],
            "object, 1, [x, b, None], {{d: 0.5}}, True"
        );
        assert_eq!(columns.texts, ["a", "b", "x", "c", "d", "e"]);
        assert_eq!(columns.lengths, [4, 3, 1]);
        assert_eq!(
            columns.encoded_size(),
            crate::encoded_size(&sample().into_nodes())
        );
        assert_eq!(decode(columns).unwrap(), sample());
        for scalar in [
            Value::Null,
            Value::Int(-1),
            Value::List(vec![]),
            Value::Object(vec![]),
        ] {
            assert_eq!(decode(scalar.clone().into_columns()).unwrap(), scalar);
        }
    }

    #[test]
    fn wire_bytes_count_what_the_columns_hold() {
        let columns = sample().into_columns();
        // 9 kinds, 1 integer, 1 float, 6 one-byte texts, a 2-byte blob, 3 lengths.
        assert_eq!(columns.wire_bytes(), 9 + 8 * 2 + 6 * 9 + 10 + 4 * 3);
        let claims = Columns {
            kinds: vec![kind::ARRAY],
            lengths: vec![u32::MAX],
            ..Columns::default()
        };
        assert_eq!(claims.wire_bytes(), 1 + 4);
        assert!(claims.encoded_size() > 1 << 34, "the claim, trusted");
    }

    #[test]
    fn rejects_malformed_columns() {
        let good = Value::List(vec![Value::Int(1), Value::Text("x".into())]).into_columns();
        let with = |f: fn(&mut Columns)| {
            let mut c = good.clone();
            f(&mut c);
            decode(c)
        };
        assert_eq!(decode(Columns::default()), Err(DecodeError::Empty));
        assert_eq!(
            with(|c| c.kinds[1] = 9),
            Err(DecodeError::BadKind { index: 1, kind: 9 })
        );
        assert_eq!(
            with(|c| c.integers.clear()),
            Err(DecodeError::ShortColumn { column: "integers" })
        );
        assert_eq!(
            with(|c| c.floats.push(1.0)),
            Err(DecodeError::LongColumn { column: "floats" })
        );
        assert_eq!(with(|c| c.lengths[0] = 3), Err(DecodeError::Unfinished));
        assert_eq!(with(|c| c.lengths[0] = 1), Err(DecodeError::TrailingNodes));
        assert_eq!(
            with(|c| c.lengths.clear()),
            Err(DecodeError::ShortColumn { column: "lengths" })
        );
        // An object's key is missing.
        let object = Columns {
            kinds: vec![kind::OBJECT, kind::NULL],
            lengths: vec![1],
            ..Columns::default()
        };
        assert_eq!(
            decode(object),
            Err(DecodeError::ShortColumn { column: "texts" })
        );
    }

    #[test]
    fn enforces_limits() {
        // A claimed length counts 4 bytes per element before anything is
        // reserved; one within the size limit reserves little and ends as
        // unfinished.
        let huge = Columns {
            kinds: vec![kind::ARRAY],
            lengths: vec![u32::MAX],
            ..Columns::default()
        };
        let limits = DecodeLimits::default();
        assert!(matches!(
            Value::from_columns(huge, &limits),
            Err(DecodeError::TooLarge { .. })
        ));
        let long = Columns {
            kinds: vec![kind::ARRAY],
            lengths: vec![1 << 20],
            ..Columns::default()
        };
        assert_eq!(
            Value::from_columns(long, &limits),
            Err(DecodeError::Unfinished)
        );
        let deep = Columns {
            kinds: [vec![kind::ARRAY; 10], vec![kind::NULL]].concat(),
            lengths: vec![1; 10],
            ..Columns::default()
        };
        let shallow = DecodeLimits {
            max_depth: 5,
            ..limits
        };
        assert_eq!(
            Value::from_columns(deep.clone(), &shallow),
            Err(DecodeError::TooDeep { max: 5 })
        );
        assert!(Value::from_columns(deep, &limits).is_ok());
        let few = DecodeLimits {
            max_nodes: 2,
            ..limits
        };
        assert_eq!(
            Value::from_columns(sample().into_columns(), &few),
            Err(DecodeError::TooManyNodes { count: 9, max: 2 })
        );
    }

    #[test]
    fn decodes_a_long_chain_without_recursion() {
        let n = 200_000;
        let chain = Columns {
            kinds: [vec![kind::OBJECT; n], vec![kind::TRUE]].concat(),
            texts: vec!["k".to_string(); n],
            lengths: vec![1; n],
            ..Columns::default()
        };
        let limits = DecodeLimits {
            max_depth: n,
            ..DecodeLimits::default()
        };
        let mut cur = Value::from_columns(chain, &limits).unwrap();
        let mut steps = 0;
        while let Value::Object(mut entries) = cur {
            cur = entries.pop().unwrap().1;
            steps += 1;
        }
        assert_eq!((steps, cur), (n, Value::Bool(true)));
    }
}
