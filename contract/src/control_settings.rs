//! The operator's execution controls as the policy file states them: per
//! plugin (`[plugins.ID.controls]`) and per method (`[plugins.ID.methods.NAME]`,
//! whose keys override the plugin's), the cost budgets (`[budgets]`) and the
//! flags that need approval (`[approval]`). Parsed strictly, like the rest of
//! the policy; [`ControlSettings::check`] and friends reject values that parse
//! but make no sense, naming the key.

use serde::{Deserialize, Serialize};

/// Costs are kept in millionths, so that sums are exact.
pub(crate) const MICROS: f64 = 1e6;

/// The largest cost or budget the policy accepts (so that millionths of any
/// number of them fit a `u64`).
const MAX_COST: f64 = 1e9;

/// The most calls a minute a rate limit may allow.
const MAX_RATE: u32 = 1_000_000;

/// The longest method name, as a manifest allows it (`MAX_NAME_LEN`; not
/// imported, as the manifest's checks depend on the errors, which depend on
/// these settings).
const MAX_METHOD_NAME: usize = 64;

/// The longest breaker window or recovery time, in seconds (a day).
const MAX_SECONDS: u64 = 86_400;

/// The controls on calls of a plugin's methods, or of one method. Every key
/// is optional: a method's keys override its plugin's, and a key set nowhere
/// controls nothing.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlSettings {
    /// Calls a minute (a token bucket holding a minute's calls, refilled
    /// continuously).
    pub rate_limit: Option<u32>,
    /// Who shares one bucket [default: `plugin`].
    pub rate_limit_scope: Option<RateScope>,
    /// A circuit breaker on the calls' failures.
    pub breaker: Option<BreakerSettings>,
    /// What one successful call costs, drawn from the run's and the chat's
    /// budgets (`[budgets]`).
    pub cost_per_use: Option<f64>,
    /// The method has effects that are hard to undo.
    pub dangerous: Option<bool>,
    /// The method acts with the user's authority.
    pub requires_auth: Option<bool>,
    /// A call of the method pauses the run until a person answers it
    /// (`Host::resume`), as `[approval] pause_for` does for a flag.
    pub pause: Option<bool>,
}

/// Who shares a rate limit's bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateScope {
    /// Every call, whoever makes it.
    #[default]
    Plugin,
    /// Each chat has its own bucket.
    Chat,
    /// Each user has their own bucket (a call with no user id counts under
    /// its chat).
    User,
}

/// A circuit breaker: it opens after `failures` failed calls in a row, or
/// when at least `min_calls` calls in the last `window_s` seconds failed at
/// `error_rate` or more; an open breaker refuses calls until `recovery_s`
/// have passed, then lets one probe call through (half-open): its success
/// closes the breaker, its failure opens it again.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BreakerSettings {
    /// Consecutive failures that open it.
    pub failures: Option<u32>,
    /// The share of failed calls in the window (0 to 1) that opens it.
    pub error_rate: Option<f64>,
    /// The window the error rate is measured over, in seconds (default 60).
    #[serde(default = "default_window_s")]
    pub window_s: u64,
    /// Calls the window must hold before its error rate counts (default 10).
    #[serde(default = "default_min_calls")]
    pub min_calls: u32,
    /// Seconds an open breaker refuses calls before a probe (default 30).
    #[serde(default = "default_recovery_s")]
    pub recovery_s: u64,
}

fn default_window_s() -> u64 {
    60
}

fn default_min_calls() -> u32 {
    10
}

fn default_recovery_s() -> u64 {
    30
}

/// A flag of a method that the operator may require approval for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flag {
    /// `dangerous = true`.
    Dangerous,
    /// `requires_auth = true`.
    RequiresAuth,
}

impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Flag::Dangerous => "dangerous",
            Flag::RequiresAuth => "requires_auth",
        })
    }
}

/// Cost budgets, over every plugin's calls.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// What one Python run's calls may cost in all.
    pub per_run: Option<f64>,
    /// What the calls made for one chat may cost in all, over the host's
    /// life.
    pub per_chat: Option<f64>,
}

/// Which method flags need a call approved: by the embedder's approver
/// within the run (`require_for`), or by a person later, the run paused at
/// the call until then (`pause_for`: pausing wins where a flag is in both).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// The flags; a call of a method with any of them is refused unless
    /// approved.
    #[serde(default)]
    pub require_for: Vec<Flag>,
    /// The flags; a call of a method with any of them pauses the run: its
    /// outcome names the call and a token that resumes it.
    #[serde(default)]
    pub pause_for: Vec<Flag>,
}

impl ControlSettings {
    /// Whether any key is set.
    pub fn is_empty(&self) -> bool {
        *self == ControlSettings::default()
    }

    /// The problem with a value, named by its key under `path` (e.g.
    /// `plugins.weather.methods.forecast`).
    pub fn check(&self, path: &str) -> Result<(), String> {
        if let Some(rate) = self.rate_limit
            && !(1..=MAX_RATE).contains(&rate)
        {
            return Err(format!(
                "`{path}.rate_limit`: {rate} is not 1 to {MAX_RATE} calls a minute"
            ));
        }
        if let Some(cost) = self.cost_per_use {
            check_amount(&format!("{path}.cost_per_use"), cost)?;
        }
        if let Some(breaker) = &self.breaker {
            breaker.check(&format!("{path}.breaker"))?;
        }
        Ok(())
    }

    /// These settings with `over`'s keys in place of theirs.
    pub fn overridden_by(&self, over: &ControlSettings) -> ControlSettings {
        ControlSettings {
            rate_limit: over.rate_limit.or(self.rate_limit),
            rate_limit_scope: over.rate_limit_scope.or(self.rate_limit_scope),
            breaker: over.breaker.clone().or_else(|| self.breaker.clone()),
            cost_per_use: over.cost_per_use.or(self.cost_per_use),
            dangerous: over.dangerous.or(self.dangerous),
            requires_auth: over.requires_auth.or(self.requires_auth),
            pause: over.pause.or(self.pause),
        }
    }

    /// The flags set.
    pub fn flags(&self) -> impl Iterator<Item = Flag> {
        [
            (self.dangerous, Flag::Dangerous),
            (self.requires_auth, Flag::RequiresAuth),
        ]
        .into_iter()
        .filter_map(|(set, flag)| (set == Some(true)).then_some(flag))
    }

    /// The cost of a call, in millionths.
    pub fn cost_micros(&self) -> u64 {
        self.cost_per_use.map_or(0, to_micros)
    }
}

impl BreakerSettings {
    fn check(&self, path: &str) -> Result<(), String> {
        if self.failures.is_none() && self.error_rate.is_none() {
            return Err(format!(
                "`{path}`: give `failures`, `error_rate` or both (what opens the breaker)"
            ));
        }
        if self.failures == Some(0) {
            return Err(format!("`{path}.failures`: 0 would open it at once"));
        }
        if let Some(rate) = self.error_rate
            && !(rate > 0.0 && rate <= 1.0)
        {
            return Err(format!(
                "`{path}.error_rate`: {rate} is not a share of calls above 0 and at most 1"
            ));
        }
        for (key, seconds) in [("window_s", self.window_s), ("recovery_s", self.recovery_s)] {
            if !(1..=MAX_SECONDS).contains(&seconds) {
                return Err(format!(
                    "`{path}.{key}`: {seconds} is not 1 to {MAX_SECONDS} seconds"
                ));
            }
        }
        if self.min_calls == 0 {
            return Err(format!("`{path}.min_calls`: it must be at least 1"));
        }
        Ok(())
    }
}

impl Budgets {
    /// Ok if each budget is a finite amount within the bounds, else what is wrong.
    pub fn check(&self) -> Result<(), String> {
        for (key, amount) in [("per_run", self.per_run), ("per_chat", self.per_chat)] {
            if let Some(amount) = amount {
                check_amount(&format!("budgets.{key}"), amount)?;
            }
        }
        Ok(())
    }
}

fn check_amount(path: &str, amount: f64) -> Result<(), String> {
    if amount.is_finite() && (0.0..=MAX_COST).contains(&amount) {
        Ok(())
    } else {
        Err(format!(
            "`{path}`: {amount} is not an amount from 0 to {MAX_COST}"
        ))
    }
}

/// An amount in millionths (checked to be 0 to `MAX_COST`).
pub fn to_micros(amount: f64) -> u64 {
    (amount * MICROS).round() as u64
}

/// Millionths as an amount.
pub fn from_micros(micros: u64) -> f64 {
    micros as f64 / MICROS
}

/// Whether `name` could be a method's name: a Python identifier.
pub(crate) fn is_method_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= MAX_METHOD_NAME
}
