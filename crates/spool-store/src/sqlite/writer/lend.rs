//! Group commits, and what the writer does while the commit thread holds
//! its connection (`commit.rs`).
//!
//! A commit writes its batch's rows on the writer, then either runs
//! `COMMIT` right there ([`Writer::commit`]: for requests that wait for it
//! inside their own handling, and for most batches someone waits for) or
//! lends the connection, transaction open, to the commit thread (a batch of
//! deltas alone, or one with waiters while other threads may stream; see
//! [`Writer::group_commit`]). Until the connection is back:
//!
//! - an append whose every stored event is a delta of an item the
//!   thread's reducer holds open is taken at once, as with the connection:
//!   such an append reads no table, and a refusal of it is the reducer's
//!   own, the same either way. (A reducer that a refusal leaves holding
//!   part of an append is rebuilt when the connection is back.)
//! - every other request waits in `deferred`, and so does everything
//!   after it that it could be ordered against: a later request of the same
//!   thread, and every later request after one that names no single thread
//!   (a flush, a whole-thread operation, closing). A delta of another
//!   thread is still taken: a thread's seqs and states are its own, so a
//!   stream need not wait for a commit because another thread started or
//!   ended an item meanwhile. Each thread's requests run in arrival order.
//!
//! The changes taken meanwhile form the next batch. If the `COMMIT` fails,
//! both fail: the batch in flight and the one after it, whose seqs follow
//! the lost ones.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use super::slice::Inbox;
use super::{Batch, Flow, Incoming, Request, Waiter, Writer, commit, held};
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
            } if !self.deferred.holds_back(&thread_id)
                && self.takes_while_lent(&thread_id, &events) =>
            {
                self.append(thread_id, events, echo, reply);
            }
            request => self.deferred.push(request),
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

    /// The requests kept while a batch was written in slices, once the
    /// connection is home without a `Request::Committed` to bring them
    /// (the slices failed, or the commit thread is gone and the batch was
    /// committed here).
    pub(super) fn run_kept(&mut self) -> Flow {
        if self.conn.is_some() && !(self.deferred.is_empty() && self.rebuilds.is_empty()) {
            return self.run_deferred();
        }
        Flow::Continue
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
        for request in self.deferred.take_all() {
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
        let written = self.write_batch(None);
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

    /// The main loop's group commit. A batch of deltas alone, which nobody
    /// waits for, goes to the commit thread, so that the deltas arriving
    /// meanwhile get their seqs at once. So does a batch somebody waits for
    /// (a lifecycle event, a flush) while other threads may stream (two or
    /// more have a turn in progress): their deltas must not wait for a
    /// commit they are not part of, which on a disk busy with other writes
    /// takes 25-300 ms (`server.md`, "A disk busy with other writes").
    /// Any other batch with waiters is committed here: they need the commit
    /// anyway, and the hand-off to the commit thread and back is two
    /// wake-ups more per commit (sequential `add_items`, (a) of `spool
    /// bench store`, ran ~8% slower).
    ///
    /// With the writer thread's `inbox`, a large batch that goes to the
    /// commit thread is written in slices (`slice.rs`); requests kept
    /// meanwhile wait for the connection to be back (`run_kept`).
    pub(super) fn group_commit(&mut self, inbox: Option<&Inbox<'_>>) {
        if self.batch.waiters.is_empty() || self.others_may_stream() {
            self.commit_in_background(inbox);
        } else if self.conn.is_some() {
            let _ = self.commit();
        }
    }

    /// Starts committing the batch on the commit thread; the connection
    /// and the outcome come back as a `Request::Committed`. Does nothing
    /// while a commit is in flight (the next follows it).
    fn commit_in_background(&mut self, inbox: Option<&Inbox<'_>>) {
        if self.conn.is_none() {
            return;
        }
        if let Written::Open = self.write_batch(inbox) {
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
    /// batch in flight; in slices if it is large and the writer thread's
    /// `inbox` is at hand (`slice.rs`).
    fn write_batch(&mut self, inbox: Option<&Inbox<'_>>) -> Written {
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
        let mut batch = std::mem::take(&mut self.batch);
        let written = self.write_rows(&mut batch, inbox);
        if let Err(error) = written {
            let error = Arc::new(error);
            tracing::error!(%error, events = batch.events, "store commit failed");
            self.fail(batch, &error);
            // What was taken between slices may follow the lost seqs, or
            // have been written with them (with no slices, nothing was).
            let next = std::mem::take(&mut self.batch);
            self.fail(next, &error);
            return Written::Failed(error);
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

/// The requests kept while the connection is lent, in arrival order, with
/// what they hold back.
#[derive(Default)]
pub(super) struct Deferred {
    queue: VecDeque<Request>,
    /// Whether a kept request names no single thread: everything waits
    /// behind it.
    barrier: bool,
    /// The threads named by kept requests.
    threads: HashSet<String>,
}

impl Deferred {
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    fn push(&mut self, request: Request) {
        match request.thread() {
            Some(thread_id) => {
                self.threads.insert(thread_id.to_owned());
            }
            None => self.barrier = true,
        }
        self.queue.push_back(request);
    }

    /// Whether a new request of `thread_id` must wait behind a kept one.
    fn holds_back(&self, thread_id: &str) -> bool {
        self.barrier || self.threads.contains(thread_id)
    }

    /// Every kept request, in arrival order, leaving none.
    fn take_all(&mut self) -> VecDeque<Request> {
        self.barrier = false;
        self.threads.clear();
        std::mem::take(&mut self.queue)
    }
}

impl Request {
    /// The one thread this request reads or writes, if it names one.
    fn thread(&self) -> Option<&str> {
        match self {
            Request::Create { record, .. } => Some(&record.thread.id),
            Request::Append { thread_id, .. }
            | Request::PopNewest { thread_id, .. }
            | Request::CacheTokenCounts { thread_id, .. } => Some(thread_id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pop(thread: &str) -> Request {
        Request::PopNewest {
            thread_id: thread.to_owned(),
            reply: tokio::sync::oneshot::channel().0,
        }
    }

    #[test]
    fn a_kept_request_holds_back_its_own_thread_and_a_barrier_everyone() {
        let mut deferred = Deferred::default();
        assert!(!deferred.holds_back("a"));
        deferred.push(pop("a"));
        assert!(
            deferred.holds_back("a"),
            "a later request of the same thread"
        );
        assert!(!deferred.holds_back("b"), "another thread streams on");
        deferred.push(Request::Flush {
            reply: tokio::sync::oneshot::channel().0,
        });
        assert!(deferred.holds_back("b"), "nothing passes a flush");
        deferred.push(pop("b"));
        let kept: Vec<Option<String>> = deferred
            .take_all()
            .iter()
            .map(|request| request.thread().map(str::to_owned))
            .collect();
        assert_eq!(kept, [Some("a".to_owned()), None, Some("b".to_owned())]);
        assert!(deferred.is_empty());
        assert!(!deferred.holds_back("a") && !deferred.holds_back("b"));
    }
}
