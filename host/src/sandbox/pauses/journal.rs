//! A run's journal: the answer each of its method calls got, in order, kept
//! while the run may pause; and, in a resumed run, the paused run's journal
//! replayed: the same calls get the same answers without being made again,
//! up to the call that paused, which gets the person's answer.

use std::sync::Arc;

use ring::digest;
use serde::{Deserialize, Serialize};

use crate::bindings::python::sandwit::interpreter::methods::Marshalled;
use crate::bindings::wit;
use crate::controls::ControlEvent;
use crate::runtime::tape::Readings;
use crate::sandbox::pauses::Resume;
use crate::sandbox::run::outcome::Event;
use sandwit_contract::types::Value;

/// The most bytes of answers a run keeps; one whose calls got more cannot
/// be paused (its pause is refused, naming this).
pub(crate) const MAX_JOURNAL_BYTES: usize = 64 << 20;

/// The SHA-256 of a call's marshalled arguments: what a replayed call is
/// checked against.
pub(crate) type ArgsDigest = [u8; 32];

/// The digest of `args`.
pub(crate) fn args_digest(args: &[u8]) -> ArgsDigest {
    let mut out = [0; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, args).as_ref());
    out
}

/// One call as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Answered {
    pub(crate) method: String,
    pub(crate) args: ArgsDigest,
    pub(crate) answer: Answer,
}

/// What the code got back from a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Answer {
    /// A value, marshalled.
    Value(Vec<u8>),
    /// An error: its kind's name (as `calls::answer` spells it) and message.
    Error(String, String),
}

impl Answer {
    pub(crate) fn of(result: &Result<Marshalled, wit::CallError>) -> Answer {
        match result {
            Ok(value) => Answer::Value(value.clone()),
            Err(error) => {
                let (kind, message) = match error {
                    wit::CallError::InvalidArguments(m) => ("invalid_arguments", m),
                    wit::CallError::UnknownMethod(m) => ("unknown_method", m),
                    wit::CallError::Failed(m) => ("failed", m),
                    wit::CallError::Denied(m) => ("denied", m),
                    wit::CallError::LimitExceeded(m) => ("limit_exceeded", m),
                };
                Answer::Error(kind.into(), message.clone())
            }
        }
    }

    pub(crate) fn to_result(&self) -> Result<Marshalled, wit::CallError> {
        match self {
            Answer::Value(value) => Ok(value.clone()),
            Answer::Error(kind, message) => Err(match kind.as_str() {
                "invalid_arguments" => wit::CallError::InvalidArguments(message.clone()),
                "unknown_method" => wit::CallError::UnknownMethod(message.clone()),
                "denied" => wit::CallError::Denied(message.clone()),
                "limit_exceeded" => wit::CallError::LimitExceeded(message.clone()),
                _ => wit::CallError::Failed(message.clone()),
            }),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Answer::Value(value) => value.len(),
            Answer::Error(kind, message) => kind.len() + message.len(),
        }
    }
}

/// Where a run stood when it paused: what its resumed run goes on from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Standing {
    /// Fuel left, where the run metered fuel.
    pub(crate) fuel_left: Option<u64>,
    /// Time left, in milliseconds.
    pub(crate) time_left_ms: u64,
    /// What its calls had cost, in millionths.
    pub(crate) spent_micros: u64,
}

/// The call a run paused at.
#[derive(Debug, Clone)]
pub(crate) struct PendingCall {
    pub(crate) plugin: String,
    pub(crate) method: String,
    pub(crate) args: Value,
    pub(crate) digest: ArgsDigest,
    pub(crate) standing: Standing,
}

/// What a resumed run replays: its paused run's answers and readings, the
/// call it paused at, where it stood then, and the person's answer.
#[derive(Debug)]
pub(crate) struct Resumed {
    pub(crate) answers: Vec<Answered>,
    pub(crate) readings: Readings,
    pub(crate) plugin: String,
    pub(crate) method: String,
    pub(crate) digest: ArgsDigest,
    pub(crate) standing: Standing,
    pub(crate) decision: Resume,
    /// Whether the host meters time with epochs (the resumed call's
    /// deadline is then set in the store too).
    pub(crate) epochs: bool,
    /// For a run in a session: the runs of the session's stored copy when
    /// the paused run began (none: it had none), which the resumed run
    /// must find.
    pub(crate) session_runs: Option<u32>,
}

/// What the journal says of a call the code makes.
pub(crate) enum Step {
    /// Make it.
    Live,
    /// Hand back the answer it got before the pause.
    Replayed(Result<Marshalled, wit::CallError>),
    /// It is the call the run paused at: go on from where the paused run
    /// stood, with the person's answer.
    Resumed(Arc<Resumed>),
    /// The code did not make the calls its paused run made: the resumed run
    /// ends with this message.
    Diverged(String),
}

/// A run's journal (in its store's state).
#[derive(Default)]
pub(crate) struct Journal {
    /// The answers kept; none for a run that cannot pause.
    kept: Option<Kept>,
    replay: Option<(Arc<Resumed>, usize)>,
    /// Set when a call paused the run.
    pub(crate) paused: Option<PendingCall>,
    /// Set when a resumed run's code did not repeat its paused run.
    pub(crate) diverged: Option<String>,
    /// Why the run cannot pause, for a run that cannot.
    unpausable: Option<String>,
}

#[derive(Default)]
struct Kept {
    answers: Vec<Answered>,
    bytes: usize,
    overflowed: bool,
}

impl Journal {
    /// The journal of a run that may pause, replaying `resumed` first if
    /// given.
    pub(crate) fn pausable(resumed: Option<Arc<Resumed>>) -> Journal {
        Journal {
            kept: Some(Kept::default()),
            replay: resumed.map(|r| (r, 0)),
            ..Journal::default()
        }
    }

    /// The journal of a run that cannot pause, and why.
    pub(crate) fn unpausable(why: impl Into<String>) -> Journal {
        Journal {
            unpausable: Some(why.into()),
            ..Journal::default()
        }
    }

    /// Whether it keeps answers (a call's arguments are digested then).
    pub(crate) fn keeps(&self) -> bool {
        self.kept.is_some()
    }

    /// Why a call that pauses cannot pause this run, if it cannot.
    pub(crate) fn cannot_pause(&self) -> Option<String> {
        match &self.kept {
            None => Some(
                self.unpausable
                    .clone()
                    .unwrap_or_else(|| "it keeps no journal".into()),
            ),
            Some(kept) if kept.overflowed => Some(format!(
                "its calls' answers came to more than {} MiB, more than a paused run may replay",
                MAX_JOURNAL_BYTES >> 20
            )),
            Some(_) => None,
        }
    }

    /// What to do about a call of `method` whose arguments digest to
    /// `digest`, the code's next.
    pub(crate) fn step(&mut self, method: &str, digest: Option<&ArgsDigest>) -> Step {
        let Some((resumed, next)) = &mut self.replay else {
            return Step::Live;
        };
        let call = *next + 1;
        let (expected, expected_args) = match resumed.answers.get(*next) {
            Some(answered) => (&answered.method, &answered.args),
            None => (&resumed.method, &resumed.digest),
        };
        if expected != method || Some(expected_args) != digest {
            let what = if expected == method {
                format!("`{method}` with other arguments")
            } else {
                format!("`{method}`")
            };
            return Step::Diverged(format!(
                "the resumed code did not repeat the paused run: its call {call} was of \
                 `{expected}`, now it is {what} (code whose calls depend on something outside \
                 the run, such as a file changed since, cannot be resumed)"
            ));
        }
        *next += 1;
        match resumed.answers.get(call - 1) {
            Some(answered) => Step::Replayed(answered.answer.to_result()),
            None => {
                let resumed = resumed.clone();
                self.replay = None;
                Step::Resumed(resumed)
            }
        }
    }

    /// Keeps the answer a call of `method` with arguments digesting to
    /// `digest` got.
    pub(crate) fn keep(
        &mut self,
        method: &str,
        digest: Option<ArgsDigest>,
        result: &Result<Marshalled, wit::CallError>,
    ) {
        let (Some(kept), Some(args)) = (&mut self.kept, digest) else {
            return;
        };
        if kept.overflowed {
            return;
        }
        let answer = Answer::of(result);
        kept.bytes += answer.bytes() + method.len() + 32;
        if kept.bytes > MAX_JOURNAL_BYTES {
            kept.overflowed = true;
            kept.answers = Vec::new();
            return;
        }
        kept.answers.push(Answered {
            method: method.to_string(),
            args,
            answer,
        });
    }

    /// The answers kept, once the run paused.
    pub(crate) fn take_answers(&mut self) -> Vec<Answered> {
        self.kept.take().map(|k| k.answers).unwrap_or_default()
    }
}

/// Whether a resumed run's `events` show it reached its paused call (the
/// person's answer is the first event a replay records).
pub(crate) fn events_reached_pause(events: &[Event]) -> bool {
    events.iter().any(|event| {
        matches!(
            event,
            Event::Control {
                event: ControlEvent::Resumed { .. },
                ..
            }
        )
    })
}
