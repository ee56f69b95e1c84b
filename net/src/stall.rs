//! A connection whose writes may stall only so long: once the client stops
//! reading, the kernel's buffers fill, writes wait, and whatever answer the
//! server was sending (and its buffers) would be held for as long as the
//! client likes. [`WriteStall`] fails a write that has waited past its
//! limit, so the connection ends and frees them.
//!
//! Only writes are timed: a connection waiting to read (between requests,
//! or while its handler runs) is bounded by the header-read timeout and by
//! each service's own request timeout instead, and a read timer would end
//! long runs whose client is simply waiting.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner`, whose writes fail with [`io::ErrorKind::TimedOut`] once one has
/// waited `limit` without any progress.
pub(crate) struct WriteStall<T> {
    inner: T,
    limit: Duration,
    /// Armed while a write waits; disarmed by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> WriteStall<T> {
    pub(crate) fn new(inner: T, limit: Duration) -> Self {
        WriteStall {
            inner,
            limit,
            stalled: None,
        }
    }

    /// What a write that returned `poll` means: progress disarms the
    /// timer, waiting arms it (once) and fails once it has run out.
    fn watch<R>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        ready!(timer.as_mut().poll(cx));
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the client read nothing for {} ms: the connection is closed",
                limit.as_millis()
            ),
        )))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteStall<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteStall<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.watch(cx, poll)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A peer that reads nothing: writes fill the pipe, then the next one
    /// fails once it has waited the limit. A peer that reads lets every
    /// write through however long the whole takes.
    #[tokio::test(start_paused = true)]
    async fn a_write_the_peer_does_not_read_fails_after_the_limit() {
        let (client, _server) = tokio::io::duplex(1024);
        let mut stalled = WriteStall::new(client, Duration::from_secs(5));
        let error = stalled.write_all(&[0u8; 4096]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(error.to_string().contains("5000 ms"), "{error}");

        let (client, mut server) = tokio::io::duplex(1024);
        let reader = tokio::spawn(async move {
            let mut sink = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut server, &mut sink)
                .await
                .unwrap();
            sink.len()
        });
        let mut reading = WriteStall::new(client, Duration::from_secs(5));
        for _ in 0..64 {
            reading.write_all(&[1u8; 1024]).await.unwrap();
            // Slower than the limit overall, never stalled that long.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        reading.shutdown().await.unwrap();
        drop(reading);
        assert_eq!(reader.await.unwrap(), 64 * 1024);
    }
}
