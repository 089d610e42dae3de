//! Seqs handed out before their commit, made safe against a crash.
//!
//! A delta is answered (and so streamed to clients, with its seq) as soon
//! as the writer gives it a seq, and committed a few milliseconds later. A
//! crash in between loses the delta; if the next process simply went on
//! from the last committed seq, the seqs a client already saw would name
//! other events, and a client resuming from one of them would skip what
//! really came next.
//!
//! So seqs are reserved durably ahead of use: the writer never answers a
//! delta whose seq is above the `upto` of the thread's committed row in
//! `seq_reservations` (such a delta waits for the commit that raises it,
//! like a lifecycle event). While a thread can stream deltas (a turn or an
//! item is in progress) every commit of it keeps `upto` at least
//! [`BLOCK`] / 2 ahead of its last seq, raising it by [`BLOCK`], so in
//! practice no delta waits; once nothing streams, the row is deleted, and
//! the writer deletes every row it holds when it closes, since everything
//! it handed out is committed by then.
//!
//! After a crash, a row whose `upto` is above the thread's last committed
//! seq says that seqs `last + 1 ..= upto` may have been seen and are lost.
//! The first append to that thread (crash recovery makes one) logs
//! `thread/eventsLost` for that range at `upto + 1` before anything else,
//! so the log never gives those seqs to other events and a client resuming
//! from any of them is told what was lost.

use spool_protocol::{ServerNotification, ThreadEventsLostNotification};

/// How far ahead of its last seq a streaming thread's reservation runs.
/// Above twice the largest batch (`StoreOptions::max_batch_events` is 16,384
/// by default, but deltas-only commits come every few ms, far below it),
/// only a burst of more than `BLOCK / 2` deltas between two commits makes a
/// delta wait.
pub(crate) const BLOCK: u64 = 4096;

/// A thread's reservation, as far as its writer knows.
#[derive(Debug, Default)]
pub(crate) struct Reservation {
    /// The committed `upto` (0: no row).
    committed: u64,
    /// What the commit in flight writes (`Some(0)`: it deletes the row).
    writing: Option<u64>,
    /// Seqs a crash voided, found when the thread was loaded: logged as
    /// `thread/eventsLost` before the thread's next event.
    pub(crate) lost: Option<(u64, u64)>,
    /// Drop the row with the next commit whatever the thread does: the
    /// writer is closing.
    pub(crate) release: bool,
}

impl Reservation {
    /// The reservation of a stored thread whose last committed seq is
    /// `last_seq`.
    /// `committed` is the stored `upto` (0: none).
    pub(crate) fn load(committed: u64, last_seq: u64) -> Reservation {
        Reservation {
            committed,
            writing: None,
            lost: (committed > last_seq).then_some((last_seq + 1, committed)),
            release: false,
        }
    }

    /// Whether a delta with `seq` may be answered before its commit.
    pub(crate) fn covers(&self, seq: u64) -> bool {
        seq <= self.committed
    }

    /// Whether there is a row to release.
    pub(crate) fn held(&self) -> bool {
        self.committed > 0
    }

    /// The `thread/eventsLost` to log before anything else, if any.
    pub(crate) fn lost_event(&self, thread_id: &str) -> Option<ServerNotification> {
        self.lost.map(|(from_seq, to_seq)| {
            ServerNotification::ThreadEventsLost(ThreadEventsLostNotification {
                thread_id: thread_id.to_owned(),
                from_seq,
                to_seq,
            })
        })
    }

    /// What the commit's transaction must write: a raised `upto` while the
    /// thread can stream (`streaming`), `Some(0)` (drop the reservation)
    /// once it cannot, `None` when it stays. Noted as the commit in flight.
    pub(crate) fn write(&mut self, last_seq: u64, streaming: bool) -> Option<u64> {
        self.writing = None;
        if streaming && !self.release {
            if self.committed < last_seq.saturating_add(BLOCK / 2) {
                self.writing = Some(last_seq.saturating_add(BLOCK));
            }
        } else if self.committed > 0 {
            self.writing = Some(0);
        }
        self.writing
    }

    /// The commit that wrote [`Reservation::write`]'s change succeeded.
    pub(crate) fn committed(&mut self) {
        if let Some(upto) = self.writing.take() {
            self.committed = upto;
        }
        self.release = false;
    }
}
