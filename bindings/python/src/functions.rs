//! The application's own functions for one run (`functions=` of
//! `Host.run`, `Host.run_start`): their names and docstrings cross to the
//! host, which pauses the run at each call; `python/sandwit/_calls.py`
//! answers them (a callable's value or exception) through `Host.resume`.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyMapping, PyString};
use sandwit::{ClientFunction, Resume};

/// The functions `functions` gives: an iterable of names, or a mapping of
/// names to a docstring or a callable (whose `__doc__` is the docstring).
/// Each takes any arguments.
pub fn functions_from_py(functions: &Bound<'_, PyAny>) -> PyResult<Vec<ClientFunction>> {
    if functions.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "functions is an iterable of names or a mapping of names to callables, not a str",
        ));
    }
    let mut out = Vec::new();
    if let Ok(mapping) = functions.cast::<PyMapping>() {
        for item in mapping.items()?.iter() {
            let (name, given): (String, Bound<'_, PyAny>) = item.extract()?;
            let docstring = match given.extract::<String>() {
                Ok(text) => text,
                Err(_) if given.is_callable() => {
                    let doc = given.getattr("__doc__")?;
                    doc.extract::<Option<String>>()?.unwrap_or_default()
                }
                Err(_) => {
                    return Err(PyTypeError::new_err(format!(
                        "functions[{name:?}] is neither a callable nor a docstring"
                    )));
                }
            };
            out.push(ClientFunction::new(name, docstring));
        }
        return Ok(out);
    }
    for name in functions.try_iter()? {
        out.push(ClientFunction::new(name?.extract::<String>()?, ""));
    }
    Ok(out)
}

/// The answer `raise_`, an exception the application's function raised:
/// its type's name (qualified by its module unless a builtin's) and its
/// message (its one str argument, else `str()`).
pub fn raise_from_py(raise_: &Bound<'_, PyAny>) -> PyResult<Resume> {
    let exception = raise_.py().get_type::<pyo3::exceptions::PyBaseException>();
    if !raise_.is_instance(&exception)? {
        return Err(PyTypeError::new_err(
            "raise_ is an exception (an instance of BaseException)",
        ));
    }
    let class = raise_.get_type();
    let name: String = class.getattr("__name__")?.extract()?;
    let module: Option<String> = class.getattr("__module__")?.extract().ok();
    // A name the host takes: qualified by a module of identifiers, else
    // bare, else `Exception`.
    let name = match module.as_deref() {
        Some("builtins") | Some("__main__") | None => name,
        Some(module) => format!("{module}.{name}"),
    };
    let name = [
        name.clone(),
        name.rsplit('.').next().unwrap_or_default().to_string(),
    ]
    .into_iter()
    .find(|candidate| sandwit::is_exception_type_name(candidate))
    .unwrap_or_else(|| "Exception".to_string());
    // The one str argument where there is one: `str()` of a `KeyError`
    // quotes it, and the code's exception would quote it again.
    let args = raise_.getattr("args")?;
    let message = match args.extract::<(String,)>() {
        Ok((message,)) => message,
        Err(_) => raise_.str()?.extract()?,
    };
    Ok(Resume::Raise { name, message })
}

/// Refuses `functions` of `Host.run` unless it maps names to callables:
/// those answer its calls (names and docstrings alone are for
/// `Host.run_start`, whose caller answers).
pub fn check_callables(functions: &Bound<'_, PyAny>) -> PyResult<()> {
    let refused = || {
        PyTypeError::new_err(
            "functions of run is a mapping of names to callables (to answer the calls yourself, \
             use run_start)",
        )
    };
    let mapping = functions.cast::<PyMapping>().map_err(|_| refused())?;
    for value in mapping.values()?.iter() {
        if !value.is_callable() {
            return Err(refused());
        }
    }
    Ok(())
}
