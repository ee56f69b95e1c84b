//! A guest's stdout or stderr, kept in memory up to a cap and emptied (and
//! given a new cap) between uses. The guest keeps the stream handle it
//! opened, so one buffer serves a plugin instance's several calls in a run,
//! each with its own cap, and an interpreter prepared before its run, whose
//! streams the run inherits.

use std::sync::{Arc, Mutex, MutexGuard};

use wasmtime_wasi::async_trait;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

use crate::guard::FuelTab;

/// A capped in-memory output. Clones share the buffer and the cap; the
/// bytes written are charged to the store's [`FuelTab`].
#[derive(Clone)]
pub(crate) struct CallOutput {
    buffer: Arc<Mutex<Buffer>>,
    tab: FuelTab,
}

struct Buffer {
    bytes: Vec<u8>,
    capacity: usize,
}

impl Buffer {
    fn room(&self) -> usize {
        self.capacity.saturating_sub(self.bytes.len())
    }
}

impl CallOutput {
    pub(crate) fn new(capacity: usize, tab: FuelTab) -> Self {
        CallOutput {
            buffer: Arc::new(Mutex::new(Buffer {
                bytes: Vec::new(),
                capacity,
            })),
            tab,
        }
    }

    /// What was written since the last take, leaving the buffer empty.
    pub(crate) fn take(&self) -> Vec<u8> {
        std::mem::take(&mut self.lock().bytes)
    }

    /// Empties the buffer and sets a new cap.
    pub(crate) fn reset(&self, capacity: usize) {
        let mut buffer = self.lock();
        buffer.bytes.clear();
        buffer.capacity = capacity;
    }

    fn lock(&self) -> MutexGuard<'_, Buffer> {
        self.buffer.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl OutputStream for CallOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.tab.charge(bytes.len());
        let mut buffer = self.lock();
        if bytes.len() > buffer.room() {
            return Err(StreamError::Trap(wasmtime::format_err!(
                "wrote more than the {} bytes an output may take",
                buffer.capacity
            )));
        }
        buffer.bytes.extend_from_slice(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        match self.lock().room() {
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
        self.tab.charge(buf.len());
        let mut buffer = self.lock();
        let n = buf.len().min(buffer.room());
        buffer.bytes.extend_from_slice(&buf[..n]);
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
    fn the_cap_is_per_take_and_can_change() {
        let tab = FuelTab::default();
        let out = CallOutput::new(4, tab.clone());
        let mut stream = out.p2_stream();
        stream.write(bytes::Bytes::from_static(b"abc")).unwrap();
        assert_eq!(stream.check_write().unwrap(), 1);
        assert!(stream.write(bytes::Bytes::from_static(b"de")).is_err());
        assert_eq!(out.take(), b"abc");
        assert_eq!(tab.take(), 5, "every byte written is charged, kept or not");
        // A new call has the whole cap again, through the same stream.
        stream.write(bytes::Bytes::from_static(b"defg")).unwrap();
        assert!(matches!(stream.check_write(), Err(StreamError::Closed)));
        assert_eq!(out.take(), b"defg");
        // A new cap, for the same stream.
        stream.write(bytes::Bytes::from_static(b"h")).unwrap();
        out.reset(2);
        assert_eq!(stream.check_write().unwrap(), 2);
        assert!(out.take().is_empty());
    }
}
