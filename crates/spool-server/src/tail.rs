//! Following what other servers write (PostgreSQL): a thread watched here
//! but written by another server reaches its watchers from the log.
//!
//! The store says when another server committed events of a thread
//! (`Store::remote_commits`); for a thread with watchers here and no run
//! here, the hub reads the log after the thread's tail and publishes what
//! it finds, as it publishes events logged outside a run. The ordering
//! stage of each watcher (`ordering.rs`) delivers by seq, fills gaps from
//! the log and drops what it already sent, so a notice that comes late,
//! twice or never costs latency, never an event: every second the watched
//! threads are read anyway, and a `Resync` (the store's listening
//! connection was opened again) reads them all at once.
//!
//! With many threads streaming on other servers, notices come faster than
//! one read per notice can follow them (a read is a round trip), and a
//! queue of notices waiting for reads is latency every watcher here pays.
//! So reads go in rounds: every notice queued when a round begins joins
//! it, a thread whose tail here already reaches the last seq its notices
//! named is not read at all, and the round's threads are read by one
//! statement (`Store::events_after_each`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use spool_store::{RemoteCommit, Store};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::hub::Hub;

/// How often watched threads are read when no notice came.
const POLL: Duration = Duration::from_secs(1);

/// Events read from the log per page.
const PAGE: usize = 500;

/// Threads read by one statement at most.
const ROUND: usize = 64;

/// Starts following other servers' commits, if the hub's store has other
/// writers; the task ends with the hub.
pub fn start(hub: &Arc<Hub>) {
    let Some(mut commits) = hub.store().remote_commits() else {
        return;
    };
    hub.follows_remote.store(true, Ordering::Relaxed);
    let hub: Weak<Hub> = Arc::downgrade(hub);
    tokio::spawn(async move {
        let mut poll = tokio::time::interval(POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut wanted = tokio::select! {
                notice = commits.recv() => match notice {
                    Ok(notice) => Wanted::from(notice),
                    Err(RecvError::Lagged(_)) => Wanted::All,
                    Err(RecvError::Closed) => return,
                },
                _ = poll.tick() => Wanted::All,
            };
            // What else was heard meanwhile is served by the same round.
            loop {
                match commits.try_recv() {
                    Ok(notice) => wanted.add(notice),
                    Err(TryRecvError::Lagged(_)) => wanted = Wanted::All,
                    Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                }
            }
            let Some(hub) = hub.upgrade() else {
                return;
            };
            let threads = hub.remote_watched(wanted.behind());
            for round in threads.chunks(ROUND) {
                read_round(&hub, round).await;
            }
        }
    });
}

/// The threads a round of reads is for.
#[derive(Debug, PartialEq, Eq)]
enum Wanted {
    /// Every thread followed.
    All,
    /// These, each up to the last seq a notice gave for it.
    Threads(HashMap<String, u64>),
}

impl From<RemoteCommit> for Wanted {
    fn from(notice: RemoteCommit) -> Self {
        let mut wanted = Wanted::Threads(HashMap::new());
        wanted.add(notice);
        wanted
    }
}

impl Wanted {
    fn add(&mut self, notice: RemoteCommit) {
        match (self, notice) {
            (Wanted::All, _) => {}
            (this, RemoteCommit::Resync) => *this = Wanted::All,
            (
                Wanted::Threads(ends),
                RemoteCommit::Commit {
                    thread_id,
                    last_seq,
                },
            ) => {
                let end = ends.entry(thread_id).or_default();
                *end = (*end).max(last_seq);
            }
        }
    }

    /// For [`Hub::remote_watched`]: the seq each thread must be read up
    /// to, or `None` for every thread.
    fn behind(&self) -> Option<&HashMap<String, u64>> {
        match self {
            Wanted::All => None,
            Wanted::Threads(ends) => Some(ends),
        }
    }
}

/// Publishes the committed events of each thread after its tail, read for
/// all of them at once (`Store::events_after_each`); a thread with more
/// than a page is read on alone.
async fn read_round(hub: &Hub, round: &[(String, u64)]) {
    let pages = match hub.store().events_after_each(round, PAGE).await {
        Ok(pages) => pages,
        Err(error) => {
            // The next notice or poll tries again from the same seqs.
            tracing::warn!(%error, threads = round.len(), "cannot read other servers' events");
            return;
        }
    };
    for ((thread_id, _), events) in round.iter().zip(pages) {
        let Some(last) = events.last().map(|event| event.seq) else {
            continue;
        };
        let full = events.len() == PAGE;
        hub.advance_tail(thread_id, last);
        hub.publish(thread_id, events);
        if full {
            catch_up(hub, thread_id, last).await;
        }
    }
}

/// Publishes the thread's committed events after `tail`.
async fn catch_up(hub: &Hub, thread_id: &str, mut tail: u64) {
    loop {
        let events = match hub.store().events_after(thread_id, tail, PAGE).await {
            Ok(events) => events,
            Err(error) => {
                // The next notice or poll tries again from the same seq.
                tracing::warn!(%thread_id, %error, "cannot read another server's events");
                return;
            }
        };
        let Some(last) = events.last().map(|event| event.seq) else {
            return;
        };
        hub.advance_tail(thread_id, last);
        let full = events.len() == PAGE;
        hub.publish(thread_id, events);
        if !full {
            return;
        }
        tail = last;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(thread_id: &str, last_seq: u64) -> RemoteCommit {
        RemoteCommit::Commit {
            thread_id: thread_id.to_owned(),
            last_seq,
        }
    }

    #[test]
    fn a_round_reads_each_thread_once_up_to_its_latest_notice() {
        let mut wanted = Wanted::from(commit("t-1", 7));
        wanted.add(commit("t-2", 3));
        wanted.add(commit("t-1", 9));
        wanted.add(commit("t-1", 8));
        let ends: HashMap<String, u64> = [("t-1".to_owned(), 9), ("t-2".to_owned(), 3)].into();
        assert_eq!(wanted, Wanted::Threads(ends));
    }

    #[test]
    fn a_resync_in_a_round_reads_every_thread() {
        let mut wanted = Wanted::from(commit("t-1", 7));
        wanted.add(RemoteCommit::Resync);
        wanted.add(commit("t-2", 3));
        assert_eq!(wanted, Wanted::All);
        assert_eq!(wanted.behind(), None);
        assert_eq!(Wanted::from(RemoteCommit::Resync), Wanted::All);
    }
}
