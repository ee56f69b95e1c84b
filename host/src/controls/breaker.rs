//! Circuit breakers: closed (calls go through, failures counted), open
//! (calls refused at once until the recovery time has passed), half-open
//! (one probe call goes through; its outcome closes or reopens the breaker).
//!
//! Hosts that share [`SharedControls`](super::SharedControls) also tell
//! each other when a breaker opens: each keeps its own counts and states,
//! and refuses calls while another host's copy of the breaker is open, as
//! read at most once per [`SHARED_VIEW_TTL`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use sandwit_contract::control_settings::BreakerSettings;

/// Slots the error-rate window is counted in: a call leaves the window
/// within a slot's length (a tenth of the window) of when it should.
const SLOTS: usize = 10;

/// The state of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Calls go through.
    Closed,
    /// Calls are refused until the recovery time has passed.
    Open,
    /// The recovery time has passed: the next call is a probe (or one is
    /// in flight, and others are refused).
    HalfOpen,
}

/// How long what a host read of the other hosts' copy of a breaker is
/// trusted before it is read again: a breaker another replica opened is
/// obeyed here within this long, for one read per breaker per this long.
pub(crate) const SHARED_VIEW_TTL: Duration = Duration::from_secs(1);

/// One breaker, shared by the calls it guards.
pub(crate) struct Breaker {
    settings: BreakerSettings,
    /// What names it among every host's that share controls.
    name: String,
    /// When the other hosts' copy was last read, on the clock, and until
    /// when it was open then.
    shared_view: Mutex<Option<(Duration, Option<Duration>)>>,
    state: Mutex<State>,
    trips: AtomicU64,
}

struct State {
    phase: Phase,
    /// Failures in a row, while closed.
    consecutive: u32,
    window: Window,
}

#[derive(Clone, Copy)]
enum Phase {
    Closed,
    Open { until: Duration },
    HalfOpen { probing: bool },
}

/// Calls and failures in the last `SLOTS` slots.
struct Window {
    slot_len: Duration,
    /// Per slot: its number since the clock's origin, calls, failures.
    slots: [(u64, u32, u32); SLOTS],
}

/// What a call admitted by the breaker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ticket {
    /// A call while the breaker is closed.
    Normal,
    /// The one call of a half-open breaker.
    Probe,
}

/// Why a breaker refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Open: the next probe is allowed after this long.
    Open(Duration),
    /// Half-open, and the probe is in flight.
    Probing,
}

impl Breaker {
    /// A closed breaker with `settings`; `name` is unique to it among a
    /// host's.
    pub(crate) fn new(settings: BreakerSettings, name: String) -> Self {
        let slot_len = Duration::from_secs(settings.window_s) / SLOTS as u32;
        Breaker {
            settings,
            name,
            shared_view: Mutex::new(None),
            state: Mutex::new(State {
                phase: Phase::Closed,
                consecutive: 0,
                window: Window {
                    slot_len,
                    slots: [(u64::MAX, 0, 0); SLOTS],
                },
            }),
            trips: AtomicU64::new(0),
        }
    }

    /// Its settings.
    pub(crate) fn settings(&self) -> &BreakerSettings {
        &self.settings
    }

    /// Its name among every host's that share controls.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Until when the other hosts' copy is open, as read within
    /// [`SHARED_VIEW_TTL`] before `now`; `None`: to be read again.
    pub(crate) fn shared_view(&self, now: Duration) -> Option<Option<Duration>> {
        let view = *self.shared_view.lock().unwrap_or_else(|e| e.into_inner());
        view.filter(|(read_at, _)| now.saturating_sub(*read_at) < SHARED_VIEW_TTL)
            .map(|(_, open_until)| open_until)
    }

    /// Keeps what was read at `now` of the other hosts' copy (open for
    /// `open_for`, or not open); returns until when it is open.
    pub(crate) fn remember_shared(
        &self,
        now: Duration,
        open_for: Option<Duration>,
    ) -> Option<Duration> {
        let open_until = open_for.map(|d| now + d);
        *self.shared_view.lock().unwrap_or_else(|e| e.into_inner()) = Some((now, open_until));
        open_until
    }

    /// How many times it opened.
    pub(crate) fn trips(&self) -> u64 {
        self.trips.load(Ordering::Relaxed)
    }

    /// Its state at `now`.
    pub(crate) fn state(&self, now: Duration) -> BreakerState {
        match self.lock().phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { until } if now < until => BreakerState::Open,
            Phase::Open { .. } | Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Lets a call through at `now`, or refuses it.
    pub(crate) fn admit(&self, now: Duration) -> Result<Ticket, Refusal> {
        let mut state = self.lock();
        match state.phase {
            Phase::Closed => Ok(Ticket::Normal),
            Phase::Open { until } if now < until => Err(Refusal::Open(until - now)),
            Phase::Open { .. } | Phase::HalfOpen { probing: false } => {
                state.phase = Phase::HalfOpen { probing: true };
                Ok(Ticket::Probe)
            }
            Phase::HalfOpen { probing: true } => Err(Refusal::Probing),
        }
    }

    /// Records the outcome of a call it let through; if the call opened
    /// the breaker, why.
    pub(crate) fn record(&self, ticket: Ticket, failed: bool, now: Duration) -> Option<String> {
        let mut state = self.lock();
        let reason = match (ticket, state.phase) {
            (Ticket::Probe, _) if failed => Some("the probe call failed".to_string()),
            (Ticket::Probe, _) => {
                state.phase = Phase::Closed;
                state.consecutive = 0;
                state.window.clear();
                None
            }
            // Another call's outcome already opened it.
            (Ticket::Normal, Phase::Open { .. } | Phase::HalfOpen { .. }) => None,
            (Ticket::Normal, Phase::Closed) => {
                state.consecutive = if failed { state.consecutive + 1 } else { 0 };
                let (calls, failures) = state.window.record(failed, now);
                self.tripped(state.consecutive, calls, failures)
            }
        };
        if reason.is_some() {
            state.phase = Phase::Open {
                until: now + Duration::from_secs(self.settings.recovery_s),
            };
            state.consecutive = 0;
            state.window.clear();
            self.trips.fetch_add(1, Ordering::Relaxed);
        }
        reason
    }

    /// Gives back a probe whose call never finished (its future was
    /// dropped): the next call probes instead.
    pub(crate) fn release(&self, ticket: Ticket) {
        let mut state = self.lock();
        if ticket == Ticket::Probe && matches!(state.phase, Phase::HalfOpen { probing: true }) {
            state.phase = Phase::HalfOpen { probing: false };
        }
    }

    /// Why these counts open the breaker, if they do.
    fn tripped(&self, consecutive: u32, calls: u32, failures: u32) -> Option<String> {
        let s = &self.settings;
        if let Some(max) = s.failures
            && consecutive >= max
        {
            return Some(format!("{consecutive} failed calls in a row"));
        }
        if let Some(rate) = s.error_rate
            && calls >= s.min_calls
            && f64::from(failures) >= rate * f64::from(calls)
        {
            return Some(format!(
                "{failures} of {calls} calls failed in the last {} s (at least {rate} of them)",
                s.window_s
            ));
        }
        None
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Window {
    /// Counts a call at `now`; the calls and failures in the window.
    fn record(&mut self, failed: bool, now: Duration) -> (u32, u32) {
        let current = (now.as_nanos() / self.slot_len.as_nanos().max(1)) as u64;
        let slot = &mut self.slots[(current % SLOTS as u64) as usize];
        if slot.0 != current {
            *slot = (current, 0, 0);
        }
        slot.1 += 1;
        slot.2 += u32::from(failed);
        self.slots
            .iter()
            .filter(|(number, ..)| *number <= current && current - number < SLOTS as u64)
            .fold((0, 0), |(calls, failures), &(_, c, f)| {
                (calls + c, failures + f)
            })
    }

    fn clear(&mut self) {
        self.slots = [(u64::MAX, 0, 0); SLOTS];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(failures: Option<u32>, error_rate: Option<f64>) -> BreakerSettings {
        BreakerSettings {
            failures,
            error_rate,
            window_s: 60,
            min_calls: 4,
            recovery_s: 30,
        }
    }

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn closed_open_half_open_closed_and_open_again() {
        let breaker = Breaker::new(settings(Some(3), None), String::new());
        let call = |failed, now| {
            let ticket = breaker.admit(now).unwrap();
            breaker.record(ticket, failed, now)
        };
        assert_eq!(call(true, S(1)), None);
        assert_eq!(call(true, S(1)), None);
        // A success resets the count of failures in a row.
        assert_eq!(call(false, S(1)), None);
        assert_eq!(call(true, S(2)), None);
        assert_eq!(call(true, S(2)), None);
        assert_eq!(breaker.state(S(2)), BreakerState::Closed);
        let reason = call(true, S(2)).unwrap();
        assert!(reason.contains("3 failed calls in a row"), "{reason}");
        assert_eq!(breaker.trips(), 1);
        // Open: refused fast, saying when to try again.
        assert_eq!(breaker.state(S(10)), BreakerState::Open);
        assert_eq!(breaker.admit(S(10)), Err(Refusal::Open(S(22))));
        // Half-open: one probe, the others refused while it runs.
        assert_eq!(breaker.state(S(32)), BreakerState::HalfOpen);
        assert_eq!(breaker.admit(S(32)), Ok(Ticket::Probe));
        assert_eq!(breaker.admit(S(32)), Err(Refusal::Probing));
        // A probe that never finished lets the next call probe.
        breaker.release(Ticket::Probe);
        assert_eq!(breaker.admit(S(33)), Ok(Ticket::Probe));
        assert_eq!(breaker.record(Ticket::Probe, false, S(33)), None);
        assert_eq!(breaker.state(S(33)), BreakerState::Closed);
        // Closed, with a clean count: three more failures open it again.
        assert_eq!(call(true, S(34)), None);
        assert_eq!(call(true, S(34)), None);
        assert!(call(true, S(34)).is_some());
        assert_eq!(breaker.trips(), 2);
        // A failed probe opens it for another recovery time.
        assert_eq!(breaker.admit(S(64)), Ok(Ticket::Probe));
        let reason = breaker.record(Ticket::Probe, true, S(64)).unwrap();
        assert!(reason.contains("probe"), "{reason}");
        assert_eq!(breaker.admit(S(65)), Err(Refusal::Open(S(29))));
        assert_eq!(breaker.trips(), 3);
    }

    #[test]
    fn the_error_rate_over_the_window_opens_it() {
        let breaker = Breaker::new(settings(None, Some(0.5)), String::new());
        let call = |failed, now| {
            let ticket = breaker.admit(now).unwrap();
            breaker.record(ticket, failed, now)
        };
        // Failures alternate with successes: never many in a row, but half.
        assert_eq!(call(true, S(0)), None);
        assert_eq!(call(false, S(1)), None);
        assert_eq!(
            call(true, S(2)),
            None,
            "3 calls are fewer than min_calls (4)"
        );
        let reason = call(false, S(3)).unwrap();
        assert!(reason.contains("2 of 4 calls failed"), "{reason}");

        // Calls older than the window no longer count.
        let breaker = Breaker::new(settings(None, Some(0.5)), String::new());
        let call = |failed, now| {
            let ticket = breaker.admit(now).unwrap();
            breaker.record(ticket, failed, now)
        };
        assert_eq!(call(true, S(0)), None);
        assert_eq!(call(true, S(1)), None);
        for t in 70..73 {
            assert_eq!(call(false, S(t)), None);
        }
        assert_eq!(call(true, S(73)), None, "1 of 4 in the window, not 3 of 6");
    }
}
