//! What a marketplace must reject, each with every problem named.

use sandwit::{LoadError, MAX_COMPONENT_BYTES};

use crate::common::{artifacts, assert_still_serving, host};

async fn problems(name: &str, bytes: &[u8]) -> Vec<String> {
    match host().load_plugin(name, bytes).await {
        Err(LoadError::Rejected { plugin, problems }) => {
            assert_eq!(plugin, name);
            problems
        }
        Err(other) => panic!("{name}: not a rejection: {other}"),
        Ok(_) => panic!("{name} was accepted"),
    }
}

fn one(problems: Vec<String>) -> String {
    assert_eq!(problems.len(), 1, "{problems:?}");
    problems.into_iter().next().unwrap()
}

#[tokio::test]
async fn malformed_bytes() {
    let p = one(problems("junk.wasm", b"this is not wasm at all").await);
    assert!(p.contains("not a WebAssembly binary"), "{p}");
    let p = one(problems("empty.wasm", b"").await);
    assert!(p.contains("not a WebAssembly binary"), "{p}");
    let p = one(problems("truncated.wasm", b"\0asm\x0d\0\x01\0\x07\x99garbage").await);
    assert!(p.starts_with("not a valid component"), "{p}");
    assert_still_serving(host()).await;
}

#[tokio::test]
async fn a_core_module() {
    let p = one(problems("core.wasm", b"\0asm\x01\0\0\0").await);
    assert!(
        p.contains("core WebAssembly module, not a component"),
        "{p}"
    );
}

#[tokio::test]
async fn a_component_of_another_world() {
    let bytes = std::fs::read(artifacts::OTHER_WORLD).unwrap();
    let p = one(problems("other.wasm", &bytes).await);
    assert!(
        p.contains("does not export `sandwit:plugin/plugin@0.1.x`"),
        "{p}"
    );
}

#[tokio::test]
async fn a_component_importing_what_the_host_does_not_offer() {
    let bytes = wat::parse_str(
        r#"(component
             (import "evil:net/raw-socket" (instance))
             (import "sandwit:plugin/secrets@0.1.0" (instance)))"#,
    )
    .unwrap();
    let all = problems("evil.wasm", &bytes).await;
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all[0].contains("imports \"evil:net/raw-socket\", which sandwit does not provide"));
    assert!(all[1].contains("imports \"sandwit:plugin/secrets@0.1.0\""));
    assert!(all[2].contains("does not export"));
}

#[tokio::test]
async fn an_oversized_file() {
    let bytes = vec![0u8; MAX_COMPONENT_BYTES + 1];
    let p = one(problems("huge.wasm", &bytes).await);
    assert!(p.contains("more than the limit of 67108864 bytes"), "{p}");
}

#[tokio::test]
async fn a_bad_manifest_lists_every_problem() {
    let bytes = std::fs::read(artifacts::BAD_MANIFEST).unwrap();
    let all = problems("bad-manifest.wasm", &bytes).await.join("\n");
    for needle in [
        "id \"Bad Manifest!\" is not",
        "version \"latest\" is not a semantic version",
        "method \"twice\" is declared more than once",
        "method \"sandwit_internal\" uses the prefix `sandwit_`",
        "method \"bad_schema\", parameter \"x\": schema is not a valid JSON Schema",
        "requests an unknown capability `filesystem`",
        "unknown capability `http:Bad Host`",
    ] {
        assert!(all.contains(needle), "missing {needle:?} in\n{all}");
    }
    assert_still_serving(host()).await;
}

#[tokio::test]
async fn a_missing_file_names_it() {
    let err = host()
        .load_plugin_file("/no/such/plugin.wasm")
        .await
        .err()
        .unwrap();
    assert!(matches!(err, LoadError::Io { .. }));
    assert!(err.to_string().contains("/no/such/plugin.wasm"), "{err}");
    // The OS error is said once, also in the alternate form that prints
    // the whole chain.
    let chain = format!("{:#}", anyhow::Error::from(err));
    assert_eq!(chain.matches("No such file").count(), 1, "{chain}");
}
