//! `sandwit:plugin/chat`: messages to the current chat, recorded as events
//! and handed to the application's [`ChatSink`](crate::ChatSink).

use wasmtime::component::{HasData, Linker};

use crate::bindings::chat_api::{self, Host};
use crate::bindings::wit::{Media as WitMedia, ServiceError};
use crate::capabilities::chat::{
    ChatMessage, MAX_IMAGE_BYTES, MAX_MESSAGE_BYTES, MAX_MESSAGES_PER_CALL,
};
use crate::capabilities::events::PluginEvent;
use crate::capabilities::scope::CallScope;
use sandwit_contract::capability::Capability;
use sandwit_contract::results::check_image_mime_type;
use sandwit_contract::text::cut;
use sandwit_contract::types::Media;

type Answer = wasmtime::Result<Result<(), ServiceError>>;

/// The chat's own state in a call: the messages sent so far.
#[derive(Default)]
pub(crate) struct Sent(usize);

/// The context of `chat`: the call's scope and the messages it sent.
pub(crate) struct ChatCtx<'a> {
    pub(crate) call: CallScope<'a>,
    pub(crate) sent: &'a mut Sent,
}

struct Chat;

impl HasData for Chat {
    type Data<'a> = ChatCtx<'a>;
}

/// Store data that lends the chat's context.
pub(crate) trait ChatData: Send + 'static {
    /// The current call's scope and the messages it sent.
    fn chat(&mut self) -> ChatCtx<'_>;
}

pub(crate) fn add_to_linker<T: ChatData>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    chat_api::add_to_linker::<T, Chat>(linker, |data| data.chat())
}

impl ChatCtx<'_> {
    async fn send(&mut self, op: &str, mut message: ChatMessage) -> Result<(), ServiceError> {
        let call = &mut self.call;
        call.meter.charge(message.bytes());
        call.require(Capability::Chat, || format!("chat.{op}"))?;
        let Some(ctx) = call.ctx else {
            return Err(ServiceError::Unavailable(
                "there is no chat while the plugin describes itself".into(),
            ));
        };
        if self.sent.0 >= MAX_MESSAGES_PER_CALL {
            return Err(ServiceError::LimitExceeded(format!(
                "sent more than {MAX_MESSAGES_PER_CALL} messages in one call"
            )));
        }
        let redactor = &call.env.config.redactor;
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
                redactor.redact_in_place(text);
            }
            ChatMessage::Image(media) => {
                check_image_mime_type(&media.mime_type).map_err(ServiceError::Invalid)?;
                if media.data.len() > MAX_IMAGE_BYTES {
                    return Err(ServiceError::LimitExceeded(format!(
                        "the image is {} bytes, more than the limit of {MAX_IMAGE_BYTES} bytes",
                        media.data.len()
                    )));
                }
                redactor.redact_media(media);
            }
        }
        // Room is checked before the message is delivered, so a message
        // delivered is always one the call's events record.
        let event = PluginEvent::Chat { message };
        let full =
            |full| ServiceError::LimitExceeded(format!("the call's events would hold {full}"));
        call.events.room(&event).map_err(full)?;
        self.sent.0 += 1;
        if let (Some(sink), PluginEvent::Chat { message }) = (&call.env.services.chat, &event) {
            sink.deliver(&call.env.id, ctx, message)
                .await
                .map_err(|e| ServiceError::Unavailable(cut(e, 500)))?;
        }
        call.events.push(event).map_err(full)
    }
}

impl Host for ChatCtx<'_> {
    async fn send_text(&mut self, text: String) -> Answer {
        Ok(self.send("send_text", ChatMessage::Text(text)).await)
    }

    async fn send_image(&mut self, image: WitMedia) -> Answer {
        let media = Media {
            mime_type: image.mime_type,
            data: image.data,
        };
        Ok(self.send("send_image", ChatMessage::Image(media)).await)
    }

    async fn push_system(&mut self, message: String, trigger_agent: bool) -> Answer {
        let message = ChatMessage::System {
            message,
            trigger_agent,
        };
        Ok(self.send("push_system", message).await)
    }
}
