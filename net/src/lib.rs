//! What sandwit's two network services, the plugin registry and `sandwit
//! serve`, share to hold up under clients they do not trust: token-bucket
//! rate limits per key ([`rate`]), and serving HTTP/1.1 with every
//! connection bounded ([`serve`]): in number (overall and per client
//! address), in the time its request headers may take (and its idle time
//! between requests), and in how long an answer may wait for a client
//! that stopped reading; and an answer given before a request's body was
//! read reaches a client still sending it ([`linger`]).
#![deny(missing_docs)]

pub mod linger;
pub mod rate;
pub mod serve;
mod stall;

pub use rate::{Buckets, RateLimit, address_key};
pub use serve::{ConnLimits, serve};
