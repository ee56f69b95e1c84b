//! [`Error`]: what a method returns when it cannot give a result.

use std::fmt;

use crate::bindings::wit::sandwit::plugin::types::CallError;

/// A method's failure, with a message for the AI.
///
/// Any `std::error::Error` converts into a [`Error::failed`], so `?` works on
/// the errors of the libraries a method uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: Kind,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Failed,
    InvalidArguments,
    Denied,
}

impl Error {
    /// The method ran and failed.
    pub fn failed(message: impl fmt::Display) -> Self {
        Error {
            kind: Kind::Failed,
            message: message.to_string(),
        }
    }

    /// The arguments were wrong in a way the schema could not say.
    pub fn invalid_arguments(message: impl fmt::Display) -> Self {
        Error {
            kind: Kind::InvalidArguments,
            message: message.to_string(),
        }
    }

    /// The method may not do what was asked.
    pub fn denied(message: impl fmt::Display) -> Self {
        Error {
            kind: Kind::Denied,
            message: message.to_string(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn into_wit(self) -> CallError {
        match self.kind {
            Kind::Failed => CallError::Failed(self.message),
            Kind::InvalidArguments => CallError::InvalidArguments(self.message),
            Kind::Denied => CallError::Denied(self.message),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error> From<E> for Error {
    fn from(e: E) -> Self {
        Error::failed(e)
    }
}
