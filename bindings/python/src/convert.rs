//! Values between Python and sandwit: arguments and host methods' results
//! going in ([`Value`] from Python objects, with the sandbox's rules and
//! error paths), JSON Schemas going in, results and JSON coming out.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple,
};
use sandwit::Value;
use sandwit::json::{BytesAs, value_to_json};

/// `s` as Python's `repr` writes it, for reprs.
pub fn lit(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// The deepest nesting a value may have, as the sandbox allows.
const MAX_DEPTH: usize = 64;

/// A call's arguments: a dict of parameter names to values, or `None` for
/// none. `call` names the call in errors (`plugin `calc`, method
/// `calculate_sum``), which name the parameter too.
pub fn args_from_py(args: Option<&Bound<'_, PyAny>>, call: &str) -> PyResult<Value> {
    let entries = named_from_py(args, call, ("args", "parameter"))?;
    Ok(Value::Object(entries))
}

/// A run's inputs: a dict of variable names to values, or `None` for none.
/// Errors name the input.
pub fn inputs_from_py(inputs: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, Value)>> {
    named_from_py(inputs, "the run's inputs", ("inputs", "input"))
}

/// A dict of names to values (`None` for none); `what` names the argument
/// and its items in errors, after `call`.
fn named_from_py(
    dict: Option<&Bound<'_, PyAny>>,
    call: &str,
    (arg, item): (&str, &str),
) -> PyResult<Vec<(String, Value)>> {
    let Some(dict) = dict.filter(|a| !a.is_none()) else {
        return Ok(Vec::new());
    };
    let dict = dict.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{call}: {arg} must be a dict of {item} names to values, not {}",
            type_name(dict)
        ))
    })?;
    let mut entries = Vec::with_capacity(dict.len());
    for (key, value) in dict.iter() {
        let name = key.cast::<PyString>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{call}: {arg}: {item} names must be str, not {}",
                type_name(&key)
            ))
        })?;
        let name = text(name, &mut || format!("{call}: {arg}: a {item} name"))?;
        let mut path = Path {
            text: format!("{call}: {item} {}", lit(&name)),
        };
        let value = value_from_py(&value, &mut path, 1, Target::Value)?;
        entries.push((name, value));
    }
    Ok(entries)
}

/// A host method's result (a tool's value), with the rules arguments have.
pub fn result_from_py(value: &Bound<'_, PyAny>) -> PyResult<Value> {
    let mut path = Path {
        text: "the result".to_string(),
    };
    value_from_py(value, &mut path, 1, Target::Value)
}

/// Where in an argument a value is, for errors: `plugin `db`, method
/// `insert`: parameter 'rows'[3]['id']`.
struct Path {
    text: String,
}

impl Path {
    fn with<R>(&mut self, step: String, f: impl FnOnce(&mut Self) -> R) -> R {
        let len = self.text.len();
        self.text.push_str(&step);
        let r = f(self);
        self.text.truncate(len);
        r
    }
}

/// The name of `obj`'s type, for errors.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

fn text(s: &Bound<'_, PyString>, path: &mut dyn FnMut() -> String) -> PyResult<String> {
    s.to_str().map(str::to_string).map_err(|_| {
        PyValueError::new_err(format!(
            "{}: a str with a lone surrogate is not valid UTF-8",
            path()
        ))
    })
}

/// What a Python value is read as: a [`Value`] that may cross into the
/// sandbox (bytes too), or one that must also be JSON (no bytes, finite
/// floats: a JSON Schema, a configuration).
#[derive(Clone, Copy, PartialEq)]
enum Target {
    Value,
    Json,
}

fn value_from_py(
    obj: &Bound<'_, PyAny>,
    path: &mut Path,
    depth: usize,
    target: Target,
) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "{}: nested deeper than {MAX_DEPTH} levels",
            path.text
        )));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(obj.is_truthy()?));
    }
    if obj.is_instance_of::<PyInt>() {
        return obj.extract::<i64>().map(Value::Int).map_err(|_| {
            PyOverflowError::new_err(format!(
                "{}: an int must fit in 64 bits (signed)",
                path.text
            ))
        });
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let x = f.value();
        if target == Target::Json && !x.is_finite() {
            return Err(PyValueError::new_err(format!(
                "{}: {x} is not a JSON number",
                path.text
            )));
        }
        return Ok(Value::Float(x));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return text(s, &mut || path.text.clone()).map(Value::Text);
    }
    let bytes_like = obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyByteArray>()
        || obj.is_instance_of::<PyMemoryView>();
    if bytes_like && target == Target::Json {
        return Err(not_json(obj, path));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Value::Bytes(b.to_vec()));
    }
    if obj.is_instance_of::<PyMemoryView>() {
        let bytes = obj.call_method0("tobytes")?;
        return Ok(Value::Bytes(bytes.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for (i, item) in obj.try_iter()?.enumerate() {
            let item = item?;
            items.push(path.with(format!("[{i}]"), |p| {
                value_from_py(&item, p, depth + 1, target)
            })?);
        }
        return Ok(Value::List(items));
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let mut entries = Vec::with_capacity(dict.len());
        for (key, value) in dict.iter() {
            let Ok(key) = key.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "{}: dict keys must be str, not {}",
                    path.text,
                    type_name(&key)
                )));
            };
            let key = text(key, &mut || format!("{}: a key", path.text))?;
            let step = format!("[{}]", lit(&key));
            let value = path.with(step, |p| value_from_py(&value, p, depth + 1, target))?;
            entries.push((key, value));
        }
        return Ok(Value::Object(entries));
    }
    if target == Target::Json {
        return Err(not_json(obj, path));
    }
    Err(PyTypeError::new_err(format!(
        "{}: a {} cannot be sent (None, bool, int, float, str, bytes, list, tuple and dict \
         with str keys can)",
        path.text,
        type_name(obj)
    )))
}

fn not_json(obj: &Bound<'_, PyAny>, path: &Path) -> PyErr {
    PyTypeError::new_err(format!(
        "{}: a {} is not JSON (None, bool, int, float, str, list, tuple and dict with str \
         keys are)",
        path.text,
        type_name(obj)
    ))
}

/// A value as Python: `None`, `bool`, `int`, `float`, `str`, `bytes`,
/// `list`, `dict`.
pub fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(x) => PyFloat::new(py, *x).into_any(),
        Value::Text(s) => PyString::new(py, s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, b).into_any(),
        Value::List(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(entries) => {
            let dict = PyDict::new(py);
            for (k, v) in entries {
                dict.set_item(k, value_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// JSON as Python: objects as dicts, arrays as lists.
pub fn json_to_py<'py>(py: Python<'py>, json: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value as Json;
    Ok(match json {
        Json::Null => py.None().into_bound(py),
        Json::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Json::String(s) => PyString::new(py, s).into_any(),
        Json::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Json::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, json_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// `value` serialised to JSON, then as Python.
pub fn to_py<'py>(py: Python<'py>, value: &impl serde::Serialize) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_value(value)
        .map_err(|e| PyValueError::new_err(format!("cannot convert to JSON: {e}")))?;
    json_to_py(py, &json)
}

/// A JSON value (a JSON Schema) given in Python: None, bool, int, float
/// (finite), str, list, tuple and dict with str keys; `what` names it in
/// errors.
pub fn json_from_py(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<serde_json::Value> {
    let mut path = Path {
        text: what.to_string(),
    };
    let value = value_from_py(obj, &mut path, 1, Target::Json)?;
    // No bytes and no non-finite float got past `Target::Json`: the
    // conversion is exact.
    Ok(value_to_json(&value, BytesAs::String))
}
