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

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use spool_store::{RemoteCommit, Store};
use tokio::sync::broadcast::error::RecvError;

use crate::hub::Hub;

/// How often watched threads are read when no notice came.
const POLL: Duration = Duration::from_secs(1);

/// Events read from the log per page.
const PAGE: usize = 500;

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
            // Which threads to read: the one a notice names, or all.
            let only = tokio::select! {
                notice = commits.recv() => match notice {
                    Ok(RemoteCommit::Commit { thread_id, .. }) => Some(thread_id),
                    Ok(RemoteCommit::Resync) | Err(RecvError::Lagged(_)) => None,
                    Err(RecvError::Closed) => return,
                },
                _ = poll.tick() => None,
            };
            let Some(hub) = hub.upgrade() else {
                return;
            };
            for (thread_id, tail) in hub.remote_watched(only.as_deref()) {
                catch_up(&hub, &thread_id, tail).await;
            }
        }
    });
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
