//! The conversion of a host service's refusal into a method's [`Error`].

use crate::Error;
use crate::bindings::wit::sandwit::plugin::types::ServiceError;

/// `denied` stays `denied` (naming the capability), the rest are failures
/// whose message says which service answered.
pub(crate) fn to_error(service: &str, e: ServiceError) -> Error {
    match e {
        ServiceError::Denied(m) => Error::denied(m),
        ServiceError::Invalid(m) => Error::failed(format!("{service}: {m}")),
        ServiceError::LimitExceeded(m) => Error::failed(format!("{service}: limit exceeded: {m}")),
        ServiceError::Unavailable(m) => Error::failed(format!("{service}: unavailable: {m}")),
    }
}
