//! A guest's stdout or stderr, kept in memory up to a cap and emptied (and
//! given a new cap) between uses. The guest keeps the stream handle it
//! opened, so one buffer serves a plugin instance's several calls in a run,
//! each with its own cap, and an interpreter prepared before its run, whose
//! streams the run inherits.

use std::sync::{Arc, Mutex, MutexGuard};

use wasmtime_wasi::async_trait;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

use crate::runtime::guard::FuelTab;

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
    /// Who is shown what is kept as it is written, if anyone.
    tap: Option<Tap>,
}

/// A listener to an output, shown text as it is written.
pub(crate) type Listener = Arc<dyn Fn(String) + Send + Sync>;

/// A listener and the start of a UTF-8 sequence a write cut in two.
struct Tap {
    listener: Listener,
    carry: Vec<u8>,
}

impl Tap {
    /// The text of `bytes` after what was carried, up to the last whole
    /// UTF-8 sequence; the rest is carried to the next write.
    fn text(&mut self, bytes: &[u8]) -> Option<String> {
        self.carry.extend_from_slice(bytes);
        let whole = match std::str::from_utf8(&self.carry) {
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            _ => self.carry.len(),
        };
        let text = String::from_utf8_lossy(&self.carry[..whole]).into_owned();
        self.carry.drain(..whole);
        (!text.is_empty()).then_some(text)
    }
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
                tap: None,
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

    /// The last `lines` non-empty lines written since the last take, joined
    /// by a space, without taking them.
    pub(crate) fn last_lines(&self, lines: usize) -> String {
        let buffer = self.lock();
        let text = String::from_utf8_lossy(&buffer.bytes);
        let mut last: Vec<&str> = (text.lines().rev())
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .take(lines)
            .collect();
        last.reverse();
        last.join(" ")
    }

    /// Empties the buffer, sets a new cap and a new listener.
    pub(crate) fn reset(&self, capacity: usize, listener: Option<Listener>) {
        let mut buffer = self.lock();
        buffer.bytes.clear();
        buffer.capacity = capacity;
        buffer.tap = listener.map(|listener| Tap {
            listener,
            carry: Vec::new(),
        });
        if let Some(dropped) = &mut buffer.dropped {
            *dropped = 0;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Buffer> {
        self.buffer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps what fits of `bytes` (all of them, or refuses them, when they
    /// do not fit and the output does not cut), and shows the listener what
    /// was kept, outside the lock.
    fn keep(&self, bytes: &[u8]) -> Result<usize, usize> {
        let mut buffer = self.lock();
        let room = buffer.room();
        let kept = match &mut buffer.dropped {
            Some(dropped) => {
                let kept = bytes.len().min(room);
                *dropped += bytes.len() - kept;
                kept
            }
            None if bytes.len() > room => return Err(buffer.capacity),
            None => bytes.len(),
        };
        buffer.bytes.extend_from_slice(&bytes[..kept]);
        let shown = buffer.tap.as_mut().and_then(|tap| {
            let text = tap.text(&bytes[..kept])?;
            Some((tap.listener.clone(), text))
        });
        drop(buffer);
        if let Some((listener, text)) = shown {
            listener(text);
        }
        Ok(kept)
    }
}

#[async_trait]
impl OutputStream for CallOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.tab.charge(bytes.len());
        match self.keep(&bytes) {
            Ok(_) => Ok(()),
            Err(capacity) => Err(StreamError::Trap(wasmtime::format_err!(
                "wrote more than the {capacity} bytes an output may take"
            ))),
        }
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
        // A cutting output takes it all (and drops what does not fit);
        // another takes what fits, which `keep` then never refuses.
        let n = {
            let buffer = self.lock();
            match buffer.dropped {
                Some(_) => buf.len(),
                None => buf.len().min(buffer.room()),
            }
        };
        let _kept = self.keep(&buf[..n]);
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
        out.reset(2, None);
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

    #[test]
    fn a_listener_sees_what_is_kept_in_whole_utf8_sequences() {
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let out = CallOutput::new(8, FuelTab::default());
        let listener: Listener = {
            let seen = seen.clone();
            Arc::new(move |text| seen.lock().unwrap().push(text))
        };
        out.reset(8, Some(listener));
        let mut stream = out.p2_stream();
        let e_acute = "é".as_bytes();
        stream
            .write(bytes::Bytes::copy_from_slice(&[b'a', e_acute[0]]))
            .unwrap();
        stream
            .write(bytes::Bytes::copy_from_slice(&e_acute[1..]))
            .unwrap();
        stream.write(bytes::Bytes::from_static(b"bcd")).unwrap();
        assert!(stream.write(bytes::Bytes::from_static(b"xyzw")).is_err());
        assert_eq!(*seen.lock().unwrap(), ["a", "é", "bcd"]);
        assert_eq!(out.take().0, "aébcd".as_bytes());
    }
}
