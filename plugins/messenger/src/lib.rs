//! `messenger`: a behavior that sends a message to the current channel. Until
//! the chat capability lands, the message is the behavior's system message,
//! which the host records.

use sandwit_sdk::{AgentCtx, Error, behavior};

/// The longest message accepted, in characters.
const MAX_MESSAGE_CHARS: usize = 4_000;

/// Send a text message to the current chat channel.
///
/// The script goes on; the confirmation is recorded as a system message.
///
/// Args:
///     text: The message to send (1 to 4000 characters).
///
/// Returns:
///     str: A confirmation naming the channel.
///
/// Example:
///     >>> send_channel_message("The build is green.")
#[behavior]
fn send_channel_message(ctx: &AgentCtx, text: String) -> Result<String, Error> {
    let chars = text.chars().count();
    if text.trim().is_empty() {
        return Err(Error::invalid_arguments("the message is empty"));
    }
    if chars > MAX_MESSAGE_CHARS {
        return Err(Error::invalid_arguments(format!(
            "the message has {chars} characters, more than {MAX_MESSAGE_CHARS}"
        )));
    }
    let channel = ctx
        .channel_name
        .as_deref()
        .or(ctx.channel_id.as_deref())
        .unwrap_or(&ctx.chat_key);
    sandwit_sdk::log::info(&format!("sending {chars} characters to {channel}"));
    Ok(format!("Message sent to channel {channel}: {text}"))
}

sandwit_sdk::plugin! {
    id: "messenger",
    name: "Messenger",
    version: env!("CARGO_PKG_VERSION"),
    author: "sandwit",
    description: "Sends messages to the current chat channel.",
    methods: [send_channel_message],
}
