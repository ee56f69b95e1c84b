//! What a tool source's settings must pass before they are used, whatever
//! its kind.

use std::path::Path;

use sandwit_contract::tool_policy::{Auth, ToolSourcePolicy};

/// The shortest secret a source's `auth` may have: one shorter could not
/// be told from ordinary text, so could not be hidden.
pub(crate) const MIN_AUTH_SECRET_LEN: usize = 8;

/// `auth`'s secret, read now; refused when too short to be hidden.
pub(crate) fn read_auth_secret(auth: &Auth, folder: Option<&Path>) -> Result<String, String> {
    let secret = auth
        .secret()
        .read(folder)
        .map_err(|why| format!("its `auth` secret: {why}"))?;
    if secret.len() < MIN_AUTH_SECRET_LEN {
        return Err(format!(
            "its `auth` secret is {} bytes; at least {MIN_AUTH_SECRET_LEN} are needed to hide it in what calls give back",
            secret.len()
        ));
    }
    Ok(secret)
}

/// What `[tools.<id>.methods.<name>]` names that `offered` does not: a
/// control meant for a method that does not exist (a missing `prefix`, a
/// renamed tool) would silently control nothing.
pub(crate) fn unmatched_controls<'a>(
    source: &'a ToolSourcePolicy,
    offered: &[String],
) -> Vec<&'a str> {
    source
        .methods
        .keys()
        .filter(|name| !offered.contains(name))
        .map(String::as_str)
        .collect()
}
