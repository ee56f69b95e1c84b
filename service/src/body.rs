//! Connections stay usable after every answer. hyper closes a connection
//! once it has answered a request whose body was not read to its end (it
//! cannot find where the next request starts), and when the handler lets
//! the body go before its bytes have all arrived, it does so after sending
//! an answer that promised keep-alive: a client that sends its next request
//! on that connection sees it dropped. So the handlers that ignore their
//! body read it anyway ([`Ignored`]), and an answer given before the body
//! was read (a refused token, an unknown endpoint, a body past the limit)
//! says `Connection: close` ([`close_unless_read`]).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

use crate::error::ApiError;

/// Marks the answer `Connection: close` when the handler did not read the
/// request's body to its end.
pub async fn close_unless_read(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let read = Arc::new(AtomicBool::new(body.is_end_stream()));
    let body = Body::new(Watched {
        inner: body,
        read: read.clone(),
    });
    let mut response = next.run(Request::from_parts(parts, body)).await;
    if !read.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that notes when it has been read to its end.
struct Watched {
    inner: Body,
    read: Arc<AtomicBool>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The body of a request whose endpoint takes none, read (within the
/// server's body limit) and dropped, so the connection stays usable.
pub struct Ignored;

impl<S: Send + Sync> FromRequest<S> for Ignored {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(request, state)
            .await
            .map(|_| Ignored)
            .map_err(|rejection| {
                ApiError::new(rejection.status(), "bad-body", rejection.body_text())
            })
    }
}
