//! Answers that come before the request's body has all been read (a
//! refused token, a cross-site form, a body past a cap) reach the client.
//!
//! hyper closes a connection whose request body was not read to its end,
//! right after the answer; a client still sending that body then sees the
//! connection reset (or its write fail) instead of the answer, as a
//! browser posting a form would. [`drain_unread`] reads and drops what is
//! left of such a body, at most [`LINGER_BYTES`] within [`LINGER_TIME`],
//! before the answer goes out, as servers' "lingering close" does; past
//! either bound the answer says `Connection: close`. Nothing read is kept,
//! so the bound is on time and bandwidth, not memory.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Frame, SizeHint};

/// The most of an unread body read and dropped after an early answer.
pub const LINGER_BYTES: u64 = 1 << 20;

/// The longest that reading takes.
pub const LINGER_TIME: Duration = Duration::from_secs(2);

/// Middleware: reads and drops what the handler left of the request's
/// body (within the bounds above) before the answer goes out, or marks the
/// answer `Connection: close`.
pub async fn drain_unread(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let left = Arc::new(Mutex::new(None));
    let body = Body::new(Returned {
        inner: Some(body),
        left: left.clone(),
    });
    let mut response = next.run(Request::from_parts(parts, body)).await;
    let rest = left.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(rest) = rest {
        let drained = tokio::time::timeout(LINGER_TIME, drain(rest, LINGER_BYTES)).await;
        if drained != Ok(true) {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
    response
}

/// Reads `body` to its end if it holds at most `max` more bytes; whether
/// it got there.
async fn drain(mut body: Body, max: u64) -> bool {
    let mut read = 0u64;
    loop {
        match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            None => return true,
            Some(Err(_)) => return false,
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    read += data.len() as u64;
                    if read > max {
                        return false;
                    }
                }
            }
        }
    }
}

/// A request body that, dropped before its end, hands what is left of it
/// to [`drain_unread`].
struct Returned {
    inner: Option<Body>,
    left: Arc<Mutex<Option<Body>>>,
}

impl HttpBody for Returned {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        match self.inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl Drop for Returned {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take()
            && !inner.is_end_stream()
        {
            *self.left.lock().unwrap_or_else(|e| e.into_inner()) = Some(inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::routing::post;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A handler that refuses without reading the body: a client that
    /// sends a body under the bound gets the answer, and the connection
    /// stays usable; one past it gets the answer marked `close`.
    #[tokio::test]
    async fn an_early_answer_reaches_a_client_still_sending_its_body() {
        let router = Router::new()
            .route(
                "/",
                post(|| async { (axum::http::StatusCode::FORBIDDEN, "no") }),
            )
            .layer(axum::middleware::from_fn(drain_unread));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(crate::serve(
            listener,
            router,
            crate::ConnLimits::default(),
            std::future::pending(),
            Duration::from_secs(1),
        ));
        let body = vec![b'x'; 512 * 1024];
        let mut stream = TcpStream::connect(addr).await.unwrap();
        for _ in 0..2 {
            stream
                .write_all(
                    format!(
                        "POST / HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await
                .unwrap();
            stream.write_all(&body).await.unwrap();
            let mut answer = vec![0u8; 1024];
            let n = stream.read(&mut answer).await.unwrap();
            let answer = String::from_utf8_lossy(&answer[..n]);
            assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
            assert!(!answer.contains("connection: close"), "{answer}");
        }
        let big = LINGER_BYTES as usize * 2;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(
                format!("POST / HTTP/1.1\r\nhost: x\r\ncontent-length: {big}\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
        let _ = stream.write_all(&vec![b'x'; big]).await;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        let answer = String::from_utf8_lossy(&answer);
        // Past the bound the server closes; the answer may be lost in the
        // reset of the bytes it did not read, but never keeps the
        // connection open.
        assert!(
            answer.is_empty()
                || (answer.starts_with("HTTP/1.1 403") && answer.contains("connection: close")),
            "{answer}"
        );
    }
}
