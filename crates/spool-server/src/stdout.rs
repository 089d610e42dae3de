//! Standard output for the stdio transport, written by a thread of its own.
//!
//! tokio's `Stdout` hands every write (and every flush) to the blocking
//! pool: a thread hand-off and two wake-ups per call, three calls per
//! message. Here the connection's writer feeds messages into a buffer
//! (no I/O), and a flush hands the whole batch to the `spool-stdout`
//! thread, which writes whatever batches are waiting with one `write` and
//! one flush. At most one batch waits for the thread while it writes
//! (`QUEUED`), so a client that stops reading still fills the outbox
//! behind it, and is disconnected the same way as on a socket (see
//! `outbox.rs`).

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Sink;
use tokio::sync::mpsc;

use crate::connection::Outgoing;

/// Batches handed to the thread and not yet taken by it.
const QUEUED: usize = 1;

type Sending = Pin<Box<dyn Future<Output = Result<(), std::io::Error>> + Send>>;

/// A sink of messages, one line each, to standard output.
pub(crate) struct StdoutSink {
    buffer: Vec<u8>,
    batches: mpsc::Sender<Vec<u8>>,
    sending: Option<Sending>,
}

impl StdoutSink {
    /// Starts the writing thread. It ends once the sink is dropped and
    /// every batch handed to it is written: join it before the process
    /// exits, or the last messages may be lost.
    pub(crate) fn start() -> std::io::Result<(StdoutSink, std::thread::JoinHandle<()>)> {
        let (batches, mut waiting) = mpsc::channel::<Vec<u8>>(QUEUED);
        let thread = std::thread::Builder::new()
            .name("spool-stdout".to_owned())
            .spawn(move || {
                let stdout = std::io::stdout();
                while let Some(mut batch) = waiting.blocking_recv() {
                    while let Ok(more) = waiting.try_recv() {
                        batch.extend_from_slice(&more);
                    }
                    // Locked per batch, not for the thread's life: anything
                    // else printing to stdout waits a write, never forever.
                    let mut out = stdout.lock();
                    if let Err(error) = out.write_all(&batch).and_then(|()| out.flush()) {
                        // The client is gone; the sink fails at its next
                        // flush, which ends the connection.
                        tracing::info!(%error, "writing standard output failed");
                        break;
                    }
                }
            })?;
        let sink = StdoutSink {
            buffer: Vec::new(),
            batches,
            sending: None,
        };
        Ok((sink, thread))
    }
}

fn gone() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "standard output is closed")
}

impl Sink<Outgoing> for StdoutSink {
    type Error = std::io::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // A batch still on its way to the thread is sent first: the buffer
        // starts over behind it.
        match self.sending.as_mut() {
            Some(sending) => match sending.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(outcome) => {
                    self.sending = None;
                    Poll::Ready(outcome)
                }
            },
            None => Poll::Ready(Ok(())),
        }
    }

    fn start_send(mut self: Pin<&mut Self>, item: Outgoing) -> Result<(), Self::Error> {
        match item {
            Outgoing::Message(line) => {
                self.buffer.extend_from_slice(line.as_bytes());
                self.buffer.push(b'\n');
                Ok(())
            }
            Outgoing::Close(reason) => {
                // A byte stream has no close frame: logged, and the writer
                // ends.
                tracing::error!(%reason, "closing the connection");
                Err(std::io::Error::other(reason))
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            if let Some(sending) = self.sending.as_mut() {
                let outcome = std::task::ready!(sending.as_mut().poll(cx));
                self.sending = None;
                outcome?;
            }
            if self.buffer.is_empty() {
                return Poll::Ready(Ok(()));
            }
            let capacity = self.buffer.capacity();
            let batch = std::mem::replace(&mut self.buffer, Vec::with_capacity(capacity));
            let batches = self.batches.clone();
            self.sending = Some(Box::pin(async move {
                batches.send(batch).await.map_err(|_| gone())
            }));
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.poll_flush(cx)
    }
}
