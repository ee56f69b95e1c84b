//! The example Python plugins (sdk/python/examples), built with the Python
//! SDK against the 0.2 world: their methods from sandboxed AI code with the
//! chat, config and store capabilities, and their lifecycle hooks.

use sandwit::{
    AgentCtx, CallErrorKind, ContentPart, Host, MethodResult, Plugin, PluginSet, Policy, RunStatus,
};
use tokio::sync::OnceCell;

use crate::common::{args, artifacts, cache_dir, ctx, digest, host, load};

/// A host granting the Python examples what they ask for: dice rolls d1s.
fn granting_host() -> &'static Host {
    static HOST: std::sync::OnceLock<Host> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let policy = Policy::from_toml(&format!(
            r#"
            [plugins.dice]
            sha256 = ["{}"]
            grant = ["chat", "config"]
            config = {{ DEFAULT_SIDES = 1 }}

            [plugins.memo]
            sha256 = ["{}"]
            grant = ["store"]
            "#,
            digest(artifacts::DICE),
            digest(artifacts::MEMO),
        ))
        .unwrap();
        Host::builder()
            .cache_dir(cache_dir())
            .policy(policy)
            .build()
            .unwrap()
    })
}

async fn plugins() -> &'static (Plugin, Plugin) {
    static PLUGINS: OnceCell<(Plugin, Plugin)> = OnceCell::const_new();
    PLUGINS
        .get_or_init(|| async {
            (
                load(granting_host(), artifacts::DICE).await,
                load(granting_host(), artifacts::MEMO).await,
            )
        })
        .await
}

#[tokio::test]
async fn dice_from_sandboxed_code_with_chat_and_config() {
    let (dice, _) = plugins().await;
    assert!(dice.has_lifecycle());
    let manifest = dice.manifest();
    let roll = manifest.method("roll_dice").unwrap();
    assert!(roll.docstring.contains("Args:\n    event_name:"));
    assert_eq!(roll.params[1].name, "difficulty");
    assert!(!roll.params[1].required);
    let python = granting_host()
        .load_python_file(artifacts::PYTHON)
        .await
        .unwrap();
    let set = PluginSet::new(std::slice::from_ref(dice)).unwrap();
    let outcome = python
        .run(
            &ctx(),
            &set,
            "print(roll_dice('open the door', 1))\nshow_dice(count=2, sides=6)",
        )
        .await;
    assert_eq!(outcome.status, RunStatus::AgentHandoff, "{outcome:?}");
    // The operator's DEFAULT_SIDES = 1 replaced the class's default of 20.
    assert!(
        outcome
            .stdout
            .contains("open the door: rolled 1 (d1) against 1: success"),
        "{}",
        outcome.stdout
    );
    let events: Vec<String> = outcome.events.iter().map(ToString::to_string).collect();
    assert!(
        events
            .iter()
            .any(|e| e.contains("chat") && e.contains("rolled 1 (d1)")),
        "{events:?}"
    );
    let handoff = outcome.handoff.unwrap();
    let MethodResult::MultimodalAgent(parts) = handoff.result else {
        panic!("{:?}", handoff.result)
    };
    assert!(matches!(&parts[0], ContentPart::Text(t) if t.starts_with("Rolled 2d6: [")));
    assert!(matches!(&parts[1], ContentPart::Image(m) if m.mime_type == "image/svg+xml"));
}

#[tokio::test]
async fn a_python_method_without_its_capability_is_denied() {
    // The shared host grants dice nothing: its config read is refused.
    let dice = load(host(), artifacts::DICE).await;
    let err = dice
        .call(
            &ctx(),
            "roll_dice",
            args(serde_json::json!({"event_name": "x"})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err.kind, CallErrorKind::Denied { message } if message.contains("config")),
        "{err}"
    );
    let err = dice
        .call(
            &ctx(),
            "show_dice",
            args(serde_json::json!({"count": "two"})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind, CallErrorKind::InvalidArguments { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn memo_keeps_per_user_memos_and_injects_their_count() {
    let (_, memo) = plugins().await;
    let set = PluginSet::new(std::slice::from_ref(memo)).unwrap();
    let ada = AgentCtx {
        user_id: Some("ada-python-plugins".into()),
        ..AgentCtx::new("chat-memo")
    };
    let python = granting_host()
        .load_python_file(artifacts::PYTHON)
        .await
        .unwrap();
    let seen = set.in_context(&ada).await.unwrap();
    assert!(seen.injected.is_empty(), "{:?}", seen.injected);
    let outcome = python
        .run(
            &ada,
            &seen.methods,
            "clear_memos()\nsave_memo('Ada prefers tea.')\nprint(save_memo('Ada likes graphs.'))\nprint(list_memos())",
        )
        .await;
    assert_eq!(outcome.status, RunStatus::Ok, "{outcome:?}");
    assert_eq!(
        outcome.stdout,
        "2\n['Ada prefers tea.', 'Ada likes graphs.']\n"
    );
    let seen = set.in_context(&ada).await.unwrap();
    assert_eq!(
        seen.injected,
        [(
            "memo".to_string(),
            "The user has 2 memo(s) saved; list_memos() reads them.".to_string()
        )]
    );
    assert!(
        seen.prompt()
            .contains("[plugin `memo`]\nThe user has 2 memo(s)")
    );
    assert!(seen.prompt().contains("def save_memo(memo"));
    // Another user of the same chat sees none of Ada's memos.
    let bob = AgentCtx {
        user_id: Some("bob-python-plugins".into()),
        ..AgentCtx::new("chat-memo")
    };
    let result = memo
        .call(&bob, "list_memos", args(serde_json::json!({})))
        .await;
    assert_eq!(
        result.unwrap(),
        MethodResult::Tool(args(serde_json::json!([])))
    );
    // Without a user, collect_methods offers nothing: not listed, not callable.
    let nobody = set.in_context(&AgentCtx::new("chat-memo")).await.unwrap();
    assert_eq!(nobody.methods.methods().count(), 0);
    let outcome = python
        .run(&AgentCtx::new("chat-memo"), &nobody.methods, "list_memos()")
        .await;
    assert_eq!(outcome.status, RunStatus::Error, "{outcome:?}");
}
