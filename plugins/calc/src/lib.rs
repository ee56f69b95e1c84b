//! `calc`: two tools, a sum and the current time.

use std::time::{SystemTime, UNIX_EPOCH};

use sandwit_sdk::{Error, tool};

/// Add two integers and return their sum.
///
/// Args:
///     num1: The first integer.
///     num2: The second integer.
///
/// Returns:
///     int: num1 + num2.
///
/// Example:
///     >>> calculate_sum(1, 2)
///     3
#[tool]
fn calculate_sum(num1: i64, num2: i64) -> Result<i64, Error> {
    num1.checked_add(num2)
        .ok_or_else(|| Error::failed(format!("{num1} + {num2} overflows a 64-bit integer")))
}

/// Get the current date and time in UTC.
///
/// Returns:
///     dict: `iso` (an ISO 8601 string such as "2026-11-22T01:53:36Z") and
///     `unix` (seconds since 1970-01-01).
///
/// Example:
///     >>> get_current_time()["iso"]
///     '2026-11-22T01:53:36Z'
#[tool]
fn get_current_time() -> Result<std::collections::BTreeMap<String, sandwit_sdk::Value>, Error> {
    let unix = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    let mut out = std::collections::BTreeMap::new();
    out.insert("iso".to_string(), sandwit_sdk::Value::Text(iso8601(unix)));
    out.insert("unix".to_string(), sandwit_sdk::Value::Int(unix));
    Ok(out)
}

/// Formats seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days,
/// after Howard Hinnant's algorithm).
fn iso8601(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

sandwit_sdk::plugin! {
    id: "calc",
    name: "Calculator",
    version: env!("CARGO_PKG_VERSION"),
    author: "sandwit",
    description: "Adds integers and tells the time.",
    methods: [calculate_sum, get_current_time],
}

#[cfg(test)]
mod tests {
    #[test]
    fn iso_dates() {
        assert_eq!(super::iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::iso8601(1_795_312_416), "2026-11-22T01:53:36Z");
    }
}
