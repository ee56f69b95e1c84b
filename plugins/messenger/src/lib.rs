//! `messenger`: sends messages to the current chat through the host's `chat`
//! service, as a behavior: the script goes on and the confirmation is
//! recorded as a system message.

use sandwit_sdk::{AgentCtx, Bytes, Error, behavior, chat};

/// The longest message accepted, in characters.
const MAX_MESSAGE_CHARS: usize = 4_000;
/// The largest image accepted, in bytes.
const MAX_IMAGE_BYTES: usize = 4 << 20;

/// What the chat is called: its channel's name, else its id, else its key.
fn channel(ctx: &AgentCtx) -> &str {
    ctx.channel_name
        .as_deref()
        .or(ctx.channel_id.as_deref())
        .unwrap_or(&ctx.chat_key)
}

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
    let channel = channel(ctx);
    sandwit_sdk::log::info(&format!("sent {chars} characters to {channel}"));
    Ok(format!("Message sent to channel {channel}: {text}"))
}

/// Post an image (PNG or JPEG bytes) with a caption to the current chat.
///
/// The script goes on; the confirmation is recorded as a system message.
///
/// Args:
///     image: The image's bytes, e.g. `open("chart.png", "rb").read()` (at most 4 MiB).
///     caption: A line sent with the image.
///
/// Returns:
///     str: A confirmation naming the channel and the image's size.
///
/// Example:
///     >>> send_channel_image(open("chart.png", "rb").read(), "Units sold")
#[behavior]
fn send_channel_image(ctx: &AgentCtx, image: Bytes, caption: String) -> Result<String, Error> {
    let data = image.0;
    let mime_type = if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if data.starts_with(&[0xFF, 0xD8, 0xFF]) {
        "image/jpeg"
    } else {
        return Err(Error::invalid_arguments(
            "the image is neither a PNG nor a JPEG",
        ));
    };
    if data.len() > MAX_IMAGE_BYTES {
        return Err(Error::invalid_arguments(format!(
            "the image has {} bytes, more than {MAX_IMAGE_BYTES}",
            data.len()
        )));
    }
    let bytes = data.len();
    chat::send_image(mime_type, data)?;
    if !caption.trim().is_empty() {
        chat::send_text(&caption)?;
    }
    let channel = channel(ctx);
    sandwit_sdk::log::info(&format!("sent a {bytes}-byte {mime_type} to {channel}"));
    Ok(format!(
        "Image sent to channel {channel}: {caption} ({bytes} bytes)"
    ))
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
    description: "Sends messages and images to the current chat.",
    capabilities: ["chat"],
    methods: [send_channel_message, send_channel_image, remind_agent],
}
