//! Outbound HTTP for plugins granted `http:<host>`: `wasi:http` with
//! sandwit's allowlist, caps and deadline (`interface`), over connections the
//! host makes itself to the address it resolved and checked (`outbound`);
//! and the same connections for requests the host makes on a tool source's
//! behalf (`host_client`).

pub(crate) mod host_client;
pub(crate) mod interface;
pub(crate) mod outbound;
