//! `messenger`: sends messages to the current chat through the host's `chat`
//! service, as a behavior: the script goes on and the confirmation is
//! recorded as a system message.

use sandwit_sdk::{AgentCtx, Error, behavior, chat};

/// The longest message accepted, in characters.
const MAX_MESSAGE_CHARS: usize = 4_000;

/// Send a text message to the current chat.
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
    chat::send_text(&text)?;
    let channel = ctx
        .channel_name
        .as_deref()
        .or(ctx.channel_id.as_deref())
        .unwrap_or(&ctx.chat_key);
    sandwit_sdk::log::info(&format!("sent {chars} characters to {channel}"));
    Ok(format!("Message sent to channel {channel}: {text}"))
}

/// Ask the agent to follow up on something in a new round.
///
/// Adds a system message to the conversation that the agent answers.
///
/// Args:
///     note: What the agent should follow up on.
///
/// Returns:
///     str: A confirmation.
///
/// Example:
///     >>> remind_agent("Check the deploy status in an hour.")
#[behavior]
fn remind_agent(note: String) -> Result<String, Error> {
    if note.trim().is_empty() {
        return Err(Error::invalid_arguments("the note is empty"));
    }
    chat::push_system(&format!("Reminder: {note}"), true)?;
    Ok(format!("The agent will follow up on: {note}"))
}

sandwit_sdk::plugin! {
    id: "messenger",
    name: "Messenger",
    version: env!("CARGO_PKG_VERSION"),
    author: "sandwit",
    description: "Sends messages to the current chat.",
    capabilities: ["chat"],
    methods: [send_channel_message, remind_agent],
}
