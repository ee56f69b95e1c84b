//! A run in a session ([`RunOptions::session`](crate::RunOptions::session)):
//! its interpreter is the session's live one if that is current, else the
//! stored session restored, else a new session's (`session.rs`); after the
//! run the session is stored, kept live, or rolled back to its last good
//! run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::session::{Durable, Live, NotStarted, OWN_WAIT, Unsaved};
use super::{Ended, Exec, PythonSandbox, Start, exec_run};
use crate::runtime::guard::limited_store;
use crate::sandbox::run::Run;
use crate::sandbox::run::outcome::{LimitHit, RunOutcome, RunStatus};
use crate::sandbox::run::state::RunState;
use crate::sandbox::sessions::saved::now_secs;
use crate::sandbox::sessions::{Lease, Refusal, SessionInfo};
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
    /// The runs of the stored session it is current with.
    head_runs: Option<u32>,
    /// Whether it was restored from the store.
    restored: bool,
}

impl PythonSandbox {
    /// The sessions of `ctx`'s chat ([`RunOptions::session`](crate::RunOptions::session)),
    /// live here or stored, by name.
    pub async fn sessions(&self, ctx: &AgentCtx) -> anyhow::Result<Vec<SessionInfo>> {
        let mut listed: BTreeMap<String, SessionInfo> = (self.inner.sessions.list(ctx))
            .into_iter()
            .map(|info| (info.name.clone(), info))
            .collect();
        let now = now_secs();
        for (name, head) in self.inner.durable.list(ctx).await? {
            let info = listed.entry(name.clone()).or_insert_with(|| SessionInfo {
                name,
                runs: head.runs,
                memory_bytes: head.memory_bytes,
                idle: Duration::from_secs(now.saturating_sub(head.saved_at)),
                busy: false,
                stored_bytes: None,
            });
            info.stored_bytes = Some(head.bytes);
        }
        Ok(listed.into_values().collect())
    }

    /// Ends the session `name` of `ctx`'s chat, live and stored, dropping
    /// what it kept: whether there was one. A run in it goes on, and
    /// nothing of it is kept.
    pub async fn close_session(&self, ctx: &AgentCtx, name: &str) -> anyhow::Result<bool> {
        let live = self.inner.sessions.close(ctx, name);
        let stored = self.inner.durable.delete(ctx, name).await?;
        Ok(live || stored)
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
            head_runs,
            restored,
        } = match self.session_interpreter(ctx, &run, &mut lease).await {
            Ok(got) => got,
            Err(refused) => return refused,
        };
        let fresh = lease.runs == 0 && !restored;
        let Ended {
            mut outcome,
            store,
            returned,
        } = exec_run(ctx, run, store, start, Exec::Session, (true, !fresh)).await;
        let memory_bytes = store.data().limiter.total_memory as u64;
        let durable = memory.is_some();
        let failed = match outcome.status {
            RunStatus::Ok => false,
            RunStatus::Error => !inner.host.session_limits.keep_failed,
            _ => true,
        };
        let (Some(interpreter), false) = (returned, failed && durable) else {
            inner.preparer.retire(running, store);
            let mut report = match head_runs {
                Some(_) => lease.roll_back(memory_bytes),
                None => lease.end(memory_bytes),
            };
            report.restored = restored;
            outcome.session = Some(report);
            return outcome;
        };
        let mut live = Live {
            store,
            interpreter,
            memory,
            head_runs,
        };
        let runs = lease.runs + 1;
        let saved = inner.durable.save(ctx, name, &mut live, runs).await;
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
            head_runs,
        } = live;
        run.begin(store.data_mut(), ctx);
        Ok(Got {
            store,
            start: Start::Prepared(interpreter),
            memory,
            head_runs,
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
        let head = durable.head(ctx, &name).await.map_err(failed)?;
        let head_runs = head.as_ref().map(|h| h.runs);
        // A live copy another process has run past is stale: dropped.
        if let Some(live) = lease.kept.take()
            && live.head_runs == head_runs
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
        if head.is_some() {
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
            return match durable.restore(&inner.host, &own, ctx, &name, max).await {
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
        self.room_for(ctx, durable, &name, run).await?;
        let Some(own) = own else {
            let pre = &inner.pre;
            return Ok(Err(Got {
                store: limited_store(pre.engine(), run.new_state(ctx)),
                start: Start::Instantiate(pre),
                memory: None,
                head_runs: None,
                restored: false,
            }));
        };
        let live = durable.start(&inner.host, &own).await.map_err(failed)?;
        Ok(Ok((live, false)))
    }

    /// Checks that `ctx`'s chat has room for a new session `name`, counting
    /// those stored (and sweeping those idle past the limit) besides the
    /// live ones.
    async fn room_for(
        &self,
        ctx: &AgentCtx,
        durable: &Durable,
        name: &str,
        run: &Run<'_>,
    ) -> Result<(), RunOutcome> {
        let stored = durable.sweep(ctx).await.map_err(|e| {
            RunOutcome::failed(e.context("listing the chat's sessions"), run.start())
        })?;
        let mut names: Vec<String> = (self.inner.sessions.list(ctx).into_iter())
            .map(|info| info.name)
            .chain(stored)
            .filter(|other| other != name)
            .collect();
        names.sort();
        names.dedup();
        let per_chat = self.inner.host.session_limits.per_chat;
        if names.len() >= per_chat {
            let message = format!(
                "this chat has {} sessions, as many as it may (SessionLimits::per_chat): close \
                 one first",
                names.len()
            );
            return Err(RunOutcome::no_session(Refusal::Limit(message), run.start()));
        }
        Ok(())
    }
}
