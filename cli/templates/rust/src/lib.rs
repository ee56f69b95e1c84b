//! `{{id}}`: a sandwit plugin. Build it with `sandwit plugin build`, try it
//! with `sandwit call <component> greet '{"name": "Ada"}'`.

use sandwit_sdk::{AgentCtx, tool};

/// Greet someone by name.
///
/// The doc comment is the docstring the AI reads; its first paragraph is the
/// method's one-line description.
///
/// Args:
///     name: Who to greet.
///
/// Returns:
///     str: The greeting.
///
/// Example:
///     >>> greet("Ada")
///     'Hello, Ada!'
#[tool]
fn greet(ctx: &AgentCtx, name: String) -> String {
    let _ = ctx;
    format!("Hello, {name}!")
}

sandwit_sdk::plugin! {
    id: "{{id}}",
    name: "{{id}}",
    version: "0.1.0",
    author: "you",
    description: "Greets people.",
    methods: [greet],
}

#[cfg(test)]
mod tests {
    #[test]
    fn greets_by_name() {
        let ctx = sandwit_sdk::AgentCtx {
            chat_key: "chat".into(),
            user_id: None,
            channel_id: None,
            channel_name: None,
            channel_type: None,
            adapter_key: None,
        };
        assert_eq!(super::greet(&ctx, "Ada".into()), "Hello, Ada!");
    }
}
