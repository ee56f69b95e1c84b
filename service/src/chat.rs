//! The agent context a request names: its chat key and user id, checked
//! against the bounds and the caller's namespace.

use sandwit::AgentCtx;

use crate::auth::Caller;
use crate::error::ApiError;

/// The longest chat key or user id a request may give, in bytes. They are
/// names (Nekro Agent's are like `group_12345`); the bound keeps what
/// plugins receive, store under and echo into prompts small.
pub const MAX_KEY_BYTES: usize = 256;

/// The context of `chat_key` (not empty) and `user_id`, each at most
/// [`MAX_KEY_BYTES`] (an error of `code`, 400, names the field otherwise)
/// and each within the namespace of `caller` (else 403
/// `outside-namespace`); the context carries that namespace.
pub fn agent_ctx(
    caller: &Caller,
    chat_key: &str,
    user_id: Option<String>,
    code: &'static str,
) -> Result<AgentCtx, ApiError> {
    if chat_key.is_empty() {
        return Err(ApiError::bad_request(code, "`chat_key` is empty"));
    }
    for (field, value) in [
        ("chat_key", Some(chat_key)),
        ("user_id", user_id.as_deref()),
    ] {
        if let Some(value) = value
            && value.len() > MAX_KEY_BYTES
        {
            return Err(ApiError::bad_request(
                code,
                format!(
                    "`{field}` is {} bytes, more than the limit of {MAX_KEY_BYTES}",
                    value.len()
                ),
            ));
        }
    }
    caller.require_in_namespace("chat_key", chat_key)?;
    if let Some(user_id) = &user_id {
        caller.require_in_namespace("user_id", user_id)?;
    }
    Ok(AgentCtx {
        user_id,
        namespace: caller.namespace.clone(),
        ..AgentCtx::new(chat_key)
    })
}
