//! `sandwit:plugin/chat`: messages to the current chat, recorded as events
//! and handed to the application's [`ChatSink`](crate::ChatSink).

use crate::bindings::chat_api::Host;
use crate::bindings::wit::{Media as WitMedia, ServiceError};
use crate::capability::Capability;
use crate::chat::{ChatMessage, MAX_IMAGE_BYTES, MAX_MESSAGE_BYTES, MAX_MESSAGES_PER_CALL};
use crate::state::{PluginEvent, PluginState};
use crate::types::Media;

type Answer = wasmtime::Result<Result<(), ServiceError>>;

impl PluginState {
    fn send(&mut self, op: &str, mut message: ChatMessage) -> Result<(), ServiceError> {
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
                if !media.mime_type.starts_with("image/") {
                    return Err(ServiceError::Invalid(format!(
                        "`{}` is not an image MIME type",
                        media.mime_type
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
        self.messages += 1;
        if let Some(sink) = &self.env.services.chat {
            sink.deliver(&self.env.id, &ctx, &message)
                .map_err(ServiceError::Unavailable)?;
        }
        self.events.push(PluginEvent::Chat { message });
        Ok(())
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
