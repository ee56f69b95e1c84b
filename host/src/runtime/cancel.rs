//! Ending a run from outside: the user left, the request was cancelled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// A handle that ends the runs it is given to (see
/// [`RunOptions::cancel`](crate::RunOptions::cancel)). Clones share it;
/// cancelling is final.
///
/// A cancelled run ends with [`RunStatus::Cancelled`](crate::RunStatus):
/// at once when it is blocked in the host (a plugin call in flight ends
/// with it), and otherwise at its next yield to the async runtime, which
/// under the default metering comes every million units of fuel. Under
/// [`Metering::DeadlineOnly`](crate::Metering) running Python code yields
/// only when a host function it calls waits (a plugin call that sleeps,
/// say) or at its deadline, so a busy script is cancelled at its deadline.
/// Dropping a run's future ends it as well.
#[derive(Clone, Debug, Default)]
pub struct Cancel {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    notify: Notify,
}

impl Cancel {
    /// A handle nothing has cancelled yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends every run given this handle (and every later one).
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::SeqCst)
    }

    /// Completes once the handle is cancelled.
    pub(crate) async fn cancelled(&self) {
        let notified = self.inner.notify.notified();
        tokio::pin!(notified);
        // Registered before the flag is read: a cancel in between wakes it.
        notified.as_mut().enable();
        if self.is_cancelled() {
            return;
        }
        notified.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_waiter_wakes_on_cancel_and_a_late_one_at_once() {
        let cancel = Cancel::new();
        let waiter = tokio::spawn({
            let cancel = cancel.clone();
            async move { cancel.cancelled().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        cancel.cancel();
        waiter.await.unwrap();
        cancel.cancelled().await;
        assert!(cancel.clone().is_cancelled());
    }
}
