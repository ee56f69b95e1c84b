//! `notes`: remembers short notes per user with the host's plugin store, so
//! a later run (or a later process) recalls them.

use sandwit_sdk::store::{self, Scope};
use sandwit_sdk::{Error, tool};

/// The longest note, in bytes.
const MAX_NOTE_BYTES: usize = 2_000;
/// The most notes kept per user.
const MAX_NOTES: usize = 500;

/// Notes are keys `note/<sequence>` in the user's scope; the sequence number
/// is zero-padded so the keys sort in the order the notes were written.
fn note_key(seq: u64) -> String {
    format!("note/{seq:010}")
}

fn note_keys() -> Result<Vec<String>, Error> {
    Ok(store::keys(Scope::User)?
        .into_iter()
        .filter(|k| k.starts_with("note/"))
        .collect())
}

/// Remember a note for the current user.
///
/// The note is kept across runs and conversations until it is forgotten.
///
/// Args:
///     note: The text to remember (at most 2000 bytes).
///
/// Returns:
///     int: How many notes the user has now.
///
/// Example:
///     >>> remember("Ada prefers tea.")
///     1
#[tool]
fn remember(note: String) -> Result<i64, Error> {
    let note = note.trim();
    if note.is_empty() {
        return Err(Error::invalid_arguments("the note is empty"));
    }
    if note.len() > MAX_NOTE_BYTES {
        return Err(Error::invalid_arguments(format!(
            "the note is {} bytes, more than {MAX_NOTE_BYTES}",
            note.len()
        )));
    }
    let keys = note_keys()?;
    if keys.len() >= MAX_NOTES {
        return Err(Error::failed(format!(
            "the user already has {MAX_NOTES} notes; forget some first"
        )));
    }
    let seq = store::get_text(Scope::User, "seq")?
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    store::set_text(Scope::User, &note_key(seq), note)?;
    store::set_text(Scope::User, "seq", &seq.to_string())?;
    Ok(keys.len() as i64 + 1)
}

/// Recall the current user's notes, oldest first.
///
/// Args:
///     containing: Only notes containing this text (case-insensitive).
///
/// Returns:
///     list[str]: The notes.
///
/// Example:
///     >>> recall("tea")
///     ['Ada prefers tea.']
#[tool]
fn recall(containing: Option<String>) -> Result<Vec<String>, Error> {
    let needle = containing.map(|c| c.to_lowercase());
    let mut notes = Vec::new();
    for key in note_keys()? {
        if let Some(note) = store::get_text(Scope::User, &key)?
            && needle
                .as_deref()
                .is_none_or(|n| note.to_lowercase().contains(n))
        {
            notes.push(note);
        }
    }
    Ok(notes)
}

/// Forget all of the current user's notes.
///
/// Returns:
///     int: How many notes were forgotten.
///
/// Example:
///     >>> forget_all()
///     1
#[tool]
fn forget_all() -> Result<i64, Error> {
    let mut forgotten = 0;
    for key in note_keys()? {
        forgotten += i64::from(store::delete(Scope::User, &key)?);
    }
    store::delete(Scope::User, "seq")?;
    Ok(forgotten)
}

sandwit_sdk::plugin! {
    id: "notes",
    name: "Notes",
    version: env!("CARGO_PKG_VERSION"),
    author: "sandwit",
    description: "Remembers short notes per user across conversations.",
    capabilities: ["store"],
    methods: [remember, recall, forget_all],
}
