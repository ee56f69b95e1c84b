//! `sandwit:plugin/chat`: messages to the current chat, recorded as events
//! and handed to the application's [`ChatSink`](crate::ChatSink).

use crate::bindings::chat_api::Host;
use crate::bindings::wit::{Media as WitMedia, ServiceError};
use crate::capability::Capability;
use crate::chat::{ChatMessage, MAX_IMAGE_BYTES, MAX_MESSAGE_BYTES, MAX_MESSAGES_PER_CALL};
use crate::error::{cut, quote};
use crate::state::{PluginEvent, PluginState};
use crate::types::Media;

type Answer = wasmtime::Result<Result<(), ServiceError>>;

impl PluginState {
    fn send(&mut self, op: &str, mut message: ChatMessage) -> Result<(), ServiceError> {
        self.meter.charge(message.bytes());
        self.require(Capability::Chat, || format!("chat.{op}"))?;
        let Some(ctx) = self.ctx.clone() else {
            return Err(ServiceError::Unavailable(
                "there is no chat while the plugin describes itself".into(),
            ));
        };
        if self.messages >= MAX_MESSAGES_PER_CALL {
            return Err(ServiceError::LimitExceeded(format!(
                "sent more than {MAX_MESSAGES_PER_CALL} messages in one call"
            )));
        }
        match &mut message {
            ChatMessage::Text(text) | ChatMessage::System { message: text, .. } => {
                if text.trim().is_empty() {
                    return Err(ServiceError::Invalid("the message is empty".into()));
                }
                if text.len() > MAX_MESSAGE_BYTES {
                    return Err(ServiceError::LimitExceeded(format!(
                        "the message is {} bytes, more than the limit of {MAX_MESSAGE_BYTES} bytes",
                        text.len()
                    )));
                }
                self.env.config.redactor.redact_in_place(text);
            }
            ChatMessage::Image(media) => {
                check_image_mime_type(&media.mime_type).map_err(ServiceError::Invalid)?;
                if media.data.len() > MAX_IMAGE_BYTES {
                    return Err(ServiceError::LimitExceeded(format!(
                        "the image is {} bytes, more than the limit of {MAX_IMAGE_BYTES} bytes",
                        media.data.len()
                    )));
                }
            }
        }
        if let ChatMessage::Image(media) = &mut message {
            self.env.config.redactor.redact_media(media);
        }
        // Room is checked before the message is delivered, so a message
        // delivered is always one the call's events record.
        let event = PluginEvent::Chat { message };
        let full =
            |full| ServiceError::LimitExceeded(format!("the call's events would hold {full}"));
        self.events.room(&event).map_err(full)?;
        self.messages += 1;
        if let (Some(sink), PluginEvent::Chat { message }) = (&self.env.services.chat, &event) {
            sink.deliver(&self.env.id, &ctx, message)
                .map_err(|e| ServiceError::Unavailable(cut(e, 500)))?;
        }
        self.events.push(event).map_err(full)
    }
}

/// Ok if `mime` is `image/` and a subtype of token characters (RFC 6838),
/// optionally with parameters: what a chat client may be handed as is;
/// otherwise what is wrong, quoting at most 80 bytes of it.
pub(crate) fn check_image_mime_type(mime: &str) -> Result<(), String> {
    let essence = mime.split(';').next().unwrap_or_default().trim();
    let subtype = essence.strip_prefix("image/").unwrap_or_default();
    let ok = mime.len() <= 255
        && !subtype.is_empty()
        && subtype
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        && mime.bytes().all(|b| (0x20..0x7f).contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{} is not an image MIME type (`image/` and a subtype)",
            quote(mime, 80)
        ))
    }
}

impl Host for PluginState {
    fn send_text(&mut self, text: String) -> Answer {
        Ok(self.send("send_text", ChatMessage::Text(text)))
    }

    fn send_image(&mut self, image: WitMedia) -> Answer {
        let media = Media {
            mime_type: image.mime_type,
            data: image.data,
        };
        Ok(self.send("send_image", ChatMessage::Image(media)))
    }

    fn push_system(&mut self, message: String, trigger_agent: bool) -> Answer {
        Ok(self.send(
            "push_system",
            ChatMessage::System {
                message,
                trigger_agent,
            },
        ))
    }
}
