//! A run's outcome, made from how its code ended and what its state holds.

use std::time::{Duration, Instant};

use wasmtime_wasi::I32Exit;

use crate::bindings::python::exports::sandwit::interpreter::runner;
use crate::plugin::trap_message;
use crate::runtime::guard::Stopped;
use crate::sandbox::pauses::Paused;
use crate::sandbox::run::outcome::{LimitHit, RunError, RunOutcome, RunStatus};
use crate::sandbox::run::state::RunState;
use crate::sandbox::values::decode_result;
use sandwit_contract::error::MAX_MESSAGE_BYTES;
use sandwit_contract::limits::{LimitKind, RunLimits};
use sandwit_contract::text::cut;
use sandwit_contract::types::Value;

/// The error type of a run whose interpreter trapped (a bug, not the code).
const TRAP_TYPE: &str = "InterpreterTrap";

/// How a run ended: its status, the code's error and the limit that ended
/// it, if any.
type Ending = (RunStatus, Option<RunError>, Option<LimitHit>);

/// The outcome of a run whose code ended with `result`, from what its
/// state holds: output, events, handoff, the value and the limit that
/// ended it, if any.
pub(crate) fn finish(
    state: &mut RunState,
    result: Result<runner::Outcome, Stopped>,
    limits: &RunLimits,
    fuel_used: u64,
    #[cfg_attr(not(feature = "internals"), expect(unused_variables))] (prepared, reused): (
        bool,
        bool,
    ),
    start: Instant,
) -> RunOutcome {
    let stdout = String::from_utf8_lossy(&state.stdout.take().0).into_owned();
    let stderr = String::from_utf8_lossy(&state.stderr.take().0).into_owned();
    let output_full = stdout.len().max(stderr.len()) >= limits.max_output_bytes;
    let ((status, error, limit), value) = match result {
        _ if state.handoff.is_some() => ((RunStatus::AgentHandoff, None, None), None),
        _ if state.journal.paused.is_some() => ((RunStatus::Paused, None, None), None),
        Err(_) if state.journal.diverged.is_some() => {
            let error = RunError {
                type_name: "ResumeDiverged".to_string(),
                message: state.journal.diverged.take().expect("checked"),
                line: None,
                traceback: String::new(),
            };
            ((RunStatus::Error, Some(error), None), None)
        }
        Ok(outcome) => returned(state, outcome, limits, output_full),
        Err(_) if state.stop.is_some() => {
            let (kind, message) = state.stop.take().expect("checked");
            let ending = (RunStatus::LimitExceeded, None, limit_hit(kind, message));
            (ending, None)
        }
        Err(stopped) => (stopped_by(stopped, limits, output_full), None),
    };
    RunOutcome {
        status,
        stdout,
        stderr,
        error,
        limit,
        files: Vec::new(),
        events: state.events.take(),
        handoff: state.handoff.take(),
        result: value,
        fuel_used,
        cost: state.controls.spent(),
        #[cfg(feature = "internals")]
        prepared,
        #[cfg(feature = "internals")]
        reused,
        elapsed: start.elapsed(),
        queued: Duration::ZERO,
        session: None,
        paused: state.journal.paused.as_ref().map(|pending| Paused {
            plugin: pending.plugin.clone(),
            method: pending.method.clone(),
            args: pending.args.clone(),
            token: String::new(),
            expires_at: 0,
        }),
    }
}

/// Every limit that ends a run is reported so, its message cut as a call
/// error's is (it may quote what the code or a plugin sent).
fn limit_hit(kind: LimitKind, message: String) -> Option<LimitHit> {
    let message = cut(message, MAX_MESSAGE_BYTES);
    Some(LimitHit { kind, message })
}

/// The output limit, for a run that printed up to it (`output_full`).
fn output_limit(limits: &RunLimits) -> Option<LimitHit> {
    limit_hit(
        LimitKind::Output,
        format!(
            "printed {} bytes, the limit for stdout and for stderr",
            limits.max_output_bytes
        ),
    )
}

/// How a run ended whose interpreter's export returned `outcome`: its
/// value (decoded under the run's call limits), or the code's error.
fn returned(
    state: &RunState,
    outcome: runner::Outcome,
    limits: &RunLimits,
    output_full: bool,
) -> (Ending, Option<Value>) {
    match outcome {
        runner::Outcome::Ok(_) if output_full => {
            ((RunStatus::LimitExceeded, None, output_limit(limits)), None)
        }
        runner::Outcome::Ok(None) => ((RunStatus::Ok, None, None), None),
        runner::Outcome::Ok(Some(bytes)) => match decode_result(&bytes, &state.call_limits) {
            Ok(result) => ((RunStatus::Ok, None, None), Some(result)),
            Err(message) => {
                let hit = limit_hit(LimitKind::ValueSize, message);
                ((RunStatus::LimitExceeded, None, hit), None)
            }
        },
        runner::Outcome::Error(info) => {
            // The exception is the code's output too: under the same cap.
            let max = limits.max_output_bytes;
            let error = RunError {
                type_name: cut(info.type_name, 200),
                message: cut(info.message, max),
                line: info.line,
                traceback: cut(info.traceback, max),
            };
            let ending = match error.type_name.as_str() {
                "MemoryError" => {
                    let hit = limit_hit(LimitKind::Memory, "Python ran out of memory".into());
                    (RunStatus::LimitExceeded, Some(error), hit)
                }
                _ if output_full => (RunStatus::LimitExceeded, Some(error), output_limit(limits)),
                _ => (RunStatus::Error, Some(error), None),
            };
            (ending, None)
        }
    }
}

/// How a run ended that was stopped (no limit of its state's ended it):
/// cancelled, a limit of the host's guard, the code's exit, or a trap.
fn stopped_by(stopped: Stopped, limits: &RunLimits, output_full: bool) -> Ending {
    match stopped {
        Stopped::Cancelled => (RunStatus::Cancelled, None, None),
        Stopped::Limit(kind, message) => (RunStatus::LimitExceeded, None, limit_hit(kind, message)),
        // The code ended the interpreter itself (`os._exit(n)`): as
        // `sys.exit(n)` ends a run, 0 is a success and any other status a
        // `SystemExit` error. (WASI 0.2's `exit` says only success or
        // failure: the small interpreter's failures are all status 1.) The
        // instance is not reused either way.
        Stopped::Trap(err) if err.is::<I32Exit>() => match err.downcast_ref() {
            Some(I32Exit(0)) if output_full => {
                (RunStatus::LimitExceeded, None, output_limit(limits))
            }
            Some(I32Exit(0)) => (RunStatus::Ok, None, None),
            exit => {
                let status = exit.map_or(1, |&I32Exit(status)| status);
                let error = RunError {
                    type_name: "SystemExit".to_string(),
                    message: format!("the code exited with status {status} (os._exit)"),
                    line: None,
                    traceback: String::new(),
                };
                (RunStatus::Error, Some(error), None)
            }
        },
        Stopped::Trap(err) => {
            let error = RunError {
                type_name: TRAP_TYPE.to_string(),
                message: trap_message(&err),
                line: None,
                traceback: String::new(),
            };
            (RunStatus::Error, Some(error), None)
        }
    }
}
