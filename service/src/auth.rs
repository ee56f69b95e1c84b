//! The caller of a request: the token of its `Authorization: Bearer`
//! header, found among the server's ([`crate::tokens`]), and what the
//! token may name and do.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};

use crate::error::ApiError;
use crate::state::Shared;
use crate::tokens::Role;

/// The caller of a request, from its `Authorization: Bearer` token.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's name.
    pub name: String,
    /// The token's role.
    pub role: Role,
    /// The token's namespace: the prefix of every chat key and user id it
    /// may name; `None` for a trusted backend, which may name any.
    pub namespace: Option<String>,
}

impl Caller {
    /// Checks that `value`, the request's `field` (a chat key or user id),
    /// is within the caller's namespace; the message names the field, what
    /// is wrong with the value and the namespace.
    pub fn check_in_namespace(&self, field: &str, value: &str) -> Result<(), String> {
        match &self.namespace {
            Some(prefix) if !value.starts_with(prefix.as_str()) => Err(format!(
                "`{field}` {value:?} does not start with `{prefix}`, the namespace of the \
                 token `{}`",
                self.name
            )),
            _ => Ok(()),
        }
    }

    /// [`Caller::check_in_namespace`] as a 403 `outside-namespace`.
    pub fn require_in_namespace(&self, field: &str, value: &str) -> Result<(), ApiError> {
        self.check_in_namespace(field, value)
            .map_err(|message| ApiError::new(StatusCode::FORBIDDEN, "outside-namespace", message))
    }

    /// Refuses a caller who is not an admin.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        match self.role {
            Role::Admin => Ok(()),
            Role::User => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "admin-only",
                format!(
                    "the token `{}` is a user token; this needs an admin's",
                    self.name
                ),
            )),
        }
    }
}

impl FromRequestParts<Shared> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Shared,
    ) -> Result<Self, Self::Rejection> {
        let unauthorized = |message: &str| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                message.to_string(),
            )
        };
        let value = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("no `Authorization: Bearer <token>` header"))?;
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| unauthorized("the Authorization header is not `Bearer <token>`"))?;
        let entry = state
            .config
            .tokens
            .find(token.trim())
            .ok_or_else(|| unauthorized("the token is not one this server accepts"))?;
        Ok(Caller {
            name: entry.name.clone(),
            role: entry.role,
            namespace: entry.namespace.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespaced_caller_names_only_its_own_chats_and_users() {
        let caller = Caller {
            name: "acme".into(),
            role: Role::User,
            namespace: Some("acme:".into()),
        };
        assert!(caller.check_in_namespace("chat_key", "acme:room").is_ok());
        let err = caller
            .check_in_namespace("user_id", "globex:bob")
            .unwrap_err();
        assert!(
            err.contains("`user_id` \"globex:bob\" does not start with `acme:`"),
            "{err}"
        );
        let err = caller.require_in_namespace("chat_key", "x").unwrap_err();
        assert_eq!(err.code(), "outside-namespace");
        let backend = Caller {
            namespace: None,
            ..caller
        };
        assert!(
            backend
                .check_in_namespace("chat_key", "globex:room")
                .is_ok()
        );
    }
}
