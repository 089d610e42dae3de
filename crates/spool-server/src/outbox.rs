//! What a connection has yet to write, bounded: a client that does not read
//! (or reads slower than it is sent to) must not make the server hold an
//! ever-growing queue of replies and events for it.
//!
//! Every message for the client (reply, notification, server request) goes
//! through one [`Outbox`], which counts the bytes queued and not yet
//! written. A message that would take the count past the bound, when
//! something is already waiting, is not queued: the outbox overflows, the
//! connection stops taking messages and is closed with a reason (a
//! WebSocket close frame, 1008) — as Codex's server drops a client whose
//! queue is full. Nothing is lost by that: every event the client missed
//! is in the log, and it resumes from the last seq it received
//! (`thread/resume` with `afterSeq`). A single message larger than the
//! bound still goes when nothing else waits, so a large reply is never
//! refused to a client that reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::{Notify, mpsc};

/// Bytes a connection may have waiting to be written by default
/// (`SPOOL_SERVE_MAX_UNSENT_BYTES` overrides it).
const MAX_UNSENT_BYTES: usize = 64 << 20;

/// The bound in force: the environment's, else [`MAX_UNSENT_BYTES`].
pub(crate) fn max_unsent_bytes() -> usize {
    std::env::var("SPOOL_SERVE_MAX_UNSENT_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(MAX_UNSENT_BYTES)
}

/// The sending side, cloned by everything that writes to the client.
#[derive(Clone)]
pub(crate) struct Outbox {
    lines: mpsc::UnboundedSender<String>,
    shared: Arc<Shared>,
}

/// The writing side: the writer takes lines and reports what it wrote.
pub(crate) struct Unsent {
    pub(crate) lines: mpsc::UnboundedReceiver<String>,
    shared: Arc<Shared>,
}

struct Shared {
    bound: usize,
    /// Bytes queued and not yet written.
    queued: AtomicUsize,
    overflowed: AtomicBool,
    overflow: Notify,
    /// The writer is gone (the connection ended).
    closed: AtomicBool,
    /// Woken when the queue falls below half the bound, overflows, or
    /// closes: a replay waiting for room goes on (see [`Room`]).
    drained: Notify,
    /// Deliveries the connection holds back, not yet encoded, until the
    /// reply they must follow is sent (`connection/mod.rs`): not in `queued`,
    /// yet waiting for the client all the same.
    held: AtomicUsize,
}

/// Deliveries a connection may hold back behind a reply before producers
/// that can wait do wait: without it, a replay running while its
/// `thread/resume` is handled would pile the whole log up unpaced.
const MAX_HELD: usize = 256;

/// Lets a producer that can wait — a watcher's forwarder, a replay of the
/// log — send no faster than the client takes it, so that a long replay
/// to a client that reads is never mistaken for one that does not. What
/// cannot wait is bounded instead: a forwarder whose live backlog passes
/// `max_live_backlog()` events gives up with [`Room::overflow`], which closes the
/// connection (it resumes by cursor).
#[derive(Clone)]
pub struct Room {
    shared: Option<Arc<Shared>>,
    /// The consumer counts events, not bytes: each send is one unit (an
    /// SSE stream), and the consumer reports each one taken with
    /// [`Room::taken`]. A connection's outbox counts bytes itself.
    counts_sends: bool,
}

/// Live events a watcher may have waiting behind a client that does not
/// make room, before it is closed (`SPOOL_SERVE_MAX_LIVE_BACKLOG`
/// overrides it).
const MAX_LIVE_BACKLOG: usize = 16_384;

/// The live backlog bound in force.
pub(crate) fn max_live_backlog() -> usize {
    std::env::var("SPOOL_SERVE_MAX_LIVE_BACKLOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(MAX_LIVE_BACKLOG)
}

impl Room {
    /// No bound at all (tests).
    pub fn unbounded() -> Room {
        Room {
            shared: None,
            counts_sends: false,
        }
    }

    /// A room of `bound` events, for a consumer that reports what it took
    /// (an SSE stream).
    pub fn counting(bound: usize) -> Room {
        Room {
            shared: Some(Arc::new(Shared::new(bound))),
            counts_sends: true,
        }
    }

    /// Whether a send now would not wait (the common case: no timer, no
    /// waker registered).
    pub fn has_room(&self) -> bool {
        self.shared.as_ref().is_none_or(|shared| shared.has_room())
    }

    /// Resolves once less than half the bound waits to be written, or the
    /// consumer overflowed or ended (the caller's sends then go nowhere).
    pub async fn wait(&self) {
        let Some(shared) = &self.shared else { return };
        loop {
            if shared.has_room() {
                return;
            }
            let drained = shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if shared.has_room() {
                return;
            }
            drained.await;
        }
    }

    /// One event was sent to the consumer.
    pub fn sent(&self) {
        if let (Some(shared), true) = (&self.shared, self.counts_sends) {
            shared.queued.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// The consumer took one event.
    pub fn taken(&self) {
        if let Some(shared) = &self.shared {
            shared.written(1);
        }
    }

    /// The producer cannot keep the bound: the consumer is to be closed.
    pub fn overflow(&self) {
        if let Some(shared) = &self.shared {
            shared.overflow();
        }
    }

    /// Whether the consumer was told to close.
    pub fn overflowed(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|s| s.overflowed.load(Ordering::Acquire))
    }
}

impl Shared {
    fn new(bound: usize) -> Shared {
        Shared {
            bound,
            queued: AtomicUsize::new(0),
            overflowed: AtomicBool::new(false),
            overflow: Notify::new(),
            closed: AtomicBool::new(false),
            drained: Notify::new(),
            held: AtomicUsize::new(0),
        }
    }

    fn has_room(&self) -> bool {
        (self.queued.load(Ordering::Acquire) < self.bound / 2
            && self.held.load(Ordering::Acquire) < MAX_HELD)
            || self.overflowed.load(Ordering::Acquire)
            || self.closed.load(Ordering::Acquire)
    }

    fn overflow(&self) {
        if !self.overflowed.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                unsent = self.queued.load(Ordering::Acquire),
                bound = self.bound,
                "a client does not keep up with what it is sent: closing it"
            );
            self.overflow.notify_one();
            self.drained.notify_waiters();
        }
    }

    fn written(&self, amount: usize) {
        let left = self
            .queued
            .fetch_sub(amount, Ordering::AcqRel)
            .saturating_sub(amount);
        if left < self.bound / 2 {
            self.drained.notify_waiters();
        }
    }
}

/// A new outbox holding at most `bound` unsent bytes.
pub(crate) fn outbox(bound: usize) -> (Outbox, Unsent) {
    let (lines, receiver) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared::new(bound));
    (
        Outbox {
            lines,
            shared: shared.clone(),
        },
        Unsent {
            lines: receiver,
            shared,
        },
    )
}

impl Outbox {
    /// Queues `line` for the client. After an overflow nothing is queued
    /// any more (the connection is closing).
    pub(crate) fn send(&self, line: String) {
        let shared = &self.shared;
        if shared.overflowed.load(Ordering::Acquire) {
            return;
        }
        let len = line.len();
        let before = shared.queued.fetch_add(len, Ordering::AcqRel);
        if before > 0 && before.saturating_add(len) > shared.bound {
            shared.queued.fetch_sub(len, Ordering::AcqRel);
            shared.overflow();
            return;
        }
        if self.lines.send(line).is_err() {
            shared.queued.fetch_sub(len, Ordering::AcqRel);
        }
    }

    /// Queues `line` from a producer that waited for [`Room`]: it never
    /// overflows the outbox (its producer is what keeps it in bounds).
    pub(crate) fn send_paced(&self, line: String) {
        let shared = &self.shared;
        if shared.overflowed.load(Ordering::Acquire) {
            return;
        }
        shared.queued.fetch_add(line.len(), Ordering::AcqRel);
        if let Err(unsent) = self.lines.send(line) {
            shared.queued.fetch_sub(unsent.0.len(), Ordering::AcqRel);
        }
    }

    /// One more delivery is held back behind a reply (see [`Shared::held`]).
    pub(crate) fn hold(&self) {
        self.shared.held.fetch_add(1, Ordering::AcqRel);
    }

    /// `count` held deliveries were queued (or dropped): producers waiting
    /// on them go on.
    pub(crate) fn release(&self, count: usize) {
        if count > 0 {
            self.shared.held.fetch_sub(count, Ordering::AcqRel);
            self.shared.drained.notify_waiters();
        }
    }

    /// What a replay waits on before each event.
    pub(crate) fn room(&self) -> Room {
        Room {
            shared: Some(self.shared.clone()),
            counts_sends: false,
        }
    }

    /// Resolves once the outbox overflowed.
    pub(crate) async fn overflowed(&self) {
        if self.shared.overflowed.load(Ordering::Acquire) {
            return;
        }
        self.shared.overflow.notified().await;
    }

    /// Why the connection is closed after an overflow (fits a WebSocket
    /// close frame's 123 bytes).
    pub(crate) fn overflow_reason(&self) -> String {
        format!(
            "client too slow: over {} MiB unsent; reconnect and resume from your last seq",
            self.shared.bound >> 20
        )
    }
}

impl Unsent {
    /// `bytes` of what was taken have been written.
    pub(crate) fn written(&self, bytes: usize) {
        self.shared.written(bytes);
    }
}

impl Drop for Unsent {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.drained.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_large_message_passes_but_a_backlog_past_the_bound_overflows() {
        let (outbox, mut unsent) = outbox(100);
        outbox.send("x".repeat(500)); // alone: passes
        assert_eq!(unsent.lines.recv().await.unwrap().len(), 500);
        unsent.written(500);
        outbox.send("y".repeat(60));
        outbox.send("z".repeat(60)); // 120 > 100 with 60 waiting
        outbox.overflowed().await;
        outbox.send("after".to_owned());
        assert_eq!(unsent.lines.recv().await.unwrap().len(), 60);
        assert!(
            unsent.lines.try_recv().is_err(),
            "nothing queued past the overflow"
        );
        assert!(outbox.overflow_reason().len() <= 123);
    }

    /// Deliveries held back behind a reply are not bytes in the queue yet,
    /// but a replay waits on them all the same, and goes on once they are
    /// queued.
    #[tokio::test]
    async fn a_replay_waits_while_deliveries_are_held_behind_a_reply() {
        let (outbox, _unsent) = outbox(1 << 20);
        let room = outbox.room();
        for _ in 0..MAX_HELD - 1 {
            outbox.hold();
        }
        assert!(room.has_room(), "under the held bound");
        outbox.hold();
        assert!(!room.has_room(), "the held bound reached, the queue empty");
        let waiting = tokio::spawn({
            let room = room.clone();
            async move { room.wait().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        outbox.release(MAX_HELD);
        waiting.await.unwrap();
        assert!(room.has_room());
    }

    #[tokio::test]
    async fn a_replay_waits_for_room_and_goes_on_once_the_client_read() {
        let (outbox, mut unsent) = outbox(100);
        outbox.send("a".repeat(70));
        let room = outbox.room();
        let waiting = tokio::spawn(async move { room.wait().await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "70 of 100 waiting: no room");
        let line = unsent.lines.recv().await.unwrap();
        unsent.written(line.len());
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("room once written")
            .unwrap();
    }

    #[tokio::test]
    async fn written_bytes_make_room_again() {
        let (outbox, mut unsent) = outbox(100);
        for _ in 0..10 {
            outbox.send("a".repeat(80));
            let line = unsent.lines.recv().await.unwrap();
            unsent.written(line.len());
        }
        assert!(!outbox.shared.overflowed.load(Ordering::Acquire));
    }
}
