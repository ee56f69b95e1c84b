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
        let sent = async { Ok(self.send("send_text", ChatMessage::Text(text)).await) };
        crate::trace::host_call("chat.send_text", sent).await
    }

    async fn send_image(&mut self, image: WitMedia) -> Answer {
        let media = Media {
            mime_type: image.mime_type,
            data: image.data,
        };
        let sent = async { Ok(self.send("send_image", ChatMessage::Image(media)).await) };
        crate::trace::host_call("chat.send_image", sent).await
    }

    async fn push_system(&mut self, message: String, trigger_agent: bool) -> Answer {
        let message = ChatMessage::System {
            message,
            trigger_agent,
        };
        let sent = async { Ok(self.send("push_system", message).await) };
        crate::trace::host_call("chat.push_system", sent).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::capabilities::config::PluginConfig;
    use crate::capabilities::env::Services;
    use crate::capabilities::events::CallEvents;
    use crate::capabilities::testing::{Inbox, TestCall, config, ctx, env, refusal};

    type Reply = Result<(), (&'static str, String)>;

    /// A call of plugin `messenger` granted `caps` in `chat-1`, its
    /// messages delivered to `inbox` if given.
    fn call(caps: &[&str], config: PluginConfig, inbox: Option<&Arc<Inbox>>) -> TestCall {
        let mut services = Services::for_tests();
        services.chat = inbox.map(|i| i.clone() as Arc<dyn crate::capabilities::chat::ChatSink>);
        let env = env("messenger", caps, config, services);
        TestCall::new(&env, Some(ctx("chat-1", Some("u1"))))
    }

    /// Sends `message` as the host function for its kind does.
    async fn send(call: &mut TestCall, sent: &mut Sent, message: ChatMessage) -> Reply {
        let mut chat = ChatCtx {
            call: call.scope(),
            sent,
        };
        let answer = match message {
            ChatMessage::Text(text) => chat.send_text(text).await,
            ChatMessage::Image(media) => {
                let image = WitMedia {
                    mime_type: media.mime_type,
                    data: media.data,
                };
                chat.send_image(image).await
            }
            ChatMessage::System {
                message,
                trigger_agent,
            } => chat.push_system(message, trigger_agent).await,
        };
        answer.unwrap().map_err(refusal)
    }

    fn text(text: &str) -> ChatMessage {
        ChatMessage::Text(text.into())
    }

    fn image(mime_type: &str, data: Vec<u8>) -> ChatMessage {
        ChatMessage::Image(Media {
            mime_type: mime_type.into(),
            data,
        })
    }

    fn system(message: &str) -> ChatMessage {
        ChatMessage::System {
            message: message.into(),
            trigger_agent: true,
        }
    }

    /// The chat messages among the call's events, leaving none.
    fn recorded(call: &mut TestCall) -> Vec<ChatMessage> {
        call.take_events()
            .into_iter()
            .filter_map(|e| match e {
                PluginEvent::Chat { message } => Some(message),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_plugin_without_the_chat_grant_is_refused_and_nothing_is_delivered() {
        let inbox = Arc::new(Inbox::default());
        let mut call = call(&["store"], PluginConfig::default(), Some(&inbox));
        let mut sent = Sent::default();
        let denied = Err((
            "denied",
            "plugin `messenger` was not granted the capability `chat`".to_string(),
        ));
        for message in [text("hi"), image("image/png", vec![1]), system("hi")] {
            assert_eq!(send(&mut call, &mut sent, message).await, denied);
        }
        // The grant is checked before the message: an empty one is refused
        // as not granted.
        assert_eq!(send(&mut call, &mut sent, text("")).await, denied);
        let chat = |op: &str| ("chat".to_string(), format!("chat.{op}"));
        assert_eq!(
            call.take_denied(),
            [
                chat("send_text"),
                chat("send_image"),
                chat("push_system"),
                chat("send_text")
            ]
        );
        assert!(inbox.messages().is_empty());
        assert_eq!(sent.0, 0, "refusals count against no cap");
    }

    #[tokio::test]
    async fn messages_are_checked_before_they_are_delivered() {
        let inbox = Arc::new(Inbox::default());
        let mut call = call(&["chat"], PluginConfig::default(), Some(&inbox));
        let mut sent = Sent::default();
        for blank in [text(""), text(" \n\t"), system("  ")] {
            let refused = send(&mut call, &mut sent, blank).await;
            assert_eq!(refused, Err(("invalid", "the message is empty".into())));
        }
        let longest = "x".repeat(MAX_MESSAGE_BYTES);
        let over = format!("{longest}y");
        for message in [text(&over), system(&over)] {
            let refused = send(&mut call, &mut sent, message).await;
            let says = format!(
                "the message is {} bytes, more than the limit of {MAX_MESSAGE_BYTES} bytes",
                MAX_MESSAGE_BYTES + 1
            );
            assert_eq!(refused, Err(("limit-exceeded", says)));
        }
        for mime in ["text/plain", "image/", "image/png\n"] {
            let (kind, message) = send(&mut call, &mut sent, image(mime, vec![1]))
                .await
                .unwrap_err();
            assert_eq!(kind, "invalid", "{mime:?}: {message}");
            assert!(message.contains("not an image MIME type"), "{message}");
        }
        let huge = image("image/png", vec![0; MAX_IMAGE_BYTES + 1]);
        let (kind, message) = send(&mut call, &mut sent, huge).await.unwrap_err();
        assert_eq!(kind, "limit-exceeded");
        assert!(
            message.contains(&format!("limit of {MAX_IMAGE_BYTES} bytes")),
            "{message}"
        );
        assert!(inbox.messages().is_empty(), "nothing refused was delivered");
        assert!(recorded(&mut call).is_empty(), "nor recorded");

        // At the caps, delivered and recorded.
        let at_caps = [
            text(&longest),
            system(&longest),
            image("image/png; q=1", vec![0; MAX_IMAGE_BYTES]),
        ];
        for message in at_caps.clone() {
            assert_eq!(send(&mut call, &mut sent, message).await, Ok(()));
        }
        let delivered: Vec<ChatMessage> = inbox.messages().into_iter().map(|m| m.2).collect();
        assert_eq!(delivered, at_caps);
        assert_eq!(recorded(&mut call), at_caps);
    }

    #[tokio::test]
    async fn a_call_delivers_at_most_its_cap_of_messages() {
        let inbox = Arc::new(Inbox::default());
        let mut call = call(&["chat"], PluginConfig::default(), Some(&inbox));
        let mut sent = Sent::default();
        // Refused messages do not count.
        for _ in 0..3 {
            send(&mut call, &mut sent, text("")).await.unwrap_err();
        }
        for i in 0..MAX_MESSAGES_PER_CALL {
            let message = text(&format!("message {i}"));
            assert_eq!(send(&mut call, &mut sent, message).await, Ok(()), "{i}");
        }
        let over = Err((
            "limit-exceeded",
            format!("sent more than {MAX_MESSAGES_PER_CALL} messages in one call"),
        ));
        assert_eq!(send(&mut call, &mut sent, text("one more")).await, over);
        assert_eq!(send(&mut call, &mut sent, system("one more")).await, over);
        let delivered = inbox.messages();
        assert_eq!(delivered.len(), MAX_MESSAGES_PER_CALL);
        assert!(
            delivered
                .iter()
                .all(|(plugin, chat, _)| plugin == "messenger" && chat == "chat-1"),
            "{delivered:?}"
        );
        // The next call (its own count) sends again.
        let mut next = Sent::default();
        assert_eq!(send(&mut call, &mut next, text("next call")).await, Ok(()));
    }

    #[tokio::test]
    async fn secrets_are_hidden_in_what_is_delivered_and_recorded() {
        let inbox = Arc::new(Inbox::default());
        let config = config(
            json!({"api_key": "tok-123456", "colour": "blue"}),
            &["api_key"],
        );
        let mut call = call(&["chat"], config, Some(&inbox));
        let mut sent = Sent::default();
        for message in [
            text("the key is tok-123456, the colour blue"),
            system("tok-123456"),
            image("image/tok-123456", b"\x89PNGtok-123456".to_vec()),
        ] {
            assert_eq!(send(&mut call, &mut sent, message).await, Ok(()));
        }
        let hidden = [
            text("the key is [secret], the colour blue"),
            system("[secret]"),
            image("image/[secret]", b"\x89PNG[secret]".to_vec()),
        ];
        let delivered: Vec<ChatMessage> = inbox.messages().into_iter().map(|m| m.2).collect();
        assert_eq!(delivered, hidden);
        assert_eq!(recorded(&mut call), hidden);
    }

    #[tokio::test]
    async fn a_message_the_calls_events_cannot_hold_is_never_delivered() {
        let inbox = Arc::new(Inbox::default());
        let mut call = call(&["chat"], PluginConfig::default(), Some(&inbox));
        call.events = CallEvents::new(300);
        let mut sent = Sent::default();
        let hundred = "x".repeat(100);
        assert_eq!(send(&mut call, &mut sent, text(&hundred)).await, Ok(()));
        let full = Err((
            "limit-exceeded",
            "the call's events would hold more than 300 bytes of events".to_string(),
        ));
        assert_eq!(send(&mut call, &mut sent, text(&hundred)).await, full);
        assert_eq!(inbox.messages().len(), 1);
        assert_eq!(recorded(&mut call), [text(&hundred)]);
    }

    #[tokio::test]
    async fn a_failing_sink_is_unavailable_to_the_plugin_and_nothing_is_recorded() {
        let inbox = Arc::new(Inbox {
            failure: Some(format!("the chat is closed {}", "!".repeat(2_000))),
            ..Inbox::default()
        });
        let mut call = call(&["chat"], PluginConfig::default(), Some(&inbox));
        let mut sent = Sent::default();
        let (kind, message) = send(&mut call, &mut sent, text("hi")).await.unwrap_err();
        assert_eq!(kind, "unavailable");
        assert!(message.starts_with("the chat is closed !!!"), "{message}");
        assert!(
            message.len() <= 500 + '…'.len_utf8(),
            "cut: {}",
            message.len()
        );
        assert!(
            recorded(&mut call).is_empty(),
            "a message not delivered is not recorded"
        );
    }

    #[tokio::test]
    async fn without_a_sink_messages_are_recorded_and_while_describing_there_is_no_chat() {
        let mut call = call(&["chat"], PluginConfig::default(), None);
        let mut sent = Sent::default();
        assert_eq!(send(&mut call, &mut sent, text("hi")).await, Ok(()));
        assert_eq!(recorded(&mut call), [text("hi")]);

        call.ctx = None;
        let (kind, message) = send(&mut call, &mut sent, text("hi")).await.unwrap_err();
        assert_eq!(kind, "unavailable");
        assert!(message.contains("describes itself"), "{message}");
        assert!(recorded(&mut call).is_empty());
    }
}
