//! A run in a session ([`RunOptions::session`](crate::RunOptions::session)):
//! its interpreter is the session's live one if that is current, else the
//! stored session restored, else a new session's (`session.rs`); after the
//! run the session is stored, kept live, or rolled back to its last good
//! run.

use std::sync::Arc;
use std::time::Instant;

use super::session::{Live, OWN_WAIT};
use super::{Ended, Exec, PythonSandbox, Start, exec_run};
use crate::runtime::guard::limited_store;
use crate::sandbox::pauses::record::SessionAt;
use crate::sandbox::run::Run;
use crate::sandbox::run::outcome::{LimitHit, RunOutcome, RunStatus};
use crate::sandbox::run::state::RunState;
use crate::sandbox::sessions::keeper::{self, NotStarted, Unsaved};
use crate::sandbox::sessions::saved::Packs;
use crate::sandbox::sessions::stored::Head;
use crate::sandbox::sessions::{Lease, LoadedSession, SessionError, SessionInfo};
use crate::sandbox::snapshot::Mapping;
use sandwit_contract::limits::LimitKind;
use sandwit_contract::types::AgentCtx;
use wasmtime::Store;

/// A session run's interpreter.
struct Got<'p> {
    store: Store<RunState>,
    start: Start<'p>,
    /// Its memory, if the session can be stored.
    memory: Option<Arc<Mapping>>,
    /// The head of the stored session it is current with.
    head: Option<Head>,
    /// What the session's last save compressed.
    packs: Packs,
    /// Whether it was restored from the store.
    restored: bool,
}

impl PythonSandbox {
    /// The sessions of `ctx`'s chat ([`RunOptions::session`](crate::RunOptions::session)),
    /// live here or stored, by name.
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
    /// session `from` (as its last good run left it): each goes on
    /// independently. Refused for a session not stored, and for a name the
    /// chat has; the new session counts against the chat's limits
    /// ([`SessionLimits`](crate::SessionLimits)).
    pub async fn fork_session(
        &self,
        ctx: &AgentCtx,
        from: &str,
        to: &str,
    ) -> Result<SessionInfo, SessionError> {
        let inner = &self.inner;
        keeper::fork(&inner.sessions, &inner.durable.keeper, ctx, (from, to)).await
    }

    /// The stored session `name` of `ctx`'s chat as bytes: signed with the
    /// host's session key and bound to the chat, this sandwit and this
    /// interpreter, so that only [`PythonSandbox::load_session`] on a host
    /// with the same key and versions takes it back, into the same chat.
    pub async fn dump_session(&self, ctx: &AgentCtx, name: &str) -> Result<Vec<u8>, SessionError> {
        self.inner.durable.keeper.dump(ctx, name).await
    }

    /// Stores `dump` (from [`PythonSandbox::dump_session`]) as a session
    /// of `ctx`'s chat, named `name` or as it was dumped; its next run
    /// restores it. A dump changed by anyone, signed with another key, of
    /// another chat or of other versions is refused, as is a name the chat
    /// has.
    pub async fn load_session(
        &self,
        ctx: &AgentCtx,
        dump: &[u8],
        name: Option<&str>,
    ) -> Result<LoadedSession, SessionError> {
        let inner = &self.inner;
        keeper::load(&inner.sessions, &inner.durable.keeper, ctx, dump, name).await
    }

    /// Runs `run` in `ctx`'s session `name`.
    pub(super) async fn execute_in_session(
        &self,
        ctx: &AgentCtx,
        run: Run<'_>,
        name: &str,
    ) -> RunOutcome {
        let inner = &self.inner;
        let mut lease = match inner.sessions.lease(ctx, name) {
            Ok(lease) => lease,
            Err(refusal) => return RunOutcome::no_session(refusal, run.start()),
        };
        let running = inner.preparer.running();
        let Got {
            store,
            start,
            memory,
            head,
            packs,
            restored,
        } = match self.session_interpreter(ctx, &run, &mut lease).await {
            Ok(got) => got,
            Err(refused) => return refused,
        };
        let fresh = lease.runs == 0 && !restored;
        let head_runs = head.as_ref().map(|h| h.runs);
        let durable = memory.is_some();
        if let Some(resumed) = run.resumed()
            && resumed.session_runs != head_runs
        {
            inner.preparer.retire(running, store);
            let message = format!(
                "the session {name:?} ran since the run paused (its stored copy had {} runs \
                 then, {} now): the paused run cannot be replayed on what it did not start from",
                resumed.session_runs.unwrap_or(0),
                head_runs.unwrap_or(0)
            );
            return RunOutcome::not_run("ResumeRefused", message, run.start());
        }
        // A pause is resumed from the stored copy: a session kept in this
        // process only could not be.
        let unpausable = (!durable).then_some(
            "its session is kept live in this process only (it cannot be stored here), so the \
             pause could not be resumed",
        );
        let run_limits = run.limits;
        let Ended {
            mut outcome,
            store,
            returned,
            pause,
        } = exec_run(
            ctx,
            run,
            store,
            start,
            Exec::Session(unpausable),
            (true, !fresh),
        )
        .await;
        let memory_bytes = store.data().limiter.total_memory as u64;
        let pause = pause.map(|mut record| {
            let name = name.to_string();
            record.session = Some(SessionAt {
                name,
                runs: head_runs,
            });
            record
        });
        let failed = match outcome.status {
            RunStatus::Ok => false,
            RunStatus::Error => !inner.host.session_limits.keep_failed,
            _ => true,
        };
        // A session closed while the run was in it is not stored again.
        let current = lease.current();
        let (Some(interpreter), false, true) = (returned, failed && durable, current) else {
            inner.preparer.retire(running, store);
            let mut report = match head_runs {
                Some(_) if current => lease.roll_back(memory_bytes),
                _ => lease.end(memory_bytes),
            };
            report.restored = restored;
            outcome.session = Some(report);
            return match pause {
                Some(record) => self.keep_pause(record, outcome).await,
                None => outcome,
            };
        };
        let mut live = Live {
            store,
            interpreter,
            memory,
            head,
            packs,
        };
        let runs = lease.runs + 1;
        let saved = (inner.durable)
            .save(ctx, name, &mut live, runs, run_limits)
            .await;
        let mut report = match saved {
            Ok(bytes) => {
                let mut report = lease.keep(live, memory_bytes);
                report.stored_bytes = Some(bytes);
                report
            }
            Err(None) => lease.keep(live, memory_bytes),
            Err(Some(Unsaved::Failed(e))) => {
                tracing::error!(session = name, "a session's run was not stored: {e:#}");
                lease.keep(live, memory_bytes)
            }
            Err(Some(Unsaved::Limit(message))) => {
                outcome.status = RunStatus::LimitExceeded;
                let kind = LimitKind::Session;
                outcome.limit = Some(LimitHit { kind, message });
                inner.preparer.retire(running, live.store);
                match head_runs {
                    Some(_) => lease.roll_back(memory_bytes),
                    None => lease.end(memory_bytes),
                }
            }
            Err(Some(Unsaved::Conflict(message))) => {
                outcome.conflicted(message);
                inner.preparer.retire(running, live.store);
                lease.roll_back(memory_bytes)
            }
        };
        report.restored = restored;
        outcome.session = Some(report);
        outcome
    }

    /// The interpreter of `lease`'s session for `run`, its store begun for
    /// the run: its live one if that is current, else the stored one
    /// restored, else a new session's. The outcome of a run refused on the
    /// way.
    async fn session_interpreter<'p>(
        &'p self,
        ctx: &AgentCtx,
        run: &Run<'_>,
        lease: &mut Lease<'_, Live>,
    ) -> Result<Got<'p>, RunOutcome> {
        let (live, restored) = match self.session_live(ctx, run, lease).await? {
            Ok(got) => got,
            Err(got) => return Ok(got),
        };
        let Live {
            mut store,
            interpreter,
            memory,
            head,
            packs,
        } = live;
        run.begin(store.data_mut(), ctx);
        Ok(Got {
            store,
            start: Start::Prepared(interpreter),
            memory,
            head,
            packs,
            restored,
        })
    }

    /// [`PythonSandbox::session_interpreter`]: a live interpreter and
    /// whether it was restored, or (`Err`) one the run instantiates, kept
    /// in this process only (the host's pool's memory is not sandwit's to
    /// read).
    async fn session_live<'p>(
        &'p self,
        ctx: &AgentCtx,
        run: &Run<'_>,
        lease: &mut Lease<'_, Live>,
    ) -> Result<Result<(Live, bool), Got<'p>>, RunOutcome> {
        let inner = &self.inner;
        let name = lease.name().to_string();
        let failed = |e: anyhow::Error| {
            RunOutcome::failed(
                e.context(format!("reading the session {name:?}")),
                run.start(),
            )
        };
        let durable = &inner.durable;
        let head = (durable.keeper.current_head(ctx, &name).await).map_err(failed)?;
        // A live copy another process has stored the session past is
        // stale: dropped.
        if let Some(live) = lease.kept.take()
            && live.head == head
        {
            return Ok(Ok((live, false)));
        }
        let wait = OWN_WAIT.min(
            run.budget
                .deadline
                .saturating_duration_since(Instant::now())
                / 2,
        );
        let own = inner.preparer.own(wait).await;
        if let Some(head) = head {
            let Some(own) = own else {
                let message = format!(
                    "the session {name:?} is stored, and this host cannot restore it yet: its \
                     interpreter is still being compiled for reuse (or the host prepares no \
                     interpreters); try again shortly"
                );
                return Err(RunOutcome::not_run(
                    "SessionUnavailable",
                    message,
                    run.start(),
                ));
            };
            let max = run.limits.memory_bytes;
            let restored = (durable)
                .restore((&inner.host, &own), (ctx, &name, &head), max)
                .await;
            return match restored {
                Ok((live, runs)) => {
                    lease.runs = runs;
                    Ok(Ok((live, true)))
                }
                Err(NotStarted::Refused(message)) => {
                    Err(RunOutcome::not_run("SessionRefused", message, run.start()))
                }
                Err(NotStarted::Failed(e)) => Err(failed(e)),
            };
        }
        lease.runs = 0;
        keeper::room_for(&inner.sessions, &durable.keeper, ctx, &name)
            .await
            .map_err(|refusal| RunOutcome::no_session(refusal, run.start()))?;
        let Some(own) = own else {
            let pre = &inner.pre;
            return Ok(Err(Got {
                store: limited_store(pre.engine(), run.new_state(ctx)),
                start: Start::Instantiate(pre),
                memory: None,
                head: None,
                packs: Packs::default(),
                restored: false,
            }));
        };
        let live = durable.start(&inner.host, &own).await.map_err(failed)?;
        Ok(Ok((live, false)))
    }
}
