//! Ordered, pipelined appends for one thread.
//!
//! `Store::append` answers each call, so a producer that awaits every
//! delta pays a round trip to the writer thread per delta — two
//! cross-thread wake-ups, which on small machines cost far more than the
//! write itself. An [`Appender`] lets the producer push without waiting:
//! whatever queues up while one append is in flight goes to the store as
//! the next single append. Order is the push order; seqs, validation,
//! durability and the persistence policy are exactly those of
//! `Store::append`; every outcome is forwarded, in order, to the channel
//! given at spawn — a lifecycle event only once it is committed, a delta
//! once it has its seq.
//!
//! A failed append (a refusal, a failed commit) stops the appender: nothing
//! of that batch is stored, and every later `push`, `sync` and `finish`
//! fails with `StoreError::AppenderStopped` carrying that error.

use std::sync::{Arc, OnceLock};

use spool_protocol::ServerNotification;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::{Appended, Store, StoreError};

/// Pushes a thread's notifications to the store in order, coalescing what
/// queues up behind an append in flight.
#[derive(Debug)]
pub struct Appender {
    queue: mpsc::UnboundedSender<Job>,
    task: JoinHandle<()>,
    /// Why the appender stopped, once it has.
    stopped: Arc<OnceLock<Arc<StoreError>>>,
}

#[derive(Debug)]
enum Job {
    Append(Vec<ServerNotification>),
    /// Answered once everything queued before it has been appended.
    Sync(oneshot::Sender<()>),
}

impl Appender {
    /// Starts the appender for `thread_id` on the current tokio runtime.
    /// Outcomes go to `outcomes` (a receiver that went away is not an error).
    pub fn spawn<S>(
        store: S,
        thread_id: impl Into<String>,
        outcomes: mpsc::UnboundedSender<Appended>,
    ) -> Appender
    where
        S: Store + Clone + 'static,
    {
        let thread_id = thread_id.into();
        let (queue, mut pending) = mpsc::unbounded_channel::<Job>();
        let stopped = Arc::new(OnceLock::new());
        let stop_reason = Arc::clone(&stopped);
        let task = tokio::spawn(async move {
            while let Some(job) = pending.recv().await {
                let mut batch = Vec::new();
                let mut sync = None;
                let mut next = Some(job);
                // Take whatever queued up, up to the first sync point.
                while let Some(job) = next.take() {
                    match job {
                        Job::Append(notifications) => batch.extend(notifications),
                        Job::Sync(reply) => {
                            sync = Some(reply);
                            break;
                        }
                    }
                    next = pending.try_recv().ok();
                }
                if !batch.is_empty() {
                    match store.append(&thread_id, batch).await {
                        Ok(appended) => {
                            for outcome in appended {
                                let _ = outcomes.send(outcome);
                            }
                        }
                        Err(error) => {
                            // Dropping `pending` makes later pushes fail;
                            // the reason is what they report.
                            let _ = stop_reason.set(Arc::new(error));
                            return;
                        }
                    }
                }
                if let Some(reply) = sync {
                    let _ = reply.send(());
                }
            }
        });
        Appender {
            queue,
            task,
            stopped,
        }
    }

    /// Queues notifications behind everything pushed before. Fails only
    /// once the appender has stopped on an error.
    pub fn push(&self, notifications: Vec<ServerNotification>) -> Result<(), StoreError> {
        if notifications.is_empty() {
            return Ok(());
        }
        self.queue
            .send(Job::Append(notifications))
            .map_err(|_| self.stop_error())
    }

    /// Waits until everything pushed before has been appended (so reads see
    /// its lifecycle events) and its outcomes forwarded. An error means the
    /// appender stopped; [`Appender::finish`] says why.
    pub async fn sync(&self) -> Result<(), StoreError> {
        let (reply, done) = oneshot::channel();
        self.queue
            .send(Job::Sync(reply))
            .map_err(|_| self.stop_error())?;
        done.await.map_err(|_| self.stop_error())
    }

    /// Waits until everything pushed has been appended (lifecycle events
    /// committed, deltas given their seqs) and its outcomes forwarded.
    pub async fn finish(self) -> Result<(), StoreError> {
        drop(self.queue);
        if let Err(join) = self.task.await {
            return Err(StoreError::WriterThread(std::io::Error::other(format!(
                "the appender task failed: {join}"
            ))));
        }
        match self.stopped.get() {
            Some(error) => Err(StoreError::AppenderStopped(Arc::clone(error))),
            None => Ok(()),
        }
    }

    /// The error a push or sync reports once the task has stopped.
    fn stop_error(&self) -> StoreError {
        match self.stopped.get() {
            Some(error) => StoreError::AppenderStopped(Arc::clone(error)),
            // The task ended without a recorded error: only a panic does that.
            None => StoreError::Closed,
        }
    }
}
