//! A [`Value`] in Python's `marshal` format, version 2: how the Python
//! sandbox passes values, since CPython writes and reads it in C
//! (`marshal.dumps(value, 2)`, `marshal.loads`), so a value crosses the
//! component boundary as one byte string each way.
//!
//! Version 2 has no back-references (they came with version 3), so every
//! object is written where it occurs. Of its types a value uses only: `N`
//! None, `F` False, `T` True, `i` an integer in 32 bits, `l` a longer one
//! (a signed count of base-2^15 digits, then the digits, least significant
//! first), `g` a float, `u` a UTF-8 string, `s` a byte string (what CPython
//! writes for `bytes`), `[` a list and `(` a tuple (both an array), and
//! `{` a dict: key and value pairs, the keys strings, ended by `0`. Counts,
//! lengths and numbers are little-endian.
//!
//! Decoding treats the bytes as hostile, as [`Value::from_nodes`] does: any
//! other code, an integer past 64 bits or malformed, a string that is not UTF-8, a key
//! that is not a string, a count the bytes cannot hold, and the limits'
//! depth, node count and size (counted as [`encoded_size`](crate::encoded_size)
//! counts nodes) are refused, in time linear in the input and without
//! recursion.

use crate::{DecodeError, DecodeLimits, Value};

/// The type codes a value's marshal form uses.
pub mod code {
    /// `None`.
    pub const NONE: u8 = b'N';
    /// `False`.
    pub const FALSE: u8 = b'F';
    /// `True`.
    pub const TRUE: u8 = b'T';
    /// An integer in 32 bits: 4 bytes.
    pub const INT: u8 = b'i';
    /// A longer integer: a signed 32-bit digit count (its sign is the
    /// integer's), then that many 16-bit digits below 2^15.
    pub const LONG: u8 = b'l';
    /// A float: 8 bytes, IEEE 754.
    pub const FLOAT: u8 = b'g';
    /// A string: a 32-bit length, then that many bytes of UTF-8.
    pub const TEXT: u8 = b'u';
    /// A byte string: a 32-bit length, then the bytes.
    pub const BYTES: u8 = b's';
    /// A list: a 32-bit count, then the elements.
    pub const LIST: u8 = b'[';
    /// A tuple, taken as a list.
    pub const TUPLE: u8 = b'(';
    /// A dict: key and value pairs until [`END`].
    pub const DICT: u8 = b'{';
    /// The end of a dict.
    pub const END: u8 = b'0';
}

/// The bits of one digit of a `LONG`.
const DIGIT_BITS: u32 = 15;
/// The most digits a 64-bit integer takes (64 / 15, rounded up).
const MAX_DIGITS: usize = 5;

/// An item still to write: a value, an object's key before its value, or
/// the end of an object after its entries.
enum Item<'a> {
    Value(&'a Value),
    Key(&'a str),
    End,
}

impl Value {
    /// The value in marshal format (version 2), as `marshal.loads` reads it.
    /// Written without recursion.
    pub fn to_marshal(&self) -> Vec<u8> {
        // Sized first: a large value is then written in one allocation,
        // not copied as it grows.
        let mut out = Vec::with_capacity(self.marshal_len());
        let mut stack = vec![Item::Value(self)];
        while let Some(item) = stack.pop() {
            let value = match item {
                Item::Key(key) => {
                    write_sized(&mut out, code::TEXT, key.as_bytes());
                    continue;
                }
                Item::End => {
                    out.push(code::END);
                    continue;
                }
                Item::Value(value) => value,
            };
            match value {
                Value::Null => out.push(code::NONE),
                Value::Bool(false) => out.push(code::FALSE),
                Value::Bool(true) => out.push(code::TRUE),
                Value::Int(i) => write_int(&mut out, *i),
                Value::Float(x) => {
                    out.push(code::FLOAT);
                    out.extend_from_slice(&x.to_le_bytes());
                }
                Value::Text(s) => write_sized(&mut out, code::TEXT, s.as_bytes()),
                Value::Bytes(b) => write_sized(&mut out, code::BYTES, b),
                Value::List(items) => {
                    out.push(code::LIST);
                    out.extend_from_slice(&count(items.len()).to_le_bytes());
                    stack.extend(items.iter().rev().map(Item::Value));
                }
                Value::Object(entries) => {
                    out.push(code::DICT);
                    stack.push(Item::End);
                    for (key, value) in entries.iter().rev() {
                        stack.push(Item::Value(value));
                        stack.push(Item::Key(key));
                    }
                }
            }
        }
        out
    }

    /// The length of [`Value::to_marshal`]'s bytes, counted without
    /// recursion.
    fn marshal_len(&self) -> usize {
        let mut len = 0;
        let mut stack = vec![self];
        while let Some(value) = stack.pop() {
            len += match value {
                Value::Null | Value::Bool(_) => 1,
                Value::Int(i) => match i32::try_from(*i) {
                    Ok(_) => 5,
                    Err(_) => 5 + 2 * digits(i.unsigned_abs()),
                },
                Value::Float(_) => 9,
                Value::Text(s) => 5 + s.len(),
                Value::Bytes(b) => 5 + b.len(),
                Value::List(items) => {
                    stack.extend(items);
                    5
                }
                Value::Object(entries) => {
                    stack.extend(entries.iter().map(|(_, v)| v));
                    2 + entries.iter().map(|(k, _)| 5 + k.len()).sum::<usize>()
                }
            };
        }
        len
    }

    /// Decodes a value's marshal form that may come from a guest, checking
    /// it and the limits; see the [module](self) for what is refused.
    pub fn from_marshal(bytes: &[u8], limits: &DecodeLimits) -> Result<Value, DecodeError> {
        if bytes.is_empty() {
            return Err(DecodeError::Empty);
        }
        let mut r = Reader {
            bytes,
            pos: 0,
            nodes: 0,
            size: 0,
            limits,
        };
        let mut open: Vec<Open> = Vec::new();
        let root = 'value: loop {
            // An object's next key, or its end.
            let mut key = None;
            if let Some(Open {
                body: Body::Object(_),
                ..
            }) = open.last()
            {
                let at = r.pos;
                match r.byte()? {
                    code::END => {
                        let Some(Open {
                            body: Body::Object(entries),
                            key: own_key,
                            ..
                        }) = open.pop()
                        else {
                            unreachable!("matched above")
                        };
                        if let Some(root) = close(&mut open, own_key, Value::Object(entries)) {
                            break 'value root;
                        }
                        continue;
                    }
                    // A key's bytes and 4 for its entry, as a node counts them.
                    code::TEXT => key = Some(r.text(at, 4)?),
                    _ => return Err(DecodeError::BadKey { offset: at }),
                }
            }
            let at = r.pos;
            let c = r.byte()?;
            r.add_node()?;
            let value = match c {
                code::NONE => Value::Null,
                code::FALSE => Value::Bool(false),
                code::TRUE => Value::Bool(true),
                code::INT => Value::Int(i32::from_le_bytes(r.array()?).into()),
                code::LONG => Value::Int(r.long(at)?),
                code::FLOAT => Value::Float(f64::from_le_bytes(r.array()?)),
                code::TEXT => Value::Text(r.text(at, 0)?),
                code::BYTES => Value::Bytes(r.sized(0)?.to_vec()),
                code::LIST | code::TUPLE => {
                    let n = u32::from_le_bytes(r.array()?) as usize;
                    // Each element takes a byte at least: a count the rest
                    // cannot hold is refused before anything is reserved.
                    if n > r.left() {
                        return Err(DecodeError::Truncated);
                    }
                    r.add_size(n.saturating_mul(4))?;
                    if n == 0 {
                        Value::List(Vec::new())
                    } else {
                        r.enter(open.len())?;
                        open.push(Open {
                            key,
                            body: Body::Array {
                                items: Vec::with_capacity(n.min(16)),
                                left: n,
                            },
                        });
                        continue;
                    }
                }
                code::DICT => {
                    if r.peek() == Some(code::END) {
                        r.pos += 1;
                        Value::Object(Vec::new())
                    } else {
                        r.enter(open.len())?;
                        open.push(Open {
                            key,
                            body: Body::Object(Vec::new()),
                        });
                        continue;
                    }
                }
                code => return Err(DecodeError::BadCode { offset: at, code }),
            };
            if let Some(root) = close(&mut open, key, value) {
                break root;
            }
        };
        if r.pos < bytes.len() {
            return Err(DecodeError::TrailingBytes { offset: r.pos });
        }
        Ok(root)
    }
}

/// A container being filled while decoding.
struct Open {
    /// Its key in the object it belongs to, if it belongs to one.
    key: Option<String>,
    body: Body,
}

enum Body {
    /// An array's elements so far, and how many are still to come (never
    /// 0; an array ends at its count).
    Array { items: Vec<Value>, left: usize },
    /// An object's entries so far (an object ends at its end code).
    Object(Vec<(String, Value)>),
}

/// Puts `value` (with its `key` if its container is an object) in the
/// innermost open container, closing every array it completes; the root,
/// when it is complete.
fn close(open: &mut Vec<Open>, mut key: Option<String>, mut value: Value) -> Option<Value> {
    loop {
        let Some(parent) = open.last_mut() else {
            return Some(value);
        };
        match &mut parent.body {
            Body::Object(entries) => {
                entries.push((key.expect("an object's value comes with its key"), value));
                return None;
            }
            Body::Array { items, left } => {
                items.push(value);
                *left -= 1;
                if *left > 0 {
                    return None;
                }
            }
        }
        let done = open.pop().expect("matched above");
        let Body::Array { items, .. } = done.body else {
            unreachable!("only arrays close here")
        };
        value = Value::List(items);
        key = done.key;
    }
}

/// The input being decoded, and what it has taken of the limits.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    nodes: usize,
    size: usize,
    limits: &'a DecodeLimits,
}

impl Reader<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if n > self.left() {
            return Err(DecodeError::Truncated);
        }
        let taken = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }

    /// A 32-bit length and that many bytes, counted against the size limit
    /// with `extra` more before they are taken.
    fn sized(&mut self, extra: usize) -> Result<&[u8], DecodeError> {
        let n = u32::from_le_bytes(self.array()?) as usize;
        self.add_size(n.saturating_add(extra))?;
        self.take(n)
    }

    /// The string of a `TEXT` whose code is at `at`, counted as [`sized`]
    /// counts it.
    ///
    /// [`sized`]: Reader::sized
    fn text(&mut self, at: usize, extra: usize) -> Result<String, DecodeError> {
        let bytes = self.sized(extra)?;
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_string()),
            Err(_) => Err(DecodeError::BadText { offset: at }),
        }
    }

    /// The integer of a `LONG` whose code is at `at`: at most 64 bits, its
    /// digits below 2^15 and the top one not zero (CPython writes no other).
    fn long(&mut self, at: usize) -> Result<i64, DecodeError> {
        let signed = i32::from_le_bytes(self.array()?);
        let digits = signed.unsigned_abs() as usize;
        let bad = DecodeError::BadInteger { offset: at };
        if digits > MAX_DIGITS {
            return Err(bad);
        }
        let mut magnitude: u128 = 0;
        let mut top = 0;
        for i in 0..digits {
            let digit = u16::from_le_bytes(self.array()?);
            if digit >> DIGIT_BITS != 0 {
                return Err(bad);
            }
            magnitude |= u128::from(digit) << (DIGIT_BITS * i as u32);
            top = digit;
        }
        if digits > 0 && top == 0 {
            return Err(bad);
        }
        let value = if signed < 0 {
            0i128 - magnitude as i128
        } else {
            magnitude as i128
        };
        i64::try_from(value).map_err(|_| bad)
    }

    /// Counts a node against the limits, and its 16 bytes.
    fn add_node(&mut self) -> Result<(), DecodeError> {
        self.nodes += 1;
        if self.nodes > self.limits.max_nodes {
            return Err(DecodeError::TooManyNodes {
                count: self.nodes,
                max: self.limits.max_nodes,
            });
        }
        self.add_size(16)
    }

    /// Counts `bytes` more of the value's size against the limit.
    fn add_size(&mut self, bytes: usize) -> Result<(), DecodeError> {
        self.size = self.size.saturating_add(bytes);
        if self.size > self.limits.max_bytes {
            return Err(DecodeError::TooLarge {
                bytes: self.size,
                max: self.limits.max_bytes,
            });
        }
        Ok(())
    }

    /// Refuses a container that would open below `depth` open ones when
    /// that passes the limit.
    fn enter(&self, depth: usize) -> Result<(), DecodeError> {
        if depth + 1 > self.limits.max_depth {
            return Err(DecodeError::TooDeep {
                max: self.limits.max_depth,
            });
        }
        Ok(())
    }
}

/// A tuple of strings in marshal format (version 2), as `marshal.loads`
/// reads it: what no value is written as ([`Value::to_marshal`] writes
/// arrays as lists), so a reader of either can tell them apart, as the
/// interpreters do a failed method call's `(kind, message)` from a
/// method's value.
pub fn marshal_text_tuple(items: &[&str]) -> Vec<u8> {
    let len = 5 + items.iter().map(|item| 5 + item.len()).sum::<usize>();
    let mut out = Vec::with_capacity(len);
    out.push(code::TUPLE);
    out.extend_from_slice(&count(items.len()).to_le_bytes());
    for item in items {
        write_sized(&mut out, code::TEXT, item.as_bytes());
    }
    out
}

/// A length or count as marshal writes it: a value this large is past every
/// limit long before 4 GiB, so the cast only guards the impossible.
fn count(n: usize) -> u32 {
    u32::try_from(n).expect("a value's lengths fit in 32 bits")
}

fn write_sized(out: &mut Vec<u8>, code: u8, bytes: &[u8]) {
    out.push(code);
    out.extend_from_slice(&count(bytes.len()).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// An integer as CPython writes it on wasm32, where a C `long` is 32 bits:
/// `INT` when it fits, else `LONG` digits.
fn write_int(out: &mut Vec<u8>, i: i64) {
    if let Ok(small) = i32::try_from(i) {
        out.push(code::INT);
        out.extend_from_slice(&small.to_le_bytes());
        return;
    }
    let magnitude = i.unsigned_abs();
    let n = digits(magnitude) as i32;
    out.push(code::LONG);
    out.extend_from_slice(&(if i < 0 { -n } else { n }).to_le_bytes());
    for d in 0..n as u32 {
        let digit = (magnitude >> (DIGIT_BITS * d)) as u16 & ((1 << DIGIT_BITS) - 1);
        out.extend_from_slice(&digit.to_le_bytes());
    }
}

/// How many base-2^15 digits `magnitude` takes.
fn digits(magnitude: u64) -> usize {
    (u64::BITS - magnitude.leading_zeros()).div_ceil(DIGIT_BITS) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::sample;

    fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
        Value::from_marshal(bytes, &DecodeLimits::default())
    }

    #[test]
    fn writes_what_cpython_writes() {
        // marshal.dumps({'a': 1, 'b': [b'xy', None], 'c': 0.5, 'd': True}, 2)
        // in CPython 3.11 and 3.14 alike.
        let value = Value::Object(vec![
            ("a".into(), Value::Int(1)),
            (
                "b".into(),
                Value::List(vec![Value::Bytes(b"xy".to_vec()), Value::Null]),
            ),
            ("c".into(), Value::Float(0.5)),
            ("d".into(), Value::Bool(true)),
        ]);
        let expected: &[u8] = b"{u\x01\x00\x00\x00ai\x01\x00\x00\x00u\x01\x00\x00\x00b[\x02\x00\x00\x00s\x02\x00\x00\x00xyNu\x01\x00\x00\x00cg\x00\x00\x00\x00\x00\x00\xe0?u\x01\x00\x00\x00dT0";
        assert_eq!(value.to_marshal(), expected);
        // marshal.dumps(2**40, 2), marshal.dumps(-2**63, 2)
        assert_eq!(
            Value::Int(1 << 40).to_marshal(),
            b"l\x03\x00\x00\x00\x00\x00\x00\x00\x00\x04"
        );
        assert_eq!(
            Value::Int(i64::MIN).to_marshal(),
            b"l\xfb\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x08\x00"
        );
    }

    #[test]
    fn sizes_its_output_exactly() {
        for value in [
            sample(),
            Value::Int(i64::MIN),
            Value::Int(1 << 40),
            Value::Int(-5),
            Value::List(vec![Value::Object(vec![("é".into(), Value::Float(1.0))])]),
        ] {
            assert_eq!(value.marshal_len(), value.to_marshal().len(), "{value:?}");
        }
    }

    #[test]
    fn round_trips() {
        for value in [
            sample(),
            Value::Null,
            Value::Int(-1),
            Value::Int(i64::MAX),
            Value::Int(i64::MIN),
            Value::Int(i64::from(i32::MIN) - 1),
            Value::Text("é\u{0}".into()),
            Value::List(vec![]),
            Value::Object(vec![]),
            Value::List(vec![Value::Object(vec![]), Value::List(vec![])]),
        ] {
            assert_eq!(decode(&value.to_marshal()).unwrap(), value);
        }
        // A tuple is an array.
        assert_eq!(
            decode(b"(\x01\x00\x00\x00N").unwrap(),
            Value::List(vec![Value::Null])
        );
    }

    #[test]
    fn rejects_malformed_bytes() {
        assert_eq!(decode(b""), Err(DecodeError::Empty));
        assert_eq!(
            decode(b"[\x01\x00\x00\x00<"),
            Err(DecodeError::BadCode {
                offset: 5,
                code: b'<'
            })
        );
        // Version 3's reference flag is not version 2.
        assert!(matches!(
            decode(b"\xe9\x01\x00\x00\x00"),
            Err(DecodeError::BadCode { offset: 0, .. })
        ));
        assert_eq!(decode(b"i\x01\x00"), Err(DecodeError::Truncated));
        assert_eq!(decode(b"u\x05\x00\x00\x00ab"), Err(DecodeError::Truncated));
        assert_eq!(decode(b"{N"), Err(DecodeError::BadKey { offset: 1 }));
        assert_eq!(
            decode(b"{u\x01\x00\x00\x00a"),
            Err(DecodeError::Truncated),
            "a key with no value"
        );
        assert_eq!(decode(b"{"), Err(DecodeError::Truncated));
        assert_eq!(
            decode(b"u\x03\x00\x00\x00\xed\xa0\x80"),
            Err(DecodeError::BadText { offset: 0 }),
            "a lone surrogate, as marshal writes one"
        );
        assert_eq!(decode(b"NN"), Err(DecodeError::TrailingBytes { offset: 1 }));
        // 2**75 - 1, and a zero top digit.
        assert_eq!(
            decode(b"l\x05\x00\x00\x00\xff\x7f\xff\x7f\xff\x7f\xff\x7f\xff\x7f"),
            Err(DecodeError::BadInteger { offset: 0 })
        );
        assert_eq!(
            decode(b"l\x06\x00\x00\x00"),
            Err(DecodeError::BadInteger { offset: 0 })
        );
        assert_eq!(
            decode(b"l\x01\x00\x00\x00\x00\x00"),
            Err(DecodeError::BadInteger { offset: 0 })
        );
        assert_eq!(
            decode(b"l\x01\x00\x00\x00\x00\x80"),
            Err(DecodeError::BadInteger { offset: 0 })
        );
        // 2**63 is one past i64::MAX; -2**63 is i64::MIN.
        assert_eq!(
            decode(b"l\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x08\x00"),
            Err(DecodeError::BadInteger { offset: 0 })
        );
    }

    #[test]
    fn a_text_tuple_reads_as_its_strings_and_is_no_value_s_form() {
        let tuple = marshal_text_tuple(&["denied", "no"]);
        assert_eq!(&tuple[..5], b"(\x02\x00\x00\x00");
        assert_eq!(
            decode(&tuple),
            Ok(Value::List(vec![
                Value::Text("denied".into()),
                Value::Text("no".into())
            ]))
        );
        let list = Value::List(vec![Value::Text("denied".into())]).to_marshal();
        assert_eq!(list[0], code::LIST);
    }

    #[test]
    fn enforces_limits() {
        let limits = DecodeLimits::default();
        // A count the bytes cannot hold reserves nothing.
        assert_eq!(
            Value::from_marshal(b"[\xff\xff\xff\xffN", &limits),
            Err(DecodeError::Truncated)
        );
        let deep = [vec![b'['; 1], vec![1, 0, 0, 0]].concat().repeat(10);
        let deep = [deep, vec![b'N']].concat();
        let shallow = DecodeLimits {
            max_depth: 5,
            ..limits
        };
        assert_eq!(
            Value::from_marshal(&deep, &shallow),
            Err(DecodeError::TooDeep { max: 5 })
        );
        assert!(Value::from_marshal(&deep, &limits).is_ok());
        // Empty containers add no depth, as in the other encodings.
        let empty = DecodeLimits {
            max_depth: 0,
            ..limits
        };
        assert!(Value::from_marshal(b"{0", &empty).is_ok());
        assert!(Value::from_marshal(b"[\x00\x00\x00\x00", &empty).is_ok());
        let few = DecodeLimits {
            max_nodes: 2,
            ..limits
        };
        assert_eq!(
            Value::from_marshal(&sample().to_marshal(), &few),
            Err(DecodeError::TooManyNodes { count: 3, max: 2 })
        );
        // The size counts as for nodes: the same value, the same bytes.
        let size = crate::encoded_size(&sample().into_nodes());
        let exact = DecodeLimits {
            max_bytes: size,
            ..limits
        };
        assert!(Value::from_marshal(&sample().to_marshal(), &exact).is_ok());
        let under = DecodeLimits {
            max_bytes: size - 1,
            ..limits
        };
        assert!(matches!(
            Value::from_marshal(&sample().to_marshal(), &under),
            Err(DecodeError::TooLarge { .. })
        ));
    }

    #[test]
    fn decodes_and_writes_a_long_chain_without_recursion() {
        let n = 200_000;
        let chain = [
            b"{u\x01\x00\x00\x00k".repeat(n),
            b"T".to_vec(),
            b"0".repeat(n),
        ]
        .concat();
        let limits = DecodeLimits {
            max_depth: n,
            ..DecodeLimits::default()
        };
        let value = Value::from_marshal(&chain, &limits).unwrap();
        assert_eq!(value.to_marshal(), chain);
        let mut cur = value;
        let mut steps = 0;
        while let Value::Object(mut entries) = cur {
            cur = entries.pop().unwrap().1;
            steps += 1;
        }
        assert_eq!((steps, cur), (n, Value::Bool(true)));
    }
}
