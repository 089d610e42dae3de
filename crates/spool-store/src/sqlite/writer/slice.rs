//! A batch's rows, written thread by thread into a `BEGIN IMMEDIATE`
//! transaction left open for its `COMMIT` (`commit::finish`, here or on the
//! commit thread); a large batch a slice of threads at a time, with the
//! writer's inbox looked at between slices.
//!
//! While the commit thread holds the connection, deltas get their seqs and
//! pile up in the next batch (`lend.rs`). On a disk busy with other writes
//! a `COMMIT` can take hundreds of milliseconds, and the batch taken
//! meanwhile then holds thousands of events of every streaming thread;
//! writing its rows took 13–33 ms in one go, during which no thread got a
//! seq (`server.md`, "A disk busy with other writes"). So a batch of more
//! than [`SLICE_EVENTS`] events over several threads is written a few
//! threads at a time, inside its one transaction, and between slices the
//! writer takes what is queued by the rules it follows while the
//! connection is lent: a delta of an item its thread holds open is taken
//! (given its seqs, and answered), anything else is kept for when the
//! batch is committed. No stream waits for more than a slice.
//!
//! The batch is taken out of the writer before its first slice, so what is
//! taken between slices belongs to the next batch — except that a thread
//! whose slice is still to come writes everything it holds by then with
//! this batch (committed sooner than it had to be, which no one can tell).
//! A thread whose slice is written has its pending changes taken
//! (`ThreadState::written`) at once, so that what it is given afterwards
//! starts its pending changes for the next batch, as it does while a commit
//! is in flight. If a slice cannot be written, the transaction is rolled
//! back and both batches fail, as when a `COMMIT` fails: the next one's
//! seqs may follow the lost ones, and its waiters' events may have been
//! written (and rolled back) with this one.

use std::sync::mpsc::Receiver;

use rusqlite::Connection;

use super::shared::Shared;
use super::{Batch, Request, Writer, batch};
use crate::error::StoreError;

/// The fewest events a slice holds before the writer looks at its inbox:
/// about a millisecond of statements (batches of 2,700–7,300 events took
/// 13–33 ms under a busy disk). A thread is never split, so a slice of one
/// thread's events may hold many more.
pub(super) const SLICE_EVENTS: usize = 256;

/// The writer thread's inbox, for taking requests between slices. (A
/// caller that runs the writer itself has none, and writes its batch, one
/// request's, in one go.)
pub(super) struct Inbox<'a> {
    pub(super) shared: &'a Shared,
    pub(super) requests: &'a Receiver<Request>,
}

impl Writer {
    /// Whether `batch` is written in slices: more than one slice's events,
    /// of more than one thread.
    pub(super) fn sliced(batch: &Batch) -> bool {
        batch.events > SLICE_EVENTS && batch.dirty_threads.len() > 1
    }

    /// Writes `batch`'s rows into a transaction left open, each thread's
    /// pending changes going to `batch.spent` once written; on error the
    /// transaction is rolled back. With the writer thread's `inbox`, a
    /// batch that is [`Self::sliced`] is written a slice at a time, what
    /// is queued taken between slices (module docs). Called with the
    /// connection home.
    #[allow(clippy::expect_used)]
    pub(super) fn write_rows(
        &mut self,
        batch: &mut Batch,
        inbox: Option<&Inbox<'_>>,
    ) -> Result<(), StoreError> {
        let inbox = inbox.filter(|_| Writer::sliced(batch));
        let conn = self
            .conn
            .take()
            .expect("a batch is written with the connection home");
        // Until the batch is written, the writer takes requests as while
        // its connection is lent.
        let written = self.write_slices(&conn, batch, inbox);
        self.conn = Some(conn);
        written
    }

    fn write_slices(
        &mut self,
        conn: &Connection,
        batch: &mut Batch,
        inbox: Option<&Inbox<'_>>,
    ) -> Result<(), StoreError> {
        let tx = batch::Begun::immediate(conn)?;
        let mut in_slice = 0;
        for thread_id in &batch.dirty_threads {
            if let Some(inbox) = inbox
                && in_slice >= SLICE_EVENTS
            {
                in_slice = 0;
                #[cfg(test)]
                super::door::pass(conn, super::door::Place::Slice);
                self.take_queued(inbox);
            }
            let Some(state) = self.threads.get_mut(thread_id) else {
                continue;
            };
            in_slice += state.pending.events.len().max(1);
            batch::write_thread(conn, thread_id, state)?;
            batch.spent.push(state.written());
        }
        batch::write_token_counts(conn, &batch.token_counts)?;
        tx.keep();
        Ok(())
    }

    /// Takes every request queued now, by the rules of a lent connection.
    fn take_queued(&mut self, inbox: &Inbox<'_>) {
        while let Ok(request) = inbox.requests.try_recv() {
            // With the connection away nothing stops the writer here: a
            // request that would is kept (`lend.rs`).
            let _ = inbox.shared.take(self, request);
        }
    }
}
