//! `weather`: a tool that calls a weather HTTP API. The API's address and key
//! come from the operator's configuration; the key is a secret, so the host
//! keeps it out of every log, event and result.
//!
//! The API: `GET {base_url}/v1/current?city=<city>` with the header
//! `x-api-key`, answering `{"temperature_c": 11.5, "summary": "Cloudy"}`.

use sandwit_sdk::http::Request;
use sandwit_sdk::{Error, Value, config, log, tool};

/// The current weather in a city.
///
/// Args:
///     city: The city's name, e.g. "Lisbon".
///
/// Returns:
///     dict: {"city": str, "temperature_c": float, "summary": str}
///
/// Example:
///     >>> current_weather("Lisbon")
///     {'city': 'Lisbon', 'temperature_c': 21.0, 'summary': 'Sunny'}
#[tool]
fn current_weather(city: String) -> Result<Value, Error> {
    let city = city.trim();
    if city.is_empty() || city.len() > 100 {
        return Err(Error::invalid_arguments("the city must be 1 to 100 bytes"));
    }
    let base_url: String = config::require("base_url")?;
    let api_key: String = config::require("api_key")?;
    let url = format!(
        "{}/v1/current?city={}",
        base_url.trim_end_matches('/'),
        percent_encode(city)
    );
    log::info(&format!("GET {url}"));
    let response = Request::get(&url)
        .header("x-api-key", &api_key)
        .header("accept", "application/json")
        .send()?;
    if response.status != 200 {
        return Err(Error::failed(format!(
            "the weather API answered {}: {}",
            response.status,
            String::from_utf8_lossy(&response.body)
                .chars()
                .take(200)
                .collect::<String>()
        )));
    }
    let body: serde_json::Value = serde_json::from_slice(&response.body)
        .map_err(|e| Error::failed(format!("the weather API sent bad JSON: {e}")))?;
    let temperature = body["temperature_c"]
        .as_f64()
        .ok_or_else(|| Error::failed("the weather API sent no temperature_c"))?;
    let summary = body["summary"].as_str().unwrap_or("unknown").to_string();
    Ok(Value::Object(vec![
        ("city".into(), Value::Text(city.to_string())),
        ("temperature_c".into(), Value::Float(temperature)),
        ("summary".into(), Value::Text(summary)),
    ]))
}

/// Percent-encodes everything but unreserved URL characters.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

sandwit_sdk::plugin! {
    id: "weather",
    name: "Weather",
    version: env!("CARGO_PKG_VERSION"),
    author: "sandwit",
    description: "Tells the current weather in a city from a weather HTTP API.",
    // The API's host is the operator's choice, so the plugin asks for any
    // host on loopback (for local services and tests) and one public API;
    // the operator grants the one it configures.
    capabilities: ["config", "http:127.0.0.1:*", "http:api.weather.example"],
    config_schema: r#"{
        "type": "object",
        "properties": {
            "base_url": {"type": "string", "pattern": "^https?://", "description": "The API's address"},
            "api_key": {"type": "string", "minLength": 8, "secret": true, "description": "The API key"}
        },
        "required": ["base_url", "api_key"],
        "additionalProperties": false
    }"#,
    methods: [current_weather],
}
