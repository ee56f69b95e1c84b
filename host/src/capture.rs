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
/// bytes written are charged to the store's [`FuelTab`], kept or not.
#[derive(Clone)]
pub(crate) struct CallOutput {
    buffer: Arc<Mutex<Buffer>>,
    tab: FuelTab,
}

struct Buffer {
    bytes: Vec<u8>,
    capacity: usize,
    /// Past the cap: `None` refuses the write (the guest sees its output
    /// closed); `Some(n)` accepts it and drops it, counting the bytes.
    dropped: Option<usize>,
}

/// The most a guest that drops its output past the cap is told it may write
/// at once: writes go on being accepted (and paid for).
const DROP_WINDOW: usize = 64 << 10;

impl Buffer {
    fn room(&self) -> usize {
        self.capacity.saturating_sub(self.bytes.len())
    }
}

impl CallOutput {
    /// An output that refuses a write past `capacity`: the guest sees it
    /// closed (a Python run's, whose overflow is a limit of the run).
    pub(crate) fn new(capacity: usize, tab: FuelTab) -> Self {
        Self::with(capacity, tab, None)
    }

    /// An output that keeps the first `capacity` bytes and drops the rest,
    /// counted, so a guest that prints too much is cut, not stopped (a
    /// plugin's, whose output is only log lines).
    pub(crate) fn cutting(capacity: usize, tab: FuelTab) -> Self {
        Self::with(capacity, tab, Some(0))
    }

    fn with(capacity: usize, tab: FuelTab, dropped: Option<usize>) -> Self {
        CallOutput {
            buffer: Arc::new(Mutex::new(Buffer {
                bytes: Vec::new(),
                capacity,
                dropped,
            })),
            tab,
        }
    }

    /// What was written since the last take, and how many bytes past the
    /// cap were dropped, leaving the buffer empty.
    pub(crate) fn take(&self) -> (Vec<u8>, usize) {
        let mut buffer = self.lock();
        let dropped = buffer.dropped.as_mut().map_or(0, std::mem::take);
        (std::mem::take(&mut buffer.bytes), dropped)
    }

    /// Empties the buffer and sets a new cap.
    pub(crate) fn reset(&self, capacity: usize) {
        let mut buffer = self.lock();
        buffer.bytes.clear();
        buffer.capacity = capacity;
        if let Some(dropped) = &mut buffer.dropped {
            *dropped = 0;
        }
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
        let room = buffer.room();
        if let Some(dropped) = &mut buffer.dropped {
            let kept = bytes.len().min(room);
            *dropped += bytes.len() - kept;
            buffer.bytes.extend_from_slice(&bytes[..kept]);
            return Ok(());
        }
        if bytes.len() > room {
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
        let buffer = self.lock();
        match buffer.room() {
            _ if buffer.dropped.is_some() => Ok(DROP_WINDOW),
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
        if let Some(dropped) = &mut buffer.dropped {
            *dropped += buf.len() - n;
            return std::task::Poll::Ready(Ok(buf.len()));
        }
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
        assert_eq!(out.take().0, b"abc");
        assert_eq!(tab.take(), 5, "every byte written is charged, kept or not");
        // A new call has the whole cap again, through the same stream.
        stream.write(bytes::Bytes::from_static(b"defg")).unwrap();
        assert!(matches!(stream.check_write(), Err(StreamError::Closed)));
        assert_eq!(out.take().0, b"defg");
        // A new cap, for the same stream.
        stream.write(bytes::Bytes::from_static(b"h")).unwrap();
        out.reset(2);
        assert_eq!(stream.check_write().unwrap(), 2);
        assert!(out.take().0.is_empty());
    }

    #[test]
    fn a_cutting_output_keeps_the_cap_and_counts_the_rest() {
        let tab = FuelTab::default();
        let out = CallOutput::cutting(4, tab.clone());
        let mut stream = out.p2_stream();
        stream.write(bytes::Bytes::from_static(b"abc")).unwrap();
        stream.write(bytes::Bytes::from_static(b"defg")).unwrap();
        assert_eq!(stream.check_write().unwrap(), DROP_WINDOW);
        stream.write(bytes::Bytes::from_static(b"hi")).unwrap();
        assert_eq!(out.take(), (b"abcd".to_vec(), 5));
        assert_eq!(tab.take(), 9, "dropped bytes are paid for too");
        stream.write(bytes::Bytes::from_static(b"j")).unwrap();
        assert_eq!(out.take(), (b"j".to_vec(), 0));
    }
}
