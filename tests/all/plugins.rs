//! Each example plugin's methods through the host: all four kinds.

use sandwit::{ContentPart, MethodKind, MethodResult, Value};
use serde_json::json;

use crate::common::{args, artifacts, ctx, host, load};

#[tokio::test]
async fn calc_sums_and_tells_the_time() {
    let calc = load(host(), artifacts::CALC).await;
    let sum = calc
        .call(&ctx(), "calculate_sum", args(json!({"num1": 1, "num2": 2})))
        .await
        .unwrap();
    assert_eq!(sum, MethodResult::Tool(Value::Int(3)));

    let MethodResult::Tool(time) = calc
        .call(&ctx(), "get_current_time", args(json!({})))
        .await
        .unwrap()
    else {
        panic!("not a tool result")
    };
    let Some(Value::Int(unix)) = time.get("unix") else {
        panic!("no unix time in {time:?}")
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - unix).abs() < 60, "{unix} vs {now}");
    let Some(Value::Text(iso)) = time.get("iso") else {
        panic!("no iso time in {time:?}")
    };
    assert_eq!(iso.len(), 20, "{iso}");
    assert!(iso.ends_with('Z') && iso.as_bytes()[10] == b'T', "{iso}");
}

#[tokio::test]
async fn knowledge_hands_passages_to_the_ai() {
    let kb = load(host(), artifacts::KNOWLEDGE).await;
    let result = kb
        .call(
            &ctx(),
            "search_knowledge_base",
            args(json!({"query": "fuel budget", "max_results": 1})),
        )
        .await
        .unwrap();
    let MethodResult::Agent(text) = result else {
        panic!("not an agent result: {result:?}")
    };
    assert!(text.contains("1. Fuel"), "{text}");
    assert!(!text.contains("2."), "max_results=1 gave more: {text}");
}

#[tokio::test]
async fn messenger_sends_to_the_chat_returns_a_system_message_and_logs() {
    let messenger = load(host(), artifacts::MESSENGER).await;
    let budget = sandwit::Budget::from_limits(host().limits());
    let report = messenger
        .call_within(
            &ctx(),
            "send_channel_message",
            args(json!({"text": "deploy done"})),
            budget,
        )
        .await;
    assert_eq!(
        report.result.unwrap(),
        MethodResult::Behavior("Message sent to channel #general: deploy done".into())
    );
    assert_eq!(
        report.events,
        [
            sandwit::PluginEvent::Chat {
                message: sandwit::ChatMessage::Text("deploy done".into())
            },
            sandwit::PluginEvent::Log(sandwit::LogLine {
                level: "info",
                message: "sent 11 characters to #general".into()
            }),
        ]
    );
    assert!(report.fuel_used > 0);
}

#[tokio::test]
async fn imagegen_draws_a_real_png() {
    let gen_ = load(host(), artifacts::IMAGEGEN).await;
    let draw = async |topic: &str| {
        let result = gen_
            .call(
                &ctx(),
                "generate_image_and_comment",
                args(json!({ "topic": topic })),
            )
            .await
            .unwrap();
        let MethodResult::MultimodalAgent(parts) = result else {
            panic!("not multimodal: {result:?}")
        };
        parts
    };
    let parts = draw("sunrise over the sea").await;
    assert_eq!(parts.len(), 2);
    let ContentPart::Text(comment) = &parts[0] else {
        panic!("first part is not text")
    };
    assert!(comment.contains("sunrise over the sea"));
    let ContentPart::Image(media) = &parts[1] else {
        panic!("second part is not an image")
    };
    assert_eq!(media.mime_type, "image/png");
    let decoder = png::Decoder::new(std::io::Cursor::new(media.data.clone()));
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).expect("PNG pixel data");
    assert_eq!((info.width, info.height), (128, 128));
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let distinct: std::collections::HashSet<_> = pixels.chunks(3).collect();
    assert!(distinct.len() > 100, "a pattern, not a flat image");

    let again = draw("sunrise over the sea").await;
    assert_eq!(again, parts, "same topic, same image");
    let other = draw("a storm").await;
    assert_ne!(other[1], parts[1], "another topic, another image");
}

#[tokio::test]
async fn manifests_carry_kinds_schemas_and_docstrings() {
    let cases = [
        (artifacts::CALC, "calculate_sum", MethodKind::Tool),
        (
            artifacts::KNOWLEDGE,
            "search_knowledge_base",
            MethodKind::Agent,
        ),
        (
            artifacts::MESSENGER,
            "send_channel_message",
            MethodKind::Behavior,
        ),
        (
            artifacts::IMAGEGEN,
            "generate_image_and_comment",
            MethodKind::MultimodalAgent,
        ),
    ];
    for (path, name, kind) in cases {
        let plugin = load(host(), path).await;
        let method = plugin.manifest().method(name).unwrap();
        assert_eq!(method.kind, kind, "{name}");
        assert!(method.docstring.contains("Args:") || method.params.is_empty());
        assert!(method.docstring.contains("Example:"), "{name}");
        assert!(!method.description.is_empty());
    }
    let calc = load(host(), artifacts::CALC).await;
    let sum = calc.manifest().method("calculate_sum").unwrap();
    assert_eq!(sum.params[0].name, "num1");
    assert_eq!(sum.params[0].schema, json!({"type": "integer"}));
    assert!(sum.params.iter().all(|p| p.required));
    assert_eq!(sum.description, "Add two integers and return their sum.");
    assert!(
        sum.docstring
            .contains("\n\nArgs:\n    num1: The first integer.")
    );

    let kb = load(host(), artifacts::KNOWLEDGE).await;
    let search = kb.manifest().method("search_knowledge_base").unwrap();
    assert!(!search.params[1].required, "Option<u32> is optional");
}
