//! What keeps a sandbox's sessions beyond its process, whichever its
//! interpreter: the signed blobs in the host's store (`stored.rs`,
//! `saved.rs`), the pages a memory differs from its base, and what a
//! chat's sessions may number and weigh. The interpreters differ only in
//! where a memory comes from and goes back into (`small/session.rs`,
//! `scientific/session.rs`).

use std::sync::Arc;

use anyhow::Context as _;
use ring::digest;

use super::saved::{
    self, Expected, Header, Opened, PAGE, Packs, SessionKey, now_secs, sandwit_version,
};
use super::stored::{Head, Saved, Stored};
use super::{
    LoadedSession, Refusal, SessionError, SessionInfo, SessionLimits, Sessions, check_name,
};
use crate::capabilities::store::StoreBackend;
use sandwit_contract::limits::RunLimits;
use sandwit_contract::types::AgentCtx;

/// The memory a session's pages are kept over, and its SHA-256 in hex.
pub(crate) struct Base {
    pub(crate) image: Arc<[u8]>,
    pub(crate) hash: String,
}

impl Base {
    pub(crate) fn of(image: Arc<[u8]>) -> Base {
        let hash = hex(digest::digest(&digest::SHA256, &image).as_ref());
        Base { image, hash }
    }
}

/// Sorted, disjoint byte ranges of a memory, as offsets.
pub(crate) type Ranges = [(usize, usize)];

/// A sandbox's sessions in the host's store, signed with its key and bound
/// to its interpreter.
pub(crate) struct Keeper {
    stored: Stored,
    key: SessionKey,
    /// The interpreter's hash, which blobs are bound to.
    interpreter: String,
    limits: SessionLimits,
}

/// Why a session run could not start.
pub(crate) enum NotStarted {
    /// The stored session was refused: the message.
    Refused(String),
    /// The host failed (the store, an instantiation).
    Failed(anyhow::Error),
}

impl Keeper {
    /// Sessions in `store` under `plugin` (`stored::SMALL_SESSIONS` or
    /// `SCIENTIFIC_SESSIONS`).
    pub(crate) fn new(
        (store, plugin): (Arc<dyn StoreBackend>, &'static str),
        key: SessionKey,
        interpreter: &str,
        limits: SessionLimits,
    ) -> Self {
        Keeper {
            stored: Stored::new(store, plugin),
            key,
            interpreter: interpreter.to_string(),
            limits,
        }
    }

    /// The store the sessions are in.
    pub(crate) fn stored(&self) -> &Stored {
        &self.stored
    }

    /// The stored sessions of `ctx`'s chat.
    pub(crate) async fn list(&self, ctx: &AgentCtx) -> anyhow::Result<Vec<(String, Head)>> {
        self.stored.list(ctx).await
    }

    /// Removes `ctx`'s stored session `name`: whether there was one.
    pub(crate) async fn delete(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<bool> {
        self.stored.delete(ctx, name).await
    }

    /// Sessions of `ctx`'s chat stored and idle past the limit are removed,
    /// and blobs no session names; the names of those left.
    pub(crate) async fn sweep(&self, ctx: &AgentCtx) -> anyhow::Result<Vec<String>> {
        let now = now_secs();
        let idle = self.limits.idle.as_secs();
        self.stored.sweep_blobs(ctx, now, idle).await?;
        let mut left = Vec::new();
        for (name, head) in self.stored.list(ctx).await? {
            let idle = now.saturating_sub(head.saved_at) > idle;
            // A session saved since it was listed stays.
            if !idle || !self.stored.delete_if(ctx, &name, &head).await? {
                left.push(name);
            }
        }
        Ok(left)
    }

    /// Seals the pages of `memory` that differ from `base` as `ctx`'s
    /// session `name` after its `runs`th run, under `limits`, and stores
    /// it in place of `replaces`, the head the run started from: the new
    /// head, or why it was not stored (a limit, another save since, or the
    /// store). `written`, if known, is where `memory` may differ from
    /// `base` within its length ([`changed_pages`]); `packs`, what the
    /// session's last save compressed.
    pub(crate) async fn save(
        &self,
        (ctx, name): (&AgentCtx, &str),
        (memory, base, written): (&[u8], &Base, Option<&Ranges>),
        (runs, replaces): (u32, Option<&Head>),
        limits: &RunLimits,
        packs: &mut Packs,
    ) -> Result<Head, Unsaved> {
        let (pages, contents) = changed_pages(memory, &base.image, written);
        let header = Header {
            format: saved::FORMAT,
            sandwit: sandwit_version().into(),
            interpreter: self.interpreter.clone(),
            base: base.hash.clone(),
            base_bytes: base.image.len() as u64,
            namespace: ctx.namespace.clone().unwrap_or_default(),
            chat: ctx.chat_key.clone(),
            name: name.into(),
            runs,
            memory_bytes: memory.len() as u64,
            pages: pages.len() as u32,
            saved_at: now_secs(),
            limits: Some(limits.into()),
        };
        let blob = (packs.seal(&self.key, &header, &pages, &contents))
            .map_err(|e| Unsaved::Failed(e.context("sealing the session")))?;
        let bytes = blob.len() as u64;
        self.check_room(ctx, name, bytes).await?;
        let head = Head::new(runs, bytes, header.memory_bytes, header.saved_at);
        let saved = (self.stored.save(ctx, name, head, blob, replaces).await)
            .map_err(|e| Unsaved::Failed(e.context("storing the session")))?;
        let Saved::Stored(head) = saved else {
            return Err(Unsaved::Conflict(format!(
                "the session {name:?} was stored by another run while this one ran (two runs of \
                 one session at once, on different hosts): what this run changed in it is not \
                 kept, and the session is as the other run left it"
            )));
        };
        tracing::debug!(
            session = name,
            chat = ctx.chat_key,
            runs,
            pages = header.pages,
            bytes,
            "session saved"
        );
        Ok(head)
    }

    /// The stored session `name` of `ctx` as `head` describes it, opened:
    /// checked to be signed with this host's key, of this sandwit and
    /// interpreter, over `base` (any base if `None`: the caller finds it by
    /// the header's hash), and within `max_memory`.
    pub(crate) async fn open(
        &self,
        (ctx, name, head): (&AgentCtx, &str, &Head),
        base: Option<&str>,
        max_memory: usize,
    ) -> Result<Opened, NotStarted> {
        let blob = match self.stored.blob(ctx, name, head).await {
            Ok(Some(blob)) => blob,
            Ok(None) => {
                return Err(NotStarted::Refused(format!(
                    "the stored session {name:?} was stored again or closed while this run read \
                     it: run again"
                )));
            }
            Err(e) => return Err(NotStarted::Failed(e.context("reading the session's pages"))),
        };
        let namespace = ctx.namespace.as_deref().unwrap_or("");
        let expected = Expected {
            interpreter: &self.interpreter,
            base,
            namespace,
            chat: &ctx.chat_key,
            name,
            max_memory: max_memory as u64,
        };
        let opened = saved::open(&self.key, &blob, &expected).map_err(|e| {
            tracing::warn!(
                session = name,
                chat = ctx.chat_key,
                "a stored session refused: {e}"
            );
            NotStarted::Refused(e.to_string())
        })?;
        tracing::debug!(
            session = name,
            chat = ctx.chat_key,
            runs = opened.header.runs,
            pages = opened.header.pages,
            "session loaded from the store"
        );
        Ok(opened)
    }

    /// The stored blob of `ctx`'s session `name`, as a dump hands it out.
    pub(crate) async fn dump(&self, ctx: &AgentCtx, name: &str) -> Result<Vec<u8>, SessionError> {
        let blob = match self.stored.head(ctx, name).await? {
            Some(head) => self.stored.blob(ctx, name, &head).await?,
            None => None,
        };
        match blob {
            Some(blob) => Ok(blob),
            None => Err(SessionError::Refused(format!(
                "this chat has no stored session {name:?}: a session is stored after a run in it \
                 ends well, on a host that reuses interpreters, with no file left open"
            ))),
        }
    }

    /// The name `blob` was dumped under, if this host's key signed it.
    pub(crate) fn name_of(&self, blob: &[u8]) -> Result<String, SessionError> {
        Ok(self.header_of(blob)?.name)
    }

    /// The header of `blob`, if this host's key signed it.
    pub(crate) fn header_of(&self, blob: &[u8]) -> Result<Header, SessionError> {
        let (header, _) = saved::signed_header(&self.key, blob, "the session dump")
            .map_err(|e| SessionError::Refused(e.to_string()))?;
        Ok(header)
    }

    /// The stored head of `ctx`'s session `name`, unless it has been idle
    /// past the limit: such a session is removed, and its next run starts
    /// it afresh.
    pub(crate) async fn current_head(
        &self,
        ctx: &AgentCtx,
        name: &str,
    ) -> anyhow::Result<Option<Head>> {
        let Some(head) = self.stored.head(ctx, name).await? else {
            return Ok(None);
        };
        if now_secs().saturating_sub(head.saved_at) > self.limits.idle.as_secs() {
            if self.stored.delete_if(ctx, name, &head).await? {
                return Ok(None);
            }
            // Saved since it was read: that save is the session.
            return self.stored.head(ctx, name).await;
        }
        Ok(Some(head))
    }

    /// Stores `blob` (a session of `ctx`'s chat this host's key signed, of
    /// this sandwit and interpreter) as the session `to`, or under its own
    /// name: the session's name, head and limits. A `loaded` one counts as
    /// saved now (its idle time starts again); a fork is as old as its
    /// source's state.
    pub(crate) async fn copy(
        &self,
        ctx: &AgentCtx,
        blob: &[u8],
        (to, loaded): (Option<&str>, bool),
    ) -> Result<(String, Head, Option<RunLimits>), SessionError> {
        let refused = |e: saved::Refused| SessionError::Refused(e.to_string());
        let (mut header, packed) =
            saved::signed_header(&self.key, blob, "the session dump").map_err(refused)?;
        let tenant = ctx.namespace.as_deref().unwrap_or("");
        if (header.namespace.as_str(), header.chat.as_str()) != (tenant, ctx.chat_key.as_str()) {
            return Err(SessionError::Refused(
                "the session dump belongs to another chat: a session goes only into the chat it \
                 was saved in"
                    .into(),
            ));
        }
        let versions = (header.sandwit.as_str(), header.interpreter.as_str());
        if header.format != saved::FORMAT || versions != (sandwit_version(), &*self.interpreter) {
            return Err(SessionError::Refused(format!(
                "the session dump was saved by sandwit {} with the interpreter {} (format {}), \
                 and this host is sandwit {} with the interpreter {} (format {}): a session is \
                 restored only by the versions that saved it",
                versions.0,
                versions.1.get(..12).unwrap_or(versions.1),
                header.format,
                sandwit_version(),
                self.interpreter.get(..12).unwrap_or(&self.interpreter),
                saved::FORMAT
            )));
        }
        if let Some(to) = to {
            header.name = to.to_string();
        }
        if loaded {
            header.saved_at = now_secs();
        }
        let name = header.name.clone();
        check_name(&name).map_err(SessionError::Refused)?;
        let blob = saved::resealed(&self.key, &header, packed);
        let bytes = blob.len() as u64;
        self.check_room(ctx, &name, bytes)
            .await
            .map_err(|e| match e {
                Unsaved::Limit(message) => SessionError::Limit(message),
                Unsaved::Conflict(message) => SessionError::Refused(message),
                Unsaved::Failed(e) => SessionError::Failed(e),
            })?;
        let head = Head::new(header.runs, bytes, header.memory_bytes, header.saved_at);
        let saved = self.stored.save(ctx, &name, head, blob, None).await;
        let Saved::Stored(head) = saved.context("storing the session")? else {
            return Err(SessionError::Refused(format!(
                "this chat has a session {name:?} already (made while this one was stored): \
                 close it first, or choose another name"
            )));
        };
        let limits = header.limits.as_ref().map(RunLimits::from);
        Ok((name, head, limits))
    }

    /// Whether `bytes` more of session `name` fit its limit and its chat's.
    pub(crate) async fn check_room(
        &self,
        ctx: &AgentCtx,
        name: &str,
        bytes: u64,
    ) -> Result<(), Unsaved> {
        let limits = &self.limits;
        if bytes > limits.max_bytes {
            return Err(Unsaved::Limit(format!(
                "the session {name:?} would take {bytes} bytes stored, more than its limit of {} \
                 (SessionLimits::max_bytes): it is left as its last good run made it",
                limits.max_bytes
            )));
        }
        let listed = (self.stored.list(ctx).await)
            .map_err(|e| Unsaved::Failed(e.context("listing the chat's sessions")))?;
        let others: u64 = (listed.iter())
            .filter(|(other, _)| other != name)
            .map(|(_, head)| head.bytes)
            .sum();
        if others + bytes > limits.chat_bytes {
            return Err(Unsaved::Limit(format!(
                "the chat's sessions would take {} bytes stored, more than its limit of {} \
                 (SessionLimits::chat_bytes): the session {name:?} is left as its last good \
                 run made it",
                others + bytes,
                limits.chat_bytes
            )));
        }
        Ok(())
    }
}

/// The sessions of `ctx`'s chat, live in `live` or stored by `keeper`, by
/// name.
pub(crate) async fn listed<T>(
    live: &Sessions<T>,
    keeper: &Keeper,
    ctx: &AgentCtx,
) -> anyhow::Result<Vec<SessionInfo>> {
    let mut listed: std::collections::BTreeMap<String, SessionInfo> = (live.list(ctx).into_iter())
        .map(|info| (info.name.clone(), info))
        .collect();
    let now = now_secs();
    for (name, head) in keeper.list(ctx).await? {
        let info = listed.entry(name.clone()).or_insert_with(|| SessionInfo {
            name,
            runs: head.runs,
            memory_bytes: head.memory_bytes,
            idle: std::time::Duration::from_secs(now.saturating_sub(head.saved_at)),
            busy: false,
            stored_bytes: None,
        });
        info.stored_bytes = Some(head.bytes);
    }
    Ok(listed.into_values().collect())
}

/// Ends `ctx`'s session `name`, live and stored: whether there was one.
pub(crate) async fn close<T>(
    live: &Sessions<T>,
    keeper: &Keeper,
    ctx: &AgentCtx,
    name: &str,
) -> anyhow::Result<bool> {
    let closed = live.close(ctx, name);
    let stored = keeper.delete(ctx, name).await?;
    Ok(closed || stored)
}

/// Checks that `ctx`'s chat has room for a new session `name`, counting
/// those stored (and sweeping those idle past the limit) besides the live
/// ones.
pub(crate) async fn room_for<T>(
    live: &Sessions<T>,
    keeper: &Keeper,
    ctx: &AgentCtx,
    name: &str,
) -> Result<(), Refusal> {
    let stored = keeper.sweep(ctx).await.unwrap_or_else(|e| {
        tracing::warn!("listing a chat's stored sessions: {e:#}");
        Vec::new()
    });
    let mut names: Vec<String> = (live.list(ctx).into_iter())
        .map(|info| info.name)
        .chain(stored)
        .filter(|other| other != name)
        .collect();
    names.sort();
    names.dedup();
    let per_chat = keeper.limits.per_chat;
    if names.len() >= per_chat {
        return Err(Refusal::Limit(format!(
            "this chat has {} sessions, as many as it may (SessionLimits::per_chat): close one \
             first",
            names.len()
        )));
    }
    Ok(())
}

/// Checks that `ctx`'s chat has no session `name` and room for one more.
async fn room_for_new<T>(
    live: &Sessions<T>,
    keeper: &Keeper,
    ctx: &AgentCtx,
    name: &str,
) -> Result<(), SessionError> {
    check_name(name).map_err(SessionError::Refused)?;
    let listed = listed(live, keeper, ctx).await?;
    if listed.iter().any(|s| s.name == name) {
        return Err(SessionError::Refused(format!(
            "this chat has a session {name:?} already: close it first, or choose another name"
        )));
    }
    if listed.len() >= keeper.limits.per_chat {
        return Err(SessionError::Limit(format!(
            "this chat has {} sessions, as many as it may (SessionLimits::per_chat): close one \
             first",
            listed.len()
        )));
    }
    Ok(())
}

/// Makes `to`, a new session of `ctx`'s chat, a copy of the stored session
/// `from` (its last good state).
pub(crate) async fn fork<T>(
    live: &Sessions<T>,
    keeper: &Keeper,
    ctx: &AgentCtx,
    (from, to): (&str, &str),
) -> Result<SessionInfo, SessionError> {
    room_for_new(live, keeper, ctx, to).await?;
    let blob = keeper.dump(ctx, from).await?;
    let (name, head, _) = keeper.copy(ctx, &blob, (Some(to), false)).await?;
    Ok(SessionInfo {
        name,
        runs: head.runs,
        memory_bytes: head.memory_bytes,
        idle: std::time::Duration::ZERO,
        busy: false,
        stored_bytes: Some(head.bytes),
    })
}

/// Stores `dump` as a session of `ctx`'s chat, named `name` or as dumped.
pub(crate) async fn load<T>(
    live: &Sessions<T>,
    keeper: &Keeper,
    ctx: &AgentCtx,
    dump: &[u8],
    name: Option<&str>,
) -> Result<LoadedSession, SessionError> {
    let name = match name {
        Some(name) => name.to_string(),
        None => keeper.name_of(dump)?,
    };
    room_for_new(live, keeper, ctx, &name).await?;
    let (name, head, limits) = keeper.copy(ctx, dump, (Some(&name), true)).await?;
    Ok(LoadedSession {
        name,
        runs: head.runs,
        stored_bytes: head.bytes,
        limits,
    })
}

/// Why a session that could be stored was not.
pub(crate) enum Unsaved {
    /// A limit of `SessionLimits`: the message.
    Limit(String),
    /// Another run stored the session since this one started: the message.
    Conflict(String),
    /// The store failed.
    Failed(anyhow::Error),
}

/// The pages of `memory` that differ from `base` (past its end, from
/// zeros), as indices and their bytes. Within `base`'s length only those
/// of the sorted, disjoint byte ranges `written` are looked at, if given:
/// every other byte there is `base`'s (what a write-tracked memory knows,
/// `Snapshot::written`), so a turn compares what it wrote, not the whole
/// memory.
pub(crate) fn changed_pages(
    memory: &[u8],
    base: &[u8],
    written: Option<&Ranges>,
) -> (Vec<u32>, Vec<u8>) {
    let zero = [0u8; PAGE];
    let mut pages = Vec::new();
    let mut contents = Vec::new();
    let tracked = base.len().min(memory.len());
    let ranges: Vec<(usize, usize)> = match written {
        None => vec![(0, memory.len())],
        Some(written) => (written.iter())
            .map(|&(start, end)| (start.min(tracked), end.min(tracked)))
            .chain([(tracked, memory.len())])
            .filter(|(start, end)| start < end)
            .collect(),
    };
    let indices = (ranges.into_iter())
        .flat_map(|(start, end)| start / PAGE..end.div_ceil(PAGE))
        .scan(None, |last: &mut Option<usize>, index| {
            // Ranges that meet within a page give it once.
            let again = *last == Some(index);
            *last = Some(index);
            Some((!again).then_some(index))
        })
        .flatten();
    for index in indices {
        let at = index * PAGE;
        let page = &memory[at..(at + PAGE).min(memory.len())];
        let was = base
            .get(at..(at + page.len()).min(base.len()))
            .unwrap_or(&[]);
        let same = if was.len() == page.len() {
            page == was
        } else {
            page[..was.len()] == *was && page[was.len()..] == zero[..page.len() - was.len()]
        };
        if !same {
            pages.push(index as u32);
            contents.extend_from_slice(page);
            contents.resize(pages.len() * PAGE, 0);
        }
    }
    (pages, contents)
}

/// Writes the saved pages of `opened` over `bytes`, a memory of the saved
/// size that holds the base it was saved over.
pub(crate) fn write_pages(bytes: &mut [u8], opened: &Opened) -> Result<(), String> {
    if bytes.len() as u64 != opened.header.memory_bytes {
        return Err(format!(
            "its memory is {} bytes, not the {} it was saved with",
            bytes.len(),
            opened.header.memory_bytes
        ));
    }
    for (page, contents) in opened.pages.iter().zip(opened.contents.chunks(PAGE)) {
        let at = *page as usize * PAGE;
        let end = (at + PAGE).min(bytes.len());
        bytes[at..end].copy_from_slice(&contents[..end - at]);
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_pages_are_those_that_differ_from_the_base_or_from_zeros_past_it() {
        let base = vec![1u8; 4 * PAGE];
        let mut memory = vec![1u8; 4 * PAGE];
        memory.extend(vec![0u8; 3 * PAGE]);
        memory[PAGE + 5] = 9;
        memory[5 * PAGE] = 7;
        let (pages, contents) = changed_pages(&memory, &base, None);
        assert_eq!(pages, [1, 5]);
        assert_eq!(contents.len(), 2 * PAGE);
        assert_eq!((contents[5], contents[PAGE]), (9, 7));
        // Told where it was written: the same pages, looking only there and
        // past the base; ranges that meet within a page give it once.
        let written = [(PAGE, PAGE + 10), (PAGE + 10, 3 * PAGE)];
        let tracked = changed_pages(&memory, &base, Some(&written));
        assert_eq!(tracked, (pages, contents));
        // A write it is not told of within the base is not looked at.
        memory[3 * PAGE] = 2;
        let (pages, _) = changed_pages(&memory, &base, Some(&written));
        assert_eq!(pages, [1, 5]);
        let (pages, _) = changed_pages(&memory, &base, None);
        assert_eq!(pages, [1, 3, 5]);
    }
}
