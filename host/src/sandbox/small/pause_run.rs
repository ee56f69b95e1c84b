//! Pauses of the small interpreter's runs: a paused run kept in the host's
//! store with its token, and a resume ([`PythonSandbox::resume`]) that
//! replays it (`sandbox/pauses`).

use std::sync::Arc;
use std::time::Instant;

use super::PythonSandbox;
use crate::sandbox::pauses::journal::{Resumed, events_reached_pause};
use crate::sandbox::pauses::record::{Record, Unkept, Unresumable};
use crate::sandbox::pauses::{Paused, Resume};
use crate::sandbox::run::RunOptions;
use crate::sandbox::run::functions::{CLIENT_FUNCTIONS, is_exception_type_name};
use crate::sandbox::run::outcome::RunOutcome;
use crate::toolbox::Toolbox;
use sandwit_contract::types::{AgentCtx, Value};
use sandwit_value::DecodeLimits;

impl PythonSandbox {
    /// Resumes the run that paused with `token` (its outcome's
    /// [`RunOutcome::paused`]) for `ctx`'s chat, with the methods of
    /// `plugins` (the same ones, or a toolbox that has the methods it calls
    /// after the pause): the code runs again from its start, every call it
    /// made before the pause gets the answer it got then without being made
    /// again, and the paused call gets `answer`. The run goes on with the
    /// limits, fuel, time and budget it had left, under `options`' cancel
    /// handle, listener and approver (their limits, inputs and session are
    /// the paused run's). The outcome is the run's as a whole: its stdout
    /// holds what the code printed before the pause too, its events those
    /// since the resume.
    ///
    /// A token resumes once, in any process sharing this host's store and
    /// session key, until it expires; a token that is forged, spent,
    /// expired, another chat's or another version's is refused with
    /// `ResumeRefused`, and the code that diverges from its paused run
    /// ends with `ResumeDiverged`. A resume that never reached the paused
    /// call (no run slot, a limit during the replay) leaves the token good.
    pub async fn resume(
        &self,
        ctx: &AgentCtx,
        plugins: &Toolbox,
        token: &str,
        answer: Resume,
        options: &RunOptions,
    ) -> RunOutcome {
        RunOutcome::traced(
            "small",
            self.resume_run(ctx, plugins, token, answer, options),
        )
        .await
    }

    /// The call that the run paused with `token` waits at, for `ctx`'s
    /// chat, without resuming it (what a person is asked to answer); the
    /// token stays good. Refused as [`PythonSandbox::resume`] refuses it,
    /// with the reason.
    pub async fn pending(&self, ctx: &AgentCtx, token: &str) -> Result<Paused, String> {
        let inner = &self.inner;
        let id = inner.pauses.check(token).map_err(|e| e.to_string())?;
        match inner.pauses.read(&id, ctx, &inner.hash).await {
            Ok(Ok(record)) => paused_at(record, token),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("reading the paused run from the store: {e:#}")),
        }
    }

    /// Ends the run that paused with `token` for `ctx`'s chat without
    /// resuming it: the call it waited at, which is never made. The token
    /// is spent and the chat's place for a paused run freed (an
    /// application that will not answer, or a person who closed the
    /// question). Refused as [`PythonSandbox::resume`] refuses a token,
    /// with the reason.
    pub async fn discard(&self, ctx: &AgentCtx, token: &str) -> Result<Paused, String> {
        let inner = &self.inner;
        let id = inner.pauses.check(token).map_err(|e| e.to_string())?;
        match inner.pauses.claim(&id, ctx, &inner.hash).await {
            Ok(Ok(record)) => paused_at(record, token),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("removing the paused run from the store: {e:#}")),
        }
    }

    async fn resume_run(
        &self,
        ctx: &AgentCtx,
        plugins: &Toolbox,
        token: &str,
        answer: Resume,
        options: &RunOptions,
    ) -> RunOutcome {
        let inner = &self.inner;
        let refused =
            |e: Unresumable| RunOutcome::not_run("ResumeRefused", e.to_string(), Instant::now());
        let id = match inner.pauses.check(token) {
            Ok(id) => id,
            Err(e) => return refused(e),
        };
        // An answer the call cannot take is refused before the record is
        // claimed: the token stays good, and no other resume races a put-back.
        if matches!(answer, Resume::Approve | Resume::Raise { .. }) {
            match inner.pauses.read(&id, ctx, &inner.hash).await {
                Ok(Ok(record)) => {
                    if let Some(why) = unanswerable(&record.plugin, &record.method, &answer) {
                        return RunOutcome::not_run("ResumeRefused", why, Instant::now());
                    }
                }
                Ok(Err(e)) => return refused(e),
                Err(e) => {
                    let e = e.context("reading the paused run from the store");
                    return RunOutcome::failed(e, Instant::now());
                }
            }
        }
        let record = match inner.pauses.claim(&id, ctx, &inner.hash).await {
            Ok(Ok(record)) => record,
            Ok(Err(e)) => return refused(e),
            Err(e) => {
                let e = e.context("reading the paused run from the store");
                return RunOutcome::failed(e, Instant::now());
            }
        };
        let inputs = match record.inputs.is_empty() {
            true => None,
            false => match Value::from_marshal(&record.inputs, &DecodeLimits::default()) {
                Ok(inputs) => Some(inputs),
                Err(e) => {
                    let message = format!("the paused run's inputs do not decode: {e}");
                    return RunOutcome::not_run("ResumeRefused", message, Instant::now());
                }
            },
        };
        let resumed = Resumed {
            answers: record.answers.clone(),
            readings: record.readings.clone(),
            plugin: record.plugin.clone(),
            method: record.method.clone(),
            digest: record.digest,
            standing: record.standing,
            decision: answer,
            epochs: inner.host.runtime().metering.epochs(),
            session_runs: record.session.as_ref().and_then(|s| s.runs),
        };
        let mut options = options.clone();
        options.limits = Some((&record.limits).into());
        options.inputs = inputs;
        options.session = record.session.as_ref().map(|s| s.name.clone());
        options.functions = record.functions.clone();
        options.resumed = Some(Arc::new(resumed));
        let outcome = self.execute(ctx, plugins, &record.code, &options).await;
        if !events_reached_pause(&outcome.events)
            && let Err(e) = inner.pauses.put_back(&id, &record).await
        {
            tracing::error!("a resume that did not reach its paused call lost its token: {e:#}");
        }
        outcome
    }

    /// Keeps the paused run `record` in the host's store and gives
    /// `outcome` its token.
    pub(super) async fn keep_pause(
        &self,
        mut record: Record,
        mut outcome: RunOutcome,
    ) -> RunOutcome {
        record.interpreter = self.inner.hash.clone();
        match self.inner.pauses.keep(&record).await {
            Ok(token) => {
                if let Some(paused) = &mut outcome.paused {
                    paused.token = token;
                    paused.expires_at = record.expires_at;
                }
            }
            Err(e) => {
                let why = match &e {
                    Unkept::Full(_) => e.to_string(),
                    Unkept::Store(e) => {
                        tracing::error!("a paused run could not be kept: {e:#}");
                        format!("the host's store did not keep it: {e:#}")
                    }
                };
                outcome.refuse_pause(format!(
                    "plugin `{}`, method `{}` pauses the run, and it cannot wait: {why}",
                    record.plugin, record.method
                ));
            }
        }
        outcome
    }
}

/// Why `answer` cannot answer the call of `plugin`'s `method` a run paused
/// at, if it cannot: an application's function is not the host's to make
/// (approved), and an exception's type must be a dotted identifier.
/// The call `record`, paused with `token`, waits at.
fn paused_at(record: Record, token: &str) -> Result<Paused, String> {
    let args = Value::from_marshal(&record.args, &DecodeLimits::default())
        .map_err(|e| format!("the paused call's arguments do not decode: {e}"))?;
    Ok(Paused {
        plugin: record.plugin,
        method: record.method,
        args,
        token: token.to_string(),
        expires_at: record.expires_at,
    })
}

fn unanswerable(plugin: &str, method: &str, answer: &Resume) -> Option<String> {
    match answer {
        Resume::Approve if plugin == CLIENT_FUNCTIONS => Some(format!(
            "function `{method}` is the application's: answer it with a result, an exception \
             or a denial, not an approval"
        )),
        Resume::Raise { name, .. } if !is_exception_type_name(name) => Some(format!(
            "the exception's type {:?} is not a dotted Python identifier of at most 128 characters",
            sandwit_contract::text::cut(name.clone(), 140)
        )),
        _ => None,
    }
}
