//! What sandwit's two network services, the plugin registry and `sandwit
//! serve`, share to hold up under clients they do not trust: token-bucket
//! rate limits per key ([`rate`]).
#![deny(missing_docs)]

pub mod rate;

pub use rate::{Buckets, RateLimit, address_key};
