//! Ordered, pipelined appends for one thread.
//!
//! `Store::append` answers each call, so a producer that awaits every
//! delta pays a round trip to the writer thread per delta — two
//! cross-thread wake-ups, which on small machines cost far more than the
//! write itself. An [`Appender`] lets the producer push without waiting:
//! whatever queues up while one append is in flight goes to the store as
//! the next append (at most [`MAX_BATCH`] notifications). Order is the
//! push order; seqs, validation, durability and the persistence policy are
//! exactly those of `Store::append`; every outcome is forwarded, in order,
//! to the channel given at spawn — a lifecycle event only once it is
//! committed, a delta once it has its seq.
//!
//! A failed append (a refusal, a failed commit) stops the appender: nothing
//! of that batch is stored, and every later `push`, `sync` and `finish`
//! fails with `StoreError::AppenderStopped` carrying that error.

use std::sync::{Arc, OnceLock};

use spool_protocol::ServerNotification;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::{Appended, Store, StoreError};

/// The most notifications one append takes from the queue (a push that
/// brings it past this goes whole). A backlog then travels as a pipeline of
/// appends: the first of its deltas reaches the client while the writer
/// works on the rest, where one append of the whole backlog held every one
/// of them until the last had its seq, and its outcomes outgrew the caches.
/// Measured with `spool bench live` (a 100,000-delta reply over stdio,
/// three alternating rounds): uncapped, 150–200k deltas/s at 7.7–8.9 µs of
/// server CPU per delta; appends of 256, 223–234k at 6.5–6.9 µs; appends
/// of 64 as fast as 256 and with no more CPU, so the append's own cost
/// does not show at this size.
const MAX_BATCH: usize = 64;

/// Pushes a thread's notifications to the store in order, coalescing what
/// queues up behind an append in flight.
#[derive(Debug)]
pub struct Appender {
    queue: mpsc::UnboundedSender<Job>,
    task: JoinHandle<()>,
    /// Why the appender stopped, once it has.
    stopped: Arc<OnceLock<Arc<StoreError>>>,
}

/// `N`: a notification (generic only so the batching is testable alone).
#[derive(Debug)]
enum Job<N = ServerNotification> {
    Append(Vec<N>),
    /// Answered once everything queued before it has been appended.
    Sync(oneshot::Sender<()>),
}

/// The next append: `first` and whatever queued up behind it, up to the
/// first sync point (returned with it) or [`MAX_BATCH`] notifications.
fn take_batch<N>(
    first: Job<N>,
    pending: &mut mpsc::UnboundedReceiver<Job<N>>,
) -> (Vec<N>, Option<oneshot::Sender<()>>) {
    let mut batch = Vec::new();
    let mut next = Some(first);
    while let Some(job) = next.take() {
        match job {
            Job::Append(notifications) => batch.extend(notifications),
            Job::Sync(reply) => return (batch, Some(reply)),
        }
        if batch.len() >= MAX_BATCH {
            break;
        }
        next = pending.try_recv().ok();
    }
    (batch, None)
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
                let (batch, sync) = take_batch(job, &mut pending);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(jobs: Vec<Job<u32>>) -> Vec<(usize, bool)> {
        let (queue, mut pending) = mpsc::unbounded_channel();
        for job in jobs {
            queue.send(job).unwrap();
        }
        let mut out = Vec::new();
        let mut next = 0;
        while let Ok(job) = pending.try_recv() {
            let (batch, sync) = take_batch(job, &mut pending);
            // Order is kept across appends.
            assert!(batch.iter().zip(next..).all(|(n, want)| *n == want));
            next += batch.len() as u32;
            out.push((batch.len(), sync.is_some()));
        }
        out
    }

    fn one(n: u32) -> Job<u32> {
        Job::Append(vec![n])
    }

    #[test]
    fn a_backlog_goes_in_appends_of_at_most_max_batch_and_a_push_goes_whole() {
        let max = MAX_BATCH as u32;
        let backlog = (0..2 * max + 22).map(one).collect();
        assert_eq!(
            sizes(backlog),
            [(MAX_BATCH, false), (MAX_BATCH, false), (22, false)]
        );
        let big = vec![one(0), Job::Append((1..max + 37).collect()), one(max + 37)];
        assert_eq!(sizes(big), [(MAX_BATCH + 37, false), (1, false)]);
    }

    #[test]
    fn a_sync_point_ends_the_append_it_follows() {
        let (reply, _done) = oneshot::channel();
        let jobs = vec![one(0), one(1), Job::Sync(reply), one(2)];
        assert_eq!(sizes(jobs), [(2, true), (1, false)]);
    }
}
