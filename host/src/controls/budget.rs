//! What the calls of each chat have cost, against the per-chat budget. A
//! call's cost is reserved before it runs (so calls in flight together
//! cannot overspend) and given back if it fails. The spending is kept in
//! memory, or in [`SharedControls`] when hosts share it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::shared::{SharedControls, SharedControlsError};

/// The most chats whose spending is remembered. Past it, the tenth that
/// have spent least are forgotten at once (so memory stays bounded, what is
/// forgiven is the least, and the cost of choosing is spread over many new
/// chats).
pub(crate) const MAX_CHATS: usize = 100_000;

/// Spending per chat, in millionths.
pub(crate) struct ChatBudgets {
    limit: u64,
    /// The chats' spending when hosts share it; `spent` is then unused.
    shared: Option<Arc<dyn SharedControls>>,
    spent: Mutex<HashMap<String, u64>>,
}

impl ChatBudgets {
    /// Budgets of `limit` millionths per chat, spent in `shared` if given.
    pub(crate) fn new(limit: u64, shared: Option<Arc<dyn SharedControls>>) -> Self {
        ChatBudgets {
            limit,
            shared,
            spent: Mutex::new(HashMap::new()),
        }
    }

    /// The budget, in millionths.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Reserves `cost` of `chat`'s budget, or gives what it has spent if
    /// that would go past the budget.
    pub(crate) async fn reserve(
        &self,
        chat: &str,
        cost: u64,
    ) -> Result<Result<(), u64>, SharedControlsError> {
        match &self.shared {
            Some(shared) => shared.reserve(chat, cost, self.limit).await,
            None => Ok(self.reserve_here(chat, cost)),
        }
    }

    fn reserve_here(&self, chat: &str, cost: u64) -> Result<(), u64> {
        let mut spent = self.lock();
        let now = spent.get(chat).copied().unwrap_or(0);
        if now + cost > self.limit {
            return Err(now);
        }
        match spent.get_mut(chat) {
            Some(total) => *total += cost,
            None => {
                if spent.len() >= MAX_CHATS {
                    let mut totals: Vec<u64> = spent.values().copied().collect();
                    let (_, threshold, _) = totals.select_nth_unstable(MAX_CHATS / 10);
                    let threshold = *threshold;
                    spent.retain(|_, total| *total > threshold);
                }
                spent.insert(chat.to_string(), cost);
            }
        }
        Ok(())
    }

    /// Gives back a reservation of a call that did not succeed. A shared
    /// refund is sent on its own task (a permit is given back on drop,
    /// which cannot wait); if it is lost, the chat is charged for a call
    /// that failed, never the other way round.
    pub(crate) fn refund(&self, chat: &str, cost: u64) {
        let Some(shared) = &self.shared else {
            if let Some(total) = self.lock().get_mut(chat) {
                *total = total.saturating_sub(cost);
            }
            return;
        };
        let (shared, chat) = (shared.clone(), chat.to_string());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if let Err(e) = shared.refund(&chat, cost).await {
                        tracing::warn!(chat, "a chat budget's refund was lost: {e}");
                    }
                });
            }
            Err(_) => tracing::warn!(chat, "a chat budget's refund was lost: no runtime"),
        }
    }

    /// What `chat` has spent, in millionths.
    pub(crate) async fn spent(&self, chat: &str) -> Result<u64, SharedControlsError> {
        match &self.shared {
            Some(shared) => shared.spent(chat).await,
            None => Ok(self.lock().get(chat).copied().unwrap_or(0)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.spent.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stay_within_the_budget_and_refunds_give_back() {
        let budgets = ChatBudgets::new(30, None);
        budgets.reserve_here("a", 10).unwrap();
        budgets.reserve_here("a", 20).unwrap();
        assert_eq!(budgets.reserve_here("a", 1), Err(30));
        budgets.reserve_here("b", 30).unwrap();
        budgets.refund("a", 20);
        assert_eq!(budgets.lock()["a"], 10);
        budgets.reserve_here("a", 20).unwrap();
        assert_eq!(
            budgets.reserve_here("a", 0),
            Ok(()),
            "a free call always fits"
        );
    }

    #[test]
    fn the_chats_remembered_are_bounded() {
        let budgets = ChatBudgets::new(u64::MAX / 2, None);
        budgets.reserve_here("big", 1_000).unwrap();
        for i in 0..MAX_CHATS + 10 {
            budgets.reserve_here(&format!("c{i}"), 1).unwrap();
        }
        assert!(budgets.lock().len() <= MAX_CHATS);
        assert_eq!(budgets.lock()["big"], 1_000, "the least spent go first");
    }
}
