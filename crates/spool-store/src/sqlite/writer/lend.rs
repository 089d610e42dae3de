//! Group commits, and what the writer does while the commit thread holds
//! its connection (`commit.rs`).
//!
//! A commit writes its batch's rows on the writer, then either runs
//! `COMMIT` right there ([`Writer::commit`]: for requests that wait for it
//! inside their own handling, and for batches someone waits for) or lends
//! the connection, transaction open, to the commit thread (a batch of
//! deltas alone, see [`Writer::group_commit`]). Until the connection is
//! back:
//!
//! - an append whose every stored event is a delta of an item the
//!   thread's reducer holds open is taken at once, as with the connection:
//!   such an append reads no table, and a refusal of it is the reducer's
//!   own, the same either way. (A reducer that a refusal leaves holding
//!   part of an append is rebuilt when the connection is back.)
//! - every other request waits in `deferred`, and so does everything after
//!   the first that waits, so requests still run in arrival order.
//!
//! The changes taken meanwhile form the next batch. If the `COMMIT` fails,
//! both fail: the batch in flight and the one after it, whose seqs follow
//! the lost ones.

use std::sync::Arc;
use std::time::Instant;

use super::{Batch, Flow, Incoming, Request, Waiter, Writer, batch, commit, held};
use crate::error::StoreError;
use crate::phases::{Phase, Timer};

/// What writing a batch's rows came to.
enum Written {
    /// Nothing to write; waiters (flushes) are answered.
    Nothing,
    /// The rows are in an open transaction; the batch is `in_flight`.
    Open,
    /// The batch failed and its waiters were told.
    Failed(Arc<StoreError>),
}

impl Writer {
    /// Runs a request now or, while the connection is lent, keeps it for
    /// later unless it may run without the connection (module docs).
    pub(super) fn take(&mut self, request: Request) -> Flow {
        if let Request::Committed { conn, result } = request {
            self.conn = Some(*conn);
            let _ = self.settle(result);
            return self.run_deferred();
        }
        if self.conn.is_some() {
            return self.handle(request);
        }
        match request {
            // Asks for nothing but a look at the batch's deadline.
            Request::Wake => {}
            Request::Append {
                thread_id,
                events,
                echo,
                reply,
            } if self.deferred.is_empty() && self.takes_while_lent(&thread_id, &events) => {
                self.append(thread_id, events, echo, reply);
            }
            request => self.deferred.push_back(request),
        }
        Flow::Continue
    }

    /// Whether an append to `thread_id` needs no table to be checked: the
    /// thread is cached whole (no voided seqs to log first, no rebuild
    /// owed) and every event it stores is a delta of an item its reducer
    /// holds open.
    fn takes_while_lent(&self, thread_id: &str, events: &[Incoming]) -> bool {
        let Some(state) = self.threads.get(thread_id) else {
            return false;
        };
        state.seqs.lost.is_none()
            && !self.rebuilds.iter().any(|owed| owed == thread_id)
            && events.iter().all(|incoming| {
                let notification = &incoming.notification;
                if incoming.json.is_none() || !state.persists(notification) {
                    return true; // never stored, never checked
                }
                notification.is_delta()
                    && notification
                        .item_id()
                        .and_then(|item_id| state.reducer.item(item_id))
                        .is_some_and(|record| !record.envelope.status.is_terminal())
            })
    }

    /// With the connection back: the rebuilds owed, then the requests that
    /// waited, in order.
    fn run_deferred(&mut self) -> Flow {
        for thread_id in std::mem::take(&mut self.rebuilds) {
            let Some(state) = self.threads.get_mut(&thread_id) else {
                continue;
            };
            if let Err(error) = state.rebuild(held(&self.conn), &thread_id) {
                tracing::error!(%thread_id, %error, "cannot undo a refused append");
                let batch = std::mem::take(&mut self.batch);
                self.fail(batch, &Arc::new(error));
                self.threads.remove(&thread_id);
            }
        }
        while let Some(request) = self.deferred.pop_front() {
            if let Flow::Stop = self.handle(request) {
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    /// Commits the batch here and answers its waiters; on failure every
    /// waiter gets the error and the states of the batch's threads are
    /// dropped, to be reloaded from what is committed.
    pub(super) fn commit(&mut self) -> Result<(), Arc<StoreError>> {
        let timer = Timer::start();
        let written = self.write_batch();
        timer.stop(Phase::Write);
        match written {
            Written::Nothing => Ok(()),
            Written::Failed(error) => Err(error),
            Written::Open => {
                let timer = Timer::start();
                let result = commit::finish(held(&self.conn));
                timer.stop(Phase::Commit);
                self.settle(result)
            }
        }
    }

    /// The main loop's group commit. A batch somebody waits for (a
    /// lifecycle event, a flush) is committed here: its waiters need the
    /// commit anyway, and the hand-off to the commit thread and back is
    /// two wake-ups more per commit (sequential `add_items`, (a) of `spool
    /// bench store`, ran ~8% slower). A batch of deltas alone, which
    /// nobody waits for, goes to the commit thread, so that the deltas
    /// arriving meanwhile get their seqs at once.
    pub(super) fn group_commit(&mut self) {
        if self.batch.waiters.is_empty() {
            self.commit_in_background();
        } else if self.conn.is_some() {
            let _ = self.commit();
        }
    }

    /// Starts committing the batch on the commit thread; the connection
    /// and the outcome come back as a `Request::Committed`. Does nothing
    /// while a commit is in flight (the next follows it).
    fn commit_in_background(&mut self) {
        if self.conn.is_none() {
            return;
        }
        if let Written::Open = self.write_batch() {
            let Some(conn) = self.conn.take() else {
                return; // checked above
            };
            if let Err(conn) = self.committer.lend(conn) {
                // The commit thread is gone: commit here.
                let result = commit::finish(&conn);
                self.conn = Some(conn);
                let _ = self.settle(result);
            }
        }
    }

    /// Writes the batch's rows into an open transaction and makes it the
    /// batch in flight.
    fn write_batch(&mut self) -> Written {
        if self.threads.len() > self.cached_threads {
            // Idle threads are dropped after this commit: first write what
            // they owe the thread row.
            self.flush_updated_at(true);
        }
        if self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            answer(batch.waiters);
            return Written::Nothing;
        }
        let written = batch::write(
            held(&self.conn),
            &self.batch.dirty_threads,
            &mut self.threads,
            &self.batch.token_counts,
        );
        let mut batch = std::mem::take(&mut self.batch);
        if let Err(error) = written {
            let error = Arc::new(error);
            tracing::error!(%error, events = batch.events, "store commit failed");
            self.fail(batch, &error);
            return Written::Failed(error);
        }
        for thread_id in &batch.dirty_threads {
            if let Some(state) = self.threads.get_mut(thread_id) {
                batch.spent.push(state.written());
            }
        }
        batch.written_at = Some(Instant::now());
        self.in_flight = Some(batch);
        Written::Open
    }

    /// The end of the batch in flight: on success its threads' states move
    /// on and its waiters are answered; on failure it fails, and with it
    /// the batch taken since.
    fn settle(&mut self, result: Result<(), rusqlite::Error>) -> Result<(), Arc<StoreError>> {
        let batch = self.in_flight.take().unwrap_or_default();
        if let Err(error) = result {
            let error = Arc::new(StoreError::from(error));
            tracing::error!(%error, events = batch.events, "store commit failed");
            self.fail(batch, &error);
            let next = std::mem::take(&mut self.batch);
            self.fail(next, &error);
            return Err(error);
        }
        tracing::debug!(
            events = batch.events,
            threads = batch.dirty_threads.len(),
            waiters = batch.waiters.len(),
            elapsed_us = batch
                .written_at
                .map_or(0, |at| at.elapsed().as_micros() as u64),
            "store commit"
        );
        // The waiters first: nothing they are told depends on what follows.
        // Then the threads' states forget what they no longer need
        // (`ThreadState::settled`) and the batch's changes and the
        // forgotten records are dropped: 65-111 µs after a 100-item
        // `add_items` (`sessions.md`). The woken caller usually runs on the
        // writer's CPU and takes turns with it (`log.md`), so this still
        // delays the next request; it no longer delays the answer.
        self.lone_caller = batch.waiters.len() <= 1;
        answer(batch.waiters);
        let timer = Timer::start();
        for thread_id in &batch.dirty_threads {
            if let Some(state) = self.threads.get_mut(thread_id) {
                drop(state.settled());
            }
        }
        drop(batch.spent);
        self.checkpointer.nudge();
        self.mark.committed(held(&self.conn), false);
        if self.threads.len() > self.cached_threads {
            self.threads.retain(|_, state| !state.is_idle());
        }
        timer.stop(Phase::Settle);
        Ok(())
    }

    /// Fails `batch`: its waiters get `error`, and its threads' states are
    /// forgotten so they reload from the committed projection.
    pub(super) fn fail(&mut self, batch: Batch, error: &Arc<StoreError>) {
        for thread_id in &batch.dirty_threads {
            self.threads.remove(thread_id);
        }
        let failed = || StoreError::Commit(error.clone());
        for waiter in batch.waiters {
            match waiter {
                Waiter::Append(reply, _) => {
                    let _ = reply.send(Err(failed()));
                }
                Waiter::Create(reply, _) => {
                    let _ = reply.send(Err(failed()));
                }
                Waiter::Flush(reply) => {
                    let _ = reply.send(Err(failed()));
                }
            }
        }
    }
}

/// Answers every waiter with success.
fn answer(waiters: Vec<Waiter>) {
    for waiter in waiters {
        match waiter {
            Waiter::Append(reply, appended) => {
                let _ = reply.send(Ok(appended));
            }
            Waiter::Create(reply, record) => {
                let _ = reply.send(Ok(*record));
            }
            Waiter::Flush(reply) => {
                let _ = reply.send(Ok(()));
            }
        }
    }
}
