//! The interpreters AI code runs in, beside the default one (`python/`, the
//! componentize-py CPython component): one folder per kind.

pub(crate) mod admission;
pub(crate) mod scientific;
pub(crate) mod values;
pub(crate) mod workspace;
