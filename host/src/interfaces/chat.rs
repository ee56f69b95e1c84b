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
                if !is_image_mime_type(&media.mime_type) {
                    return Err(ServiceError::Invalid(format!(
                        "{} is not an image MIME type (`image/` and a subtype)",
                        quote(
                            &self
                                .env
                                .config
                                .redactor
                                .redact_cut(media.mime_type.clone(), 80),
                            100
                        )
                    )));
                }
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
        let event = PluginEvent::Chat { message };
        let full = |max| {
            ServiceError::LimitExceeded(format!(
                "the call's events would hold more than {max} bytes"
            ))
        };
        self.event_room(event.bytes()).map_err(full)?;
        let PluginEvent::Chat { message } = event else {
            unreachable!("made above")
        };
        self.messages += 1;
        if let Some(sink) = &self.env.services.chat {
            sink.deliver(&self.env.id, &ctx, &message)
                .map_err(|e| ServiceError::Unavailable(cut(e, 500)))?;
        }
        self.try_push_event(PluginEvent::Chat { message })
            .map_err(full)
    }
}

/// Whether `mime` is `image/` and a subtype of token characters (RFC 6838),
/// optionally with parameters: what a chat client may be handed as is.
pub(crate) fn is_image_mime_type(mime: &str) -> bool {
    let essence = mime.split(';').next().unwrap_or_default().trim();
    let Some(subtype) = essence.strip_prefix("image/") else {
        return false;
    };
    mime.len() <= 255
        && !subtype.is_empty()
        && subtype
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        && mime.bytes().all(|b| (0x20..0x7f).contains(&b))
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
