//! Logging to the host: lines go to the host's log with the plugin's id and to
//! the run's events. The host caps their size and number.

use crate::bindings::wit::sandwit::plugin::log::{Level, log};

/// Logs a debugging line.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Logs an informational line.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Logs a warning.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Logs an error.
pub fn error(message: &str) {
    log(Level::Error, message);
}
