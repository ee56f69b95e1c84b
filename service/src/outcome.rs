//! The JSON of a run's outcome and of a method's result: the contract of
//! `sandwit run --json` and `sandwit call --json`, which the service answers
//! with too (the types of `crate::wire`, which `/openapi.json` describes).
//! Images are rendered by the caller: the command writes them to files, the
//! service inlines them.

use base64::Engine;
use sandwit::json::{BytesAs, value_to_json};
use sandwit::{CallReport, ContentPart, Media, MethodResult, RunOutcome};
use serde::Serialize;
use serde_json::Value as Json;

use crate::wire;

/// Renders the image at `index` of a multimodal result as its JSON part.
pub type RenderImage<'a> = dyn FnMut(usize, &Media) -> anyhow::Result<Json> + 'a;

/// An image part inline.
#[derive(Serialize)]
struct InlineImage<'a> {
    /// Always `image`.
    #[serde(rename = "type")]
    kind: &'static str,
    mime_type: &'a str,
    bytes: usize,
    /// The bytes in standard base64.
    data: String,
}

/// An image inline: `{"type": "image", "mime_type", "bytes", "data"}` with
/// the bytes in standard base64.
pub fn inline_image(_index: usize, media: &Media) -> anyhow::Result<Json> {
    Ok(serde_json::to_value(InlineImage {
        kind: "image",
        mime_type: &media.mime_type,
        bytes: media.data.len(),
        data: base64::engine::general_purpose::STANDARD.encode(&media.data),
    })?)
}

/// A method's result, by its kind.
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
enum ResultJson<'a> {
    Tool { value: Json },
    Agent { text: &'a str },
    Behavior { text: &'a str },
    MultimodalAgent { parts: Vec<Json> },
}

/// A part of a multimodal result that is not an image.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum PartJson<'a> {
    Text { text: &'a str },
    ImageUrl { url: &'a str },
}

/// A method's result: `{"kind": "tool", "value"}`, `{"kind": "agent" |
/// "behavior", "text"}` or `{"kind": "multimodal-agent", "parts"}`.
pub fn result_json(result: &MethodResult, image: &mut RenderImage<'_>) -> anyhow::Result<Json> {
    let result = match result {
        MethodResult::Tool(v) => ResultJson::Tool {
            value: value_to_json(v, BytesAs::Summary),
        },
        MethodResult::Agent(text) => ResultJson::Agent { text },
        MethodResult::Behavior(text) => ResultJson::Behavior { text },
        MethodResult::MultimodalAgent(parts) => {
            let mut out = Vec::with_capacity(parts.len());
            for (i, part) in parts.iter().enumerate() {
                out.push(match part {
                    ContentPart::Text(text) => serde_json::to_value(PartJson::Text { text })?,
                    ContentPart::ImageUrl(url) => serde_json::to_value(PartJson::ImageUrl { url })?,
                    ContentPart::Image(media) => image(i, media)?,
                });
            }
            ResultJson::MultimodalAgent { parts: out }
        }
    };
    Ok(serde_json::to_value(result)?)
}

/// A method call's report, with `result` as [`result_json`] rendered it
/// (none when the call failed).
pub(crate) fn call_report(report: &CallReport, result: Option<Json>) -> wire::CallReport {
    wire::CallReport {
        ok: report.result.is_ok(),
        result,
        error: report.result.as_ref().err().cloned(),
        events: report.events.clone(),
        fuel_used: report.fuel_used,
        ms: report.elapsed.as_secs_f64() * 1e3,
    }
}

/// A method call's report: `{"ok", "result", "error", "events",
/// "fuel_used", "ms"}`, with `result` as [`result_json`] rendered it (none
/// when the call failed).
pub fn call_json(report: &CallReport, result: Option<Json>) -> Json {
    serde_json::to_value(call_report(report, result)).expect("a call report is JSON")
}

/// A run's outcome, images rendered by `image`.
pub(crate) fn outcome_body(
    outcome: &RunOutcome,
    image: &mut RenderImage<'_>,
) -> anyhow::Result<wire::Outcome> {
    let handoff = match &outcome.handoff {
        Some(h) => Some(wire::Handoff {
            plugin: h.plugin.clone(),
            method: h.method.clone(),
            result: result_json(&h.result, image)?,
        }),
        None => None,
    };
    Ok(wire::Outcome {
        status: outcome.status,
        result: (outcome.result.as_ref()).map(|v| value_to_json(v, BytesAs::Base64)),
        stdout: outcome.stdout.clone(),
        stderr: outcome.stderr.clone(),
        error: outcome.error.clone(),
        limit: outcome.limit.clone(),
        files: outcome
            .files
            .iter()
            .map(wire::WorkspaceFile::from)
            .collect(),
        events: outcome.events.clone(),
        handoff,
        fuel_used: outcome.fuel_used,
        cost: outcome.cost,
        ms: outcome.elapsed.as_secs_f64() * 1e3,
        queued_ms: outcome.queued.as_secs_f64() * 1e3,
        session: outcome.session.clone(),
        paused: outcome.paused.as_ref().map(|p| wire::Paused {
            plugin: p.plugin.clone(),
            method: p.method.clone(),
            args: value_to_json(&p.args, BytesAs::Base64),
            token: p.token.clone(),
            expires_at: p.expires_at,
        }),
    })
}

/// A run's outcome: `{"status", "result", "stdout", "stderr", "error",
/// "limit", "files", "events", "handoff", "fuel_used", "cost", "ms",
/// "queued_ms"}`; `result` is the code's last expression's value or its
/// `result` variable's, as JSON (bytes as `{"base64": ...}`), `null` for
/// none; `files` lists the `{"path", "size"}` of each file of the chat's
/// workspace the run created or changed (empty without workspaces).
pub fn outcome_json(outcome: &RunOutcome, image: &mut RenderImage<'_>) -> anyhow::Result<Json> {
    Ok(serde_json::to_value(outcome_body(outcome, image)?)?)
}
