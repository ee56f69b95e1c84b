//! How the service runs: what its operator chose ([`Config`]).

use std::path::PathBuf;

use sandwit_net::RateLimit;

use crate::mcp_sessions::McpSessionLimits;
use crate::tokens::Tokens;

/// How the service runs. Its runs wait in the host's run queue, as the
/// host's [`RunSlots`](sandwit::RunSlots) say (`HostBuilder::run_slots`):
/// each takes a place there at once or is refused with 503, and the calls'
/// queue and the MCP exchanges answered at once are bounded by the same.
#[derive(Debug, Clone)]
pub struct Config {
    /// The folder of `.wasm` plugins offered (and reloaded on request).
    pub plugin_dir: PathBuf,
    /// The tokens accepted.
    pub tokens: Tokens,
    /// The largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Requests a token may make, on every endpoint but `/healthz`,
    /// `/readyz` and `/openapi.json` ([`crate::DEFAULT_TOKEN_RATE`] by
    /// default).
    pub rate: RateLimit,
    /// The bounds on MCP sessions over HTTP.
    pub mcp_sessions: McpSessionLimits,
    /// Whether `/readyz` answers 200 before the small interpreter reuses
    /// its prepared interpreters (`PythonSandbox::reuses_interpreters`;
    /// until then every run instantiates one, several times slower). Set
    /// it for a host that prepares none (`HostBuilder::prepared_interpreters(0)`):
    /// reuse never comes there. Runs are taken either way.
    pub ready_before_reuse: bool,
}
