//! Versioned plugin worlds: every 0.1 plugin loads and behaves as before the
//! 0.2 lifecycle hooks (no injected prompt, every method available).

use sandwit::{AgentCtx, PluginContext, Toolbox};

use crate::common::{artifacts, ctx, host, load};

/// The example plugins and the fixtures built with raw wit-bindgen against
/// `wit/` (0.1): none exports the lifecycle, each keeps every method.
#[tokio::test]
async fn plugins_of_0_1_keep_loading_without_hooks() {
    let mut plugins = Vec::new();
    for path in [
        artifacts::CALC,
        artifacts::KNOWLEDGE,
        artifacts::MESSENGER,
        artifacts::IMAGEGEN,
        artifacts::NOTES,
        artifacts::WEATHER,
        artifacts::ECHO,
        artifacts::SERVICES,
        artifacts::HOSTILE,
    ] {
        let plugin = load(host(), path).await;
        assert!(!plugin.has_lifecycle(), "{path} exports the lifecycle");
        assert_eq!(
            plugin.in_context(&ctx()).await.unwrap(),
            PluginContext::default()
        );
        plugins.push(plugin);
    }
    let set = Toolbox::new(&plugins[..6]).unwrap();
    let seen = set.in_context(&ctx()).await;
    assert!(seen.failed.is_empty());
    assert!(seen.injected.is_empty());
    assert_eq!(seen.methods.methods().count(), set.methods().count());
    assert_eq!(seen.prompt(), set.prompt());
}

/// The Rust SDK's `lifecycle: { .. }` makes a 0.2 plugin: its prompt and its
/// methods by context.
#[tokio::test]
async fn a_rust_plugin_with_hooks_injects_and_hides() {
    let plugin = load(host(), artifacts::LIFECYCLE).await;
    assert!(plugin.has_lifecycle());
    let seen = plugin.in_context(&ctx()).await.unwrap();
    assert_eq!(seen.prompt.as_deref(), Some("This is the chat `chat-1`."));
    assert_eq!(
        seen.methods,
        Some(vec!["chat_name".to_string(), "whoami".to_string()])
    );
    let anonymous = AgentCtx::new("lobby");
    let set = Toolbox::new(&[plugin])
        .unwrap()
        .in_context(&anonymous)
        .await;
    assert_eq!(
        set.injected,
        [(
            "lifecycle".to_string(),
            "This is the chat `lobby`.".to_string()
        )]
    );
    let listing = set.prompt();
    assert!(
        listing.contains("[plugin `lifecycle`]\nThis is the chat `lobby`."),
        "{listing}"
    );
    assert!(listing.contains("def chat_name("), "{listing}");
    assert!(!listing.contains("def whoami("), "{listing}");
    assert!(set.methods.plugin_for("whoami").is_none());
}

/// A plugin whose methods hook never returns is closed for that chat: its
/// methods are withheld and its error reported, while the other plugins'
/// methods and the listing are served as usual. One whose prompt hook
/// traps loses its text alone: its methods stay.
#[tokio::test]
async fn a_failing_hook_costs_what_it_owns() {
    let lifecycle = load(host(), artifacts::LIFECYCLE).await;
    let calc = load(host(), artifacts::CALC).await;
    let set = Toolbox::new(&[lifecycle, calc]).unwrap();
    for (chat, what) in [("hook-traps", "trap"), ("hook-spins", "limit")] {
        let seen = set.in_context(&AgentCtx::new(chat)).await;
        let (errors, other) = match what {
            "trap" => (&seen.lost_prompts, &seen.failed),
            _ => (&seen.failed, &seen.lost_prompts),
        };
        assert_eq!(errors.len(), 1, "{chat}");
        assert!(other.is_empty(), "{chat}: {other:?}");
        let error = &errors[0];
        assert_eq!(error.plugin, "lifecycle");
        let message = error.to_string();
        assert!(message.contains("plugin `lifecycle`"), "{chat}: {message}");
        match what {
            // The Rust SDK logs the panic before the trap: the error is
            // the panic's message and place, not a trap dump.
            "trap" => {
                assert!(
                    matches!(error.kind, sandwit::CallErrorKind::Trapped { .. }),
                    "{chat}: {error:?}"
                );
                assert!(
                    message.contains("panicked at")
                        && message.contains("the prompt hook breaks in this chat")
                        && !message.contains("wasm backtrace"),
                    "{chat}: {message}"
                );
            }
            // Stopped at the hooks' own fuel cap (HOOK_FUEL), not after
            // the call's whole time limit: the host has no fuel budget.
            _ => assert!(
                matches!(
                    error.kind,
                    sandwit::CallErrorKind::LimitExceeded {
                        limit: sandwit::LimitKind::Fuel,
                        ..
                    }
                ),
                "{chat}: {error:?}"
            ),
        }
        assert!(seen.injected.is_empty(), "{chat}");
        // The prompt hook's failure leaves the methods; the methods hook's
        // withholds them (fail closed).
        let kept = what == "trap";
        assert_eq!(
            seen.methods.plugin_for("chat_name").is_some(),
            kept,
            "{chat}"
        );
        assert!(seen.methods.plugin_for("calculate_sum").is_some(), "{chat}");
        let listing = seen.prompt();
        assert!(listing.contains("def calculate_sum("), "{chat}: {listing}");
        assert_eq!(
            listing.contains("def chat_name("),
            kept,
            "{chat}: {listing}"
        );
    }
}

/// A run applies the plugins' lifecycle hooks itself, whatever toolbox it
/// is given: a method the `lifecycle` fixture withholds from a chat with no
/// user is not callable there, in a run or a direct call, even with the
/// toolbox made as it is, or made for another context.
#[tokio::test]
async fn a_run_sees_only_what_its_chat_sees_whatever_toolbox_it_is_given() {
    let (python, _) = crate::python::sandbox().await;
    let plugin = load(host(), artifacts::LIFECYCLE).await;
    let plain = Toolbox::new(&[plugin]).unwrap();
    let known = AgentCtx {
        user_id: Some("ada".into()),
        ..AgentCtx::new("lobby")
    };
    let made_for_known = plain.in_context(&known).await.methods;
    let anonymous = AgentCtx::new("lobby");
    for set in [&plain, &made_for_known] {
        let out = python
            .run(&anonymous, set, "print(chat_name())\nwhoami()")
            .await;
        assert_eq!(out.stdout, "lobby\n", "{out:?}");
        let error = out.error.expect("whoami is withheld");
        assert_eq!(error.type_name, "NameError", "{error:?}");
        let call = host()
            .call(
                set,
                &anonymous,
                "whoami",
                sandwit::Value::Object(Default::default()),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(call.kind, sandwit::CallErrorKind::UnknownMethod),
            "{call:?}"
        );
    }
    let out = python.run(&known, &plain, "print(whoami())").await;
    assert_eq!(out.stdout, "ada\n", "{out:?}");
}
