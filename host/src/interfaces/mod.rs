//! The host's implementations of the interfaces guests import, one file each.

pub(crate) mod log;
pub(crate) mod methods;
