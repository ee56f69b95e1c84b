//! A run's answer holds its place in the run queue until it has gone out.
//!
//! A finished run frees its run slot at once, but its answer (up to a
//! run's output, event and image caps, as JSON) still waits for a client
//! that may read slowly or not at all; the connection's write-stall bound
//! ends such a client eventually, but until then the answer is held. So
//! the answer keeps the run's place in the host's run queue
//! ([`sandwit::RunPlace`]; a call's, [`crate::queue::CallPlace`]) until it
//! has been handed to the connection: the answers held for
//! clients are never more than `--max-runs` plus `--queue` runs' worth, and
//! past them new runs are refused (503 `queue-full`) instead of memory
//! growing.
//!
//! [`Holding`] is such an answer, typed by its body.
//!
//! [`Chunked`] hands the body to hyper in frames of at most
//! [`FRAME_BYTES`]: hyper asks for the next frame only once its write
//! buffer (bounded by the connection layer) has room, so a body handed out
//! is a body written, within a frame.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};

/// The largest frame handed to the connection.
pub const FRAME_BYTES: usize = 16 * 1024;

/// `response` with its body handed out in frames of at most
/// [`FRAME_BYTES`], holding `hold` until the last frame was taken (or the
/// connection went away).
pub fn holding<T: Send + Sync + Unpin + 'static>(response: Response, hold: T) -> Response {
    response.map(|body| {
        Body::new(Chunked {
            inner: body,
            pending: Bytes::new(),
            hold: Some(hold),
        })
    })
}

/// The answer `body`, holding `hold` until it has gone out ([`holding`]).
pub struct Holding<B, H> {
    /// What is answered.
    pub body: B,
    /// What is held meanwhile (a run's place in its queue).
    pub hold: H,
}

impl<B: IntoResponse, H: Send + Sync + Unpin + 'static> IntoResponse for Holding<B, H> {
    fn into_response(self) -> Response {
        holding(self.body.into_response(), self.hold)
    }
}

/// A body re-cut into frames of at most [`FRAME_BYTES`], holding `hold`
/// until its end.
struct Chunked<T> {
    inner: Body,
    /// The rest of the inner body's last data frame.
    pending: Bytes,
    hold: Option<T>,
}

impl<T: Unpin> HttpBody for Chunked<T> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        loop {
            if !self.pending.is_empty() {
                let n = self.pending.len().min(FRAME_BYTES);
                let frame = self.pending.split_to(n);
                return Poll::Ready(Some(Ok(Frame::data(frame))));
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.pending = data,
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Poll::Ready(None) => {
                    self.hold = None;
                    return Poll::Ready(None);
                }
                other => return other,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let pending = self.pending.len() as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + pending);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + pending);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// The body comes out whole, in frames no larger than the bound, and
    /// what it holds is let go only once the last frame was taken.
    #[tokio::test]
    async fn an_answer_holds_until_its_last_frame_is_taken() {
        let released = Arc::new(AtomicBool::new(false));
        let bytes: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let response = holding(
            Response::new(Body::from(bytes.clone())),
            Flag(released.clone()),
        );
        let mut body = response.into_body();
        let mut seen = Vec::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let data = frame.unwrap().into_data().unwrap();
            assert!(data.len() <= FRAME_BYTES);
            seen.extend_from_slice(&data);
            if seen.len() < bytes.len() {
                assert!(
                    !released.load(Ordering::SeqCst),
                    "let go after {}",
                    seen.len()
                );
            }
        }
        assert_eq!(seen, bytes);
        assert!(released.load(Ordering::SeqCst));

        // A body dropped half-read (the client went away) lets go too.
        let released = Arc::new(AtomicBool::new(false));
        let response = holding(Response::new(Body::from(bytes)), Flag(released.clone()));
        let mut body = response.into_body();
        std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
        assert!(!released.load(Ordering::SeqCst));
        drop(body);
        assert!(released.load(Ordering::SeqCst));
    }
}
