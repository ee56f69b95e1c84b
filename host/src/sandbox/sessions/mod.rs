//! Sessions: a chat's interpreter kept between its runs, so that a run
//! that names a session ([`RunOptions::session`](crate::RunOptions::session))
//! finds the globals, imports and objects the session's last run left.
//!
//! A session belongs to one chat (its namespace and chat key): the table is
//! keyed by both, so another chat or tenant naming the same session gets a
//! session of its own, and cannot list or close another's. A session is
//! live in this process (this table: the interpreter instance itself, idle
//! between its runs and used by one run at a time) and, where the
//! interpreter allows, stored (`stored.rs`, as `saved.rs` seals it) after
//! every run that ends well, so another process (a replica, the host after
//! a restart) resumes it, and a run that fails leaves it as the last good
//! run made it. A live copy ends when the session is closed, when it has
//! been idle for [`SessionLimits::idle`], when the host drops, or when a
//! run in it fails or stops midway (a trap, a limit, cancellation, an agent
//! handoff): the next run restores the stored copy, or, with none, starts
//! the session afresh, its report saying which.

pub(crate) mod keeper;
pub(crate) mod saved;
pub(crate) mod stored;

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use sandwit_contract::types::AgentCtx;

/// The most bytes a session's name may have.
pub const MAX_SESSION_NAME_BYTES: usize = 64;

/// How many sessions a host keeps, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions each chat may have at once (default 8).
    pub per_chat: usize,
    /// Sessions the host keeps at once, over all chats (default 64): each
    /// holds an interpreter instance and its memory (up to the run limits'
    /// `memory_bytes`).
    pub per_host: usize,
    /// How long a session may sit idle before it is ended (default 30
    /// minutes), live or stored.
    pub idle: Duration,
    /// The most bytes a session takes stored (its sealed pages,
    /// compressed; default 256 MiB): a run that leaves it larger ends with
    /// the `session` limit, and the session as its last good run left it.
    pub max_bytes: u64,
    /// The most bytes a chat's sessions take stored, all told (default
    /// 1 GiB), enforced as `max_bytes` is.
    pub chat_bytes: u64,
    /// Whether a run whose code raised keeps what it changed (false, the
    /// default: the session stays as its last good run left it).
    pub keep_failed: bool,
    /// How long a paused run waits for its answer (default 24 hours): a
    /// token older than that resumes nothing.
    pub pause_ttl: Duration,
    /// How many paused runs a chat may have waiting at once (default 16):
    /// a run that would pause past them ends with the error
    /// `PauseRefused` naming this limit. Expired ones are dropped first.
    pub pauses_per_chat: usize,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            per_chat: 8,
            per_host: 64,
            idle: Duration::from_secs(30 * 60),
            max_bytes: 256 << 20,
            chat_bytes: 1 << 30,
            keep_failed: false,
            pause_ttl: Duration::from_secs(24 * 3600),
            pauses_per_chat: 16,
        }
    }
}

/// What a run in a session reports of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionReport {
    /// The session's name.
    pub name: String,
    /// Whether the run started the session (its first run, or the first
    /// after the session ended).
    pub started: bool,
    /// Whether the run's interpreter was restored from the stored session
    /// (none was live here, or another process ran the session since).
    pub restored: bool,
    /// Runs the session has had, this one included.
    pub runs: u32,
    /// The interpreter's memory after the run, in bytes.
    pub memory_bytes: u64,
    /// Whether the session is kept for the next run: false if the run
    /// failed or stopped midway with nothing stored to go back to, which
    /// ends it.
    pub kept: bool,
    /// The session's size stored after this run, if the run stored it.
    /// `None` when it could not be: the small interpreter not yet loaded
    /// for reuse, a run that left a handle open (a file in a global), or
    /// the store failing; the session is then kept live in this process
    /// only.
    pub stored_bytes: Option<u64>,
    /// Whether what the run changed was dropped (it failed, stopped midway
    /// or took more than the session's limits): the session is as its last
    /// good run left it.
    pub rolled_back: bool,
}

/// A session of a chat, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// Its name.
    pub name: String,
    /// Runs it has had.
    pub runs: u32,
    /// Its interpreter's memory, in bytes.
    pub memory_bytes: u64,
    /// How long since its last run ended (zero while a run is in it).
    pub idle: Duration,
    /// Whether a run is in it now.
    pub busy: bool,
    /// Its size stored, if it is.
    pub stored_bytes: Option<u64>,
}

/// Why a session could not be forked, dumped or loaded.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Not done, for the reason given: no such session, one not stored
    /// (kept live in one process only), a name taken, a dump of another
    /// chat, key or version.
    #[error("{0}")]
    Refused(String),
    /// A limit of [`SessionLimits`], named in the message.
    #[error("{0}")]
    Limit(String),
    /// The host failed (its store).
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// A session a dump was loaded as ([`PythonSandbox::load_session`](crate::PythonSandbox::load_session)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedSession {
    /// Its name in the chat.
    pub name: String,
    /// Runs it had when it was dumped.
    pub runs: u32,
    /// Its size stored.
    pub stored_bytes: u64,
    /// The limits of the run that saved it, for the session's next runs.
    pub limits: Option<sandwit_contract::limits::RunLimits>,
}

/// Checks a session's name: 1 to [`MAX_SESSION_NAME_BYTES`] ASCII letters,
/// digits, `-`, `_` and `.`.
pub fn check_name(name: &str) -> Result<(), String> {
    let fits = !name.is_empty() && name.len() <= MAX_SESSION_NAME_BYTES;
    if fits
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Ok(());
    }
    let shown: String = name.chars().take(MAX_SESSION_NAME_BYTES).collect();
    Err(format!(
        "the session name {shown:?} is not 1 to {MAX_SESSION_NAME_BYTES} ASCII letters, digits, \
         `-`, `_` or `.`"
    ))
}

/// Which chat a session belongs to, and its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    namespace: String,
    chat: String,
    name: String,
}

impl Key {
    fn of(ctx: &AgentCtx, name: &str) -> Key {
        Key {
            namespace: ctx.namespace.clone().unwrap_or_default(),
            chat: ctx.chat_key.clone(),
            name: name.to_string(),
        }
    }

    fn same_chat(&self, ctx: &AgentCtx) -> bool {
        self.chat == ctx.chat_key && self.namespace == ctx.namespace.as_deref().unwrap_or("")
    }
}

struct Entry<T> {
    /// The interpreter, `None` while a run has it.
    kept: Option<T>,
    /// The lease that made or last took it: a run holding an older one
    /// (its session closed, and started again by another run meanwhile)
    /// neither gives its interpreter back to it nor ends it.
    lease: u64,
    runs: u32,
    memory_bytes: u64,
    /// When its last run ended.
    last_used: Instant,
}

/// Why a run could not have its session.
pub(crate) enum Refusal {
    /// The name is not a session's ([`check_name`]).
    Invalid(String),
    /// Another run is in it.
    Busy(String),
    /// The chat or the host has as many sessions as it may.
    Limit(String),
}

/// The live sessions of one sandbox, holding `T`, an interpreter between
/// its runs.
pub(crate) struct Sessions<T> {
    limits: SessionLimits,
    table: Mutex<HashMap<Key, Entry<T>>>,
    /// The last lease's number.
    leases: AtomicU64,
}

/// A run's hold on its session: the interpreter the session kept, if it
/// had one. Dropped without [`Lease::keep`] (the run stopped midway, or
/// its future was dropped), it ends the session.
pub(crate) struct Lease<'a, T> {
    sessions: &'a Sessions<T>,
    key: Key,
    /// Its number, in its entry while the run holds it.
    id: u64,
    /// The session's interpreter: `None` for a session this run starts.
    pub(crate) kept: Option<T>,
    /// Runs before this one.
    pub(crate) runs: u32,
    ended: bool,
}

impl<T> Sessions<T> {
    pub(crate) fn new(limits: SessionLimits) -> Self {
        Sessions {
            limits,
            table: Mutex::new(HashMap::new()),
            leases: AtomicU64::new(0),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry<T>>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session `name` of `ctx`'s chat for a run: its interpreter, or
    /// room for one the run starts. Sessions idle past their limit end
    /// first (their interpreters dropped after the lock is released).
    pub(crate) fn lease(&self, ctx: &AgentCtx, name: &str) -> Result<Lease<'_, T>, Refusal> {
        check_name(name).map_err(Refusal::Invalid)?;
        let key = Key::of(ctx, name);
        let id = (self.leases).fetch_add(1, Ordering::Relaxed);
        let mut expired = Vec::new();
        let mut table = self.table();
        let now = Instant::now();
        let idle = self.limits.idle;
        table.retain(|_, e| {
            let stale = e.kept.is_some() && now.duration_since(e.last_used) > idle;
            if stale {
                expired.extend(e.kept.take());
            }
            !stale
        });
        let leased = match table.get_mut(&key) {
            Some(entry) => match entry.kept.take() {
                Some(kept) => {
                    entry.lease = id;
                    Ok((Some(kept), entry.runs))
                }
                None => Err(Refusal::Busy(format!(
                    "session {name:?} of this chat has a run in it: a session runs one run at a \
                     time"
                ))),
            },
            None => {
                let chat = table.keys().filter(|k| k.same_chat(ctx)).count();
                if chat >= self.limits.per_chat {
                    Err(Refusal::Limit(format!(
                        "this chat has {chat} sessions, as many as it may \
                         (SessionLimits::per_chat): close one first"
                    )))
                } else if table.len() >= self.limits.per_host {
                    Err(Refusal::Limit(format!(
                        "the host keeps {} sessions, as many as it may (SessionLimits::per_host)",
                        table.len()
                    )))
                } else {
                    table.insert(
                        key.clone(),
                        Entry {
                            kept: None,
                            lease: id,
                            runs: 0,
                            memory_bytes: 0,
                            last_used: now,
                        },
                    );
                    Ok((None, 0))
                }
            }
        };
        drop(table);
        drop(expired);
        let (kept, runs) = leased?;
        Ok(Lease {
            sessions: self,
            key,
            id,
            kept,
            runs,
            ended: false,
        })
    }

    /// How many sessions are live (or have a run in them), over all chats.
    pub(crate) fn live(&self) -> usize {
        self.table().len()
    }

    /// The sessions of `ctx`'s chat, by name.
    pub(crate) fn list(&self, ctx: &AgentCtx) -> Vec<SessionInfo> {
        let now = Instant::now();
        let mut listed: Vec<SessionInfo> = (self.table().iter())
            .filter(|(k, _)| k.same_chat(ctx))
            .map(|(k, e)| SessionInfo {
                name: k.name.clone(),
                runs: e.runs,
                memory_bytes: e.memory_bytes,
                idle: match e.kept {
                    Some(_) => now.duration_since(e.last_used),
                    None => Duration::ZERO,
                },
                busy: e.kept.is_none(),
                stored_bytes: None,
            })
            .collect();
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        listed
    }

    /// Ends the session `name` of `ctx`'s chat: whether it had one. A
    /// session with a run in it ends when the run does.
    pub(crate) fn close(&self, ctx: &AgentCtx, name: &str) -> bool {
        let key = Key::of(ctx, name);
        let removed = self.table().remove(&key);
        removed.is_some()
    }
}

impl<T> Lease<'_, T> {
    /// The session's name.
    pub(crate) fn name(&self) -> &str {
        &self.key.name
    }

    /// Keeps `interpreter` as the session's for its next run, its memory
    /// `memory_bytes`: the report of the run. Unless the session was closed
    /// while the run was in it.
    pub(crate) fn keep(self, interpreter: T, memory_bytes: u64) -> SessionReport {
        let runs = self.runs + 1;
        self.put(interpreter, memory_bytes, runs)
    }

    /// Keeps `interpreter` as the session's, which has had `runs` runs
    /// (for a lease no run used: a fork's source and its copy).
    pub(crate) fn put(mut self, interpreter: T, memory_bytes: u64, runs: u32) -> SessionReport {
        self.ended = true;
        let mut table = self.sessions.table();
        let kept = match table.get_mut(&self.key) {
            Some(entry) if entry.lease == self.id => {
                entry.kept = Some(interpreter);
                entry.runs = runs;
                entry.memory_bytes = memory_bytes;
                entry.last_used = Instant::now();
                true
            }
            _ => false,
        };
        drop(table);
        self.report(runs, memory_bytes, kept)
    }

    /// Whether the session is still this lease's: false once it was closed
    /// while the run was in it (whatever the run left must not be stored,
    /// or the closed session would come back).
    pub(crate) fn current(&self) -> bool {
        let table = self.sessions.table();
        table.get(&self.key).is_some_and(|e| e.lease == self.id)
    }

    /// Ends the session after a run that stopped midway: the report.
    pub(crate) fn end(mut self, memory_bytes: u64) -> SessionReport {
        self.ended = true;
        self.remove();
        self.report(self.runs + 1, memory_bytes, false)
    }

    /// Ends the live copy after a run whose changes are dropped, the
    /// session kept as stored (its last good run): the report.
    pub(crate) fn roll_back(mut self, memory_bytes: u64) -> SessionReport {
        self.ended = true;
        self.remove();
        let mut report = self.report(self.runs, memory_bytes, true);
        report.rolled_back = true;
        report
    }

    fn report(&self, runs: u32, memory_bytes: u64, kept: bool) -> SessionReport {
        SessionReport {
            name: self.key.name.clone(),
            started: self.runs == 0,
            restored: false,
            runs,
            memory_bytes,
            kept,
            stored_bytes: None,
            rolled_back: false,
        }
    }

    fn remove(&self) {
        let mut table = self.sessions.table();
        if table.get(&self.key).is_some_and(|e| e.lease == self.id) {
            table.remove(&self.key);
        }
    }
}

impl<T> Drop for Lease<'_, T> {
    fn drop(&mut self) {
        if !self.ended {
            self.remove();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(namespace: Option<&str>, chat: &str) -> AgentCtx {
        AgentCtx {
            namespace: namespace.map(str::to_string),
            ..AgentCtx::new(chat)
        }
    }

    #[test]
    fn a_session_is_its_chats_alone_and_one_run_at_a_time() {
        let sessions = Sessions::<u32>::new(SessionLimits::default());
        let (a, b, other_tenant) = (ctx(None, "a"), ctx(None, "b"), ctx(Some("t"), "a"));
        let lease = sessions.lease(&a, "s").ok().unwrap();
        assert!(lease.kept.is_none());
        assert!(matches!(sessions.lease(&a, "s"), Err(Refusal::Busy(_))));
        let report = lease.keep(7, 100);
        assert!(report.started && report.kept && report.runs == 1);
        // Another chat, or the same chat key of another tenant: another session.
        for other in [&b, &other_tenant] {
            assert!(sessions.list(other).is_empty());
            assert!(sessions.lease(other, "s").ok().unwrap().kept.is_none());
            assert!(!sessions.close(other, "s"));
        }
        let listed = sessions.list(&a);
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].runs, listed[0].memory_bytes), (1, 100));
        let lease = sessions.lease(&a, "s").ok().unwrap();
        assert_eq!((lease.kept, lease.runs), (Some(7), 1));
        // A run that stops midway ends the session.
        let report = lease.end(200);
        assert!(!report.kept && !report.started);
        assert!(sessions.list(&a).is_empty());
    }

    #[test]
    fn sessions_are_capped_per_chat_and_host_and_end_when_idle_or_dropped() {
        let limits = SessionLimits {
            per_chat: 2,
            per_host: 3,
            idle: Duration::from_millis(50),
            ..SessionLimits::default()
        };
        let sessions = Sessions::<u32>::new(limits);
        let (a, b) = (ctx(None, "a"), ctx(None, "b"));
        sessions.lease(&a, "1").ok().unwrap().keep(1, 0);
        sessions.lease(&a, "2").ok().unwrap().keep(2, 0);
        assert!(
            matches!(sessions.lease(&a, "3"), Err(Refusal::Limit(m)) if m.contains("per_chat"))
        );
        sessions.lease(&b, "1").ok().unwrap().keep(3, 0);
        assert!(
            matches!(sessions.lease(&b, "2"), Err(Refusal::Limit(m)) if m.contains("per_host"))
        );
        // A lease dropped without being kept (a run's future dropped) ends
        // its session; closing frees a place.
        drop(sessions.lease(&a, "1").ok().unwrap());
        assert_eq!(sessions.list(&a).len(), 1);
        assert!(sessions.close(&a, "2"));
        assert!(sessions.list(&a).is_empty());
        // Idle past the limit: gone at the next lease.
        std::thread::sleep(Duration::from_millis(80));
        sessions.lease(&a, "x").ok().unwrap().keep(4, 0);
        assert!(sessions.list(&b).is_empty());
    }

    #[test]
    fn a_run_whose_session_was_closed_and_started_again_leaves_the_new_one_alone() {
        let sessions = Sessions::<u32>::new(SessionLimits::default());
        let a = ctx(None, "a");
        let old = sessions.lease(&a, "s").ok().unwrap();
        assert!(sessions.close(&a, "s"));
        let new = sessions.lease(&a, "s").ok().unwrap();
        // The old run ends: the new run's session is neither given the old
        // interpreter nor ended.
        assert!(!old.keep(1, 0).kept);
        assert!(sessions.list(&a)[0].busy);
        new.keep(2, 0);
        let old = sessions.lease(&a, "s").ok().unwrap();
        assert_eq!(old.kept, Some(2));
        assert!(sessions.close(&a, "s"));
        let new = sessions.lease(&a, "s").ok().unwrap();
        drop(old);
        assert_eq!(sessions.list(&a).len(), 1);
        drop(new);
        assert!(sessions.list(&a).is_empty());
    }

    #[test]
    fn session_names_are_short_and_plain() {
        assert!(check_name("turns-1.a_b").is_ok());
        for bad in ["", "a b", "ä", &"x".repeat(65), "../x"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
