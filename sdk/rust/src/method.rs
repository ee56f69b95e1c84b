//! What the attribute macros expand to: a method's spec from its parameter
//! and return types, and its arguments decoded one parameter at a time.

use crate::bindings::wit::sandwit::plugin::types as t;
use crate::bindings::wit::sandwit::plugin::types::{MethodResult, MethodSpec};
use crate::convert::{FromValue, Schema};
use crate::error::Error;
use crate::output::{Kind, Output};
use sandwit_value::Value;

/// A method as the attribute macros describe it.
pub trait Method {
    /// The method's name.
    const NAME: &'static str;
    /// Its spec.
    fn spec() -> MethodSpec;
    /// Decodes the arguments, calls the function, encodes the result.
    fn call(ctx: &t::AgentCtx, args: Args) -> Result<MethodResult, Error>;
}

/// A method's entry point.
pub type CallFn = fn(&t::AgentCtx, Args) -> Result<MethodResult, Error>;

/// The arguments of one call, taken out one parameter at a time.
pub struct Args {
    entries: Vec<(String, Value)>,
}

impl Args {
    /// The arguments of a call: the entries of its object.
    pub(crate) fn new(entries: Vec<(String, Value)>) -> Self {
        Args { entries }
    }

    /// Takes and decodes the argument `name`.
    pub fn take<T: FromValue>(&mut self, name: &str) -> Result<T, Error> {
        match self.entries.iter().position(|(k, _)| k == name) {
            Some(i) => {
                let (_, value) = self.entries.swap_remove(i);
                T::from_value(value)
                    .map_err(|e| Error::invalid_arguments(format!("argument `{name}`: {e}")))
            }
            None => T::when_missing().ok_or_else(|| {
                Error::invalid_arguments(format!("missing required argument `{name}`"))
            }),
        }
    }

    /// Fails if an argument was given that no parameter took.
    pub fn finish(self) -> Result<(), Error> {
        match self.entries.first() {
            Some((name, _)) => Err(Error::invalid_arguments(format!(
                "unexpected argument `{name}`"
            ))),
            None => Ok(()),
        }
    }
}

/// A parameter's spec, from its type.
pub fn param<T: Schema + FromValue>(name: &str) -> t::Param {
    t::Param {
        name: name.into(),
        schema: T::schema(),
        required: T::when_missing().is_none(),
    }
}

/// A method's spec, from its kind and return type.
pub fn spec<K: Kind, R: Output<K>>(
    name: &str,
    description: &str,
    docstring: &str,
    params: Vec<t::Param>,
) -> MethodSpec {
    MethodSpec {
        name: name.into(),
        kind: K::KIND,
        description: description.into(),
        docstring: docstring.into(),
        params,
        returns: R::returns(),
    }
}
