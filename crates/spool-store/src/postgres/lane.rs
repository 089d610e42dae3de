//! A server's writer lanes: several writers, each a thread with a
//! connection of its own, the threads of the log split among them by a
//! hash of their ids.
//!
//! One writer commits one group at a time: while PostgreSQL runs a commit
//! (its statements, then the flush of its WAL), the next group waits, and
//! the database's other cores sit idle. Lanes commit side by side, and
//! PostgreSQL flushes their WAL together. What one writer guaranteed still
//! holds, because a thread lives in one lane for the store's life: its
//! appends are checked, ordered and committed by that lane alone (its seqs
//! stay gap-free), its lease is held, fenced, renewed and released by that
//! lane's connection alone (two lanes never lock the same lease rows, so
//! they cannot deadlock each other), and what is answered is committed.
//! What spans lanes is only what concerns every thread: a flush or a close
//! goes to each lane and is answered once all of them answered.

use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;

use tokio::sync::{broadcast, oneshot};

use super::PgDatabase;
use super::listen::RemoteCommit;
use super::writer::{self, Request};
use crate::error::StoreError;
use crate::options::StoreOptions;

/// A store's writers, one per lane.
pub(super) struct Writers {
    /// Each lane's channel; empty once stopped.
    requests: Vec<Sender<Request>>,
    threads: Vec<JoinHandle<()>>,
}

impl Writers {
    /// Starts `options.writer_lanes` writers (at least one) for the server
    /// `me`; returns once each is connected.
    pub(super) async fn start(
        db: &PgDatabase,
        options: &StoreOptions,
        me: Arc<str>,
        takeovers: &broadcast::Sender<RemoteCommit>,
    ) -> Result<Writers, StoreError> {
        let count = options.writer_lanes.max(1);
        let mut writers = Writers {
            requests: Vec::with_capacity(count),
            threads: Vec::with_capacity(count),
        };
        for index in 0..count {
            // On an error, dropping `writers` stops the lanes started.
            let (sender, thread) = writer::spawn(
                db,
                options,
                me.clone(),
                Lane { index, count },
                takeovers.clone(),
            )
            .await?;
            writers.requests.push(sender);
            writers.threads.push(thread);
        }
        Ok(writers)
    }

    /// The lane whose writer writes `thread_id`.
    pub(super) fn lane(&self, thread_id: &str) -> usize {
        Lane::of(thread_id, self.requests.len())
    }

    /// Sends a request to the writer of `lane` and waits for its answer.
    pub(super) async fn ask<T>(
        &self,
        lane: usize,
        request: impl FnOnce(writer::Reply<T>) -> Request,
    ) -> Result<T, StoreError> {
        let lane = self.requests.get(lane).ok_or(StoreError::Closed)?;
        let (reply, answer) = oneshot::channel();
        lane.send(request(reply)).map_err(|_| StoreError::Closed)?;
        // A dropped reply means the writer stopped before answering.
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Sends a request to every lane's writer and waits for all of their
    /// answers; the first error, if any.
    pub(super) async fn ask_all(
        &self,
        request: impl Fn(writer::Reply<()>) -> Request,
    ) -> Result<(), StoreError> {
        if self.requests.is_empty() {
            return Err(StoreError::Closed);
        }
        let mut answers = Vec::with_capacity(self.requests.len());
        for lane in &self.requests {
            let (reply, answer) = oneshot::channel();
            lane.send(request(reply)).map_err(|_| StoreError::Closed)?;
            answers.push(answer);
        }
        let mut result = Ok(());
        for answer in answers {
            let answered = answer.await.map_err(|_| StoreError::Closed).and_then(|r| r);
            if result.is_ok() {
                result = answered;
            }
        }
        result
    }

    /// Ends the channels, which stops the writers once they have committed
    /// what they took, and joins them, so that a reopen sees it all.
    pub(super) fn stop(&mut self) {
        self.requests.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for Writers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Which lane a writer is, among how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lane {
    pub(super) index: usize,
    pub(super) count: usize,
}

impl Lane {
    /// The lane of `thread_id` among `count`: FNV-1a of its bytes, so
    /// every process agrees and ids spread evenly.
    pub(super) fn of(thread_id: &str, count: usize) -> usize {
        let hash = thread_id
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
            });
        // `count` is small: the remainder fits any usize.
        (hash % count.max(1) as u64) as usize
    }

    /// Whether this lane writes `thread_id`.
    pub(super) fn owns(&self, thread_id: &str) -> bool {
        Self::of(thread_id, self.count) == self.index
    }

    /// The lane that speaks for the whole server (its row in `servers`).
    pub(super) fn is_first(&self) -> bool {
        self.index == 0
    }
}

#[cfg(test)]
mod tests {
    use super::Lane;

    #[test]
    fn every_thread_has_exactly_one_lane_and_ids_spread() {
        let count = 4;
        let mut per_lane = [0_usize; 4];
        for n in 0..4_000 {
            let id = format!("019a{n:028x}");
            let owners: Vec<usize> = (0..count)
                .filter(|&index| Lane { index, count }.owns(&id))
                .collect();
            assert_eq!(owners.len(), 1, "{id} has lanes {owners:?}");
            per_lane[owners[0]] += 1;
        }
        for (lane, n) in per_lane.iter().enumerate() {
            assert!((800..1_200).contains(n), "lane {lane} got {n} of 4,000");
        }
        assert_eq!(Lane::of("anything", 1), 0);
        assert_eq!(Lane::of("anything", 0), 0);
    }
}
