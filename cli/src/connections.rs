//! The connection bounds of the two servers, `sandwit serve` and `sandwit
//! registry serve`: the same flags, the same defaults
//! ([`sandwit_net::ConnLimits`]).

use std::time::Duration;

use clap::Args;
use sandwit_net::ConnLimits;

/// How many connections a server keeps, and how long it waits on each.
#[derive(Args)]
pub struct ConnArgs {
    /// Connections at once from all clients; past it the server accepts
    /// no more until one ends.
    #[arg(long, default_value_t = ConnLimits::default().max_connections, value_name = "N")]
    max_connections: usize,
    /// Connections at once from one client address (IPv6: one /64); past
    /// it a new one is closed at once. Behind a reverse proxy, where every
    /// connection comes from the proxy, set it to --max-connections.
    #[arg(long, default_value_t = ConnLimits::default().max_per_address, value_name = "N")]
    max_connections_per_address: usize,
    /// How long a request's headers may take to arrive, and an idle
    /// connection is kept between requests, in milliseconds.
    #[arg(long, default_value_t = millis(ConnLimits::default().header_read_timeout), value_name = "MS")]
    header_timeout_ms: u64,
    /// How long an answer may wait for a client that reads none of it
    /// before the connection is closed, in milliseconds.
    #[arg(long, default_value_t = millis(ConnLimits::default().write_stall_timeout), value_name = "MS")]
    write_stall_ms: u64,
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl ConnArgs {
    /// The bounds these flags give.
    pub fn limits(&self) -> ConnLimits {
        ConnLimits {
            max_connections: self.max_connections,
            max_per_address: self.max_connections_per_address,
            header_read_timeout: Duration::from_millis(self.header_timeout_ms),
            write_stall_timeout: Duration::from_millis(self.write_stall_ms),
        }
    }
}
