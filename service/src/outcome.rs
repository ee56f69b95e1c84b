//! The JSON of a run's outcome and of a method's result: the contract of
//! `sandwit run --json` and `sandwit call --json`, which the service answers
//! with too. Images are rendered by the caller: the command writes them to
//! files, the service inlines them.

use base64::Engine;
use sandwit::json::{BytesAs, value_to_json};
use sandwit::{CallReport, ContentPart, Media, MethodResult, RunOutcome};
use serde_json::{Value as Json, json};

/// Renders the image at `index` of a multimodal result as its JSON part.
pub type RenderImage<'a> = dyn FnMut(usize, &Media) -> anyhow::Result<Json> + 'a;

/// An image inline: `{"type": "image", "mime_type", "bytes", "data"}` with
/// the bytes in standard base64.
pub fn inline_image(_index: usize, media: &Media) -> anyhow::Result<Json> {
    Ok(json!({
        "type": "image",
        "mime_type": media.mime_type,
        "bytes": media.data.len(),
        "data": base64::engine::general_purpose::STANDARD.encode(&media.data),
    }))
}

/// A method's result: `{"kind": "tool", "value"}`, `{"kind": "agent" |
/// "behavior", "text"}` or `{"kind": "multimodal-agent", "parts"}`.
pub fn result_json(result: &MethodResult, image: &mut RenderImage<'_>) -> anyhow::Result<Json> {
    Ok(match result {
        MethodResult::Tool(v) => {
            json!({"kind": "tool", "value": value_to_json(v, BytesAs::Summary)})
        }
        MethodResult::Agent(t) => json!({"kind": "agent", "text": t}),
        MethodResult::Behavior(t) => json!({"kind": "behavior", "text": t}),
        MethodResult::MultimodalAgent(parts) => {
            let mut out = Vec::new();
            for (i, part) in parts.iter().enumerate() {
                out.push(match part {
                    ContentPart::Text(t) => json!({"type": "text", "text": t}),
                    ContentPart::ImageUrl(u) => json!({"type": "image_url", "url": u}),
                    ContentPart::Image(m) => image(i, m)?,
                });
            }
            json!({"kind": "multimodal-agent", "parts": out})
        }
    })
}

/// A method call's report: `{"ok", "result", "error", "events",
/// "fuel_used", "ms"}`, with `result` as [`result_json`] rendered it (none
/// when the call failed).
pub fn call_json(report: &CallReport, result: Option<Json>) -> Json {
    json!({
        "ok": report.result.is_ok(),
        "result": result,
        "error": report.result.as_ref().err(),
        "events": report.events,
        "fuel_used": report.fuel_used,
        "ms": report.elapsed.as_secs_f64() * 1e3,
    })
}

/// A run's outcome: `{"status", "result", "stdout", "stderr", "error",
/// "limit", "files", "events", "handoff", "fuel_used", "cost", "ms",
/// "queued_ms"}`; `result` is the code's last expression's value or its
/// `result` variable's, as JSON (bytes as `{"base64": ...}`), `null` for
/// none; `files` lists the `{"path", "size"}` of each file of the chat's
/// workspace the run created or changed (empty without workspaces).
pub fn outcome_json(outcome: &RunOutcome, image: &mut RenderImage<'_>) -> anyhow::Result<Json> {
    let handoff = match &outcome.handoff {
        Some(h) => Some(json!({
            "plugin": h.plugin,
            "method": h.method,
            "result": result_json(&h.result, image)?,
        })),
        None => None,
    };
    let result = (outcome.result.as_ref()).map(|v| value_to_json(v, BytesAs::Base64));
    Ok(json!({
        "status": outcome.status,
        "result": result,
        "stdout": outcome.stdout,
        "stderr": outcome.stderr,
        "error": outcome.error,
        "limit": outcome.limit,
        "files": outcome.files,
        "events": outcome.events,
        "handoff": handoff,
        "fuel_used": outcome.fuel_used,
        "cost": outcome.cost,
        "ms": outcome.elapsed.as_secs_f64() * 1e3,
        "queued_ms": outcome.queued.as_secs_f64() * 1e3,
    }))
}
