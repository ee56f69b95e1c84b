//! A plugin's stdout and stderr: kept in memory up to a cap per call and
//! taken out after each call, so one instance can serve the several calls of
//! a run with the same cap on each.

use std::sync::{Arc, Mutex, MutexGuard};

use wasmtime_wasi::async_trait;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// A capped in-memory output. Clones share the buffer.
#[derive(Clone)]
pub(crate) struct CallOutput {
    capacity: usize,
    buffer: Arc<Mutex<Vec<u8>>>,
}

impl CallOutput {
    pub(crate) fn new(capacity: usize) -> Self {
        CallOutput {
            capacity,
            buffer: Arc::default(),
        }
    }

    /// What was written since the last take, leaving the buffer empty.
    pub(crate) fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        self.buffer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Room left in this call's cap.
    fn room(&self) -> usize {
        self.capacity.saturating_sub(self.lock().len())
    }
}

#[async_trait]
impl OutputStream for CallOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        let mut buffer = self.lock();
        if bytes.len() > self.capacity.saturating_sub(buffer.len()) {
            return Err(StreamError::Trap(wasmtime::format_err!(
                "wrote more than {} bytes to stdout and stderr in one call",
                self.capacity
            )));
        }
        buffer.extend_from_slice(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        match self.room() {
            0 => Err(StreamError::Closed),
            room => Ok(room),
        }
    }
}

#[async_trait]
impl Pollable for CallOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CallOutput {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let mut buffer = self.lock();
        let n = buf.len().min(self.capacity.saturating_sub(buffer.len()));
        buffer.extend_from_slice(&buf[..n]);
        std::task::Poll::Ready(Ok(n))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CallOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CallOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_per_take() {
        let out = CallOutput::new(4);
        let mut stream = out.p2_stream();
        stream.write(bytes::Bytes::from_static(b"abc")).unwrap();
        assert_eq!(stream.check_write().unwrap(), 1);
        assert!(stream.write(bytes::Bytes::from_static(b"de")).is_err());
        assert_eq!(out.take(), b"abc");
        // A new call has the whole cap again, through the same stream.
        stream.write(bytes::Bytes::from_static(b"defg")).unwrap();
        assert!(matches!(stream.check_write(), Err(StreamError::Closed)));
        assert_eq!(out.take(), b"defg");
    }
}
