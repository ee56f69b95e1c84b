//! A run in a scientific session ([`RunOptions::session`](crate::RunOptions::session)),
//! and the chat's sessions: listing, closing, fork, dump and load
//! (`sessions/keeper.rs`). Where its interpreter comes from and what is kept
//! is `session.rs`.

use super::ScientificSandbox;
use super::session::{Live, WASM_PAGE};
use super::template::Interpreter;
use crate::sandbox::run::Run;
use crate::sandbox::run::outcome::{LimitHit, RunOutcome, RunStatus};
use crate::sandbox::sessions::keeper::{self, NotStarted, Ranges, Unsaved, write_pages};
use crate::sandbox::sessions::saved::Packs;
use crate::sandbox::sessions::stored::Head;
use crate::sandbox::sessions::{LoadedSession, SessionError, SessionInfo};
use crate::sandbox::snapshot::Mapping;
use sandwit_contract::limits::{LimitKind, RunLimits};
use sandwit_contract::types::AgentCtx;

impl ScientificSandbox {
    /// The sessions of `ctx`'s chat, live here or stored, by name.
    pub async fn sessions(&self, ctx: &AgentCtx) -> anyhow::Result<Vec<SessionInfo>> {
        keeper::listed(&self.inner.sessions, &self.inner.durable.keeper, ctx).await
    }

    /// How many sessions are live in this process, over all chats (each
    /// holds an interpreter).
    pub fn live_sessions(&self) -> usize {
        self.inner.sessions.live()
    }

    /// Ends the session `name` of `ctx`'s chat, live and stored, dropping
    /// what it kept: whether there was one. A run in it goes on, and
    /// nothing of it is kept.
    pub async fn close_session(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<bool> {
        keeper::close(&self.inner.sessions, &self.inner.durable.keeper, ctx, name).await
    }

    /// Makes `to`, a new session of `ctx`'s chat, a copy of the stored
    /// session `from` (as [`PythonSandbox::fork_session`](crate::PythonSandbox::fork_session)).
    pub async fn fork_session(
        &self,
        ctx: &AgentCtx,
        from: &str,
        to: &str,
    ) -> Result<SessionInfo, SessionError> {
        let inner = &self.inner;
        keeper::fork(&inner.sessions, &inner.durable.keeper, ctx, (from, to)).await
    }

    /// The stored session `name` as bytes (as
    /// [`PythonSandbox::dump_session`](crate::PythonSandbox::dump_session)):
    /// the pages over a base the store holds, so a host without that base
    /// and store cannot load it.
    pub async fn dump_session(&self, ctx: &AgentCtx, name: &str) -> Result<Vec<u8>, SessionError> {
        self.inner.durable.keeper.dump(ctx, name).await
    }

    /// Stores a dump as a session of `ctx`'s chat (as
    /// [`PythonSandbox::load_session`](crate::PythonSandbox::load_session)).
    pub async fn load_session(
        &self,
        ctx: &AgentCtx,
        dump: &[u8],
        name: Option<&str>,
    ) -> Result<LoadedSession, SessionError> {
        let inner = &self.inner;
        let header = inner.durable.keeper.header_of(dump)?;
        inner.durable.hold_base(&header.base).await?;
        keeper::load(&inner.sessions, &inner.durable.keeper, ctx, dump, name).await
    }

    /// Runs `run` in `ctx`'s session `name`: in its live interpreter if
    /// that is current, else the stored one restored, else a new one; then
    /// stores it, or rolls it back to its last good run.
    pub(super) async fn execute_in_session(
        &self,
        ctx: &AgentCtx,
        run: Run<'_>,
        name: &str,
    ) -> RunOutcome {
        let inner = &*self.inner;
        let mut lease = match inner.sessions.lease(ctx, name) {
            Ok(lease) => lease,
            Err(refusal) => return RunOutcome::no_session(refusal, run.start()),
        };
        let keeper = &inner.durable.keeper;
        let failed = |e: anyhow::Error, run: &Run<'_>| {
            let e = e.context(format!("reading the session {name:?}"));
            RunOutcome::failed(e, run.start())
        };
        let head = match keeper.current_head(ctx, name).await {
            Ok(head) => head,
            Err(e) => return failed(e, &run),
        };
        let head_runs = head.as_ref().map(|h| h.runs);
        // A live copy another process has stored the session past is
        // stale: dropped.
        let mut packs = Packs::default();
        let (interpreter, restored) = match (lease.kept.take(), &head) {
            (Some(live), _) if live.head == head => {
                packs = live.packs;
                (live.interpreter, false)
            }
            (_, Some(stored)) => match self
                .restore((ctx, name, stored), run.limits.memory_bytes)
                .await
            {
                Ok((interpreter, runs)) => {
                    lease.runs = runs;
                    (interpreter, true)
                }
                Err(NotStarted::Refused(message)) => {
                    return RunOutcome::not_run("SessionRefused", message, run.start());
                }
                Err(NotStarted::Failed(e)) => return failed(e, &run),
            },
            _ => {
                lease.runs = 0;
                if let Err(refusal) = keeper::room_for(&inner.sessions, keeper, ctx, name).await {
                    return RunOutcome::no_session(refusal, run.start());
                }
                let interpreter = match self.take_ready().await {
                    // A new session's interpreter is its own from now on.
                    Some(interpreter) => {
                        self.refill();
                        interpreter
                    }
                    None => match inner.template.make(&inner.host).await {
                        Ok(interpreter) => interpreter,
                        Err(e) => return RunOutcome::failed(e, run.start()),
                    },
                };
                (interpreter, false)
            }
        };
        let fresh = lease.runs == 0 && !restored;
        let limits = run.limits;
        let (mut outcome, returned, memory_bytes) = self
            .run_in(interpreter, ctx, run, (true, !fresh), true)
            .await;
        let failed = match outcome.status {
            RunStatus::Ok => false,
            RunStatus::Error => !inner.host.session_limits.keep_failed,
            _ => true,
        };
        let back = |lease: crate::sandbox::sessions::Lease<'_, Live>| match head_runs {
            Some(_) => lease.roll_back(memory_bytes),
            None => lease.end(memory_bytes),
        };
        // A session closed while the run was in it is not stored again.
        let current = lease.current();
        let (Some(interpreter), false, true) = (returned, failed, current) else {
            let mut report = match current {
                true => back(lease),
                false => lease.end(memory_bytes),
            };
            report.restored = restored;
            outcome.session = Some(report);
            return outcome;
        };
        let runs = lease.runs + 1;
        let mut interpreter = interpreter;
        let memory = interpreter.snapshot.mapping().clone();
        // Where the memory may differ from the prepared one (all of it, for
        // one restored over another process's base).
        let written = interpreter.snapshot.written();
        let saved = self.save(
            (ctx, name),
            (&memory, written.as_deref()),
            (runs, head.as_ref()),
            limits,
            &mut packs,
        );
        let mut report = match saved.await {
            Ok(head) => {
                let bytes = head.bytes;
                let live = Live {
                    interpreter,
                    head: Some(head),
                    packs,
                };
                let mut report = lease.keep(live, memory_bytes);
                report.stored_bytes = Some(bytes);
                report
            }
            Err(Unsaved::Failed(e)) => {
                tracing::error!(session = name, "a session's run was not stored: {e:#}");
                let live = Live {
                    interpreter,
                    head,
                    packs,
                };
                lease.keep(live, memory_bytes)
            }
            Err(Unsaved::Conflict(message)) => {
                outcome.conflicted(message);
                drop(interpreter);
                lease.roll_back(memory_bytes)
            }
            Err(Unsaved::Limit(message)) => {
                outcome.status = RunStatus::LimitExceeded;
                let kind = LimitKind::Session;
                outcome.limit = Some(LimitHit { kind, message });
                drop(interpreter);
                back(lease)
            }
        };
        report.restored = restored;
        outcome.session = Some(report);
        outcome
    }

    /// Stores `memory`, a session's interpreter's, as `ctx`'s session
    /// `name` after its `runs`th run, in place of the head the run started
    /// from: the new head. `written`: where it may differ from the own
    /// base, if known.
    async fn save(
        &self,
        (ctx, name): (&AgentCtx, &str),
        (memory, written): (&Mapping, Option<&Ranges>),
        runs: (u32, Option<&Head>),
        limits: &RunLimits,
        packs: &mut Packs,
    ) -> Result<Head, Unsaved> {
        let durable = &self.inner.durable;
        (durable.publish().await)
            .map_err(|e| Unsaved::Failed(e.context("storing the interpreter's base")))?;
        // SAFETY: the run's export returned, and its store is the caller's
        // alone: nothing runs in the instance while it is read.
        let memory = unsafe { memory.bytes() };
        let base = durable.own();
        (durable.keeper)
            .save((ctx, name), (memory, base, written), runs, limits, packs)
            .await
    }

    /// The stored session `name` of `ctx` in a new interpreter: its memory
    /// grown to the saved size, made the base it was saved over, and the
    /// saved pages written over that; the runs it had.
    async fn restore(
        &self,
        (ctx, name, head): (&AgentCtx, &str, &Head),
        max_memory: usize,
    ) -> Result<(Interpreter, u32), NotStarted> {
        let inner = &*self.inner;
        let opened = inner
            .durable
            .keeper
            .open((ctx, name, head), None, max_memory)
            .await?;
        let base = inner.durable.base_for(&opened.header).await?;
        let size = opened.header.memory_bytes as usize;
        let mut interpreter =
            (inner.template.make(&inner.host).await).map_err(NotStarted::Failed)?;
        let have = interpreter.memory.data_size(&interpreter.store);
        let refused = |why: String| {
            NotStarted::Refused(format!(
                "the stored session {name:?} cannot be restored: {why}"
            ))
        };
        if size < have.max(base.len()) || !size.is_multiple_of(WASM_PAGE) {
            return Err(refused(format!(
                "it was saved with a {size} byte memory, which is not a whole number of \
                 64 KiB pages at least as large as its {} byte base and this host's interpreter \
                 ({have} bytes)",
                base.len()
            )));
        }
        // Room for the saved size: the interpreter was made capped at the
        // prepared memory's (the run recaps it to its own limit).
        let limiter = &mut interpreter.store.data_mut().run.limiter;
        *limiter = limiter.recapped(&inner.host.runtime().limits, size);
        let pages = ((size - have) / WASM_PAGE) as u64;
        (interpreter.memory.grow(&mut interpreter.store, pages)).map_err(|e| {
            NotStarted::Failed(anyhow::anyhow!("growing a session's memory: {e:#}"))
        })?;
        let own = std::sync::Arc::ptr_eq(&base, &inner.durable.own().image);
        let bytes = interpreter.memory.data_mut(&mut interpreter.store);
        // A new interpreter's memory is the own base already (and what it
        // grew by is zeros): left so, only the saved pages are written, and
        // its write tracking goes on telling the pages that differ.
        if !own {
            bytes[..base.len()].copy_from_slice(&base);
            bytes[base.len()..].fill(0);
        }
        write_pages(bytes, &opened).map_err(refused)?;
        interpreter.runs = u64::from(opened.header.runs);
        Ok((interpreter, opened.header.runs))
    }
}
