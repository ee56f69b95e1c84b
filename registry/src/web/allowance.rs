//! A request body read under an allowance that the handler raises as it
//! learns who is sending: the upload form reads a few KiB (preamble, part
//! headers, the token field) until the token is accepted and an upload slot
//! taken, and only then the component.
//!
//! multer's `Constraints` cannot do this: their limits are fixed before the
//! first byte, and they bound fields, not the preamble or part headers that
//! multer buffers while it looks for a boundary. Here the body itself hands
//! out no byte past the allowance: at the allowance it says "nothing yet"
//! (multer reads every chunk that is ready, so an error there would fail a
//! parse that had all it needed) and records that it is starved; a read of
//! the form that then still waits ([`Allowance::bounded`]) needs more than
//! the allowance, and is refused.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};

/// How many bytes of a body may be read: shared between the body and the
/// handler that raises it.
#[derive(Debug)]
pub(super) struct Allowance {
    /// Bytes handed to the reader so far.
    read: AtomicUsize,
    /// The most that may be handed out in all.
    cap: AtomicUsize,
    /// Whether the body's last answer was "nothing yet" because of the cap
    /// (bytes were waiting), not because none had arrived.
    starved: AtomicBool,
}

impl Allowance {
    /// An allowance of `cap` bytes in all.
    pub(super) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Allowance {
            read: AtomicUsize::new(0),
            cap: AtomicUsize::new(cap),
            starved: AtomicBool::new(false),
        })
    }

    /// Allows `more` bytes past what has been read so far.
    pub(super) fn allow_more(&self, more: usize) {
        let read = self.read.load(Ordering::Acquire);
        self.cap.store(read.saturating_add(more), Ordering::Release);
        self.starved.store(false, Ordering::Release);
    }

    /// Runs `read` (a read of the body, through its parser) to its end;
    /// `None` if it waits for bytes the allowance withholds.
    pub(super) async fn bounded<T>(&self, read: impl Future<Output = T>) -> Option<T> {
        let mut read = pin!(read);
        std::future::poll_fn(|cx| match read.as_mut().poll(cx) {
            Poll::Ready(done) => Poll::Ready(Some(done)),
            // Starved: no waker will come; waiting on the network: one
            // will.
            Poll::Pending if self.starved.load(Ordering::Acquire) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        })
        .await
    }
}

/// `inner`, handing out no byte past `allowance`: a chunk that crosses it
/// is split, and its rest kept until the allowance is raised.
pub(super) struct CappedBody {
    inner: Body,
    /// The part of the last chunk not handed out yet.
    pending: Bytes,
    allowance: Arc<Allowance>,
}

impl CappedBody {
    /// `inner` under `allowance`, as a body.
    pub(super) fn wrap(inner: Body, allowance: Arc<Allowance>) -> Body {
        Body::new(CappedBody {
            inner,
            pending: Bytes::new(),
            allowance,
        })
    }
}

impl http_body::Body for CappedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        loop {
            if !self.pending.is_empty() {
                let allowance = self.allowance.clone();
                let read = allowance.read.load(Ordering::Acquire);
                let left = allowance.cap.load(Ordering::Acquire).saturating_sub(read);
                if left == 0 {
                    allowance.starved.store(true, Ordering::Release);
                    return Poll::Pending;
                }
                let n = left.min(self.pending.len());
                let chunk = self.pending.split_to(n);
                allowance.read.fetch_add(chunk.len(), Ordering::AcqRel);
                allowance.starved.store(false, Ordering::Release);
                return Poll::Ready(Some(Ok(Frame::data(chunk))));
            }
            let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => frame,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => {
                    self.allowance.starved.store(false, Ordering::Release);
                    return Poll::Pending;
                }
            };
            match frame.into_data() {
                Ok(data) => self.pending = data,
                Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        // What the sender says is coming is no promise of what may be read.
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A body is read up to its allowance, chunks split at it; past it a
    /// read that needs more is refused (not left waiting), and once the
    /// allowance is raised the body goes on.
    #[tokio::test]
    async fn reads_stop_at_the_allowance_until_it_is_raised() {
        let allowance = Allowance::new(5);
        let mut body = CappedBody::wrap(Body::from("0123456789"), allowance.clone());
        let first = allowance.bounded(body.frame()).await.unwrap().unwrap();
        assert_eq!(&first.unwrap().into_data().unwrap()[..], b"01234");
        assert!(allowance.bounded(body.frame()).await.is_none());
        allowance.allow_more(3);
        let next = allowance.bounded(body.frame()).await.unwrap().unwrap();
        assert_eq!(&next.unwrap().into_data().unwrap()[..], b"567");
        allowance.allow_more(100);
        let rest = allowance.bounded(body.collect()).await.unwrap().unwrap();
        assert_eq!(&rest.to_bytes()[..], b"89");
    }
}
